#pragma once
// Kernel arguments packed from Python objects by launch()'s rules (launch.cpp),
// shared with the graph nodes (graph.cpp), which pack the same way.
#include <cucore/graph.hpp>
#include <cucore/launch.hpp>

#include "common.hpp"

namespace cucore::python {

constexpr std::size_t kMaxKernelArgs = 64;

struct alignas(16) ArgSlot {
  unsigned char bytes[16];
};

struct PackedArgs {
  ArgSlot slots[kMaxKernelArgs];
  void* pointers[kMaxKernelArgs];
  cucore::detail::ArgDesc descs[kMaxKernelArgs];
};

// Packs `n` Python arguments for `kernel` (ValueError/TypeError naming the argument).
void pack_kernel_args(const cucore::Kernel& kernel, PyObject* const* args, std::size_t n, PackedArgs& out);

// launch() into a GraphBuilder: its stream, after checking it is building;
// the graph keeps the kernel and the arguments that own memory (Buffers).
cucore::StreamRef graph_builder_launch_stream(PyObject* builder, const cucore::Kernel& kernel,
                                              PyObject* const* args, std::size_t n);

}  // namespace cucore::python
