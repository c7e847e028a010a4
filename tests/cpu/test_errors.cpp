// cucore's errors on any machine: CudaError's code, name, description and call
// (from cucore's table, or the driver for newer codes), the hierarchy callers
// catch, and the inline check.
#include <cucore/errors.hpp>

#include <cucore/buffer.hpp>
#include <cucore/ipc.hpp>
#include <cucore/launch.hpp>
#include <cucore/stream.hpp>
#include <cucore/system.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

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

// cucore::Error is the root of everything cucore throws, and each error is
// also its standard kind: one std::exception base, so a handler of any of
// the three (cucore::Error, the standard kind, std::exception) catches it.
namespace {
template <typename Std, typename E>
void expect_caught_three_ways(const E& error, const char* what) {
  SCOPED_TRACE(what);
  try {
    throw error;
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), error.what());
  } catch (...) {
    ADD_FAILURE() << "not a cucore::Error";
  }
  try {
    throw error;
  } catch (const Std& e) {
    EXPECT_STREQ(e.what(), error.what());
  } catch (...) {
    ADD_FAILURE() << "not its standard kind";
  }
  try {
    throw error;
  } catch (const std::exception& e) {  // an ambiguous std::exception base would not match here
    EXPECT_STREQ(e.what(), error.what());
  } catch (...) {
    ADD_FAILURE() << "not a std::exception";
  }
}
}  // namespace

TEST(Errors, EveryErrorIsACucoreErrorAndItsStandardKind) {
  expect_caught_three_ways<std::runtime_error>(RuntimeError("r"), "RuntimeError");
  expect_caught_three_ways<std::runtime_error>(CudaError(CUDA_ERROR_INVALID_VALUE, "cuX"), "CudaError");
  expect_caught_three_ways<std::runtime_error>(CompileError("bad", "log"), "CompileError");
  expect_caught_three_ways<std::runtime_error>(LibraryNotFoundError("nvrtc", {"a"}), "LibraryNotFoundError");
  expect_caught_three_ways<std::runtime_error>(FeatureUnavailableError("f", "r"), "FeatureUnavailableError");
  expect_caught_three_ways<std::runtime_error>(IpcError("i"), "IpcError");
  expect_caught_three_ways<std::runtime_error>(NvmlError(4, "nvmlX"), "NvmlError");
  expect_caught_three_ways<std::invalid_argument>(InvalidArgumentError("a"), "InvalidArgumentError");
  expect_caught_three_ways<std::invalid_argument>(ClosedError("Stream", "sync"), "ClosedError");
  expect_caught_three_ways<std::out_of_range>(OutOfRangeError("o"), "OutOfRangeError");
  expect_caught_three_ways<std::overflow_error>(OverflowError("v"), "OverflowError");
  expect_caught_three_ways<std::logic_error>(LogicError("l"), "LogicError");
  expect_caught_three_ways<std::system_error>(SystemError(std::error_code(2, std::generic_category()), "open"),
                                              "SystemError");
}

// What the library itself throws for a bad argument and a closed object.
TEST(Errors, TheLibrarysOwnRefusalsAreCucoreErrors) {
  try {
    validate(LaunchConfig{});  // no grid, no block
    FAIL() << "an empty config was accepted";
  } catch (const Error& e) {
    EXPECT_NE(dynamic_cast<const std::invalid_argument*>(&e), nullptr) << e.what();
  }
  try {
    Buffer closed;  // default-constructed: closed
    (void)closed.ipc_descriptor();
    FAIL() << "a closed Buffer was described";
  } catch (const Error& e) {
    EXPECT_NE(dynamic_cast<const ClosedError*>(&e), nullptr) << e.what();
  }
}

// libcucore throws only cucore's classes: no `throw std::...` under src/ or
// include/ (a standard exception thrown there would slip past
// `catch (const cucore::Error&)`).
TEST(Errors, LibcucoreThrowsNoBareStandardException) {
  const std::filesystem::path root = std::filesystem::path(CUCORE_TEST_DATA_DIR).parent_path().parent_path();
  const std::regex bare(R"(throw\s+std::\w+)");
  std::vector<std::string> found;
  std::size_t files = 0;
  for (const char* dir : {"src", "include"})
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / dir)) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".inc" && ext != ".h")) continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const auto comment = line.find("//");
        const std::string code = comment == std::string::npos ? line : line.substr(0, comment);
        if (std::regex_search(code, bare))
          found.push_back(std::filesystem::relative(entry.path(), root).string() + ":" + std::to_string(n) + ": " + line);
      }
    }
  EXPECT_GT(files, 100u) << "the source tree was not found at " << root;
  std::ostringstream all;
  for (const auto& f : found) all << f << "\n";
  EXPECT_TRUE(found.empty()) << all.str();
}
