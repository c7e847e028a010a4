#pragma once
// NVRTC, nvJitLink, libNVVM (and its libdevice) and NVML, loaded on first use
// by versioned name through the pathfinder's search order. Internal to libcucore.
#include <nvJitLink.h>
#include <nvrtc.h>

#include <cucore/pathfinder.hpp>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/nvml_types.hpp"
#include "loader/nvvm_types.hpp"

namespace cucore::detail {

struct NvrtcTable {
#define CUCORE_NVRTC_FUNCTIONS(X)                                                                       \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)         \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetPTXSize) X(nvrtcGetPTX) \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetLTOIRSize) X(nvrtcGetLTOIR) X(nvrtcGetProgramLogSize) \
  X(nvrtcGetProgramLog) X(nvrtcAddNameExpression) X(nvrtcGetLoweredName) X(nvrtcGetPCHHeapSize)         \
  X(nvrtcSetPCHHeapSize) X(nvrtcGetPCHCreateStatus) X(nvrtcGetPCHHeapSizeRequired)
#define X(name) decltype(&::name) name = nullptr;
  CUCORE_NVRTC_FUNCTIONS(X)
#undef X
  int major = 0, minor = 0;
};

struct NvJitLinkTable {
#define CUCORE_NVJITLINK_FUNCTIONS(X)                                                                 \
  X(nvJitLinkCreate) X(nvJitLinkDestroy) X(nvJitLinkAddData) X(nvJitLinkAddFile) X(nvJitLinkComplete) \
  X(nvJitLinkGetLinkedCubinSize) X(nvJitLinkGetLinkedCubin) X(nvJitLinkGetLinkedPtxSize)              \
  X(nvJitLinkGetLinkedPtx) X(nvJitLinkGetErrorLogSize) X(nvJitLinkGetErrorLog)                        \
  X(nvJitLinkGetInfoLogSize) X(nvJitLinkGetInfoLog) X(nvJitLinkVersion)
#define X(name) decltype(&::name) name = nullptr;
  CUCORE_NVJITLINK_FUNCTIONS(X)
#undef X
  unsigned major = 0, minor = 0;
};

// libNVVM's entry points (nvvm_types.hpp), for NVVM IR programs.
struct NvvmTable {
#define X(name, ret, params) ret(*name) params = nullptr;
  CUCORE_NVVM_FUNCTIONS(X)
#undef X
  int major = 0, minor = 0;                                     // nvvmVersion
  int ir_major = 0, ir_minor = 0, dbg_major = 0, dbg_minor = 0;  // nvvmIRVersion
};

// NVML's entry points (nvml_types.hpp). Unlike NVRTC and nvJitLink, NVML is
// reached through an atomic pointer, like the driver: queries are a hot path
// (monitoring loops), and tests substitute the whole table.
struct NvmlTable {
#define X(name, required, params) nvml::PFN_##name name = nullptr;
  CUCORE_NVML_FUNCTIONS(X)
  CUCORE_NVML_LEGACY_FUNCTIONS(X)
#undef X
  nvml::PFN_nvmlErrorString nvmlErrorString = nullptr;
};

extern std::atomic<const NvmlTable*> g_nvml;

// nvmlInit_v2's refusal, with its return code: the loader reports the code,
// and system/ (above it) throws it as NvmlError (system/nvml_call.hpp).
struct NvmlInitFailure : std::runtime_error {
  NvmlInitFailure(nvml::Return r, const std::string& what) : std::runtime_error(what), code(r) {}
  nvml::Return code;
};

// Slow path: loads libnvidia-ml.so.1 (once), binds the table and calls
// nvmlInit_v2 (once per process, again in a forked child). Throws
// LibraryNotFoundError with every place searched when NVML is missing, or
// NvmlInitFailure when nvmlInit fails; the failure is remembered and rethrown.
// cucore never calls nvmlShutdown: NVML's reference count ends with the
// process, and a shutdown at exit could race threads still querying.
const NvmlTable& load_nvml();

inline const NvmlTable& nvml_table() {
  const NvmlTable* t = g_nvml.load(std::memory_order_acquire);
  if (t) [[likely]]
    return *t;
  return load_nvml();
}

// Test seams: route NVML calls through `table` (nullptr: back to the real
// library, searched again on next use); search other sonames than
// libnvidia-ml.so.1 (empty: the default). Both forget a remembered failure.
void set_nvml_table_for_testing(const NvmlTable* table);
void set_nvml_library_for_testing(std::vector<std::string> sonames);

// nvmlErrorString of the bound library (or substituted table); nullptr when
// none is bound yet.
const char* nvml_error_string(int code) noexcept;

// Each throws LibraryNotFoundError (with every place searched) when the library
// is missing; the result is cached for the process.
const NvrtcTable& nvrtc();
const NvJitLinkTable& nvjitlink();
const NvvmTable& libnvvm();

// Test seams: route NVRTC, nvJitLink or libNVVM calls through `table`
// (nullptr: back to the loaded library), to count or fail them; the table
// must outlive its use.
void set_nvrtc_table_for_testing(const NvrtcTable* table) noexcept;
void set_nvjitlink_table_for_testing(const NvJitLinkTable* table) noexcept;
void set_nvvm_table_for_testing(const NvvmTable* table) noexcept;

// Whether nvJitLink can be loaded (the linker falls back to the driver's).
bool nvjitlink_available() noexcept;

pathfinder::ComponentInfo nvrtc_component_info();
pathfinder::ComponentInfo nvjitlink_component_info();
pathfinder::ComponentInfo nvml_component_info();
pathfinder::ComponentInfo nvvm_component_info();

// Throws CompileError-free NVRTC failures as cucore::Error naming the call.
void check_nvrtc(nvrtcResult r, const char* call);
// The same for libNVVM.
void check_nvvm(nvvm::Result r, const char* call);

// libdevice's bitcode (libdevice.10.bc in nvvm/libdevice beside libNVVM, or in
// the toolkit), read once; LibraryNotFoundError naming where it looked.
const std::string& libdevice_bitcode();

}  // namespace cucore::detail
