// NVVM IR programs through libNVVM, a Program's shared state (the compiler's
// own program, close, the PCH outcome), path-backed ObjectCode read on first
// use, and cache keys for PTX and NVVM: the libcucore side of cuda.core's
// Program behaviour, on the CPU (libNVVM and NVRTC need no GPU).
#include <gtest/gtest.h>

#include <cucore/errors.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/compile_helpers.hpp"

namespace cucore {
namespace {

namespace fs = std::filesystem;

std::string ir_version_metadata() {
  const auto v = nvvm_ir_version();
  return "!nvvmir.version = !{!9}\n!9 = !{i32 " + std::to_string(v[0]) + ", i32 " + std::to_string(v[1]) + ", i32 " +
         std::to_string(v[2]) + ", i32 " + std::to_string(v[3]) + "}\n";
}

const char* kLayout =
    "target triple = \"nvptx64-unknown-cuda\"\n"
    "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:"
    "64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n";

// A kernel storing helper(seed) through its argument; helper lives in another module.
std::string kernel_ir() {
  return std::string(kLayout) +
         "declare i32 @helper(i32)\n"
         "define void @store(i32* %p) {\n"
         "  %v = call i32 @helper(i32 1000)\n"
         "  store i32 %v, i32* %p, align 4\n"
         "  ret void\n"
         "}\n"
         "!nvvm.annotations = !{!0}\n"
         "!0 = !{void (i32*)* @store, !\"kernel\", i32 1}\n" +
         ir_version_metadata();
}

std::string helper_ir(int add) {
  return std::string(kLayout) + "define i32 @helper(i32 %a) {\n  %r = add i32 %a, " + std::to_string(add) +
         "\n  ret i32 %r\n}\n" + ir_version_metadata();
}

std::string text_of(const ObjectCode& o) {
  auto c = o.code();
  return std::string(reinterpret_cast<const char*>(c.data()), c.size());
}

TEST(NvvmProgram, CompilesIrWithExtraModulesToPtxAndLtoir) {
  ASSERT_TRUE(pathfinder::find("nvvm").found) << "libNVVM ships with the toolkit the build uses";
  std::mt19937 rng(17);
  const int add = 2 + static_cast<int>(rng() % 5000);
  ProgramOptions o{.name = "nvvm_kernel", .arch = "sm_90", .extra_sources = {{"helper.ll", helper_ir(add)}}};
  Program p(kernel_ir(), "NVVM", o);
  EXPECT_EQ(p.code_type(), "nvvm");
  EXPECT_EQ(p.backend(), "NVVM");
  const ObjectCode ptx = p.compile(CodeType::ptx);
  EXPECT_EQ(ptx.code_type(), CodeType::ptx);
  EXPECT_EQ(ptx.name(), "nvvm_kernel");
  const std::string text = text_of(ptx);
  EXPECT_NE(text.find(".visible .entry store("), std::string::npos) << text;
  EXPECT_NE(text.find(".target sm_90"), std::string::npos);  // sm_90 went to libNVVM as compute_90
  // The helper was compiled in: its sum is folded into a constant.
  EXPECT_NE(text.find(std::to_string(1000 + add)), std::string::npos) << text;
  const ObjectCode ltoir = p.compile(CodeType::ltoir);
  EXPECT_EQ(ltoir.code_type(), CodeType::ltoir);
  EXPECT_TRUE(is_valid_code(CodeType::ltoir, ltoir.code()));
  try {
    (void)p.compile(CodeType::cubin);
    FAIL() << "NVVM made a cubin";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("NVVM backend only supports target_type=\"ptx\""), std::string::npos)
        << e.what();
  }
  // Without the helper module it stays an external call in the PTX.
  EXPECT_NE(text_of(Program(kernel_ir(), "nvvm", test::sm90()).compile(CodeType::ptx)).find(".extern .func"),
            std::string::npos);
  // IR libNVVM cannot read is a CompileError carrying its log.
  try {
    (void)Program(std::string(kLayout) + "define void @broken( {\n", "nvvm", test::sm90()).compile(CodeType::ptx);
    FAIL() << "broken IR compiled";
  } catch (const CompileError& e) {
    EXPECT_FALSE(e.log().empty());
  }
}

TEST(NvvmProgram, RefusesWhatLibnvvmCannotTake) {
  test::expect_invalid([] { Program(kernel_ir(), "nvvm", {.arch = "sm_90", .lineinfo = true}); }, "lineinfo");
  test::expect_invalid([] { Program(kernel_ir(), "nvvm", {.arch = "sm_90", .extra_sources = {{"empty", ""}}}); },
                       "extra_sources");
  test::expect_invalid([] { Program("__global__ void k() {}", "c++", {.arch = "sm_90", .extra_sources = {{"m", "x"}}}); },
                       "extra_sources");
  test::expect_invalid([] { Program(".version 8.0", "ptx", {.arch = "sm_90", .extra_sources = {{"m", "x"}}}); },
                       "extra_sources");
  // Empty PTX is refused when the Program is made (cuda.core's linker refuses it then).
  test::expect_invalid([] { Program("", "ptx", test::sm90()); }, "PTX source is empty");
}

// Empty NVVM IR is libNVVM's to judge, as in cuda.core: the Program is made,
// and its compile is a CompileError carrying libNVVM's verdict.
TEST(NvvmProgram, EmptyIrIsRefusedByLibnvvmAtCompile) {
  Program p("", "nvvm", test::sm90());
  try {
    (void)p.compile(CodeType::ptx);
    ADD_FAILURE() << "libNVVM compiled an empty module";
  } catch (const CompileError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

TEST(ProgramState, HandleCloseAndPchStatusAreShared) {
  const std::string src = "#include <cuda/std/type_traits>\nextern \"C\" __global__ void k(int* x) { *x = 1; }\n";
  Program p(src, "c++", test::sm90());
  EXPECT_FALSE(p.pch_status());
  void* h = p.handle();
  ASSERT_NE(h, nullptr);
  Program copy = p;
  EXPECT_EQ(copy.handle(), h);  // one compiler program for the copies
  EXPECT_FALSE(p.nvrtc_flags().empty());
  EXPECT_EQ(p.nvrtc_flags().front(), "-arch=sm_90");
  (void)p.compile(CodeType::ptx);
  EXPECT_FALSE(p.pch_status());  // not asked for
  const fs::path pch = fs::temp_directory_path() / ("cucore-pch-" + std::to_string(std::random_device{}()));
  Program makes(src, "c++", {.arch = "sm_90", .create_pch = pch.string()});
  (void)makes.compile(CodeType::ptx);
  ASSERT_TRUE(makes.pch_status());
  EXPECT_EQ(*makes.pch_status(), PchStatus::created);
  EXPECT_EQ(to_string(PchStatus::created), "created");
  EXPECT_GT(fs::file_size(pch), 0u);
  fs::remove(pch);
  copy.close();
  EXPECT_TRUE(p.is_closed());
  EXPECT_EQ(p.handle(), nullptr);
  EXPECT_THROW((void)p.compile(CodeType::ptx), ClosedError);
  p.close();  // idempotent
  Program ptx(".version 8.0\n.target sm_90\n.address_size 64\n", "ptx", test::sm90());
  void* const link_state = ptx.handle();  // its linker's (cuda.core: self._linker.handle)
  EXPECT_NE(link_state, nullptr);
  Program ptx_copy = ptx;
  EXPECT_EQ(ptx_copy.handle(), link_state);  // one linker for the copies
  ptx_copy.close();
  EXPECT_EQ(ptx.handle(), nullptr);
  Program nvvm(kernel_ir(), "nvvm", test::sm90());
  EXPECT_NE(nvvm.handle(), nullptr);
}

TEST(ProgramState, PtxSourceWithItsTerminatorIsTaken) {
  const ObjectCode ptx = Program("extern \"C\" __global__ void k() {}", "c++", test::sm90()).compile(CodeType::ptx);
  const std::string text = text_of(ptx);  // with the C string's NUL, as NVRTC hands it out
  ASSERT_EQ(text.back(), '\0');
  EXPECT_TRUE(is_valid_code(CodeType::cubin, Program(text, "ptx", test::sm90()).compile(CodeType::cubin).code()));
  test::expect_invalid([] { Program(std::string("a\0b", 3), "c++", test::sm90()); }, "NUL");
}

TEST(PathBackedObjectCode, ReadsOnFirstUseAndReportsAMissingFile) {
  const fs::path dir = fs::temp_directory_path() / ("cucore-pb-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  std::mt19937 rng(23);
  std::string bytes(777, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  std::ofstream(dir / "x.bin", std::ios::binary) << bytes;
  ObjectCode o = ObjectCode::from_path(CodeType::cubin, dir / "x.bin", "named");
  EXPECT_EQ(o.source_path(), dir / "x.bin");
  EXPECT_EQ(o.name(), "named");
  fs::remove(dir / "x.bin");  // read on first use: now
  EXPECT_THROW((void)o.code(), std::invalid_argument);
  EXPECT_THROW((void)o.code(), std::invalid_argument);  // the failure is kept
  std::ofstream(dir / "y.bin", std::ios::binary) << bytes;
  ObjectCode y = ObjectCode::from_path(CodeType::ltoir, dir / "y.bin");
  ASSERT_EQ(y.code().size(), bytes.size());
  EXPECT_EQ(text_of(y), bytes);
  fs::remove(dir / "y.bin");
  EXPECT_EQ(text_of(y), bytes);  // once read, kept
  EXPECT_TRUE(y.source_path() == dir / "y.bin");
  ObjectCode opaque = ObjectCode::opaque({std::byte{1}, std::byte{2}});
  EXPECT_TRUE(opaque.is_opaque());
  EXPECT_FALSE(y.is_opaque());
  fs::remove_all(dir);
}

TEST(ProgramCacheKeyKinds, PtxAndNvvmKeysFollowWhatTheirCompilerSees) {
  const ProgramOptions base = test::sm90();
  auto key = [](std::string_view code, std::string_view type, const ProgramOptions& o, CodeType t,
                std::vector<std::string> names = {}, std::string_view extra = {}) {
    return make_program_cache_key(code, type, o, t, names, extra);
  };
  const std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";
  const std::string k = key(ptx, "ptx", base, CodeType::cubin);
  ProgramOptions nvrtc_only = base;
  nvrtc_only.std = "c++17";
  nvrtc_only.define_macro = {std::string("X")};
  nvrtc_only.include_path = {"/opt/include"};
  EXPECT_EQ(key(ptx, "PTX", nvrtc_only, CodeType::cubin), k);  // the linker never sees them
  EXPECT_EQ(key(ptx, "ptx", base, CodeType::cubin, {"a", "b"}), k);  // nor name expressions
  ProgramOptions ftz = base;
  ftz.ftz = true;
  EXPECT_NE(key(ptx, "ptx", ftz, CodeType::cubin), k);
  test::expect_invalid([&] { (void)key(ptx, "ptx", base, CodeType::ltoir); }, "not valid for code_type");
  const std::string ir = kernel_ir();
  const std::string n = key(ir, "nvvm", base, CodeType::ptx);
  EXPECT_NE(key(ir, "nvvm", base, CodeType::ltoir), n);
  ProgramOptions extra = base;
  extra.extra_sources = {{"helper.ll", helper_ir(5)}};
  ProgramOptions extra2 = base;
  extra2.extra_sources = {{"helper.ll", helper_ir(6)}};
  EXPECT_NE(key(ir, "nvvm", extra, CodeType::ptx), n);
  EXPECT_NE(key(ir, "nvvm", extra, CodeType::ptx), key(ir, "nvvm", extra2, CodeType::ptx));
  test::expect_invalid([&] { (void)key(ir, "nvvm", base, CodeType::cubin); }, "not valid for code_type");
  ProgramOptions libdevice = base;
  libdevice.use_libdevice = true;
  test::expect_invalid([&] { (void)key(ir, "nvvm", libdevice, CodeType::ptx); }, "libdevice");
  EXPECT_NE(key(ir, "nvvm", libdevice, CodeType::ptx, {}, "a"), key(ir, "nvvm", libdevice, CodeType::ptx, {}, "b"));
  test::expect_invalid([&] { (void)key("k", "c++", extra, CodeType::ptx); }, "extra_sources");
  ProgramOptions dir = base;
  dir.name = "src\\kernel.cu";
  test::expect_invalid([&] { (void)key("k", "c++", dir, CodeType::ptx); }, "directory component");
  EXPECT_EQ(key("k", "c++", dir, CodeType::ptx, {}, "d").size(), kProgramCacheKeySize);
}

}  // namespace
}  // namespace cucore
