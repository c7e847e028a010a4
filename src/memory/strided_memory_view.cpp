#include <cucore/strided_memory_view.hpp>

#include <cucore/errors.hpp>

#include <cstdint>
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "handles/box_allocator.hpp"
#include "loader/driver.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

using detail::check;
using detail::driver;

namespace {

[[noreturn]] void invalid(const std::string& what) { throw InvalidArgumentError("StridedMemoryView: " + what); }

bool known_device_type(dlpack::DLDeviceType t) {
  return t == dlpack::kDLCPU || t == dlpack::kDLCUDA || t == dlpack::kDLCUDAHost || t == dlpack::kDLCUDAManaged;
}

// Everything a view's layout must satisfy before any arithmetic on it is done
// (strides in elements; empty: C-contiguous), so that size(), span_bytes(),
// the dense strides and the addresses of the first and last element are
// exact: shared by the constructor and check_dltensor. The arithmetic is the
// layout's (strided_layout.hpp); its refusals become the view's.
// The usual layout (no zero extent, every product in range, inside the
// address space) checked in one pass with the same arithmetic as the layout
// functions check_layout names below. A view is made per interop call, and
// going through those functions (each checking the extents anew) cost
// several times this; false sends the layout to them, to say what is wrong.
bool fits_at_once(std::uintptr_t data, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                  std::int64_t itemsize) noexcept {
  auto mul = [](std::int64_t a, std::int64_t b, std::int64_t& out) { return !__builtin_mul_overflow(a, b, &out); };
  auto add = [](std::int64_t a, std::int64_t b, std::int64_t& out) { return !__builtin_add_overflow(a, b, &out); };
  if ((!strides.empty() && strides.size() != shape.size()) || itemsize <= 0) return false;
  std::int64_t count = 1, bytes = 0;
  for (std::int64_t e : shape)
    if (e <= 0 || !mul(count, e, count)) return false;
  if (!mul(count, itemsize, bytes)) return false;
  std::int64_t lo = 0, hi = count - 1;  // element offsets of the lowest and highest element
  if (!strides.empty()) {
    hi = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      std::int64_t reach = 0;
      if (!mul(shape[i] - 1, strides[i], reach)) return false;
      std::int64_t& end = reach < 0 ? lo : hi;
      if (!add(end, reach, end)) return false;
    }
  }
  std::int64_t begin = 0, end = 0;
  if (!mul(lo, itemsize, begin) || !add(hi, 1, end) || !mul(end, itemsize, end)) return false;
  const auto before = static_cast<std::uint64_t>(-(begin + 1)) + 1;  // -begin, also for INT64_MIN
  return !((begin < 0 && before > data) ||
           static_cast<std::uint64_t>(end) > std::numeric_limits<std::uintptr_t>::max() - data);
}

void check_layout(std::uintptr_t data, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                  DataType dtype, dlpack::DLDevice device) {
  if (shape.size() > static_cast<std::size_t>(kMaxNdim))
    invalid("ndim " + std::to_string(shape.size()) + " is more than " + std::to_string(kMaxNdim));
  if (!known_device_type(device.device_type))
    invalid("device type " + std::to_string(static_cast<int>(device.device_type)) +
            " is not CPU, CUDA, CUDA host or CUDA managed memory");
  if (dtype.bits == 0 || dtype.lanes == 0) invalid("the element type has no size");
  if (fits_at_once(data, shape, strides, static_cast<std::int64_t>(dtype.itemsize()))) [[likely]]
    return;
  ByteBounds reach;
  try {
    if (!strides.empty()) check_strides_rank(shape.size(), strides.size());
    check_extents(shape);
    const auto itemsize = static_cast<std::int64_t>(dtype.itemsize());
    // The element count and its bytes fit (for an empty shape too: its dense
    // strides multiply the other extents), and so do the byte offsets of the
    // lowest element and one past the highest from `data`.
    (void)size_in_bytes(shape, itemsize);
    reach = byte_bounds(shape, strides, itemsize);
  } catch (const std::invalid_argument& e) {
    invalid(e.what());
  } catch (const std::overflow_error& e) {
    invalid(e.what());
  }
  // The elements lie between data + begin (<= 0) and data + end: neither may
  // wrap around the address space.
  const auto before = static_cast<std::uint64_t>(-(reach.begin + 1)) + 1;  // -begin, also for INT64_MIN
  if ((reach.begin < 0 && before > data) ||
      static_cast<std::uint64_t>(reach.end) > std::numeric_limits<std::uintptr_t>::max() - data)
    invalid("the layout reaches outside the address space from the data pointer " + std::to_string(data));
}

// The data pointer of a DLPack tensor (its byte offset applied), once the
// fields its shape and strides are read through are known to be sound.
std::uintptr_t checked_dltensor_data(const dlpack::DLTensor& t) {
  auto refuse = [](const std::string& what) { throw InvalidArgumentError("DLPack tensor: " + what); };
  if (t.ndim < 0 || t.ndim > kMaxNdim)
    refuse("ndim " + std::to_string(t.ndim) + " is out of range (0 to " + std::to_string(kMaxNdim) + ")");
  if (t.ndim > 0 && !t.shape) refuse("ndim is " + std::to_string(t.ndim) + " but shape is null");
  const auto data = reinterpret_cast<std::uintptr_t>(t.data);
  if (t.byte_offset > std::numeric_limits<std::uintptr_t>::max() - data)
    refuse("byte_offset " + std::to_string(t.byte_offset) + " wraps the data pointer " + std::to_string(data));
  return data + t.byte_offset;
}

std::span<const std::int64_t> dltensor_shape(const dlpack::DLTensor& t) {
  return {t.shape, t.ndim > 0 ? static_cast<std::size_t>(t.ndim) : 0};
}
std::span<const std::int64_t> dltensor_strides(const dlpack::DLTensor& t) {
  return {t.strides, t.strides && t.ndim > 0 ? static_cast<std::size_t>(t.ndim) : 0};
}

// What an exported tensor owns: its shape and strides (inline up to
// kInlineNdim dimensions: one allocation per export), and the shares that keep
// the memory alive until the consumer calls the deleter.
template <typename Managed>
struct Export {
  Managed tensor{};
  std::int64_t inline_dims[2 * kInlineNdim];
  std::vector<std::int64_t> big_dims;
  std::shared_ptr<const void> view_owner, owner;
  ForeignRef keep;
  ~Export() {
    if (keep.release) keep.release(keep.object);
  }
};

template <typename Managed>
Managed* export_view(const StridedMemoryView& v, std::shared_ptr<const void> owner, ForeignRef keep) {
  std::unique_ptr<Export<Managed>> e;
  try {
    e.reset(new Export<Managed>);
  } catch (...) {
    if (keep.release) keep.release(keep.object);
    throw;
  }
  e->keep = keep;
  const auto n = static_cast<std::size_t>(v.ndim());
  std::int64_t* dims = e->inline_dims;
  if (v.ndim() > kInlineNdim) {
    e->big_dims.resize(2 * n);  // released with e (and `keep` with it) if this throws
    dims = e->big_dims.data();
  }
  std::copy_n(v.shape().data(), n, dims);
  std::copy_n(v.strides().data(), n, dims + n);
  e->view_owner = v.owner();
  e->owner = std::move(owner);
  dlpack::DLTensor& d = e->tensor.dl_tensor;
  v.describe(d);
  d.shape = n ? dims : nullptr;  // the export's own copies
  d.strides = n ? dims + n : nullptr;
  if constexpr (std::is_same_v<Managed, dlpack::DLManagedTensorVersioned>) {
    e->tensor.version = {dlpack::kMajor, dlpack::kMinor};
    e->tensor.flags = v.readonly() ? dlpack::kDLFlagBitMaskReadOnly : 0;
  }
  e->tensor.manager_ctx = e.get();
  e->tensor.deleter = [](Managed* self) { delete static_cast<Export<Managed>*>(self->manager_ctx); };
  return &e.release()->tensor;
}

template <typename Managed>
Managed* export_bytes(const Buffer& b, dlpack::DLDevice device, ForeignRef keep) {
  Export<Managed>* e;
  try {
    if (b.is_closed()) detail::throw_closed("Buffer", "__dlpack__");
    if (b.size() > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()))
      invalid("a Buffer of " + std::to_string(b.size()) + " bytes has no 1-D int8 DLPack shape");
    e = new Export<Managed>;
  } catch (...) {
    if (keep.release) keep.release(keep.object);
    throw;
  }
  e->keep = keep;
  e->inline_dims[0] = static_cast<std::int64_t>(b.size());
  e->inline_dims[1] = 1;
  dlpack::DLTensor& d = e->tensor.dl_tensor;
  d.data = reinterpret_cast<void*>(b.handle());
  d.device = device;
  d.ndim = 1;
  d.dtype = {dlpack::kDLInt, 8, 1};
  d.shape = e->inline_dims;
  d.strides = e->inline_dims + 1;
  d.byte_offset = 0;
  if constexpr (std::is_same_v<Managed, dlpack::DLManagedTensorVersioned>) {
    e->tensor.version = {dlpack::kMajor, dlpack::kMinor};
    e->tensor.flags = 0;
  }
  e->tensor.manager_ctx = e;
  e->tensor.deleter = [](Managed* self) { delete static_cast<Export<Managed>*>(self->manager_ctx); };
  return &e->tensor;
}

// An adopted tensor, released by its deleter with the view's last copy. A
// recycled box (make_box): adopting one per interop call mallocs nothing.
template <typename Managed>
struct Adopted {
  Managed* tensor;
  explicit Adopted(Managed* t) noexcept : tensor(t) {}
  Adopted(const Adopted&) = delete;
  Adopted& operator=(const Adopted&) = delete;
  ~Adopted() {
    if (tensor->deleter) tensor->deleter(tensor);
  }
};

// The owner of `tensor`; when it cannot be made, the tensor is released
// (`release_on_failure`) or stays the caller's.
template <typename Managed>
std::shared_ptr<const void> deleter_owner(Managed* tensor, bool release_on_failure = true) {
  try {
    return detail::make_box<Adopted<Managed>>(tensor);
  } catch (...) {
    if (release_on_failure && tensor->deleter) tensor->deleter(tensor);
    throw;
  }
}

}  // namespace

dlpack::DLDevice dlpack_device_of(const Buffer& b) {
  if (b.is_closed()) detail::throw_closed("Buffer", "dlpack_device_of");
  // A resource that reports its memory's kind is taken at its word: no driver
  // call (torch.from_dlpack asks twice per conversion). Buffer::is_managed
  // asks the driver for any other.
  // The resource is asked through the Buffer's own share (memory_resource()
  // would copy one: two atomic operations per call).
  if (const MemoryResource::Impl* mr = b.resource_impl(); mr && mr->reports_memory_kind()) {
    if (mr->is_managed()) return {dlpack::kDLCUDAManaged, 0};
    const bool dev = mr->is_device_accessible(), host = mr->is_host_accessible();
    if (dev && host) return {dlpack::kDLCUDAHost, 0};
    if (dev) return {dlpack::kDLCUDA, std::max(mr->device_id(), 0)};
    return {dlpack::kDLCPU, 0};
  }
  if (b.is_managed()) return {dlpack::kDLCUDAManaged, 0};
  const bool dev = b.is_device_accessible(), host = b.is_host_accessible();
  if (dev && host) return {dlpack::kDLCUDAHost, 0};
  if (dev) return {dlpack::kDLCUDA, std::max(b.device_id(), 0)};
  return {dlpack::kDLCPU, 0};
}

dlpack::DLManagedTensorVersioned* buffer_to_dlpack(const Buffer& b, dlpack::DLDevice device, ForeignRef keep) {
  return export_bytes<dlpack::DLManagedTensorVersioned>(b, device, keep);
}

dlpack::DLManagedTensor* buffer_to_dlpack_unversioned(const Buffer& b, dlpack::DLDevice device, ForeignRef keep) {
  return export_bytes<dlpack::DLManagedTensor>(b, device, keep);
}

StridedMemoryView::StridedMemoryView(void* data, std::span<const std::int64_t> shape,
                                     std::span<const std::int64_t> strides, DataType dtype, dlpack::DLDevice device,
                                     bool readonly, std::shared_ptr<const void> owner)
    : data_(data), dtype_(dtype), device_(device), readonly_(readonly), owner_(std::move(owner)) {
  check_layout(reinterpret_cast<std::uintptr_t>(data), shape, strides, dtype, device);
  ndim_ = static_cast<int>(shape.size());
  if (ndim_ > kInlineNdim) big_dims_.resize(shape.size() * 2);
  std::int64_t* d = dims();
  const std::size_t n = shape.size();
  std::copy_n(shape.data(), n, d);
  if (strides.empty()) {
    // C order's dense strides, written here: they fit (check_layout bounded
    // the product of the non-zero extents) and need no second check.
    std::int64_t step = 1;
    for (std::size_t k = n; k-- > 0;) {
      d[n + k] = step;
      step *= shape[k];
    }
  } else
    std::copy_n(strides.data(), n, d + n);
}

StridedMemoryView StridedMemoryView::from_buffer(const Buffer& buffer, std::span<const std::int64_t> shape,
                                                 std::span<const std::int64_t> strides, DataType dtype,
                                                 bool readonly) {
  if (buffer.is_closed()) detail::throw_closed("Buffer", "StridedMemoryView::from_buffer");
  StridedMemoryView v(buffer.data(), shape, strides, dtype, dlpack_device_of(buffer), readonly);
  const std::size_t need = v.span_bytes();
  if (need > buffer.size())
    invalid("from_buffer: the layout reaches " + std::to_string(need) + " bytes but the buffer has " +
            std::to_string(buffer.size()));
  return v;
}

void check_dltensor(const dlpack::DLTensor& t) {
  check_layout(checked_dltensor_data(t), dltensor_shape(t), dltensor_strides(t), DataType::from_dlpack(t.dtype),
               t.device);
}

StridedMemoryView StridedMemoryView::from_dltensor(const dlpack::DLTensor& t, bool readonly) {
  const std::uintptr_t data = checked_dltensor_data(t);  // before a shape or stride is read
  return StridedMemoryView(reinterpret_cast<void*>(data), dltensor_shape(t), dltensor_strides(t),
                           DataType::from_dlpack(t.dtype), t.device, readonly);
}

TypeStr parse_typestr(std::string_view ts) {
  auto refuse = [&](const char* why) {
    throw InvalidArgumentError("typestr '" + std::string(ts) + "' " + why +
                                " (expected a byte order, a kind and a size in bytes, e.g. '<f4')");
  };
  if (ts.size() < 3) refuse("is too short");
  const char order = ts[0], kind = ts[1];
  if (order != '<' && order != '>' && order != '|' && order != '=') refuse("has no byte order");
  if (!((kind >= 'a' && kind <= 'z') || (kind >= 'A' && kind <= 'Z'))) refuse("has no kind letter");
  std::size_t i = 2, itemsize = 0;
  for (; i < ts.size() && ts[i] >= '0' && ts[i] <= '9'; ++i) {
    itemsize = itemsize * 10 + static_cast<std::size_t>(ts[i] - '0');
    if (itemsize > 0xffff) refuse("has an item size above 65535 bytes");
  }
  if (i == 2) refuse("has no size");
  if (itemsize == 0) refuse("has a size of 0 bytes");
  // A datetime or timedelta has its unit in brackets: "<M8[ns]".
  if (i < ts.size() && !((kind == 'M' || kind == 'm') && ts[i] == '[' && ts.back() == ']' && ts.size() > i + 2))
    refuse("has trailing characters");
  TypeStr out{itemsize, std::nullopt};
  // DLPack has no byte order: a multi-byte type of the other order has no DLPack type.
  if (order == '>' && itemsize > 1) return out;
  const auto bits = static_cast<std::uint8_t>(itemsize * 8);  // used only for the sizes below
  auto is = [&](std::initializer_list<std::size_t> sizes) {
    return std::find(sizes.begin(), sizes.end(), itemsize) != sizes.end();
  };
  switch (kind) {
    case 'b': if (itemsize == 1) out.dtype = DataType{dlpack::kDLBool, 8, 1}; break;
    case 'i': if (is({1, 2, 4, 8})) out.dtype = DataType{dlpack::kDLInt, bits, 1}; break;
    case 'u': if (is({1, 2, 4, 8})) out.dtype = DataType{dlpack::kDLUInt, bits, 1}; break;
    case 'f': if (is({2, 4, 8})) out.dtype = DataType{dlpack::kDLFloat, bits, 1}; break;
    case 'c': if (is({8, 16})) out.dtype = DataType{dlpack::kDLComplex, bits, 1}; break;
    default: break;
  }
  return out;
}

StridedMemoryView StridedMemoryView::from_array_interface(const ArrayInterface& a) {
  const TypeStr type = parse_typestr(a.typestr);
  const DataType dtype = type.dtype.value_or(DataType{dlpack::kDLUInt, 8, static_cast<std::uint16_t>(type.itemsize)});
  if (a.shape.size() > static_cast<std::size_t>(kMaxNdim))
    invalid("ndim " + std::to_string(a.shape.size()) + " is more than " + std::to_string(kMaxNdim));
  std::vector<std::int64_t> strides;
  if (a.strides) {
    try {
      check_strides_rank(a.shape.size(), a.strides->size());
      strides.resize(a.strides->size());
      strides_from_bytes(*a.strides, static_cast<std::int64_t>(type.itemsize), strides);
    } catch (const std::invalid_argument& e) {
      invalid(e.what());
    }
  }
  return StridedMemoryView(reinterpret_cast<void*>(a.data), a.shape, strides, dtype, a.device, a.readonly);
}

namespace {
// What a managed tensor must be before its DLTensor is looked at.
void check_managed(const dlpack::DLManagedTensorVersioned* t) {
  if (!t) invalid("from_dlpack: the tensor is null");
  if (t->version.major != dlpack::kMajor)
    invalid("from_dlpack: DLPack version " + std::to_string(t->version.major) + "." +
            std::to_string(t->version.minor) + " (cucore reads major version " + std::to_string(dlpack::kMajor) + ")");
}
void check_managed(const dlpack::DLManagedTensor* t) {
  if (!t) invalid("from_dlpack: the tensor is null");
}
}  // namespace

void check_dlpack(const dlpack::DLManagedTensorVersioned* t) {
  check_managed(t);
  check_dltensor(t->dl_tensor);
}

void check_dlpack(const dlpack::DLManagedTensor* t) {
  check_managed(t);
  check_dltensor(t->dl_tensor);
}

StridedMemoryView StridedMemoryView::from_dlpack(const dlpack::DLManagedTensorVersioned* t) {
  check_managed(t);
  return from_dltensor(t->dl_tensor, (t->flags & dlpack::kDLFlagBitMaskReadOnly) != 0);
}

StridedMemoryView StridedMemoryView::from_dlpack(const dlpack::DLManagedTensor* t) {
  check_managed(t);
  return from_dltensor(t->dl_tensor);
}

template <typename Managed>
StridedMemoryView StridedMemoryView::adopt(Managed* t, bool release_if_refused) {
  if (!release_if_refused) {
    StridedMemoryView v = from_dlpack(t);  // refused: still the caller's
    v.owner_ = deleter_owner(t, false);
    return v;
  }
  auto owner = t ? deleter_owner(t) : nullptr;  // released on every path from here
  StridedMemoryView v = from_dlpack(t);
  v.owner_ = std::move(owner);
  return v;
}

StridedMemoryView StridedMemoryView::adopt_dlpack(dlpack::DLManagedTensorVersioned* t, bool release_if_refused) {
  return adopt(t, release_if_refused);
}

StridedMemoryView StridedMemoryView::adopt_dlpack(dlpack::DLManagedTensor* t, bool release_if_refused) {
  return adopt(t, release_if_refused);
}

std::size_t StridedMemoryView::span_bytes() const {
  try {
    return static_cast<std::size_t>(
        required_size_in_bytes(shape(), strides(), static_cast<std::int64_t>(itemsize())));
  } catch (const std::invalid_argument& e) {
    invalid(std::string("span_bytes: ") + e.what());
  }
}

void StridedMemoryView::check_element_type(DataType want, std::size_t size) const {
  if (want != dtype_ || size != itemsize())
    invalid("data_as: the view's elements are DLPack type (code " + std::to_string(int(dtype_.code)) + ", " +
            std::to_string(int(dtype_.bits)) + " bits, " + std::to_string(dtype_.lanes) +
            " lanes), not the requested type");
}

dlpack::DLManagedTensorVersioned* StridedMemoryView::to_dlpack(std::shared_ptr<const void> owner) const {
  return export_view<dlpack::DLManagedTensorVersioned>(*this, std::move(owner), {});
}

dlpack::DLManagedTensor* StridedMemoryView::to_dlpack_unversioned(std::shared_ptr<const void> owner) const {
  return export_view<dlpack::DLManagedTensor>(*this, std::move(owner), {});
}

dlpack::DLManagedTensorVersioned* StridedMemoryView::to_dlpack(ForeignRef keep) const {
  return export_view<dlpack::DLManagedTensorVersioned>(*this, {}, keep);
}

dlpack::DLManagedTensor* StridedMemoryView::to_dlpack_unversioned(ForeignRef keep) const {
  return export_view<dlpack::DLManagedTensor>(*this, {}, keep);
}

void StridedMemoryView::copy_from(const StridedMemoryView& src, StreamRef stream) const {
  if (readonly_) invalid("copy_from: the destination view is read-only");
  if (src.ndim() != ndim() || !std::equal(shape().begin(), shape().end(), src.shape().begin()))
    invalid("copy_from: the shapes differ");
  if (src.itemsize() != itemsize())
    invalid("copy_from: the item sizes differ (" + std::to_string(src.itemsize()) + " and " +
            std::to_string(itemsize()) + " bytes)");
  const bool both_c = is_contiguous_c() && src.is_contiguous_c();
  const bool both_f = is_contiguous_f() && src.is_contiguous_f();
  if (!both_c && !both_f)
    invalid("copy_from: both views must be contiguous in the same order (C or F); copy through a contiguous "
            "temporary");
  detail::StreamContextGuard guard(stream, "StridedMemoryView::copy_from");
  const std::size_t n = static_cast<std::size_t>(size()) * itemsize();
  if (n == 0) return;
  check(driver().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(data_), reinterpret_cast<CUdeviceptr>(src.data_), n,
                               stream.handle()),
        "cuMemcpyAsync");
}

}  // namespace cucore
