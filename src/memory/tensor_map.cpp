#include <cucore/tensor_map.hpp>

#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "loader/driver.hpp"

namespace cucore {

using detail::check;
using detail::driver;

namespace {

[[noreturn]] void invalid(const std::string& what) { throw InvalidArgumentError("TensorMapDescriptor: " + what); }

bool is_floating(TensorMapDataType t) {
  switch (t) {
    case TensorMapDataType::float16:
    case TensorMapDataType::float32:
    case TensorMapDataType::float64:
    case TensorMapDataType::bfloat16:
    case TensorMapDataType::float32_ftz:
    case TensorMapDataType::tfloat32:
    case TensorMapDataType::tfloat32_ftz:
      return true;
    default:
      return false;
  }
}

std::size_t swizzle_span(TensorMapSwizzle s) {
  switch (s) {
    case TensorMapSwizzle::swizzle_32b: return 32;
    case TensorMapSwizzle::swizzle_64b: return 64;
    case TensorMapSwizzle::swizzle_128b: return 128;
    default: return 0;
  }
}

std::string dim_name(int i) { return "dimension " + std::to_string(i); }

void check_address(std::uintptr_t address, TensorMapInterleave interleave) {
  const std::uintptr_t align = interleave == TensorMapInterleave::interleave_32b ? 32 : 16;
  if (address % align != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%#llx", static_cast<unsigned long long>(address));
    invalid(std::string("the address ") + hex + " is not " + std::to_string(align) + "-byte aligned");
  }
}

}  // namespace

std::size_t element_size(TensorMapDataType type) {
  switch (type) {
    case TensorMapDataType::uint8: return 1;
    case TensorMapDataType::uint16:
    case TensorMapDataType::float16:
    case TensorMapDataType::bfloat16: return 2;
    case TensorMapDataType::uint64:
    case TensorMapDataType::int64:
    case TensorMapDataType::float64: return 8;
    default: return 4;
  }
}

std::optional<TensorMapDataType> tensor_map_data_type(DataType t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case dlpack::kDLUInt:
      if (t.bits == 8) return TensorMapDataType::uint8;
      if (t.bits == 16) return TensorMapDataType::uint16;
      if (t.bits == 32) return TensorMapDataType::uint32;
      if (t.bits == 64) return TensorMapDataType::uint64;
      break;
    case dlpack::kDLInt:
      if (t.bits == 32) return TensorMapDataType::int32;
      if (t.bits == 64) return TensorMapDataType::int64;
      break;
    case dlpack::kDLFloat:
      if (t.bits == 16) return TensorMapDataType::float16;
      if (t.bits == 32) return TensorMapDataType::float32;
      if (t.bits == 64) return TensorMapDataType::float64;
      break;
    case dlpack::kDLBfloat:
      if (t.bits == 16) return TensorMapDataType::bfloat16;
      break;
    default:
      break;
  }
  return std::nullopt;
}

TiledEncoding encode_tiled(const StridedMemoryView& view, const TensorMapOptions& o) {
  const int rank = view.ndim();
  if (rank < 1 || rank > 5) invalid("the view has rank " + std::to_string(rank) + "; tiled maps take 1 to 5");
  if (o.interleave != TensorMapInterleave::none && rank < 3)
    invalid("interleaved layouts need rank 3 or more; the view has rank " + std::to_string(rank));
  if (!view.is_device_accessible()) invalid("the view's memory is not device-accessible");
  TiledEncoding e;
  e.rank = static_cast<std::uint32_t>(rank);
  if (o.data_type) {
    e.data_type = *o.data_type;
    if (element_size(e.data_type) != view.itemsize())
      invalid("data_type has " + std::to_string(element_size(e.data_type)) + "-byte elements but the view has " +
              std::to_string(view.itemsize()) + "-byte ones");
  } else if (auto t = tensor_map_data_type(view.dtype())) {
    e.data_type = *t;
  } else {
    invalid("the view's element type (DLPack code " + std::to_string(int(view.dtype().code)) + ", " +
            std::to_string(int(view.dtype().bits)) + " bits) has no TMA data type; give data_type");
  }
  if (o.oob_fill == TensorMapOOBFill::nan_request_zero_fma && !is_floating(e.data_type))
    invalid("oob_fill NAN_REQUEST_ZERO_FMA needs a floating-point data type");
  check_address(view.ptr(), o.interleave);
  e.global_address = view.data();
  const std::size_t item = element_size(e.data_type);
  const auto shape = view.shape();
  const auto strides = view.strides();
  // The view is row-major (dimension rank-1 innermost); the driver counts from the innermost.
  if (shape[rank - 1] != 1 && strides[rank - 1] != 1)
    invalid("the innermost " + dim_name(rank - 1) + " must be contiguous (stride 1), not stride " +
            std::to_string(strides[rank - 1]));
  const std::uint64_t stride_align = o.interleave == TensorMapInterleave::interleave_32b ? 32 : 16;
  for (int i = 0; i < rank; ++i) {
    const int d = rank - 1 - i;  // the view's dimension for the driver's dimension i
    if (shape[d] < 1 || static_cast<std::uint64_t>(shape[d]) > (1ULL << 32))
      invalid("the extent of " + dim_name(d) + " is " + std::to_string(shape[d]) + "; it must be 1 to 2^32");
    e.global_dim[i] = static_cast<cuuint64_t>(shape[d]);
    if (i > 0) {
      if (strides[d] < 0) invalid("the stride of " + dim_name(d) + " is negative");
      const std::uint64_t bytes = static_cast<std::uint64_t>(strides[d]) * item;
      if (bytes % stride_align != 0)
        invalid("the stride of " + dim_name(d) + " is " + std::to_string(bytes) + " bytes; it must be a multiple of " +
                std::to_string(stride_align));
      if (bytes >= (1ULL << 40)) invalid("the stride of " + dim_name(d) + " is 2^40 bytes or more");
      e.global_strides[i - 1] = bytes;
    }
  }
  if (o.box_dim.size() != static_cast<std::size_t>(rank))
    invalid("box_dim has " + std::to_string(o.box_dim.size()) + " entries for a view of rank " + std::to_string(rank));
  for (int i = 0; i < rank; ++i) {
    const int d = rank - 1 - i;
    if (o.box_dim[d] < 1 || o.box_dim[d] > 256)
      invalid("box_dim[" + std::to_string(d) + "] is " + std::to_string(o.box_dim[d]) + "; it must be 1 to 256");
    e.box_dim[i] = o.box_dim[d];
  }
  const std::size_t inner_bytes = std::size_t(o.box_dim[rank - 1]) * item;
  if (o.interleave == TensorMapInterleave::none) {
    if (inner_bytes % 16 != 0)
      invalid("the box's inner row (box_dim[" + std::to_string(rank - 1) + "] x " + std::to_string(item) + " = " +
              std::to_string(inner_bytes) + " bytes) must be a multiple of 16 bytes");
    if (const std::size_t span = swizzle_span(o.swizzle); span && inner_bytes > span)
      invalid("the box's inner row (" + std::to_string(inner_bytes) + " bytes) exceeds the " + std::to_string(span) +
              "-byte swizzle span");
  }
  if (o.interleave == TensorMapInterleave::interleave_32b && o.swizzle != TensorMapSwizzle::swizzle_32b)
    invalid("32-byte interleave needs the 32-byte swizzle");
  if (!o.element_strides.empty() && o.element_strides.size() != static_cast<std::size_t>(rank))
    invalid("element_strides has " + std::to_string(o.element_strides.size()) + " entries for a view of rank " +
            std::to_string(rank));
  for (int i = 0; i < rank; ++i) {
    const int d = rank - 1 - i;
    const std::uint32_t s = o.element_strides.empty() ? 1 : o.element_strides[d];
    if (s < 1 || s > 8)
      invalid("element_strides[" + std::to_string(d) + "] is " + std::to_string(s) + "; it must be 1 to 8");
    e.element_strides[i] = s;
  }
  return e;
}

TensorMapDescriptor TensorMapDescriptor::tiled(const StridedMemoryView& view, const TensorMapOptions& options) {
  const TiledEncoding e = encode_tiled(view, options);
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuTensorMapEncodeTiled), 12000,
                  "TMA tensor maps (cuTensorMapEncodeTiled)");
  // The driver wants a context; the view's device's primary one unless one is current.
  std::optional<ScopedContext> scope;
  if (!Context::current()) scope.emplace(Device(view.device_id() >= 0 ? view.device_id() : 0).context().handle());
  TensorMapDescriptor m;
  check(d.cuTensorMapEncodeTiled(&m.map_, static_cast<CUtensorMapDataType>(e.data_type), e.rank, e.global_address,
                                 e.global_dim, e.global_strides, e.box_dim, e.element_strides,
                                 static_cast<CUtensorMapInterleave>(options.interleave),
                                 static_cast<CUtensorMapSwizzle>(options.swizzle),
                                 static_cast<CUtensorMapL2promotion>(options.l2_promotion),
                                 static_cast<CUtensorMapFloatOOBfill>(options.oob_fill)),
        "cuTensorMapEncodeTiled");
  return m;
}

void TensorMapDescriptor::replace_address(void* address) {
  check_address(reinterpret_cast<std::uintptr_t>(address), TensorMapInterleave::none);
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuTensorMapReplaceAddress), 12000,
                  "TMA tensor maps (cuTensorMapReplaceAddress)");
  check(d.cuTensorMapReplaceAddress(&map_, address), "cuTensorMapReplaceAddress");
}

void TensorMapDescriptor::replace_address(const StridedMemoryView& view) {
  if (!view.is_device_accessible()) invalid("replace_address: the view's memory is not device-accessible");
  replace_address(view.data());
}

}  // namespace cucore
