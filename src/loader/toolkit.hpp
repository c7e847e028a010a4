#pragma once
// NVRTC, nvJitLink and NVML, loaded on first use by versioned name through the
// pathfinder's search order. Internal to libcucore.
#include <nvJitLink.h>
#include <nvrtc.h>

#include <cucore/pathfinder.hpp>

#include <string>

#include "loader/nvml_types.hpp"

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

struct NvmlTable {
#define X(name, sym) nvml::PFN_##name name = nullptr;
  CUCORE_NVML_FUNCTIONS(X)
#undef X
};

// Each throws LibraryNotFoundError (with every place searched) when the library
// is missing; the result is cached for the process.
const NvrtcTable& nvrtc();
const NvJitLinkTable& nvjitlink();
const NvmlTable& nvml_lib();  // nvmlInit has been called

// Whether nvJitLink can be loaded (the linker falls back to the driver's).
bool nvjitlink_available() noexcept;

pathfinder::ComponentInfo nvrtc_component_info();
pathfinder::ComponentInfo nvjitlink_component_info();
pathfinder::ComponentInfo nvml_component_info();

// Throws CompileError-free NVRTC failures as cucore::Error naming the call.
void check_nvrtc(nvrtcResult r, const char* call);

}  // namespace cucore::detail
