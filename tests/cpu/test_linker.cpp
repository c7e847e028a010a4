// Linker and LinkerOptions with the real nvJitLink (no GPU needed): LTO-IR of
// two programs into one cubin, relocatable cubins, PTX output, link errors and
// logs, option validation and the nvJitLink flag each option renders to.
#include <gtest/gtest.h>

#include <cucore/errors.hpp>
#include <cucore/linker.hpp>
#include <cucore/program.hpp>

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/gpu.hpp"
#include "loader/toolkit.hpp"

using cucore::CodeType;
using cucore::CompileError;
using cucore::Linker;
using cucore::LinkerOptions;
using cucore::ObjectCode;
using cucore::Program;
using cucore::ProgramOptions;

#include "common/compile_helpers.hpp"

namespace {

// The kernel calls a function the other program defines.
constexpr const char* kCaller = R"(
extern __device__ float scale_it(float x);
extern "C" __global__ void apply_scale(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = scale_it(data[i]);
}
)";
constexpr const char* kCallee = R"(
__device__ float scale_it(float x) { return 3.0f * x + 1.0f; }
)";

std::string text_of(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

bool is_elf(const ObjectCode& c) {
  auto b = c.code();
  return b.size() > 4 && std::memcmp(b.data(), "\x7f" "ELF", 4) == 0;
}

ObjectCode compile(const char* src, const char* name, CodeType target, bool lto) {
  ProgramOptions o{.name = name, .arch = "sm_90", .relocatable_device_code = true};
  if (lto) o.link_time_optimization = true;
  return Program(src, "c++", o).compile(target);
}

using cucore::test::expect_invalid;

}  // namespace

TEST(Linker, LtoirOfTwoProgramsLinksIntoOneCubin) {
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::ltoir, true);
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::ltoir, true);
  ASSERT_EQ(caller.code_type(), CodeType::ltoir);
  ASSERT_EQ(callee.code_type(), CodeType::ltoir);
  Linker linker({caller, callee}, {.name = "linked", .arch = "sm_90", .link_time_optimization = true});
  EXPECT_EQ(linker.backend(), "nvJitLink");
  ObjectCode cubin = linker.link(CodeType::cubin);
  EXPECT_EQ(cubin.code_type(), CodeType::cubin);
  EXPECT_EQ(cubin.name(), "linked");
  EXPECT_TRUE(is_elf(cubin));
  EXPECT_NE(text_of(cubin.code()).find("apply_scale"), std::string::npos);
  EXPECT_EQ(linker.error_log(), "");
}

// close() lets go of the inputs; a closed Linker refuses link() with
// ClosedError and keeps the last link's logs; close() again is nothing.
TEST(Linker, CloseReleasesTheInputsAndRefusesLink) {
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::ltoir, true);
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::ltoir, true);
  Linker linker({caller, callee}, {.arch = "sm_90", .verbose = true, .link_time_optimization = true});
  EXPECT_FALSE(linker.is_closed());
  EXPECT_TRUE(is_elf(linker.link(CodeType::cubin)));
  const std::string info = linker.info_log();
  EXPECT_FALSE(info.empty());
  linker.close();
  EXPECT_TRUE(linker.is_closed());
  EXPECT_TRUE(linker.object_codes().empty());
  EXPECT_THROW(linker.link(CodeType::cubin), cucore::ClosedError);
  EXPECT_EQ(linker.info_log(), info);
  linker.close();
  EXPECT_TRUE(linker.is_closed());
}

// handle() is the nvJitLink state the next link() completes: made once, the
// same before and after that link (the linked cubin is read back through it),
// a new one for a later link, null once closed.
TEST(Linker, HandleIsTheNvJitLinkStateLinkCompletes) {
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::ltoir, true);
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::ltoir, true);
  Linker linker({caller, callee}, {.arch = "sm_90", .link_time_optimization = true});
  ASSERT_EQ(linker.backend(), "nvJitLink");
  void* const h = linker.handle();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(linker.handle(), h);
  const ObjectCode cubin = linker.link(CodeType::cubin);
  EXPECT_EQ(linker.handle(), h);
  const auto& t = cucore::detail::nvjitlink();
  std::size_t size = 0;
  ASSERT_EQ(t.nvJitLinkGetLinkedCubinSize(static_cast<nvJitLinkHandle>(h), &size), NVJITLINK_SUCCESS);
  EXPECT_EQ(size, cubin.code().size());  // the very link link() returned
  EXPECT_TRUE(is_elf(linker.link(CodeType::cubin)));
  void* const again = linker.handle();
  ASSERT_NE(again, nullptr);
  ASSERT_EQ(t.nvJitLinkGetLinkedCubinSize(static_cast<nvJitLinkHandle>(again), &size), NVJITLINK_SUCCESS);
  EXPECT_EQ(size, cubin.code().size());
  linker.close();
  EXPECT_EQ(linker.handle(), nullptr);
}

TEST(Linker, LtoCanEmitPtxWithTheCalleeInlined) {
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::ltoir, true);
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::ltoir, true);
  Linker linker({caller, callee}, {.arch = "sm_90", .link_time_optimization = true, .ptx = true});
  ObjectCode ptx = linker.link(CodeType::ptx);
  EXPECT_EQ(ptx.code_type(), CodeType::ptx);
  const std::string text = text_of(ptx.code());
  EXPECT_NE(text.find(".entry apply_scale"), std::string::npos) << text;
  // Link-time optimization inlined scale_it: no call remains.
  EXPECT_EQ(text.find("call.uni"), std::string::npos) << text;
  EXPECT_NE(text.find("3.0"), std::string::npos) << text;  // 3.0f appears as 0f40400000 or 3.0
}

TEST(Linker, RelocatableCubinsLinkWithoutLto) {
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::cubin, false);
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::cubin, false);
  ObjectCode linked = Linker({caller, callee}, {.arch = "sm_90"}).link(CodeType::cubin);
  EXPECT_TRUE(is_elf(linked));
  EXPECT_NE(text_of(linked.code()).find("apply_scale"), std::string::npos);
}

TEST(Linker, UnresolvedSymbolIsCompileErrorWithTheLog) {
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::ltoir, true);
  Linker linker({caller}, {.arch = "sm_90", .link_time_optimization = true});
  try {
    linker.link(CodeType::cubin);
    FAIL() << "linked with an unresolved symbol";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("scale_it"), std::string::npos) << e.log();
    EXPECT_EQ(linker.error_log(), e.log());
    EXPECT_NE(std::string(e.what()).find("linking"), std::string::npos) << e.what();
  }
}

TEST(Linker, VerboseFillsTheInfoLog) {
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::ltoir, true);
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::ltoir, true);
  Linker quiet({caller, callee}, {.arch = "sm_90", .link_time_optimization = true});
  quiet.link(CodeType::cubin);
  Linker loud({caller, callee}, {.arch = "sm_90", .verbose = true, .link_time_optimization = true});
  loud.link(CodeType::cubin);
  EXPECT_FALSE(loud.info_log().empty());
  EXPECT_GT(loud.info_log().size(), quiet.info_log().size());
}

TEST(Linker, NameExpressionsSurviveLinking) {
  const char* tmpl = "template <typename T> __global__ void fill(T* p, T v) { p[threadIdx.x] = v; }\n";
  ObjectCode lto = Program(tmpl, "c++", {.arch = "sm_90", .relocatable_device_code = true})
                       .compile(CodeType::ltoir, {"fill<int>"});
  ASSERT_EQ(lto.symbol_mapping().count("fill<int>"), 1u);
  ObjectCode cubin = Linker({lto}, {.arch = "sm_90", .link_time_optimization = true}).link(CodeType::cubin);
  EXPECT_EQ(cubin.symbol_mapping(), lto.symbol_mapping());
  EXPECT_NE(text_of(cubin.code()).find(lto.symbol_mapping().at("fill<int>")), std::string::npos);
}

TEST(Linker, InputsAndTargetsAreChecked) {
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::ltoir, true);
  EXPECT_THROW(Linker({}, {.arch = "sm_90"}), std::invalid_argument);
  expect_invalid([] { Linker({ObjectCode()}, {.arch = "sm_90"}); }, "empty");
  Linker l({caller}, {.arch = "sm_90", .link_time_optimization = true});
  expect_invalid([&] { l.link(CodeType::fatbin); }, "fatbin");
  expect_invalid([&] { l.link(CodeType::ptx); }, "ptx");  // without LinkerOptions::ptx
  Linker p({caller}, {.arch = "sm_90", .link_time_optimization = true, .ptx = true});
  expect_invalid([&] { p.link(CodeType::cubin); }, "ptx");
}

TEST(Linker, EmptyArchComesFromTheDeviceOrAsksForIt) {
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::cubin, false);
  if (cucore::test::gpu_unavailable_reason().empty()) {
    EXPECT_FALSE(Linker({callee}).options().arch.empty());
    return;
  }
  expect_invalid([&] { Linker({callee}); }, "LinkerOptions::arch");
}

TEST(Linker, BackendIsNvJitLinkWhenItLoads) {
  ASSERT_TRUE(cucore::detail::nvjitlink_available());
  EXPECT_EQ(cucore::detail::linker_backend(false), "nvJitLink");
  EXPECT_EQ(cucore::detail::linker_backend(true), "nvJitLink");
}

TEST(LinkerOptions, ValidationNamesTheField) {
  auto flags = [](LinkerOptions o) { return [o] { (void)o.as_nvjitlink_flags(); }; };
  expect_invalid(flags({}), "arch");
  expect_invalid(flags({.arch = "sm9"}), "arch");
  expect_invalid(flags({.arch = "ampere"}), "arch");
  expect_invalid(flags({.arch = "sm_90", .max_register_count = 0}), "max_register_count");
  expect_invalid(flags({.arch = "sm_90", .max_register_count = -4}), "max_register_count");
  expect_invalid(flags({.arch = "sm_90", .optimization_level = 2}), "optimization_level");
  expect_invalid(flags({.arch = "sm_90", .ptx = true}), "ptx");
  expect_invalid(flags({.arch = "sm_90", .kernels_used = {""}}), "kernels_used");
  expect_invalid(flags({.arch = "sm_90", .variables_used = {""}}), "variables_used");
  expect_invalid(flags({.arch = "sm_90", .ptxas_options = {""}}), "ptxas_options");
  expect_invalid(flags({.arch = "sm_90", .split_compile = -1}), "split_compile");
  expect_invalid(flags({.arch = "sm_90", .split_compile_extended = -1}), "split_compile_extended");
  // nvJitLink reads each flag as a C string: a NUL would cut an entry short.
  using namespace std::string_literals;
  expect_invalid(flags({.arch = "sm_90", .kernels_used = {"k", "a\0b"s}}), "kernels_used: entry 1 contains a NUL");
  expect_invalid(flags({.arch = "sm_90", .variables_used = {"v\0"s}}), "variables_used: entry 0 contains a NUL");
  expect_invalid(flags({.arch = "sm_90", .ptxas_options = {"-v\0-O0"s}}), "ptxas_options: entry 0 contains a NUL");
  // The Linker validates too, before linking anything.
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::cubin, false);
  expect_invalid([&] { Linker({callee}, {.arch = "sm_90", .optimization_level = 1}); }, "optimization_level");
}

TEST(LinkerOptions, EveryOptionRendersToItsNvJitLinkFlag) {
  using L = LinkerOptions&;
  struct Case {
    const char* field;
    std::function<void(L)> set;
    std::vector<std::string> flags;
  };
  const std::vector<Case> cases{
      {"max_register_count", [](L o) { o.max_register_count = 32; }, {"-maxrregcount=32"}},
      {"time", [](L o) { o.time = true; }, {"-time"}},
      {"time", [](L o) { o.time = false; }, {}},
      {"verbose", [](L o) { o.verbose = true; }, {"-verbose"}},
      {"link_time_optimization", [](L o) { o.link_time_optimization = true; }, {"-lto"}},
      {"ptx",
       [](L o) {
         o.link_time_optimization = true;
         o.ptx = true;
       },
       {"-lto", "-ptx"}},
      {"optimization_level", [](L o) { o.optimization_level = 0; }, {"-O0"}},
      {"optimization_level", [](L o) { o.optimization_level = 3; }, {"-O3"}},
      {"debug", [](L o) { o.debug = true; }, {"-g"}},
      {"lineinfo", [](L o) { o.lineinfo = true; }, {"-lineinfo"}},
      {"ftz", [](L o) { o.ftz = true; }, {"-ftz=true"}},
      {"prec_div", [](L o) { o.prec_div = false; }, {"-prec-div=false"}},
      {"prec_sqrt", [](L o) { o.prec_sqrt = true; }, {"-prec-sqrt=true"}},
      {"fma", [](L o) { o.fma = false; }, {"-fma=false"}},
      {"kernels_used", [](L o) { o.kernels_used = {"a", "b"}; }, {"-kernels-used=a", "-kernels-used=b"}},
      {"variables_used", [](L o) { o.variables_used = {"v"}; }, {"-variables-used=v"}},
      {"optimize_unused_variables", [](L o) { o.optimize_unused_variables = true; }, {"-optimize-unused-variables"}},
      {"optimize_unused_variables", [](L o) { o.optimize_unused_variables = false; }, {}},
      {"ptxas_options", [](L o) { o.ptxas_options = {"-v", "-O2"}; }, {"-Xptxas=-v", "-Xptxas=-O2"}},
      {"split_compile", [](L o) { o.split_compile = 0; }, {"-split-compile=0"}},
      {"split_compile_extended", [](L o) { o.split_compile_extended = 4; }, {"-split-compile-extended=4"}},
      {"no_cache", [](L o) { o.no_cache = true; }, {"-no-cache"}},
  };
  // Each rendering is nvJitLink's spelling: it links LTO-IR with that flag.
  ObjectCode caller = compile(kCaller, "caller.cu", CodeType::ltoir, true);
  ObjectCode callee = compile(kCallee, "callee.cu", CodeType::ltoir, true);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field);
    LinkerOptions o{.arch = "sm_90"};
    c.set(o);
    std::vector<std::string> expected{"-arch=sm_90"};
    expected.insert(expected.end(), c.flags.begin(), c.flags.end());
    EXPECT_EQ(o.as_nvjitlink_flags(), expected);
    o.link_time_optimization = true;
    // Under LTO libNVVM takes the valued booleans only as 1/0 ("-ftz=true"
    // makes nvJitLinkComplete fail), so they render so there.
    for (const auto& f : o.as_nvjitlink_flags()) {
      EXPECT_EQ(f.find("=true"), std::string::npos) << f;
      EXPECT_EQ(f.find("=false"), std::string::npos) << f;
    }
    Linker linker({caller, callee}, o);
    EXPECT_NO_THROW(linker.link(o.ptx.value_or(false) ? CodeType::ptx : CodeType::cubin)) << linker.error_log();
  }
  EXPECT_EQ(LinkerOptions{.arch = "sm_90"}.as_nvjitlink_flags(), std::vector<std::string>{"-arch=sm_90"});
}
