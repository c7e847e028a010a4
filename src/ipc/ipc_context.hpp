#pragma once
// The context an IPC driver call runs in. Every IPC entry point must work from
// a thread where no context is current (a multiprocessing Queue's feeder
// thread, a worker): the call runs in its object's own context, made current
// for it where another (or none) is and put back after. When the right one is
// current already, that costs one cuCtxGetCurrent; call_in_context, for the
// hot paths, costs none.
#include <cucore/context.hpp>

#include <optional>

#include "loader/driver.hpp"
#include "memory/pool_impl.hpp"
#include "runtime/device_state.hpp"

namespace cucore::detail {

// A device's primary context (kept for the process, so it may be stored).
inline CUcontext primary_of(int device) { return primary_context(*device_state(device))->ctx; }

class IpcContext {
 public:
  // `ctx` null: the object belongs to no context (a pinned pool, an event
  // opened from another process), so any current context will do; where none
  // is, device 0's primary context (as the runtime API does).
  explicit IpcContext(CUcontext ctx) {
    if (!ctx) {
      check(driver().cuCtxGetCurrent(&current_), "cuCtxGetCurrent");
      if (current_) return;
      ctx = primary_of(0);
    }
    current_ = ctx;
    scope_.emplace(ctx);
  }
  CUcontext get() const noexcept { return current_; }  // the context the calls run in

 private:
  CUcontext current_ = nullptr;
  std::optional<ScopedContext> scope_;
};

// For the calls of the hot paths (importing a buffer, unmapping it), which
// change nothing when they fail: made as they are, and only where the driver
// finds no current context (CUDA_ERROR_INVALID_CONTEXT) made again with `ctx`
// current (IpcContext's rule) for `in`'s life. No call more in the usual case.
template <typename Call>
CUresult call_in_context(CUcontext ctx, std::optional<IpcContext>& in, Call&& call) {
  CUresult r = call();
  if (r != CUDA_ERROR_INVALID_CONTEXT || in) [[likely]]
    return r;
  in.emplace(ctx);
  return call();
}

// A pool's own context: its device's primary context (a mapped pool's, looked
// up when it was mapped); null for a pinned pool, which belongs to no device.
inline CUcontext pool_context(const PoolImpl& p) {
  if (p.host_) return nullptr;
  return p.mapped_ctx_ ? p.mapped_ctx_ : primary_of(p.device_);
}

}  // namespace cucore::detail
