#pragma once
// The context an IPC driver call runs in. Every IPC entry point must work from
// a thread where no context is current (a multiprocessing Queue's feeder
// thread, a worker): the call runs in its object's own context, made current
// for it where another (or none) is and put back after. When the right one is
// current already, that costs one cuCtxGetCurrent. The hot paths (importing a
// pool or a buffer, unmapping it) use call_in_context instead
// (runtime/call_in_context.hpp), which costs none.
#include <cucore/context.hpp>

#include <optional>

#include "loader/driver.hpp"
#include "memory/pool_impl.hpp"
#include "runtime/call_in_context.hpp"
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

// The context a refused IPC call is made again in (call_in_context): the
// object's own, or device 0's primary context for one that belongs to no
// context (IpcContext's rule where none is current).
inline CUcontext context_or_device0(CUcontext ctx) { return ctx ? ctx : primary_of(0); }

// A pool's own context: its device's primary context; null for a pinned
// pool, which belongs to no device.
inline CUcontext pool_context(const PoolImpl& p) { return p.host_ ? nullptr : primary_of(p.device_); }

}  // namespace cucore::detail
