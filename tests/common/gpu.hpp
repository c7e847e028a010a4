#pragma once
// GPU tests call CUCORE_REQUIRE_GPU() first: without a usable GPU they skip with
// the reason, or fail when CUCORE_REQUIRE_GPU=1 (scripts/gpu-check sets it).
#include <gtest/gtest.h>

#include <string>

namespace cucore::test {
// Empty when a GPU is usable, else why not.
std::string gpu_unavailable_reason();
bool gpu_required_by_environment();
}  // namespace cucore::test

#define CUCORE_REQUIRE_GPU()                                                         \
  do {                                                                               \
    if (auto why = ::cucore::test::gpu_unavailable_reason(); !why.empty()) {        \
      if (::cucore::test::gpu_required_by_environment()) FAIL() << "no GPU: " << why; \
      GTEST_SKIP() << "needs a GPU: " << why;                                        \
    }                                                                                \
  } while (0)
