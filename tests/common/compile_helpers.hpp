#pragma once
// Shared by the compilation and cache tests.
#include <cucore/program.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace cucore {
// GoogleTest prints CodeType values by name.
inline void PrintTo(CodeType type, std::ostream* os) { *os << to_string(type); }
}  // namespace cucore

namespace cucore::test {

// A templated SAXPY: exercises name expressions ("saxpy<float>").
inline const std::string kSaxpyTemplate = R"(
template <typename T>
__global__ void saxpy(T a, const T* x, const T* y, T* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

inline ProgramOptions sm90() { return ProgramOptions{.arch = "sm_90"}; }

// Runs `fn`, expects std::invalid_argument whose message names `field`.
inline void expect_invalid(const std::function<void()>& fn, const std::string& field) {
  try {
    fn();
    ADD_FAILURE() << "no std::invalid_argument for " << field;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << "message does not name " << field << ": "
                                                                     << e.what();
  }
}

}  // namespace cucore::test
