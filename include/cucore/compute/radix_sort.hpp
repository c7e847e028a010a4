#pragma once
// Device-wide radix sort of keys, or of key-value pairs by key (cuda.compute's
// radix_sort / make_radix_sort; CUB's DeviceRadixSort): stable, ascending or
// descending, over a bit range [begin_bit, end_bit) of the keys. Keys are
// integers, floats (float16, bfloat16, float32, float64) or bool; values any
// type. The double-buffer form may overwrite both buffers and says which one
// holds the result (the least temporary storage).
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <cucore/compute/build.hpp>
#include <cucore/compute/types.hpp>
#include <cucore/stream.hpp>

namespace cucore::compute {

namespace detail {
struct RadixSortImpl;
}

enum class SortOrder { ascending, descending };

// Two device buffers of n elements; `selector` names the current one (cuda.compute's DoubleBuffer).
struct DoubleBuffer {
  CUdeviceptr buffers[2] = {0, 0};
  int selector = 0;
  CUdeviceptr current() const noexcept { return buffers[selector]; }
  CUdeviceptr alternate() const noexcept { return buffers[selector ^ 1]; }
};

class RadixSort {
 public:
  // value_type: none for keys only.
  RadixSort(const Type& key_type, std::optional<Type> value_type, SortOrder order, const BuildOptions& options = {});

  // Keys (and values) from the input arrays into the output arrays; the inputs
  // are left as they are. values_in/values_out are 0 for keys only. end_bit -1:
  // the key's width in bits. Two-phase (see Reduce).
  std::size_t operator()(void* temp, std::size_t temp_bytes, CUdeviceptr keys_in, CUdeviceptr keys_out,
                         CUdeviceptr values_in, CUdeviceptr values_out, std::uint64_t num_items, int begin_bit,
                         int end_bit, StreamRef stream) const;
  // The double-buffer form: both buffers may be overwritten; on return (with
  // temp given) keys.selector (and values->selector) name the sorted ones.
  std::size_t operator()(void* temp, std::size_t temp_bytes, DoubleBuffer& keys, DoubleBuffer* values,
                         std::uint64_t num_items, int begin_bit, int end_bit, StreamRef stream) const;
  // Temporary storage from `mr` (empty: the device's pool).
  void operator()(CUdeviceptr keys_in, CUdeviceptr keys_out, CUdeviceptr values_in, CUdeviceptr values_out,
                  std::uint64_t num_items, StreamRef stream, int begin_bit = 0, int end_bit = -1,
                  const MemoryResource& mr = {}) const;
  void operator()(DoubleBuffer& keys, DoubleBuffer* values, std::uint64_t num_items, StreamRef stream,
                  int begin_bit = 0, int end_bit = -1, const MemoryResource& mr = {}) const;

 private:
  std::shared_ptr<const detail::RadixSortImpl> impl_;
};

// One-shot forms.
void radix_sort(StreamRef stream, const Type& key_type, CUdeviceptr keys_in, CUdeviceptr keys_out,
                std::optional<Type> value_type, CUdeviceptr values_in, CUdeviceptr values_out,
                std::uint64_t num_items, SortOrder order, int begin_bit = 0, int end_bit = -1,
                const CallOptions& options = {});
template <typename K>
void radix_sort_keys(StreamRef stream, const K* keys_in, K* keys_out, std::uint64_t num_items,
                     SortOrder order = SortOrder::ascending, const CallOptions& options = {}) {
  radix_sort(stream, Type::of<K>(), reinterpret_cast<CUdeviceptr>(keys_in), reinterpret_cast<CUdeviceptr>(keys_out),
             std::nullopt, 0, 0, num_items, order, 0, -1, options);
}
template <typename K, typename V>
void radix_sort_pairs(StreamRef stream, const K* keys_in, K* keys_out, const V* values_in, V* values_out,
                      std::uint64_t num_items, SortOrder order = SortOrder::ascending, const CallOptions& options = {}) {
  radix_sort(stream, Type::of<K>(), reinterpret_cast<CUdeviceptr>(keys_in), reinterpret_cast<CUdeviceptr>(keys_out),
             Type::of<V>(), reinterpret_cast<CUdeviceptr>(values_in), reinterpret_cast<CUdeviceptr>(values_out),
             num_items, order, 0, -1, options);
}

}  // namespace cucore::compute
