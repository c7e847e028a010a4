#pragma once
// The fuzz targets' bodies, shared by the libFuzzer binaries (fuzz_*.cpp) and
// the regression test that replays the corpus and every crash found
// (tests/cpu/test_program_cache_fuzz_regressions.cpp). Each feeds untrusted
// bytes to one parser the program caches read from disk or from a user, or to
// one importer of another library's array description (DLPack tensors, array
// interfaces), and checks properties that must hold for any input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <cucore/strided_memory_view.hpp>

#include "cache/code_format.hpp"
#include "cache/entry_record.hpp"
#include "cache/include_manifest.hpp"
#include "cache/toolchain_identity.hpp"
#include "compile/include_scan.hpp"

// A broken property: libFuzzer needs a crash; the regression test a throw.
#ifndef CUCORE_FUZZ_FAIL
#define CUCORE_FUZZ_FAIL(what) (std::fprintf(stderr, "fuzz property broken: %s\n", what), std::abort())
#endif
#define CUCORE_FUZZ_CHECK(cond) \
  do {                          \
    if (!(cond)) CUCORE_FUZZ_FAIL(#cond); \
  } while (0)

namespace cucore::fuzz {

// An entry's record as the disk cache reads it (from an xattr or a sidecar),
// and the bytes it describes through the structural checks. A record that
// decodes re-encodes to the very same bytes.
inline int entry_record(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto rec = detail::decode_entry_record(bytes)) {
    CUCORE_FUZZ_CHECK(rec->size > 0);
    CUCORE_FUZZ_CHECK(static_cast<unsigned>(rec->code_type) <= static_cast<unsigned>(CodeType::library));
    CUCORE_FUZZ_CHECK(detail::encode_entry_record(*rec) == bytes);
  }
  const auto code = std::as_bytes(std::span(data, size));
  const auto detected = detail::detect_code_type(code);
  for (CodeType t : {CodeType::cubin, CodeType::ptx, CodeType::ltoir, CodeType::fatbin, CodeType::object,
                     CodeType::library}) {
    const bool valid = detail::structurally_valid(t, code);
    if (detected == t) CUCORE_FUZZ_CHECK(valid);
  }
  return 0;
}

// A program's text as the cache key reads it: the include directives found lie
// inside the text, and rewriting each with its own name gives the text back.
inline int include_scan(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const detail::IncludeScan scan = detail::scan_includes(text);
  std::vector<std::optional<std::string>> same, renamed;
  for (const auto& d : scan.directives) {
    CUCORE_FUZZ_CHECK(d.line >= 1);
    if (d.has_include) {
      CUCORE_FUZZ_CHECK(d.begin == 0 && d.end == 0);
    } else {
      CUCORE_FUZZ_CHECK(d.begin < d.end && d.end <= text.size());
      CUCORE_FUZZ_CHECK(text[d.begin] == (d.angled ? '<' : '"'));
      CUCORE_FUZZ_CHECK(text[d.end - 1] == (d.angled ? '>' : '"'));
    }
    same.push_back(d.name);
    renamed.push_back("/fuzz/" + d.name);
  }
  if (scan.unfollowable.empty()) {
    CUCORE_FUZZ_CHECK(detail::rewrite_includes(text, scan.directives, same) == text);
    const std::string out = detail::rewrite_includes(text, scan.directives, renamed);
    CUCORE_FUZZ_CHECK(out.size() >= text.size());
  }
  return 0;
}

// The include manifests and the toolchain memo, as read back from the cache
// root: whatever parses formats back to the same text.
inline int manifests(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto probes = detail::parse_include_manifest(text)) {
    const std::string again = detail::format_include_manifest(*probes);
    auto reparsed = detail::parse_include_manifest(again);
    CUCORE_FUZZ_CHECK(reparsed && *reparsed == *probes);
  }
  if (auto memo = detail::parse_toolchain_memo(text)) {
    CUCORE_FUZZ_CHECK(!memo->identity.empty() && !memo->stamps.empty());
    auto reparsed = detail::parse_toolchain_memo(detail::format_toolchain_memo(*memo));
    CUCORE_FUZZ_CHECK(reparsed && reparsed->identity == memo->identity && reparsed->stamps == memo->stamps);
  }
  return 0;
}

// ---- array descriptions from other libraries ------------------------------------

// Fuzz bytes read as fixed-size fields, zeros once they run out.
struct FieldReader {
  const std::uint8_t* p;
  std::size_t n;
  template <typename T>
  T take() {
    T v{};
    const std::size_t k = n < sizeof(T) ? n : sizeof(T);
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    return v;
  }
};

// An independent model of what a view's layout may be (the rules
// cucore::check_layout states), in 128-bit arithmetic that cannot overflow:
// at most kMaxNdim extents, none negative; the product of the non-zero
// extents and its size in bytes fit in 64 signed bits; for a non-empty array
// (strides in elements, empty: C-contiguous) each (extent - 1) * stride and the
// sums of the negative and of the positive ones fit, as do the byte offsets
// of the first and one past the last element, and neither wraps the address
// space from `data`.
__extension__ typedef __int128 wide_int;
inline bool layout_is_sound(std::uint64_t data, std::span<const std::int64_t> shape,
                            std::span<const std::int64_t> strides, std::size_t itemsize) {
  const wide_int lim = std::numeric_limits<std::int64_t>::max(), neg = std::numeric_limits<std::int64_t>::min();
  auto fits = [&](wide_int v) { return v >= neg && v <= lim; };
  if (shape.size() > static_cast<std::size_t>(kMaxNdim)) return false;
  if (!strides.empty() && strides.size() != shape.size()) return false;
  wide_int count = 1;
  bool empty = false;
  for (std::int64_t e : shape) {
    if (e < 0) return false;
    if (e == 0) {
      empty = true;
      continue;
    }
    count *= e;
    if (!fits(count)) return false;
  }
  if (!fits(count * static_cast<wide_int>(itemsize))) return false;
  if (empty) return true;
  wide_int lo = 0, hi = count - 1;
  if (!strides.empty()) {
    hi = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const wide_int reach = static_cast<wide_int>(shape[i] - 1) * strides[i];
      if (!fits(reach)) return false;
      (reach < 0 ? lo : hi) += reach;
      if (!fits(lo) || !fits(hi)) return false;
    }
  }
  const wide_int lo_bytes = lo * static_cast<wide_int>(itemsize), end_bytes = (hi + 1) * static_cast<wide_int>(itemsize);
  if (!fits(lo_bytes) || !fits(end_bytes)) return false;
  const wide_int first = static_cast<wide_int>(data) + lo_bytes, end = static_cast<wide_int>(data) + end_bytes;
  return first >= 0 && end <= static_cast<wide_int>(std::numeric_limits<std::uint64_t>::max());
}

// The view describes exactly this layout: the shape, the strides (compact
// ones when none are given) and a size that is the product of the extents.
inline void check_view_layout(const StridedMemoryView& v, std::span<const std::int64_t> shape,
                              std::span<const std::int64_t> strides) {
  CUCORE_FUZZ_CHECK(v.ndim() == static_cast<int>(shape.size()));
  wide_int count = 1, step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    CUCORE_FUZZ_CHECK(v.shape()[i] == shape[i]);
    CUCORE_FUZZ_CHECK(v.strides()[i] == (strides.empty() ? static_cast<std::int64_t>(step) : strides[i]));
    count *= shape[i];
    step *= shape[i];
  }
  CUCORE_FUZZ_CHECK(v.size() == static_cast<std::int64_t>(count));
  // span_bytes is exact (it refuses only negative strides of a non-empty view).
  bool negative = false;
  for (std::int64_t s : v.strides()) negative = negative || s < 0;
  if (count == 0) {
    CUCORE_FUZZ_CHECK(v.span_bytes() == 0);
  } else if (!negative) {
    wide_int last = 0;
    for (int i = 0; i < v.ndim(); ++i) last += static_cast<wide_int>(v.shape()[i] - 1) * v.strides()[i];
    CUCORE_FUZZ_CHECK(v.span_bytes() == static_cast<std::size_t>((last + 1) * static_cast<wide_int>(v.itemsize())));
  }
  // It exports as a DLPack tensor that imports as the same view.
  dlpack::DLManagedTensorVersioned* out = v.to_dlpack();
  {
    const StridedMemoryView back = StridedMemoryView::from_dlpack(out);
    CUCORE_FUZZ_CHECK(back.data() == v.data() && back.dtype() == v.dtype() && back.readonly() == v.readonly());
    CUCORE_FUZZ_CHECK(back.ndim() == v.ndim());
    for (int i = 0; i < v.ndim(); ++i)
      CUCORE_FUZZ_CHECK(back.shape()[i] == v.shape()[i] && back.strides()[i] == v.strides()[i]);
  }
  out->deleter(out);
}

// A DLPack tensor as a producer hands one over, every field from the bytes:
//   u8 flags (1 versioned, 2 no shape, 4 no strides, 8 adopt), i32 ndim,
//   u8 code, u8 bits, u16 lanes, i32 device type, i32 device id,
//   u64 data, u64 byte_offset, u32 major, u32 minor, u64 flags,
//   then the shape's and the strides' int64 entries.
// The shape and strides arrays hold min(ndim, kMaxNdim + 1) entries each (a
// read past them is ASan's to see). The importer (from_dlpack, adopt_dlpack)
// accepts exactly the tensors the model calls sound, and then describes what
// the fields say; it refuses the others with std::invalid_argument, as
// check_dlpack does; an adopted tensor is released once either way.
inline int dlpack(const std::uint8_t* bytes, std::size_t size) {
  FieldReader r{bytes, size};
  const auto flags = r.take<std::uint8_t>();
  const auto ndim = r.take<std::int32_t>();
  const auto code = r.take<std::uint8_t>();
  const auto bits = r.take<std::uint8_t>();
  const auto lanes = r.take<std::uint16_t>();
  const auto device_type = r.take<std::int32_t>();
  const auto device_id = r.take<std::int32_t>();
  const auto data = r.take<std::uint64_t>();
  const auto byte_offset = r.take<std::uint64_t>();
  const auto major = r.take<std::uint32_t>();
  const auto minor = r.take<std::uint32_t>();
  const auto tensor_flags = r.take<std::uint64_t>();
  const bool versioned = flags & 1, no_shape = flags & 2, no_strides = flags & 4, adopt = flags & 8;
  const std::size_t entries = ndim <= 0 ? 0 : ndim > kMaxNdim ? kMaxNdim + 1 : static_cast<std::size_t>(ndim);
  // Exactly `entries` long (new[] of 0 is a valid pointer to nothing).
  std::unique_ptr<std::int64_t[]> shape(new std::int64_t[entries]), strides(new std::int64_t[entries]);
  for (std::size_t i = 0; i < entries; ++i) shape[i] = r.take<std::int64_t>();
  for (std::size_t i = 0; i < entries; ++i) strides[i] = r.take<std::int64_t>();

  dlpack::DLTensor t{};
  t.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(data));  // never dereferenced
  t.device = {static_cast<dlpack::DLDeviceType>(device_type), device_id};
  t.ndim = ndim;
  t.dtype = {code, bits, lanes};
  t.shape = no_shape ? nullptr : shape.get();
  t.strides = no_strides ? nullptr : strides.get();
  t.byte_offset = byte_offset;

  // The model's verdict, read only as far as the rules let a consumer read.
  const DataType dtype = DataType::from_dlpack(t.dtype);
  const bool known_device = device_type == dlpack::kDLCPU || device_type == dlpack::kDLCUDA ||
                            device_type == dlpack::kDLCUDAHost || device_type == dlpack::kDLCUDAManaged;
  bool sound = ndim >= 0 && ndim <= kMaxNdim && (ndim == 0 || !no_shape) && known_device && bits > 0 && lanes > 0 &&
               byte_offset <= std::numeric_limits<std::uint64_t>::max() - data && (!versioned || major == 1);
  const std::span<const std::int64_t> shape_span(shape.get(), sound ? entries : 0),
      strides_span(strides.get(), sound && !no_strides ? entries : 0);
  sound = sound && layout_is_sound(data + byte_offset, shape_span, strides_span, dtype.itemsize());

  int released = 0;
  dlpack::DLManagedTensorVersioned mv{};
  dlpack::DLManagedTensor mu{};
  mv.version = {major, minor};
  mv.flags = tensor_flags;
  mv.dl_tensor = t;
  mv.manager_ctx = &released;
  mv.deleter = +[](dlpack::DLManagedTensorVersioned* m) { ++*static_cast<int*>(m->manager_ctx); };
  mu.dl_tensor = t;
  mu.manager_ctx = &released;
  mu.deleter = +[](dlpack::DLManagedTensor* m) { ++*static_cast<int*>(m->manager_ctx); };

  bool accepted = false;
  try {
    std::optional<StridedMemoryView> v;
    if (adopt)
      v = versioned ? StridedMemoryView::adopt_dlpack(&mv) : StridedMemoryView::adopt_dlpack(&mu);
    else
      v = versioned ? StridedMemoryView::from_dlpack(&mv) : StridedMemoryView::from_dlpack(&mu);
    accepted = true;
    CUCORE_FUZZ_CHECK(sound);
    CUCORE_FUZZ_CHECK(v->ptr() == data + byte_offset);
    CUCORE_FUZZ_CHECK(v->dtype() == dtype && v->device().device_type == t.device.device_type);
    CUCORE_FUZZ_CHECK(v->readonly() == (versioned && (tensor_flags & dlpack::kDLFlagBitMaskReadOnly) != 0));
    check_view_layout(*v, shape_span, strides_span);
    if (versioned) check_dlpack(&mv);
    else check_dlpack(&mu);
  } catch (const std::invalid_argument&) {
    CUCORE_FUZZ_CHECK(!accepted);  // a refusal, not a failed property check
    CUCORE_FUZZ_CHECK(!sound);
    bool checks_refuse = false;
    try {
      if (versioned) check_dlpack(&mv);
      else check_dlpack(&mu);
    } catch (const std::invalid_argument&) {
      checks_refuse = true;
    }
    CUCORE_FUZZ_CHECK(checks_refuse);
  }
  CUCORE_FUZZ_CHECK(released == (adopt ? 1 : 0));
  return 0;
}

// An array interface's values (NumPy's __array_interface__, the CUDA Array
// Interface), as the Python module reads them out of the dict:
//   u8 flags (1 strides given, 2 read-only, 4 device memory), u8 typestr
//   length, the typestr's bytes, u64 data, u8 ndim, then the shape's and the
//   strides' (in bytes) int64 entries.
// The importer accepts exactly the arrays whose typestr parses and whose
// layout the model calls sound (strides whole items, of the shape's rank),
// and describes them with the strides in elements.
inline int array_interface(const std::uint8_t* bytes, std::size_t size) {
  FieldReader r{bytes, size};
  const auto flags = r.take<std::uint8_t>();
  const std::size_t ts_len = r.take<std::uint8_t>() % 24;
  std::string typestr;
  for (std::size_t i = 0; i < ts_len && r.n > 0; ++i) typestr.push_back(static_cast<char>(r.take<std::uint8_t>()));
  const auto data = r.take<std::uint64_t>();
  const std::size_t ndim = r.take<std::uint8_t>() % 80;
  const std::size_t nstrides = (flags & 1) ? (r.take<std::uint8_t>() % 2 ? ndim : (ndim + 1) % 80) : 0;
  std::vector<std::int64_t> shape(ndim), strides(nstrides);
  for (auto& e : shape) e = r.take<std::int64_t>();
  for (auto& s : strides) s = r.take<std::int64_t>();

  ArrayInterface a;
  a.data = static_cast<std::uintptr_t>(data);
  a.readonly = flags & 2;
  a.typestr = typestr;
  a.shape = shape;
  if (flags & 1) a.strides = std::span<const std::int64_t>(strides);
  a.device = {(flags & 4) ? dlpack::kDLCUDA : dlpack::kDLCPU, 0};

  std::optional<TypeStr> type;
  try {
    type = parse_typestr(typestr);
  } catch (const std::invalid_argument&) {
  }
  if (type) {
    CUCORE_FUZZ_CHECK(type->itemsize >= 1 && type->itemsize <= 0xffff);
    if (type->dtype) CUCORE_FUZZ_CHECK(type->dtype->itemsize() == type->itemsize);
  }
  // The model: strides in whole items of the shape's rank, then a sound layout.
  bool sound = type.has_value() && ndim <= static_cast<std::size_t>(kMaxNdim);
  std::vector<std::int64_t> elements;
  if (sound && (flags & 1)) {
    sound = strides.size() == shape.size();
    for (std::size_t i = 0; sound && i < strides.size(); ++i) {
      sound = strides[i] % static_cast<std::int64_t>(type->itemsize) == 0;
      elements.push_back(strides[i] / static_cast<std::int64_t>(type->itemsize));
    }
  }
  sound = sound && layout_is_sound(data, shape, elements, type->itemsize);

  bool accepted = false;
  try {
    const StridedMemoryView v = StridedMemoryView::from_array_interface(a);
    accepted = true;
    CUCORE_FUZZ_CHECK(sound);
    CUCORE_FUZZ_CHECK(v.ptr() == data && v.readonly() == a.readonly && v.device().device_type == a.device.device_type);
    CUCORE_FUZZ_CHECK(v.itemsize() == type->itemsize);
    CUCORE_FUZZ_CHECK(v.dtype() == type->dtype.value_or(DataType{dlpack::kDLUInt, 8,
                                                                 static_cast<std::uint16_t>(type->itemsize)}));
    check_view_layout(v, shape, elements);
  } catch (const std::invalid_argument&) {
    CUCORE_FUZZ_CHECK(!accepted);
    CUCORE_FUZZ_CHECK(!sound);
  }
  return 0;
}

}  // namespace cucore::fuzz
