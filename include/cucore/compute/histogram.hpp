#pragma once
// Histogram with evenly spaced bins (cuda.compute's histogram_even /
// make_histogram_even; CUB's DeviceHistogram::HistogramEven): num_levels - 1
// bins splitting [lower, upper); samples outside are not counted.
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include <cucore/compute/build.hpp>
#include <cucore/compute/iterator.hpp>
#include <cucore/compute/types.hpp>
#include <cucore/stream.hpp>

namespace cucore::compute {

namespace detail {
struct HistogramImpl;
}

class HistogramEven {
 public:
  // counter_type: the histogram's element type (int32, uint32, int64, ...);
  // level_type: lower/upper's type (integral or float32/float64 samples and
  // levels). num_levels only picks the kernel variant (up to 257 levels:
  // per-block bins in shared memory); calls may pass other counts.
  HistogramEven(const Iterator& samples, const Type& counter_type, const Type& level_type, int num_levels = 257,
                const BuildOptions& options = {});
  // Two-phase (see Reduce). `histogram` holds num_levels - 1 counters, which are overwritten.
  std::size_t operator()(void* temp, std::size_t temp_bytes, const Iterator& samples, CUdeviceptr histogram,
                         int num_levels, const Value& lower, const Value& upper, std::uint64_t num_samples,
                         StreamRef stream) const;
  void operator()(const Iterator& samples, CUdeviceptr histogram, int num_levels, const Value& lower,
                  const Value& upper, std::uint64_t num_samples, StreamRef stream, const MemoryResource& mr = {}) const;

 private:
  std::shared_ptr<const detail::HistogramImpl> impl_;
};

void histogram_even(StreamRef stream, const Iterator& samples, const Type& counter_type, CUdeviceptr histogram,
                    int num_levels, const Value& lower, const Value& upper, std::uint64_t num_samples,
                    const CallOptions& options = {});

}  // namespace cucore::compute
