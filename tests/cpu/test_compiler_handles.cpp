// The compilers' handles (src/handles/compiler_handles.hpp): every NVRTC
// program, NVVM program, nvJitLink handle and driver link state made is
// destroyed exactly once, on success and on each failure path. The real
// libraries' tables are wrapped to count (and, at one chosen call, fail)
// through the loader's test seams; the driver's linker runs against a fake
// driver table (there is no GPU here).
#include <gtest/gtest.h>

#include <cucore/errors.hpp>
#include <cucore/linker.hpp>
#include <cucore/program.hpp>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "handles/compiler_handles.hpp"
#include "loader/driver.hpp"
#include "loader/toolkit.hpp"

namespace cucore {
namespace {

const char* kKernel = "extern \"C\" __global__ void k(int* p) { *p = 7; }\n";

// Made, destroyed and the call made to fail (nullptr: none) for the library
// under test; a counting table's wrappers read them.
struct Counts {
  static inline long made = 0, destroyed = 0;
  static inline const char* fail_at = nullptr;
  static void reset(const char* fail) {
    made = destroyed = 0;
    fail_at = fail;
  }
  static bool fails(const char* call) { return fail_at && std::strcmp(fail_at, call) == 0; }
};

// ---- NVRTC -----------------------------------------------------------------

class NvrtcCounts {
 public:
  NvrtcCounts() {
    real_ = &detail::nvrtc();
    table_ = *real_;
    table_.nvrtcCreateProgram = [](nvrtcProgram* p, const char* src, const char* name, int n, const char* const* h,
                                   const char* const* names) {
      const nvrtcResult r = real_->nvrtcCreateProgram(p, src, name, n, h, names);
      if (r == NVRTC_SUCCESS) ++Counts::made;
      return r;
    };
    table_.nvrtcDestroyProgram = [](nvrtcProgram* p) {
      ++Counts::destroyed;
      return real_->nvrtcDestroyProgram(p);
    };
    table_.nvrtcAddNameExpression = [](nvrtcProgram p, const char* n) {
      return Counts::fails("nvrtcAddNameExpression") ? NVRTC_ERROR_INVALID_INPUT : real_->nvrtcAddNameExpression(p, n);
    };
    table_.nvrtcCompileProgram = [](nvrtcProgram p, int n, const char* const* o) {
      return Counts::fails("nvrtcCompileProgram") ? NVRTC_ERROR_OUT_OF_MEMORY : real_->nvrtcCompileProgram(p, n, o);
    };
    table_.nvrtcGetPTXSize = [](nvrtcProgram p, std::size_t* n) {
      return Counts::fails("nvrtcGetPTXSize") ? NVRTC_ERROR_INVALID_PROGRAM : real_->nvrtcGetPTXSize(p, n);
    };
    table_.nvrtcGetPTX = [](nvrtcProgram p, char* out) {
      return Counts::fails("nvrtcGetPTX") ? NVRTC_ERROR_INVALID_PROGRAM : real_->nvrtcGetPTX(p, out);
    };
    table_.nvrtcGetLoweredName = [](nvrtcProgram p, const char* n, const char** out) {
      return Counts::fails("nvrtcGetLoweredName") ? NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID
                                                  : real_->nvrtcGetLoweredName(p, n, out);
    };
    detail::set_nvrtc_table_for_testing(&table_);
  }
  ~NvrtcCounts() { detail::set_nvrtc_table_for_testing(nullptr); }
  NvrtcCounts(const NvrtcCounts&) = delete;
  NvrtcCounts& operator=(const NvrtcCounts&) = delete;

 private:
  static inline const detail::NvrtcTable* real_ = nullptr;
  detail::NvrtcTable table_;
};

TEST(CompilerHandles, EveryNvrtcProgramIsDestroyedOnceOnSuccessAndOnEachFailure) {
  const std::string kernel = std::string(kKernel) + "template <typename T> __global__ void t(T* p) { *p = 1; }\n";
  NvrtcCounts counts;
  Program program(kernel, "c++", ProgramOptions{.arch = "sm_90", .use_toolkit_headers = false});
  Counts::reset(nullptr);
  const ObjectCode ptx = program.compile(CodeType::ptx, {"t<int>"});
  EXPECT_FALSE(ptx.code().empty());
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 1);

  for (const char* call : {"nvrtcAddNameExpression", "nvrtcCompileProgram", "nvrtcGetPTXSize", "nvrtcGetPTX",
                           "nvrtcGetLoweredName"}) {
    Counts::reset(call);
    EXPECT_THROW((void)program.compile(CodeType::ptx, {"t<int>"}), Error) << call;
    EXPECT_EQ(Counts::made, 1) << call;
    EXPECT_EQ(Counts::destroyed, 1) << call << " failed: the program is destroyed once";
  }
  Counts::reset(nullptr);
}

TEST(CompilerHandles, ProgramHandleIsMadeOnceSharedByCopiesAndDestroyedOnceByClose) {
  NvrtcCounts counts;
  Counts::reset(nullptr);
  {
    Program program(kKernel, "c++", ProgramOptions{.arch = "sm_90", .use_toolkit_headers = false});
    void* h = program.handle();
    ASSERT_NE(h, nullptr);
    const Program copy = program;
    EXPECT_EQ(copy.handle(), h);  // shared, not made again
    EXPECT_EQ(Counts::made, 1);
    program.close();
    EXPECT_EQ(Counts::destroyed, 1);
    EXPECT_EQ(copy.handle(), nullptr);  // closed for every copy
    program.close();                    // idempotent
    EXPECT_EQ(Counts::destroyed, 1);
  }
  EXPECT_EQ(Counts::destroyed, 1);  // the last copy going destroys nothing more
  {
    Program program(kKernel, "c++", ProgramOptions{.arch = "sm_90", .use_toolkit_headers = false});
    ASSERT_NE(program.handle(), nullptr);
    EXPECT_EQ(Counts::made, 2);
  }
  EXPECT_EQ(Counts::destroyed, 2);  // never closed: destroyed with the last copy
}

// ---- NVVM ------------------------------------------------------------------

class NvvmCounts {
 public:
  NvvmCounts() {
    real_ = &detail::libnvvm();
    table_ = *real_;
    using detail::nvvm::Program;
    using detail::nvvm::Result;
    table_.nvvmCreateProgram = [](Program* p) {
      const Result r = real_->nvvmCreateProgram(p);
      if (r == detail::nvvm::SUCCESS) ++Counts::made;
      return r;
    };
    table_.nvvmDestroyProgram = [](Program* p) {
      ++Counts::destroyed;
      return real_->nvvmDestroyProgram(p);
    };
    table_.nvvmAddModuleToProgram = [](Program p, const char* b, std::size_t n, const char* name) {
      return Counts::fails("nvvmAddModuleToProgram") ? detail::nvvm::ERROR_INVALID_INPUT
                                                     : real_->nvvmAddModuleToProgram(p, b, n, name);
    };
    table_.nvvmVerifyProgram = [](Program p, int n, const char** o) {
      return Counts::fails("nvvmVerifyProgram") ? detail::nvvm::ERROR_INVALID_IR : real_->nvvmVerifyProgram(p, n, o);
    };
    table_.nvvmCompileProgram = [](Program p, int n, const char** o) {
      return Counts::fails("nvvmCompileProgram") ? detail::nvvm::ERROR_COMPILATION
                                                 : real_->nvvmCompileProgram(p, n, o);
    };
    table_.nvvmGetCompiledResultSize = [](Program p, std::size_t* n) {
      return Counts::fails("nvvmGetCompiledResultSize") ? detail::nvvm::ERROR_INVALID_PROGRAM
                                                        : real_->nvvmGetCompiledResultSize(p, n);
    };
    detail::set_nvvm_table_for_testing(&table_);
  }
  ~NvvmCounts() { detail::set_nvvm_table_for_testing(nullptr); }
  NvvmCounts(const NvvmCounts&) = delete;
  NvvmCounts& operator=(const NvvmCounts&) = delete;

 private:
  static inline const detail::NvvmTable* real_ = nullptr;
  detail::NvvmTable table_;
};

std::string nvvm_ir() {
  const auto v = nvvm_ir_version();
  return "target triple = \"nvptx64-unknown-cuda\"\n"
         "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-"
         "f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n"
         "define void @store(i32* %p) {\n  store i32 7, i32* %p, align 4\n  ret void\n}\n"
         "!nvvm.annotations = !{!0}\n!0 = !{void (i32*)* @store, !\"kernel\", i32 1}\n"
         "!nvvmir.version = !{!9}\n!9 = !{i32 " +
         std::to_string(v[0]) + ", i32 " + std::to_string(v[1]) + ", i32 " + std::to_string(v[2]) + ", i32 " +
         std::to_string(v[3]) + "}\n";
}

TEST(CompilerHandles, EveryNvvmProgramIsDestroyedOnceOnSuccessAndOnEachFailure) {
  NvvmCounts counts;
  Program program(nvvm_ir(), "nvvm", ProgramOptions{.arch = "sm_90"});
  Counts::reset(nullptr);
  EXPECT_FALSE(program.compile(CodeType::ptx).code().empty());
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 1);
  // nvvmAddModuleToProgram fails inside the program's making, before any compile.
  for (const char* call :
       {"nvvmAddModuleToProgram", "nvvmVerifyProgram", "nvvmCompileProgram", "nvvmGetCompiledResultSize"}) {
    Counts::reset(call);
    EXPECT_THROW((void)program.compile(CodeType::ptx), Error) << call;
    EXPECT_EQ(Counts::made, 1) << call;
    EXPECT_EQ(Counts::destroyed, 1) << call << " failed: the program is destroyed once";
  }
  Counts::reset("nvvmAddModuleToProgram");  // Program::handle() makes one the same way
  EXPECT_THROW((void)program.handle(), Error);
  EXPECT_EQ(Counts::destroyed, Counts::made);
  Counts::reset(nullptr);
  ASSERT_NE(program.handle(), nullptr);
  program.close();
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 1);
}

// ---- nvJitLink -------------------------------------------------------------

class NvJitLinkCounts {
 public:
  NvJitLinkCounts() {
    real_ = &detail::nvjitlink();
    table_ = *real_;
    table_.nvJitLinkCreate = [](nvJitLinkHandle* h, std::uint32_t n, const char** o) {
      if (Counts::fails("nvJitLinkCreate")) return NVJITLINK_ERROR_INTERNAL;
      const nvJitLinkResult r = real_->nvJitLinkCreate(h, n, o);
      if (r == NVJITLINK_SUCCESS) ++Counts::made;
      return r;
    };
    table_.nvJitLinkDestroy = [](nvJitLinkHandle* h) {
      ++Counts::destroyed;
      return real_->nvJitLinkDestroy(h);
    };
    table_.nvJitLinkAddData = [](nvJitLinkHandle h, nvJitLinkInputType type, const void* d, std::size_t n,
                                 const char* name) {
      return Counts::fails("nvJitLinkAddData") ? NVJITLINK_ERROR_INVALID_INPUT
                                               : real_->nvJitLinkAddData(h, type, d, n, name);
    };
    table_.nvJitLinkComplete = [](nvJitLinkHandle h) {
      return Counts::fails("nvJitLinkComplete") ? NVJITLINK_ERROR_INTERNAL : real_->nvJitLinkComplete(h);
    };
    table_.nvJitLinkGetLinkedCubinSize = [](nvJitLinkHandle h, std::size_t* n) {
      return Counts::fails("nvJitLinkGetLinkedCubinSize") ? NVJITLINK_ERROR_INTERNAL
                                                          : real_->nvJitLinkGetLinkedCubinSize(h, n);
    };
    table_.nvJitLinkGetLinkedCubin = [](nvJitLinkHandle h, void* out) {
      return Counts::fails("nvJitLinkGetLinkedCubin") ? NVJITLINK_ERROR_INTERNAL
                                                      : real_->nvJitLinkGetLinkedCubin(h, out);
    };
    detail::set_nvjitlink_table_for_testing(&table_);
  }
  ~NvJitLinkCounts() { detail::set_nvjitlink_table_for_testing(nullptr); }
  NvJitLinkCounts(const NvJitLinkCounts&) = delete;
  NvJitLinkCounts& operator=(const NvJitLinkCounts&) = delete;

 private:
  static inline const detail::NvJitLinkTable* real_ = nullptr;
  detail::NvJitLinkTable table_;
};

ObjectCode kernel_ptx() {
  return Program(kKernel, "c++", ProgramOptions{.arch = "sm_90", .use_toolkit_headers = false})
      .compile(CodeType::ptx);
}

// Each handle goes exactly once: a linked one stays (Linker::handle() names it)
// until the next link() or close(); one that fails while being made goes with
// the failure; one that fails to complete stays until the next link().
TEST(CompilerHandles, EveryNvJitLinkHandleIsDestroyedOnceOnSuccessAndOnEachFailure) {
  const ObjectCode ptx = kernel_ptx();
  NvJitLinkCounts counts;
  Linker linker({ptx}, LinkerOptions{.arch = "sm_90"});
  ASSERT_EQ(linker.backend(), "nvJitLink");
  Counts::reset(nullptr);
  EXPECT_FALSE(linker.link(CodeType::cubin).code().empty());
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 0);
  Counts::reset("nvJitLinkAddData");
  EXPECT_THROW((void)linker.link(CodeType::cubin), CompileError);
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 2) << "the linked handle, then the half-made one";
  for (const char* call : {"nvJitLinkComplete", "nvJitLinkGetLinkedCubinSize", "nvJitLinkGetLinkedCubin"}) {
    const bool held = std::strcmp(call, "nvJitLinkComplete") != 0;  // the one before failed to complete, kept
    Counts::reset(call);
    EXPECT_THROW((void)linker.link(CodeType::cubin), CompileError) << call;
    EXPECT_EQ(Counts::made, 1) << call;
    EXPECT_EQ(Counts::destroyed, held ? 1 : 0) << call;
  }
  Counts::reset("nvJitLinkCreate");
  EXPECT_THROW((void)linker.link(CodeType::cubin), CompileError);
  EXPECT_EQ(Counts::made, 0);
  EXPECT_EQ(Counts::destroyed, 1);  // the failed one before; nothing made
  Counts::reset(nullptr);
  EXPECT_FALSE(linker.link(CodeType::cubin).code().empty());  // still usable after every failure
  linker.close();
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 1);
  {
    Linker dropped({ptx}, LinkerOptions{.arch = "sm_90"});
    (void)dropped.handle();
  }
  EXPECT_EQ(Counts::made, 2);
  EXPECT_EQ(Counts::destroyed, 2);  // with the Linker
  // link() completes the handle handle() made rather than making another.
  Counts::reset(nullptr);
  Linker first({ptx}, LinkerOptions{.arch = "sm_90"});
  void* const h = first.handle();
  EXPECT_FALSE(first.link(CodeType::cubin).code().empty());
  EXPECT_EQ(first.handle(), h);
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 0);
}

// ---- the driver's linker ---------------------------------------------------

// A driver with only what Linker::link's driver path calls: cuLink* over a
// fake state, counted.
struct FakeLinkDriver {
  static inline int state = 0;                         // the fake CUlinkState points here
  static inline const char cubin[] = "\x7f" "ELF fake";  // what cuLinkComplete hands out
  detail::DriverTable table{};
  explicit FakeLinkDriver(int version) {
    table.version = version;
    table.cuCtxGetCurrent = [](CUcontext* c) {
      *c = reinterpret_cast<CUcontext>(&state);
      return CUDA_SUCCESS;
    };
    table.cuLinkCreate = [](unsigned, CUjit_option*, void**, CUlinkState* s) {
      if (Counts::fails("cuLinkCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
      *s = reinterpret_cast<CUlinkState>(&state);
      ++Counts::made;
      return CUDA_SUCCESS;
    };
    table.cuLinkAddData = [](CUlinkState s, CUjitInputType, void*, std::size_t, const char*, unsigned, CUjit_option*,
                             void**) {
      EXPECT_EQ(s, reinterpret_cast<CUlinkState>(&state));
      return Counts::fails("cuLinkAddData") ? CUDA_ERROR_INVALID_PTX : CUDA_SUCCESS;
    };
    table.cuLinkComplete = [](CUlinkState, void** out, std::size_t* size) {
      if (Counts::fails("cuLinkComplete")) return CUDA_ERROR_NO_BINARY_FOR_GPU;
      *out = const_cast<char*>(cubin);
      *size = sizeof(cubin);
      return CUDA_SUCCESS;
    };
    table.cuLinkDestroy = [](CUlinkState s) {
      EXPECT_EQ(s, reinterpret_cast<CUlinkState>(&state));
      ++Counts::destroyed;
      return CUDA_SUCCESS;
    };
    table.cuGetErrorName = [](CUresult, const char** s) {
      *s = "CUDA_ERROR_FAKE";
      return CUDA_SUCCESS;
    };
    table.cuGetErrorString = [](CUresult, const char** s) {
      *s = "fake";
      return CUDA_SUCCESS;
    };
    detail::set_driver_table_for_testing(&table);
  }
  ~FakeLinkDriver() { detail::set_driver_table_for_testing(nullptr); }
  FakeLinkDriver(const FakeLinkDriver&) = delete;
  FakeLinkDriver& operator=(const FakeLinkDriver&) = delete;
};

// A link state stays after its link (Linker::handle() names it) and goes once:
// with the next link(), the failure that leaves it half made, close().
TEST(CompilerHandles, EveryDriverLinkStateIsDestroyedOnceOnSuccessAndOnEachFailure) {
  const ObjectCode ptx = kernel_ptx();
  // A driver of another major release than nvJitLink's: the driver's linker links.
  FakeLinkDriver driver((static_cast<int>(detail::nvjitlink().major) - 1) * 1000);
  Linker linker({ptx}, LinkerOptions{.arch = "sm_90"});
  ASSERT_EQ(linker.backend(), "driver");
  Counts::reset(nullptr);
  const ObjectCode cubin = linker.link(CodeType::cubin);
  EXPECT_EQ(cubin.code().size(), sizeof(FakeLinkDriver::cubin));  // copied out of the state
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 0);
  EXPECT_EQ(linker.handle(), static_cast<void*>(&FakeLinkDriver::state));
  EXPECT_EQ(Counts::made, 1);  // the same state, not another
  // A failed add: the linked state goes, and the new one with the failure.
  Counts::reset("cuLinkAddData");
  EXPECT_THROW((void)linker.link(CodeType::cubin), CompileError);
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 2);
  // A failed completion keeps its state (its logs) until the next link.
  Counts::reset("cuLinkComplete");
  EXPECT_THROW((void)linker.link(CodeType::cubin), CompileError);
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 0);
  Counts::reset("cuLinkCreate");
  EXPECT_THROW((void)linker.link(CodeType::cubin), CompileError);
  EXPECT_EQ(Counts::made, 0);
  EXPECT_EQ(Counts::destroyed, 1);
  EXPECT_THROW((void)linker.handle(), CompileError);  // handle() makes its state the same way
  Counts::reset(nullptr);
  EXPECT_NE(linker.handle(), nullptr);
  linker.close();
  EXPECT_EQ(Counts::made, 1);
  EXPECT_EQ(Counts::destroyed, 1);
  EXPECT_EQ(linker.handle(), nullptr);
  Counts::reset(nullptr);
}

// The box itself: moves hand the handle over, reset and destruction release it once.
TEST(CompilerHandles, BoxReleasesOnceAcrossMovesAndResets) {
  static int released = 0;
  static int thing = 0;
  released = 0;
  const detail::DriverTable table{};
  auto release = [](const detail::DriverTable&, CUlinkState) noexcept { ++released; };
  {
    detail::CuLinkStateHandle a(reinterpret_cast<CUlinkState>(&thing), table, release);
    detail::CuLinkStateHandle b(std::move(a));
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_TRUE(b);
    detail::CuLinkStateHandle c;
    c = std::move(b);
    EXPECT_EQ(released, 0);
    c.reset();
    EXPECT_EQ(released, 1);
    c.reset();
    EXPECT_EQ(released, 1);
    detail::CuLinkStateHandle d(reinterpret_cast<CUlinkState>(&thing), table, release);
    d = detail::CuLinkStateHandle(reinterpret_cast<CUlinkState>(&thing), table, release);  // the old one goes
    EXPECT_EQ(released, 2);
  }
  EXPECT_EQ(released, 3);
}

}  // namespace
}  // namespace cucore
