#pragma once
// TMA tensor maps (Hopper and later): TensorMapDescriptor, the 128-byte
// CUtensorMap that cp.async.bulk.tensor reads, made from a StridedMemoryView
// with cuTensorMapEncodeTiled (cuda.core's StridedMemoryView.as_tensor_map).
//
//   auto map = cucore::TensorMapDescriptor::tiled(view, {.box_dim = {64, 32}});
//   cucore::launch(stream, config, kernel, map, out);  // by value, 128 bytes
//
// box_dim and element_strides are in the view's own (row-major) order, as
// cuda.core takes them; the driver's innermost-first order is cucore's
// business. Everything the driver would refuse with a bare
// CUDA_ERROR_INVALID_VALUE is checked first and thrown as
// std::invalid_argument naming the dimension and the rule: the rank (1 to 5,
// at least 3 with interleave), the element type, a 16-byte aligned address
// (32 with 32-byte interleave), a contiguous innermost dimension, byte
// strides that are multiples of 16 (32) and below 2^40, extents up to 2^32,
// box sizes 1 to 256 whose inner row is a multiple of 16 bytes and fits the
// swizzle span, element strides 1 to 8, and NaN fill for floating types only.
#include <cuda.h>

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include <cucore/strided_memory_view.hpp>

namespace cucore {

// The driver's CUtensorMapDataType values.
enum class TensorMapDataType : int {
  uint8 = CU_TENSOR_MAP_DATA_TYPE_UINT8,
  uint16 = CU_TENSOR_MAP_DATA_TYPE_UINT16,
  uint32 = CU_TENSOR_MAP_DATA_TYPE_UINT32,
  int32 = CU_TENSOR_MAP_DATA_TYPE_INT32,
  uint64 = CU_TENSOR_MAP_DATA_TYPE_UINT64,
  int64 = CU_TENSOR_MAP_DATA_TYPE_INT64,
  float16 = CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
  float32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
  float64 = CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
  bfloat16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
  float32_ftz = CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
  tfloat32 = CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
  tfloat32_ftz = CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
};
enum class TensorMapInterleave : int {
  none = CU_TENSOR_MAP_INTERLEAVE_NONE,
  interleave_16b = CU_TENSOR_MAP_INTERLEAVE_16B,
  interleave_32b = CU_TENSOR_MAP_INTERLEAVE_32B,
};
enum class TensorMapSwizzle : int {
  none = CU_TENSOR_MAP_SWIZZLE_NONE,
  swizzle_32b = CU_TENSOR_MAP_SWIZZLE_32B,
  swizzle_64b = CU_TENSOR_MAP_SWIZZLE_64B,
  swizzle_128b = CU_TENSOR_MAP_SWIZZLE_128B,
};
enum class TensorMapL2Promotion : int {
  none = CU_TENSOR_MAP_L2_PROMOTION_NONE,
  l2_64b = CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
  l2_128b = CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
  l2_256b = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
};
enum class TensorMapOOBFill : int {
  none = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
  nan_request_zero_fma = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
};

// Bytes per element of a tensor map data type.
std::size_t element_size(TensorMapDataType type);
// The tensor map data type of a view's element type (float32 for 32-bit
// floats, ...); std::nullopt when TMA has none (complex, bool, 8-bit floats).
std::optional<TensorMapDataType> tensor_map_data_type(DataType type);

// cuda.core's TensorMapDescriptorOptions.
struct TensorMapOptions {
  std::vector<std::uint32_t> box_dim{};          // tile extents, one per dimension; required
  std::vector<std::uint32_t> element_strides{};  // empty: all 1
  std::optional<TensorMapDataType> data_type{};  // empty: from the view's element type
  TensorMapInterleave interleave = TensorMapInterleave::none;
  TensorMapSwizzle swizzle = TensorMapSwizzle::none;
  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::none;
  TensorMapOOBFill oob_fill = TensorMapOOBFill::none;
};

// The driver's arguments for cuTensorMapEncodeTiled, innermost dimension
// first, after every check (what tiled() passes; for tests and tools).
struct TiledEncoding {
  TensorMapDataType data_type{};
  std::uint32_t rank = 0;
  void* global_address = nullptr;
  cuuint64_t global_dim[5] = {};
  cuuint64_t global_strides[4] = {};  // bytes, dimensions 1..rank-1
  cuuint32_t box_dim[5] = {};
  cuuint32_t element_strides[5] = {};
};
// Checks `view` and `options` against the driver's rules and returns the
// encoding; throws std::invalid_argument as described at the top.
TiledEncoding encode_tiled(const StridedMemoryView& view, const TensorMapOptions& options);

// A CUtensorMap: trivially copyable, 128 bytes, passed to kernels by value
// (`const __grid_constant__ CUtensorMap map` in CUDA C++).
class TensorMapDescriptor {
 public:
  // A tiled map of `view` (device-accessible memory). Made in the view's
  // device's primary context when no context is current.
  static TensorMapDescriptor tiled(const StridedMemoryView& view, const TensorMapOptions& options);
  // Points the map at other memory of the same shape and strides (16-byte
  // aligned; 32 with 32-byte interleave, which the caller must observe).
  void replace_address(void* address);
  void replace_address(const StridedMemoryView& view);

  const CUtensorMap& handle() const noexcept { return map_; }
  CUtensorMap& handle() noexcept { return map_; }

 private:
  CUtensorMap map_;
};
static_assert(sizeof(TensorMapDescriptor) == 128 && std::is_trivially_copyable_v<TensorMapDescriptor>,
              "a TensorMapDescriptor is passed to kernels as the driver's 128-byte CUtensorMap");

}  // namespace cucore
