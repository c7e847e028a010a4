#pragma once
// A kernel's box (handles.hpp's rules): the CUkernel and a share of the
// library it lives in, so every holder keeps its library loaded whatever
// happens to the ObjectCode. A CUkernel belongs to its library (it has no
// release of its own): it goes when the last share of the library does. An
// adopted kernel (Kernel::from_handle) holds no library: its maker keeps it.
//
// The launch layer's facts about the kernel (its name, parameter layout and
// cached attributes) extend this box (launch/kernel_info.hpp's KernelInfo), so
// a kernel is still one allocation.
#include <cuda.h>

#include <utility>

#include "handles/handles.hpp"

namespace cucore::detail {

struct KernelBox {
  const CUkernel handle;
  const LibraryHandle library;  // none for adopted kernels
  KernelBox(CUkernel h, LibraryHandle lib) noexcept : handle(h), library(std::move(lib)) {}
  KernelBox(const KernelBox&) = delete;
  KernelBox& operator=(const KernelBox&) = delete;
};

}  // namespace cucore::detail
