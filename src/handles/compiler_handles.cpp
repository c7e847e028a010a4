#include "handles/compiler_handles.hpp"

#include <string>

#include "errors/release.hpp"

namespace cucore::detail {
namespace {

// The compilers' results by number: their names need their libraries' help.
void report_compiler_release(int result, const char* call) noexcept {
  if (result != 0) report_release(std::string(call) + " failed: result " + std::to_string(result));
}
void destroy_nvrtc(const NvrtcTable& t, nvrtcProgram p) noexcept {
  report_compiler_release(static_cast<int>(t.nvrtcDestroyProgram(&p)), "nvrtcDestroyProgram");
}
void destroy_nvvm(const NvvmTable& t, nvvm::Program p) noexcept {
  report_compiler_release(static_cast<int>(t.nvvmDestroyProgram(&p)), "nvvmDestroyProgram");
}
void destroy_nvjitlink(const NvJitLinkTable& t, nvJitLinkHandle h) noexcept {
  report_compiler_release(static_cast<int>(t.nvJitLinkDestroy(&h)), "nvJitLinkDestroy");
}
void destroy_culink(const DriverTable& d, CUlinkState s) noexcept {
  report_release(d.cuLinkDestroy(s), "cuLinkDestroy");
}

}  // namespace

nvrtcResult create_nvrtc_program(const NvrtcTable& t, const char* source, const char* name, int num_headers,
                                 const char* const* headers, const char* const* include_names,
                                 NvrtcProgramHandle& out) noexcept {
  out.reset();
  nvrtcProgram p = nullptr;
  const nvrtcResult r = t.nvrtcCreateProgram(&p, source, name, num_headers, headers, include_names);
  if (r == NVRTC_SUCCESS && p) out = NvrtcProgramHandle(p, t, destroy_nvrtc);
  return r;
}

nvvm::Result create_nvvm_program(const NvvmTable& t, NvvmProgramHandle& out) noexcept {
  out.reset();
  nvvm::Program p = nullptr;
  const nvvm::Result r = t.nvvmCreateProgram(&p);
  if (r == nvvm::SUCCESS && p) out = NvvmProgramHandle(p, t, destroy_nvvm);
  return r;
}

nvJitLinkResult create_nvjitlink(const NvJitLinkTable& t, std::uint32_t num_options, const char** options,
                                 NvJitLinkBox& out) noexcept {
  out.reset();
  nvJitLinkHandle h = nullptr;
  const nvJitLinkResult r = t.nvJitLinkCreate(&h, num_options, options);
  if (r == NVJITLINK_SUCCESS && h) out = NvJitLinkBox(h, t, destroy_nvjitlink);
  return r;
}

CUresult create_culink(const DriverTable& d, unsigned num_options, CUjit_option* keys, void** values,
                       CuLinkStateHandle& out) noexcept {
  out.reset();
  CUlinkState s = nullptr;
  const CUresult r = d.cuLinkCreate(num_options, keys, values, &s);
  if (r == CUDA_SUCCESS && s) out = CuLinkStateHandle(s, d, destroy_culink);
  return r;
}

}  // namespace cucore::detail
