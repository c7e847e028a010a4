#pragma once
// Test data: random floats in [-100, 100), never zero (a zero would hide a
// missing write), the same for the same seed.
#include <cstddef>
#include <random>
#include <vector>

namespace cucore::test {

inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  std::vector<float> v(n);
  for (auto& x : v) {
    x = dist(rng);
    if (x == 0.f) x = 1.5f;
  }
  return v;
}

}  // namespace cucore::test
