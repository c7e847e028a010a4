#pragma once
// Runs a release (or an unmap) with its object's context current, for boxes
// whose driver call needs that context: a box may go on any thread (a
// finalizer, a worker), where another context or none is current. The
// thread's context is put back after; one cuCtxGetCurrent when `ctx` is
// current already. Never throws: the call's CUresult is what it returns (or
// the switch's, when the context cannot be made current).
#include <cuda.h>

#include "loader/driver.hpp"

namespace cucore::detail {

template <typename Call>
CUresult in_context(const DriverTable& t, CUcontext ctx, Call&& call) noexcept {
  CUcontext current = nullptr;
  if (!ctx || t.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == ctx) return call();
  if (CUresult r = t.cuCtxSetCurrent(ctx); r != CUDA_SUCCESS) return r;
  const CUresult r = call();
  t.cuCtxSetCurrent(current);  // best effort: the call's result is the one reported
  return r;
}

}  // namespace cucore::detail
