#pragma once
// The even-bin transform histogram_even's kernels are given (internal): CUB's
// ScaleTransform fields, then cucore's exact fast form for integer levels.
// CUB computes a bin as (sample - min) * bins / range in 64-bit arithmetic
// when samples and levels are 32-bit, a 64-bit division per sample that makes
// its sweep kernel instruction bound. When every (sample - min) * bins fits
// 32 bits (the host checks, per call), the same quotient is a multiply-high by
// magic = ceil(2^64 / range): floor(p / d) == floor(p * ceil(2^64 / d) / 2^64)
// for all p, d < 2^32 (Lemire, Kaser and Kurz, "Faster remainder by direct
// computation", 2019).
#include <cucore/compute/types.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cucore::compute::detail {

// The bytes' layout; the generated cucore_scale struct has the same members.
template <typename T>
struct HistogramScale {
  T max, min;
  T scale0, scale1;  // integers: bins and range; floats: the reciprocal bin width
  std::uint64_t magic;
  std::uint32_t bins;  // as 32 bits, for the fast form
  std::uint32_t fast;  // 1: the fast form is exact for this call
};

// `common`: the C++ common type of the level and sample types. Throws
// std::invalid_argument when (upper - lower) * bins overflows CUB's arithmetic.
std::vector<std::byte> histogram_scale(const Type& common, int num_levels, const Value& upper, const Value& lower,
                                       std::size_t sample_size);

}  // namespace cucore::compute::detail
