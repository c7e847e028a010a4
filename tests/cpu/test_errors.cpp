// cucore's errors on any machine: CudaError's code, name, description and call
// (from cucore's table, or the driver for newer codes), the hierarchy callers
// catch, and the inline check.
#include <cucore/errors.hpp>

#include <gtest/gtest.h>

#include <string>

#include "loader/driver.hpp"

using namespace cucore;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(Errors, CudaErrorCarriesCodeNameDescriptionAndCall) {
  CudaError e(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAllocFromPoolAsync");
  EXPECT_EQ(e.code(), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(e.name(), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(e.call(), "cuMemAllocFromPoolAsync");
  EXPECT_TRUE(contains(e.description(), "unable to allocate enough memory")) << e.description();
  std::string what = e.what();
  EXPECT_TRUE(contains(what, "cuMemAllocFromPoolAsync")) << what;
  EXPECT_TRUE(contains(what, "CUDA_ERROR_OUT_OF_MEMORY")) << what;
  EXPECT_TRUE(contains(what, "(2)")) << what;
}

// A code newer than cucore's table is named by the driver in force (errors/
// stands below the loader, which hands it the lookup), and by nobody without one.
TEST(Errors, ACodeNewerThanTheTableIsNamedByTheDriverInForce) {
  const auto newer = static_cast<CUresult>(12345);
  detail::DriverTable t{};
  t.cuGetErrorName = [](CUresult c, const char** s) {
    *s = c == static_cast<CUresult>(12345) ? "CUDA_ERROR_FROM_A_NEWER_DRIVER" : nullptr;
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  };
  t.cuGetErrorString = [](CUresult, const char** s) {
    *s = "a newer driver's text";
    return CUDA_SUCCESS;
  };
  detail::set_driver_table_for_testing(&t);
  CudaError e(newer, "cuSomething");
  EXPECT_EQ(e.name(), "CUDA_ERROR_FROM_A_NEWER_DRIVER");
  EXPECT_EQ(e.description(), "a newer driver's text");
  EXPECT_STREQ(result_name(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY");  // the table first
  detail::set_driver_table_for_testing(nullptr);
  EXPECT_STREQ(result_name(newer), "CUDA_ERROR_UNKNOWN_CODE");
  EXPECT_STREQ(result_description(newer), "unrecognized CUresult");
}

TEST(Errors, EveryCodeInCudaHHasItsOwnName) {
  // A sample across the enum, including the high ranges.
  EXPECT_STREQ(result_name(CUDA_SUCCESS), "CUDA_SUCCESS");
  EXPECT_STREQ(result_name(CUDA_ERROR_INVALID_VALUE), "CUDA_ERROR_INVALID_VALUE");
  EXPECT_STREQ(result_name(CUDA_ERROR_NO_DEVICE), "CUDA_ERROR_NO_DEVICE");
  EXPECT_STREQ(result_name(CUDA_ERROR_ILLEGAL_ADDRESS), "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_STREQ(result_name(CUDA_ERROR_NOT_READY), "CUDA_ERROR_NOT_READY");
  EXPECT_STREQ(result_name(CUDA_ERROR_UNKNOWN), "CUDA_ERROR_UNKNOWN");
  EXPECT_STREQ(result_name(static_cast<CUresult>(987654)), "CUDA_ERROR_UNKNOWN_CODE");
}

TEST(Errors, HierarchyLetsCallersCatchTheBase) {
  EXPECT_THROW(throw CudaError(CUDA_ERROR_INVALID_VALUE, "x"), Error);
  EXPECT_THROW(throw LibraryNotFoundError("nvrtc", {"a", "b"}), Error);
  EXPECT_THROW(throw FeatureUnavailableError("green contexts", "CUDA driver 12.4"), std::runtime_error);
  LibraryNotFoundError lnf("nvrtc", {"step one: /x - no such file", "step two"}, "install it");
  std::string what = lnf.what();
  EXPECT_TRUE(contains(what, "nvrtc"));
  EXPECT_TRUE(contains(what, "step one: /x - no such file"));
  EXPECT_TRUE(contains(what, "hint: install it"));
  EXPECT_EQ(lnf.searched().size(), 2u);
  FeatureUnavailableError fu("green contexts", "CUDA driver 12.4");
  EXPECT_TRUE(contains(fu.what(), "green contexts"));
  EXPECT_TRUE(contains(fu.what(), "CUDA driver 12.4"));
}

TEST(Errors, CheckThrowsOnlyOnFailure) {
  EXPECT_NO_THROW(detail::check(CUDA_SUCCESS, "cuX"));
  try {
    detail::check(CUDA_ERROR_INVALID_HANDLE, "cuStreamSynchronize");
    FAIL() << "no throw";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(e.call(), "cuStreamSynchronize");
  }
}
