// Program and ProgramOptions with the real NVRTC (no GPU needed): outputs,
// name expressions, errors and warnings, toolkit headers, option validation,
// and the NVRTC flag each option renders to.
#include <gtest/gtest.h>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/program.hpp>

#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/gpu.hpp"
#include "loader/library.hpp"
#include "loader/toolkit.hpp"

#include "common/compile_helpers.hpp"

namespace fs = std::filesystem;
using cucore::CodeType;
using cucore::CompileError;
using cucore::ObjectCode;
using cucore::Program;
using cucore::ProgramOptions;

namespace {

constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

constexpr const char* kTemplated = R"(
template <typename T>
__global__ void saxpy(T a, const T* x, const T* y, T* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

std::string text_of(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

bool is_elf(const ObjectCode& c) {
  auto b = c.code();
  return b.size() > 4 && std::memcmp(b.data(), "\x7f" "ELF", 4) == 0;
}

using cucore::test::sm90;

using cucore::test::expect_invalid;

fs::path temp_dir(const std::string& tag) {
  fs::path p = fs::temp_directory_path() / ("cucore_program_" + std::to_string(::getpid()) + "_" + tag);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

}  // namespace

TEST(Program, CubinStartsWithElfMagic) {
  ObjectCode c = Program(kSaxpy, "c++", sm90()).compile(CodeType::cubin);
  EXPECT_EQ(c.code_type(), CodeType::cubin);
  EXPECT_EQ(c.name(), "default_program");
  EXPECT_TRUE(is_elf(c));
  // The kernel's name is in the ELF's symbol table.
  EXPECT_NE(text_of(c.code()).find("saxpy"), std::string::npos);
}

TEST(Program, PtxHasTheEntryAndTarget) {
  ObjectCode c = Program(kSaxpy, "c++", sm90()).compile(CodeType::ptx);
  EXPECT_EQ(c.code_type(), CodeType::ptx);
  const std::string ptx = text_of(c.code());
  EXPECT_NE(ptx.find(".entry saxpy("), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  EXPECT_EQ(ptx.back(), '\0');  // kept loadable as a C string
}

TEST(Program, LtoirTargetAddsLinkTimeOptimization) {
  ObjectCode c = Program(kSaxpy, "c++", sm90()).compile(CodeType::ltoir);
  EXPECT_EQ(c.code_type(), CodeType::ltoir);
  EXPECT_GT(c.code().size(), 16u);
  EXPECT_FALSE(is_elf(c));
  // Explicitly off contradicts the target.
  expect_invalid([] { Program(kSaxpy, "c++", {.arch = "sm_90", .link_time_optimization = false}).compile(CodeType::ltoir); },
                 "link_time_optimization");
  // LTO makes only LTO-IR: asking for a cubin is a clear error, not an empty one.
  expect_invalid([] { Program(kSaxpy, "c++", {.arch = "sm_90", .link_time_optimization = true}).compile(CodeType::cubin); },
                 "link_time_optimization");
}

TEST(Program, NameExpressionsMapTemplatesToLoweredNames) {
  Program p(kTemplated, "c++", sm90());
  ObjectCode c = p.compile(CodeType::ptx, {"saxpy<float>", "saxpy<double>"});
  const auto& m = c.symbol_mapping();
  ASSERT_EQ(m.size(), 2u);
  const std::string f = m.at("saxpy<float>"), d = m.at("saxpy<double>");
  EXPECT_EQ(f, "_Z5saxpyIfEvT_PKS0_S2_PS0_i");  // the Itanium mangling of saxpy<float>
  EXPECT_EQ(d, "_Z5saxpyIdEvT_PKS0_S2_PS0_i");
  const std::string ptx = text_of(c.code());
  EXPECT_NE(ptx.find(".entry " + f), std::string::npos);  // the lowered name is the kernel's
  EXPECT_NE(ptx.find(".entry " + d), std::string::npos);
  // The cubin gets the same mapping.
  EXPECT_EQ(p.compile(CodeType::cubin, {"saxpy<float>"}).symbol_mapping().at("saxpy<float>"), f);
  expect_invalid([&] { p.compile(CodeType::ptx, {""}); }, "name expression");
}

TEST(Program, SyntaxErrorGivesCompileErrorNamingTheLine) {
  const std::string bad = "extern \"C\" __global__ void k(int* p) {\n"
                          "  p[0] = 1;\n"
                          "  p[1] = 2\n"  // line 3: missing ';'
                          "}\n";
  try {
    Program(bad, "c++", {.name = "bad.cu", .arch = "sm_90"}).compile(CodeType::cubin);
    FAIL() << "compiled";
  } catch (const CompileError& e) {
    const std::string what = e.what();
    EXPECT_NE(e.log().find("bad.cu(4): error"), std::string::npos) << e.log();  // NVRTC reports at the '}'
    EXPECT_NE(what.find("bad.cu(4): error"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "what() is one line: " << what;
    EXPECT_GT(e.log().size(), what.size() / 2);
  }
}

TEST(Program, WhatGivesTheFirstOfSeveralErrors) {
  const std::string bad = "__global__ void k() {\n"
                          "  undeclared_one = 1;\n"
                          "  undeclared_two = 2;\n"
                          "}\n";
  try {
    Program(bad, "c++", sm90()).compile(CodeType::ptx);
    FAIL();
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("(2): error"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("undeclared_one"), std::string::npos) << e.what();
    EXPECT_NE(e.log().find("undeclared_two"), std::string::npos) << e.log();
  }
}

TEST(Program, WarningsOfASuccessfulCompileAreKept) {
  const std::string warn = "extern \"C\" __global__ void k(int* p) {\n"
                           "  int unused_variable;\n"
                           "  p[0] = 1;\n"
                           "}\n";
  ObjectCode c = Program(warn, "c++", sm90()).compile(CodeType::cubin);
  EXPECT_TRUE(is_elf(c));
  EXPECT_NE(c.compile_log().find("warning"), std::string::npos) << c.compile_log();
  EXPECT_NE(c.compile_log().find("unused_variable"), std::string::npos) << c.compile_log();
  EXPECT_NE(c.compile_log().find("(2)"), std::string::npos) << c.compile_log();
  // A clean compile has an empty log; disable_warnings silences this one.
  EXPECT_EQ(Program(kSaxpy, "c++", sm90()).compile(CodeType::cubin).compile_log(), "");
  EXPECT_EQ(Program(warn, "c++", {.arch = "sm_90", .disable_warnings = true}).compile(CodeType::cubin).compile_log(), "");
}

TEST(Program, ToolkitHeadersNeedNoIncludePath) {
  const std::string src = "#include <cuda/std/cstdint>\n"
                          "#include <cuda/std/limits>\n"
                          "extern \"C\" __global__ void k(cuda::std::uint64_t* p) {\n"
                          "  p[0] = cuda::std::numeric_limits<cuda::std::uint32_t>::max();\n"
                          "}\n";
  ObjectCode c = Program(src, "c++", sm90()).compile(CodeType::cubin);
  EXPECT_TRUE(is_elf(c));
  // The default is what makes it work: without the toolkit's headers it fails.
  EXPECT_THROW(Program(src, "c++", {.arch = "sm_90", .use_toolkit_headers = false}).compile(CodeType::cubin), CompileError);
}

TEST(Program, IncludePathAndMacrosReachTheCompiler) {
  const fs::path dir = temp_dir("inc");
  {
    std::ofstream(dir / "scale.h") << "#define SCALE_BY(x) ((x) * FACTOR)\n";
  }
  const std::string src = "#include \"scale.h\"\n"
                          "#ifdef FORBIDDEN\n#error FORBIDDEN must be undefined\n#endif\n"
                          "extern \"C\" __global__ void k(int* p) { p[0] = SCALE_BY(2) + ONE; }\n";
  ProgramOptions o{.arch = "sm_90",
                   .define_macro = {std::pair<std::string, std::string>{"FACTOR", "21"}, std::string("ONE")},
                   .undefine_macro = {"FORBIDDEN"},
                   .include_path = {dir.string()}};
  EXPECT_TRUE(is_elf(Program(src, "c++", o).compile(CodeType::cubin)));
  o.define_macro = {std::pair<std::string, std::string>{"FORBIDDEN", "1"}};  // undefined again by undefine_macro
  o.define_macro.push_back(std::string("FACTOR=21"));
  o.define_macro.push_back(std::string("ONE"));
  EXPECT_TRUE(is_elf(Program(src, "c++", o).compile(CodeType::cubin)));
  o.include_path.clear();
  EXPECT_THROW(Program(src, "c++", o).compile(CodeType::cubin), CompileError);  // scale.h not found
  fs::remove_all(dir);
}

TEST(Program, OptionValidationRejectsEachInvalidValueBeforeCompiling) {
  auto make = [](ProgramOptions o) { return [o] { Program(kSaxpy, "c++", o); }; };
  // Too old for this NVRTC: known once NVRTC is asked, still before it compiles.
  expect_invalid([] { Program(kSaxpy, "c++", {.arch = "sm_70"}).compile(CodeType::cubin); }, "arch");
  expect_invalid(make({.arch = "sm_9"}), "arch");       // malformed
  expect_invalid(make({.arch = "sm_9x"}), "arch");
  expect_invalid(make({.arch = "gfx90a"}), "arch");
  expect_invalid(make({.arch = "sm_1000"}), "arch");
  expect_invalid(make({.arch = "sm_90", .max_register_count = -1}), "max_register_count");
  expect_invalid(make({.arch = "sm_90", .max_register_count = 0}), "max_register_count");
  expect_invalid(make({.arch = "sm_90", .split_compile = -2}), "split_compile");
  expect_invalid(make({.arch = "sm_90", .std = "c++23"}), "std");
  expect_invalid(make({.arch = "sm_90", .std = "gnu++17"}), "std");
  expect_invalid(make({.arch = "sm_90", .define_macro = {std::string("1BAD")}}), "define_macro");
  expect_invalid(make({.arch = "sm_90", .define_macro = {std::string("=1")}}), "define_macro");
  expect_invalid(make({.arch = "sm_90", .define_macro = {std::pair<std::string, std::string>{"", "1"}}}),
                 "define_macro");
  expect_invalid(make({.arch = "sm_90", .define_macro = {std::pair<std::string, std::string>{"A B", "1"}}}),
                 "define_macro");
  expect_invalid(make({.arch = "sm_90", .undefine_macro = {"A-B"}}), "undefine_macro");
  expect_invalid(make({.arch = "sm_90", .include_path = {""}}), "include_path");
  expect_invalid(make({.arch = "sm_90", .pre_include = {""}}), "pre_include");
  expect_invalid(make({.arch = "sm_90", .ptxas_options = {""}}), "ptxas_options");
  expect_invalid(make({.arch = "sm_90", .diag_error = {-1}}), "diag_error");
  expect_invalid(make({.arch = "sm_90", .diag_suppress = {-5}}), "diag_suppress");
  expect_invalid(make({.arch = "sm_90", .diag_warn = {-7}}), "diag_warn");
  expect_invalid(make({.arch = "sm_90", .ofast_compile = "fast"}), "ofast_compile");
  expect_invalid(make({.arch = "sm_90", .create_pch = "a.pch", .use_pch = "b.pch"}), "use_pch");
  // Valid neighbours of the invalid values pass.
  EXPECT_NO_THROW(make({.arch = "sm_90a", .max_register_count = 32, .std = "c++20", .split_compile = 0})());
  EXPECT_NO_THROW(make({.arch = "compute_90", .define_macro = {std::string("F(x)=x")}})());
  // as_nvrtc_flags needs a resolved arch.
  expect_invalid([] { (void)ProgramOptions{}.as_nvrtc_flags(); }, "arch");
}

TEST(Program, CodeTypesAndTargetsAreChecked) {
  try {
    Program(kSaxpy, "cuda", sm90());
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("cuda"), std::string::npos);
    EXPECT_NE(w.find("\"c++\""), std::string::npos) << w;  // lists the valid ones
    EXPECT_NE(w.find("\"ptx\""), std::string::npos) << w;
  }
  EXPECT_EQ(Program(kSaxpy, "C++", sm90()).code_type(), "c++");  // case-insensitive, like cuda.core
  Program p(kSaxpy, "c++", sm90());
  try {
    p.compile(CodeType::fatbin);  // a code type, but not one NVRTC makes
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"fatbin\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ltoir"), std::string::npos) << e.what();  // lists the valid ones
  }
  expect_invalid([] { Program(kSaxpy, "c++", {.arch = "compute_90"}).compile(CodeType::cubin); }, "compute_90");
  EXPECT_NE(text_of(Program(kSaxpy, "c++", {.arch = "compute_90"}).compile(CodeType::ptx).code()).find(".target sm_90"),
            std::string::npos);
}

TEST(Program, NulBytesAreRefusedRatherThanCutShort) {
  // NVRTC reads C strings: a NUL would silently drop the rest.
  const std::string src = std::string(kSaxpy) + '\0' + "__global__ void hidden() {}";
  expect_invalid([&] { Program(src, "c++", sm90()); }, "NUL byte at offset " + std::to_string(std::strlen(kSaxpy)));
  ProgramOptions o = sm90();
  o.name = std::string("a\0b", 3);
  expect_invalid([&] { Program(kSaxpy, "c++", o); }, "ProgramOptions::name: contains a NUL byte at offset 1");
  o = sm90();
  o.include_path = {"inc", std::string("x\0y", 3)};
  expect_invalid([&] { Program(kSaxpy, "c++", o); }, "ProgramOptions::include_path: contains a NUL byte");
  o = sm90();
  o.define_macro = {std::pair<std::string, std::string>("N", std::string("1\0", 2))};
  expect_invalid([&] { Program(kSaxpy, "c++", o); }, "ProgramOptions::define_macro: contains a NUL byte");
  expect_invalid([] { Program(kSaxpy, "c++", sm90()).compile(CodeType::ptx, {std::string("saxpy\0x", 7)}); },
                 "contains a NUL byte");
}

TEST(Program, AnOverrideThatIsNotALibraryIsNamedWhenNothingElseLoads) {
  const std::string file = "/proc/self/cmdline";  // exists, and is no library
  ::setenv("CUCORE_TEST_GHOST_PATH", file.c_str(), 1);
  cucore::detail::LibrarySpec spec{"ghost", {"libcucore_ghost.so.1"}, "CUCORE_TEST_GHOST_PATH", true, "install ghost"};
  auto r = cucore::detail::load_library(spec);
  ::unsetenv("CUCORE_TEST_GHOST_PATH");
  EXPECT_FALSE(r.info.found);
  EXPECT_NE(r.info.hint.find("$CUCORE_TEST_GHOST_PATH is set to '" + file + "', which is not a loadable ghost library"),
            std::string::npos)
      << r.info.hint;
  cucore::LibraryNotFoundError e(spec.component, r.info.searched, r.info.hint);
  EXPECT_NE(std::string(e.what()).find("CUCORE_TEST_GHOST_PATH is set to"), std::string::npos) << e.what();
}

TEST(Program, OwnsACopyOfItsSource) {
  std::string src = kSaxpy;
  Program p(src, "c++", sm90());
  src.assign("this is not C++");
  EXPECT_EQ(p.code(), kSaxpy);
  EXPECT_TRUE(is_elf(p.compile(CodeType::cubin)));
}

TEST(Program, EmptyArchComesFromTheDeviceOrAsksForIt) {
  const std::string why = cucore::test::gpu_unavailable_reason();
  if (why.empty()) {
    Program p(kSaxpy);
    EXPECT_EQ(p.options().arch, "sm_" + cucore::Device().arch());
    return;
  }
  try {
    Program p(kSaxpy);
    FAIL() << "no device, yet an arch was found";
  } catch (const std::invalid_argument& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("ProgramOptions::arch"), std::string::npos) << w;
    EXPECT_NE(w.find("sm_90"), std::string::npos) << w;  // says how to set it
    EXPECT_GT(w.size(), 80u) << "keeps the underlying reason: " << w;
  }
}

TEST(Program, PtxSourceLinksToCubinOrPassesThrough) {
  const std::string ptx = [] {
    std::string s = text_of(Program(kSaxpy, "c++", sm90()).compile(CodeType::ptx).code());
    s.pop_back();  // as a user would hold it: text without the NUL
    return s;
  }();
  Program p(ptx, "ptx", {.name = "from_ptx", .arch = "sm_90"});
  EXPECT_EQ(p.backend(), "nvJitLink");
  ObjectCode cubin = p.compile(CodeType::cubin);
  EXPECT_EQ(cubin.code_type(), CodeType::cubin);
  EXPECT_EQ(cubin.name(), "from_ptx");
  EXPECT_TRUE(is_elf(cubin));
  ObjectCode same = p.compile(CodeType::ptx);
  EXPECT_EQ(text_of(same.code()), ptx + '\0');
  EXPECT_THROW(p.compile(CodeType::ltoir), std::invalid_argument);
  // Name expressions are NVRTC's: a PTX program ignores them, as cuda.core's does.
  EXPECT_EQ(text_of(p.compile(CodeType::cubin, {"saxpy"}).code()), text_of(cubin.code()));
  // Broken PTX is a CompileError from the linker, with its log.
  try {
    Program(".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k( { ret; }\n", "ptx", sm90())
        .compile(CodeType::cubin);
    FAIL();
  } catch (const CompileError& e) {
    EXPECT_FALSE(e.log().empty());
  }
}

// A PTX program's handle is its linker's (as cuda.core's): nvJitLink's state
// with the source added, kept until close().
TEST(Program, PtxHandleIsItsLinkersState) {
  std::string ptx = text_of(Program(kSaxpy, "c++", sm90()).compile(CodeType::ptx).code());
  Program p(ptx, "ptx", sm90());
  ASSERT_EQ(p.backend(), "nvJitLink");
  void* const h = p.handle();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(p.handle(), h);
  // A live nvJitLink state: it completes into a cubin.
  const auto& t = cucore::detail::nvjitlink();
  ASSERT_EQ(t.nvJitLinkComplete(static_cast<nvJitLinkHandle>(h)), NVJITLINK_SUCCESS);
  std::size_t size = 0;
  ASSERT_EQ(t.nvJitLinkGetLinkedCubinSize(static_cast<nvJitLinkHandle>(h), &size), NVJITLINK_SUCCESS);
  EXPECT_GT(size, 0u);
  EXPECT_TRUE(is_elf(p.compile(CodeType::cubin)));  // compile() makes its own
  p.close();
  EXPECT_EQ(p.handle(), nullptr);
}

// use_bundled_headers: NVRTC's own headers, from NVRTC 13.3; an older NVRTC is
// refused when the Program is made, naming the option and the version.
TEST(Program, BundledHeadersNeedNvrtc133) {
  const auto [major, minor] = cucore::nvrtc_version();
  ProgramOptions o = sm90();
  o.use_bundled_headers = true;
  if (major * 100 + minor >= 1303) {
    EXPECT_NO_THROW(Program(kSaxpy, "c++", o));
    return;
  }
  try {
    Program(kSaxpy, "c++", o);
    FAIL() << "NVRTC " << major << "." << minor << " has no bundled headers";
  } catch (const cucore::FeatureUnavailableError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("use_bundled_headers"), std::string::npos) << what;
    EXPECT_NE(what.find("NVRTC 13.3"), std::string::npos) << what;
    EXPECT_NE(what.find("this NVRTC is " + std::to_string(major) + "." + std::to_string(minor)), std::string::npos)
        << what;
  }
  o.use_bundled_headers = false;
  EXPECT_NO_THROW(Program(kSaxpy, "c++", o));
}

// The flag names nvrtc-bundled-headers under cucore's cache root (made
// private), and the toolkit's headers give way to NVRTC's.
TEST(ProgramOptionsFlags, BundledHeadersNameTheCacheDirectoryAndDropTheToolkits) {
  const fs::path dir = temp_dir("bundled");
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  ProgramOptions o{.arch = "sm_90", .include_path = {"/mine"}, .use_bundled_headers = true};
  const auto flags = o.as_nvrtc_flags();
  if (old) {
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
  const std::vector<std::string> expected{"-arch=sm_90", "--include-path=/mine",
                                          "--use-bundled-headers=" + (dir / "cucore/nvrtc-bundled-headers").string()};
  EXPECT_EQ(flags, expected);
  EXPECT_EQ(fs::status(dir / "cucore").permissions() & fs::perms::all, fs::perms::owner_all);
  o.use_bundled_headers = false;
  EXPECT_GT(o.as_nvrtc_flags().size(), 2u);  // the toolkit's directories are back
  fs::remove_all(dir);
}

TEST(Program, BackendAndVersionQueries) {
  EXPECT_EQ(Program(kSaxpy, "c++", sm90()).backend(), "NVRTC");
  auto [major, minor] = cucore::nvrtc_version();
  EXPECT_GE(major, 12);
  EXPECT_GE(minor, 0);
  auto archs = cucore::nvrtc_supported_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90"), archs.end());
  EXPECT_EQ(std::find(archs.begin(), archs.end(), "sm_70"), archs.end());
}

TEST(Program, ConcurrentCompilesOfOneProgram) {
  Program p(kTemplated, "c++", sm90());
  std::vector<std::string> lowered(4);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] { lowered[i] = p.compile(CodeType::cubin, {"saxpy<float>"}).symbol_mapping().at("saxpy<float>"); });
  for (auto& t : ts) t.join();
  for (const auto& l : lowered) EXPECT_EQ(l, "_Z5saxpyIfEvT_PKS0_S2_PS0_i");
}

// ---- every option renders to the right NVRTC flag -------------------------

namespace {

struct FlagCase {
  const char* field;
  std::function<void(ProgramOptions&)> set;
  std::vector<std::string> flags;  // after -arch
  bool nvrtc_accepts_alone = true;  // checked against NVRTC below
};

std::vector<FlagCase> flag_cases(const fs::path& dir) {
  using P = ProgramOptions&;
  const std::string d = dir.string();
  return {
      {"relocatable_device_code", [](P o) { o.relocatable_device_code = true; }, {"--relocatable-device-code=true"}},
      {"relocatable_device_code", [](P o) { o.relocatable_device_code = false; }, {"--relocatable-device-code=false"}},
      {"extensible_whole_program", [](P o) { o.extensible_whole_program = true; }, {"--extensible-whole-program"}},
      {"extensible_whole_program", [](P o) { o.extensible_whole_program = false; }, {}},
      {"debug", [](P o) { o.debug = true; }, {"--device-debug"}},
      {"debug", [](P o) { o.debug = false; }, {}},
      {"lineinfo", [](P o) { o.lineinfo = true; }, {"--generate-line-info"}},
      {"device_code_optimize", [](P o) { o.device_code_optimize = true; }, {"--dopt=on"}},
      {"device_code_optimize", [](P o) { o.device_code_optimize = false; }, {}},
      {"ptxas_options", [](P o) { o.ptxas_options = {"-v", "--warn-on-spills"}; },
       {"--ptxas-options=-v", "--ptxas-options=--warn-on-spills"}},
      {"max_register_count", [](P o) { o.max_register_count = 64; }, {"--maxrregcount=64"}},
      {"ftz", [](P o) { o.ftz = true; }, {"--ftz=true"}},
      {"ftz", [](P o) { o.ftz = false; }, {"--ftz=false"}},
      {"prec_sqrt", [](P o) { o.prec_sqrt = false; }, {"--prec-sqrt=false"}},
      {"prec_div", [](P o) { o.prec_div = true; }, {"--prec-div=true"}},
      {"fma", [](P o) { o.fma = false; }, {"--fmad=false"}},
      {"use_fast_math", [](P o) { o.use_fast_math = true; }, {"--use_fast_math"}},
      {"extra_device_vectorization", [](P o) { o.extra_device_vectorization = true; },
       {"--extra-device-vectorization"}},
      {"link_time_optimization", [](P o) { o.link_time_optimization = true; }, {"--dlink-time-opt"}},
      {"gen_opt_lto", [](P o) { o.gen_opt_lto = true; }, {"--gen-opt-lto"}},
      {"define_macro",
       [](P o) {
         o.define_macro = {std::string("A"), std::pair<std::string, std::string>{"B", "2"}, std::string("C=3")};
       },
       {"--define-macro=A", "--define-macro=B=2", "--define-macro=C=3"}},
      {"undefine_macro", [](P o) { o.undefine_macro = {"X", "Y"}; }, {"--undefine-macro=X", "--undefine-macro=Y"}},
      {"include_path", [d](P o) { o.include_path = {d, d + "/sub"}; },
       {"--include-path=" + d, "--include-path=" + d + "/sub"}},
      {"pre_include", [](P o) { o.pre_include = {"cuda_fp16.h"}; }, {"--pre-include=cuda_fp16.h"}, false},
      {"no_source_include", [](P o) { o.no_source_include = true; }, {"--no-source-include"}},
      {"std", [](P o) { o.std = "c++17"; }, {"--std=c++17"}},
      {"std", [](P o) { o.std = "c++03"; }, {"--std=c++03"}},
      {"builtin_move_forward", [](P o) { o.builtin_move_forward = false; }, {"--builtin-move-forward=false"}},
      {"builtin_initializer_list", [](P o) { o.builtin_initializer_list = true; },
       {"--builtin-initializer-list=true"}},
      {"disable_warnings", [](P o) { o.disable_warnings = true; }, {"--disable-warnings"}},
      {"restrict", [](P o) { o.restrict = true; }, {"--restrict"}},
      {"device_as_default_execution_space", [](P o) { o.device_as_default_execution_space = true; },
       {"--device-as-default-execution-space"}},
      {"device_int128", [](P o) { o.device_int128 = true; }, {"--device-int128"}},
      {"device_float128",
       [](P o) {
         o.arch = "sm_100";
         o.device_float128 = true;
       },
       {"--device-float128"}},
      {"optimization_info", [](P o) { o.optimization_info = "inline"; }, {"--optimization-info=inline"}},
      {"no_display_error_number", [](P o) { o.no_display_error_number = true; }, {"--no-display-error-number"}},
      {"diag_error", [](P o) { o.diag_error = {177, 550}; }, {"--diag-error=177", "--diag-error=550"}},
      {"diag_suppress", [](P o) { o.diag_suppress = {177}; }, {"--diag-suppress=177"}},
      {"diag_warn", [](P o) { o.diag_warn = {20012}; }, {"--diag-warn=20012"}},
      {"brief_diagnostics", [](P o) { o.brief_diagnostics = true; }, {"--brief-diagnostics=true"}},
      {"time", [d](P o) { o.time = d + "/time.csv"; }, {"--time=" + d + "/time.csv"}},
      {"split_compile", [](P o) { o.split_compile = 0; }, {"--split-compile=0"}},
      {"fdevice_syntax_only", [](P o) { o.fdevice_syntax_only = true; }, {"--fdevice-syntax-only"}},
      {"minimal", [](P o) { o.minimal = true; }, {"--minimal"}},
      {"no_cache", [](P o) { o.no_cache = true; }, {"--no-cache"}},
      {"fdevice_time_trace", [d](P o) { o.fdevice_time_trace = d + "/trace"; },
       {"--fdevice-time-trace=" + d + "/trace"}},
      {"frandom_seed", [](P o) { o.frandom_seed = "42"; }, {"--frandom-seed=42"}},
      {"ofast_compile", [](P o) { o.ofast_compile = "mid"; }, {"--Ofast-compile=mid"}},
      {"pch", [](P o) { o.pch = true; }, {"--pch"}, false},  // writes under /tmp: rendered only
      {"create_pch", [d](P o) { o.create_pch = d + "/k.pch"; }, {"--create-pch=" + d + "/k.pch"}},
      {"use_pch", [d](P o) { o.use_pch = d + "/none.pch"; }, {"--use-pch=" + d + "/none.pch"}, false},
      {"pch_dir", [d](P o) { o.pch_dir = d; }, {"--pch-dir=" + d}},
      {"pch_verbose", [](P o) { o.pch_verbose = true; }, {"--pch-verbose=true"}},
      {"pch_messages", [](P o) { o.pch_messages = false; }, {"--pch-messages=false"}},
      {"instantiate_templates_in_pch", [](P o) { o.instantiate_templates_in_pch = true; },
       {"--instantiate-templates-in-pch=true"}},
  };
}

}  // namespace

TEST(ProgramOptionsFlags, EveryOptionRendersToItsNvrtcFlag) {
  const fs::path dir = temp_dir("flags");
  for (const auto& c : flag_cases(dir)) {
    SCOPED_TRACE(c.field);
    ProgramOptions o{.arch = "sm_90", .use_toolkit_headers = false};
    c.set(o);
    std::vector<std::string> expected{"-arch=" + o.arch};
    expected.insert(expected.end(), c.flags.begin(), c.flags.end());
    EXPECT_EQ(o.as_nvrtc_flags(), expected);
  }
  fs::remove_all(dir);
}

TEST(ProgramOptionsFlags, NvrtcAcceptsEveryRenderedFlag) {
  // The spelling is NVRTC's own: each flag, alone, compiles a kernel.
  const fs::path dir = temp_dir("accept");
  const auto& t = cucore::detail::nvrtc();
  for (const auto& c : flag_cases(dir)) {
    if (!c.nvrtc_accepts_alone) continue;
    SCOPED_TRACE(c.field);
    ProgramOptions o{.arch = "sm_90", .use_toolkit_headers = false};
    c.set(o);
    const auto flags = o.as_nvrtc_flags();
    std::vector<const char*> argv;
    for (const auto& f : flags) argv.push_back(f.c_str());
    nvrtcProgram prog = nullptr;
    ASSERT_EQ(t.nvrtcCreateProgram(&prog, kSaxpy, "k", 0, nullptr, nullptr), NVRTC_SUCCESS);
    const nvrtcResult r = t.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    std::size_t n = 0;
    t.nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    t.nvrtcGetProgramLog(prog, log.data());
    t.nvrtcDestroyProgram(&prog);
    EXPECT_EQ(r, NVRTC_SUCCESS) << log;
  }
  fs::remove_all(dir);
}

TEST(ProgramOptionsFlags, DefaultsToolkitHeadersAndDeterminism) {
  ProgramOptions bare{.arch = "sm_90", .use_toolkit_headers = false};
  EXPECT_EQ(bare.as_nvrtc_flags(), std::vector<std::string>{"-arch=sm_90"});  // unset fields pass nothing

  ProgramOptions o{.arch = "sm_90", .include_path = {"/mine"}, .std = "c++17"};
  const auto flags = o.as_nvrtc_flags();
  EXPECT_EQ(flags, o.as_nvrtc_flags());  // deterministic
  const auto cccl = cucore::pathfinder::cccl_include_dir();
  const auto cuda = cucore::pathfinder::cuda_include_dir();
  ASSERT_TRUE(cccl && cuda) << "the CUDA toolkit's headers are expected on this machine";
  const std::vector<std::string> expected{"-arch=sm_90", "--include-path=/mine", "--include-path=" + *cccl,
                                          "--include-path=" + *cuda, "--std=c++17"};
  EXPECT_EQ(flags, expected);  // the caller's paths come first
}
