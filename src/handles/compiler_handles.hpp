#pragma once
// The compilers' handles (handles.hpp's rules): an NVRTC program, an NVVM
// program, an nvJitLink handle and a driver link state (cuLink*), each owned
// by one move-only box that releases it through the loaded library's table it
// was made with, by the deleter its maker chose, exactly once, never throwing.
// The makers return the library's result code and leave the box empty on
// failure, so the caller reports the failure its own way.
#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "loader/driver.hpp"
#include "loader/toolkit.hpp"

namespace cucore::detail {

template <typename Native, typename Table>
class CompilerHandle {
 public:
  using Release = void (*)(const Table& table, Native handle) noexcept;

  CompilerHandle() noexcept = default;
  // Owns `handle` (non-null), released by `release` through `table`.
  CompilerHandle(Native handle, const Table& table, Release release) noexcept
      : handle_(handle), table_(&table), release_(release) {}
  CompilerHandle(CompilerHandle&& o) noexcept
      : handle_(std::exchange(o.handle_, nullptr)), table_(o.table_), release_(o.release_) {}
  CompilerHandle& operator=(CompilerHandle&& o) noexcept {
    if (this != &o) {
      reset();
      handle_ = std::exchange(o.handle_, nullptr);
      table_ = o.table_;
      release_ = o.release_;
    }
    return *this;
  }
  CompilerHandle(const CompilerHandle&) = delete;
  CompilerHandle& operator=(const CompilerHandle&) = delete;
  ~CompilerHandle() { reset(); }

  Native get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  // Releases the handle now (idempotent).
  void reset() noexcept {
    if (handle_) release_(*table_, std::exchange(handle_, nullptr));
  }

 private:
  Native handle_ = nullptr;
  const Table* table_ = nullptr;
  Release release_ = nullptr;
};

using NvrtcProgramHandle = CompilerHandle<nvrtcProgram, NvrtcTable>;
using NvvmProgramHandle = CompilerHandle<nvvm::Program, NvvmTable>;
using NvJitLinkBox = CompilerHandle<nvJitLinkHandle, NvJitLinkTable>;
using CuLinkStateHandle = CompilerHandle<CUlinkState, DriverTable>;

// nvrtcCreateProgram; `out` owns the program on NVRTC_SUCCESS (nvrtcDestroyProgram).
nvrtcResult create_nvrtc_program(const NvrtcTable& t, const char* source, const char* name, int num_headers,
                                 const char* const* headers, const char* const* include_names,
                                 NvrtcProgramHandle& out) noexcept;
// nvvmCreateProgram; `out` owns it on nvvm::SUCCESS (nvvmDestroyProgram).
nvvm::Result create_nvvm_program(const NvvmTable& t, NvvmProgramHandle& out) noexcept;
// nvJitLinkCreate; `out` owns it on NVJITLINK_SUCCESS (nvJitLinkDestroy).
nvJitLinkResult create_nvjitlink(const NvJitLinkTable& t, std::uint32_t num_options, const char** options,
                                 NvJitLinkBox& out) noexcept;
// cuLinkCreate; `out` owns it on CUDA_SUCCESS (cuLinkDestroy).
CUresult create_culink(const DriverTable& d, unsigned num_options, CUjit_option* keys, void** values,
                       CuLinkStateHandle& out) noexcept;

}  // namespace cucore::detail
