// The peer of bench_compute: the same algorithms from CUB, compiled by nvcc
// into this benchmark (32-bit item counts, as a C++ caller writes them).
#include <cub/device/device_histogram.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_transform.cuh>

#include <cuda/std/tuple>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace cub_peer {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUB ") + what + ": " + cudaGetErrorString(e));
}
struct Saxpy {
  __device__ float operator()(float x, float y) const { return 2.0f * x + y; }
};
}  // namespace

// Each returns the temporary storage bytes when temp is null, else runs on `stream`.
std::size_t reduce_sum(void* temp, std::size_t bytes, const int* in, int* out, int n, void* stream) {
  check(cub::DeviceReduce::Reduce(temp, bytes, in, out, n, cuda::std::plus<>{}, 0, static_cast<cudaStream_t>(stream)),
        "DeviceReduce::Reduce");
  return bytes;
}

std::size_t inclusive_sum(void* temp, std::size_t bytes, const int* in, int* out, int n, void* stream) {
  check(cub::DeviceScan::InclusiveSum(temp, bytes, in, out, n, static_cast<cudaStream_t>(stream)),
        "DeviceScan::InclusiveSum");
  return bytes;
}

std::size_t sort_pairs(void* temp, std::size_t bytes, const unsigned* keys_in, unsigned* keys_out,
                       const unsigned* values_in, unsigned* values_out, int n, void* stream) {
  check(cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, values_in, values_out, n, 0, 32,
                                        static_cast<cudaStream_t>(stream)),
        "DeviceRadixSort::SortPairs");
  return bytes;
}

std::size_t histogram_even(void* temp, std::size_t bytes, const int* samples, int* histogram, int num_levels,
                           int lower, int upper, int n, void* stream) {
  check(cub::DeviceHistogram::HistogramEven(temp, bytes, samples, histogram, num_levels, lower, upper, n,
                                            static_cast<cudaStream_t>(stream)),
        "DeviceHistogram::HistogramEven");
  return bytes;
}

std::size_t histogram_even_u8(void* temp, std::size_t bytes, const unsigned char* samples, int* histogram,
                              int num_levels, int lower, int upper, int n, void* stream) {
  check(cub::DeviceHistogram::HistogramEven(temp, bytes, samples, histogram, num_levels, lower, upper, n,
                                            static_cast<cudaStream_t>(stream)),
        "DeviceHistogram::HistogramEven (bytes)");
  return bytes;
}

void saxpy(const float* x, const float* y, float* out, int n, void* stream) {
  check(cub::DeviceTransform::Transform(cuda::std::make_tuple(x, y), out, n, Saxpy{}, static_cast<cudaStream_t>(stream)),
        "DeviceTransform::Transform");
}

}  // namespace cub_peer
