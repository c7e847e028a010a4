// The loader and the pathfinder on any machine (CI has no GPU): the driver
// loads or says where it looked, NVRTC's version and path, the search order
// step by step, override variables, and the pathfinder's report.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/pathfinder.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "loader/driver.hpp"
#include "loader/library.hpp"
#include "loader/toolkit.hpp"

using namespace cucore;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(Loader, DriverEitherLoadsOrSaysWhereItLooked) {
  auto info = pathfinder::find("driver");
  EXPECT_EQ(info.name, "driver");
  if (info.found) {
    // A machine with the driver: it loads and reports a version; devices count.
    EXPECT_FALSE(info.path.empty());
    EXPECT_FALSE(info.version.empty());
    EXPECT_GE(Device::count(), 0);
  } else {
    ASSERT_FALSE(info.searched.empty());
    try {
      Device::count();
      FAIL() << "Device::count() did not throw without a driver";
    } catch (const LibraryNotFoundError& e) {
      EXPECT_TRUE(contains(e.what(), "libcuda")) << e.what();
      EXPECT_TRUE(contains(e.component(), "libcuda"));
      EXPECT_FALSE(e.searched().empty());
    }
    // The failure is remembered and rethrown the same way.
    EXPECT_THROW(Device::count(), LibraryNotFoundError);
    EXPECT_THROW(Device(0), LibraryNotFoundError);
  }
}

TEST(Loader, NvrtcIsFoundWithVersionAndPath) {
  auto info = pathfinder::find("nvrtc");
  ASSERT_TRUE(info.found) << "this test needs the CUDA toolkit's NVRTC";
  EXPECT_TRUE(contains(info.path, "libnvrtc.so")) << info.path;
  EXPECT_FALSE(info.found_by.empty());
  const auto& t = detail::nvrtc();
  EXPECT_EQ(info.version, std::to_string(t.major) + "." + std::to_string(t.minor));
  EXPECT_GE(t.major, 12);
  // After loading, a second lookup of the same library is "already loaded".
  detail::LibrarySpec spec{"nvrtc-again", {"libnvrtc.so.13", "libnvrtc.so.12"}, "CUCORE_TEST_UNSET_VAR", true, ""};
  auto again = detail::load_library(spec);
  ASSERT_NE(again.handle, nullptr);
  EXPECT_EQ(again.info.found_by, "already loaded");
}

TEST(Loader, SearchOrderIsReportedStepByStep) {
  // A library that exists nowhere: every step appears in the trail, in order.
  ::setenv("CUCORE_TEST_LIB_PATH", "/nonexistent/dir", 1);
  ::setenv("CUDA_HOME", "/nonexistent/cuda_home", 1);
  detail::LibrarySpec spec{"ghost", {"libcucore_ghost.so.1"}, "CUCORE_TEST_LIB_PATH", true, "install ghost"};
  auto r = detail::load_library(spec);
  ::unsetenv("CUCORE_TEST_LIB_PATH");
  ::unsetenv("CUDA_HOME");
  EXPECT_EQ(r.handle, nullptr);
  EXPECT_FALSE(r.info.found);
  const auto& s = r.info.searched;
  auto index_of = [&](const std::string& prefix) {
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i].rfind(prefix, 0) == 0) return static_cast<long>(i);
    return -1L;
  };
  long loaded = index_of("already loaded"), override_env = index_of("$CUCORE_TEST_LIB_PATH"),
       site = index_of("site-packages"), conda = index_of("$CONDA_PREFIX"), os = index_of("OS loader"),
       home = index_of("$CUDA_HOME"), usr = index_of("/usr/local/cuda");
  for (long i : {loaded, override_env, site, conda, os, home, usr}) ASSERT_GE(i, 0) << testing::PrintToString(s);
  EXPECT_LT(loaded, override_env);
  EXPECT_LT(override_env, site);
  EXPECT_LT(site, conda);
  EXPECT_LT(conda, os);
  EXPECT_LT(os, home);
  EXPECT_LT(home, usr);
}

TEST(Loader, OverrideVariableWins) {
  // Point the override at the toolkit's lib directory: found by the override
  // step. The library is one cucore never loads (NVRTC loads nvrtc-builtins,
  // and other tests in this process compile), so no earlier test has it.
  ::setenv("CUCORE_TEST_OVERRIDE", "/usr/local/cuda/lib64", 1);
  detail::LibrarySpec spec{"cudart-like", {"libcudart.so.13"}, "CUCORE_TEST_OVERRIDE", true, ""};
  auto r = detail::load_library(spec);
  ::unsetenv("CUCORE_TEST_OVERRIDE");
  ASSERT_NE(r.info.found_by, "already loaded") << "libcudart.so.13 was loaded before this test";
  ASSERT_TRUE(r.info.found) << testing::PrintToString(r.info.searched);
  EXPECT_EQ(r.info.found_by, "$CUCORE_TEST_OVERRIDE");
  EXPECT_TRUE(contains(r.info.path, "/usr/local/cuda/lib64")) << r.info.path;
}

TEST(Pathfinder, ReportCoversEveryComponent) {
  auto report = pathfinder::report();
  auto names = pathfinder::component_names();
  ASSERT_EQ(report.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(report[i].name, names[i]);
    if (report[i].found) {
      EXPECT_FALSE(report[i].path.empty()) << names[i];
    } else {
      EXPECT_FALSE(report[i].searched.empty()) << names[i];
    }
  }
  EXPECT_THROW(pathfinder::find("cudnn-ish"), std::invalid_argument);
}

TEST(Pathfinder, ToolkitHeadersAreFound) {
  auto inc = pathfinder::cuda_include_dir();
  ASSERT_TRUE(inc.has_value());
  auto cccl = pathfinder::cccl_include_dir();
  ASSERT_TRUE(cccl.has_value());
  auto info = pathfinder::find("cccl_headers");
  EXPECT_TRUE(info.found);
  EXPECT_EQ(info.path, *cccl);
}

TEST(Pathfinder, SitePackagesAreSearchedWhenGiven) {
  pathfinder::set_python_site_packages({"/nonexistent/site-packages"});
  detail::LibrarySpec spec{"ghost2", {"libcucore_ghost2.so.1"}, "CUCORE_TEST_UNSET_VAR", true, ""};
  auto r = detail::load_library(spec);
  pathfinder::set_python_site_packages({});
  bool absent = false, searched = false;
  for (const auto& s : r.info.searched) {
    absent |= contains(s, "not running under Python");
    searched |= contains(s, "site-packages: /nonexistent/site-packages/nvidia");
  }
  EXPECT_FALSE(absent) << "site-packages were given, yet reported absent";
  EXPECT_TRUE(searched) << testing::PrintToString(r.info.searched);
}
