// Events shared between processes (cuIpcGetEventHandle / cuIpcOpenEventHandle).
// An event's descriptor is made once and kept in its box (handles.hpp).
#include <cucore/event.hpp>
#include <cucore/ipc.hpp>

#include <cstring>
#include <memory>
#include <mutex>

#include "handles/handles.hpp"
#include "ipc/ipc_context.hpp"
#include "loader/driver.hpp"
#include "runtime/device_state.hpp"

namespace cucore {

const std::shared_ptr<const IPCEventDescriptor>& Event::shared_ipc_descriptor() const {
  const detail::EventBox& box = open_box("ipc_descriptor");
  if (box.ipc_ready.load(std::memory_order_acquire)) [[likely]]
    return box.ipc_descriptor;
  if (!(box.flags & CU_EVENT_INTERPROCESS)) throw IpcError("Event is not IPC-enabled");
  // Once per event: the first export makes the descriptor (rare, so one lock for all events).
  static std::mutex* first_export = new std::mutex;  // never destroyed: events may go during static destruction
  std::lock_guard lock(*first_export);
  if (box.ipc_ready.load(std::memory_order_relaxed)) return box.ipc_descriptor;
  if (!box.ipc_handle_known) {  // an opened event knows the handle it was opened from
    const auto& d = detail::driver();
    detail::require(reinterpret_cast<const void*>(d.cuIpcGetEventHandle), 4010, "sharing events (IPC)");
    detail::IpcContext in(box.ctx ? box.ctx->ctx : nullptr);
    detail::check(d.cuIpcGetEventHandle(&box.ipc_handle, box.event), "cuIpcGetEventHandle");
    box.ipc_handle_known = true;
  }
  auto made = std::make_shared<IPCEventDescriptor>();
  std::memcpy(made->handle.data(), box.ipc_handle.reserved, made->handle.size());
  made->blocking_sync = box.flags & CU_EVENT_BLOCKING_SYNC;
  box.ipc_descriptor = std::move(made);
  box.ipc_ready.store(true, std::memory_order_release);
  return box.ipc_descriptor;
}

IPCEventDescriptor Event::ipc_descriptor() const { return *shared_ipc_descriptor(); }

Event Event::from_ipc_descriptor(const IPCEventDescriptor& descriptor) {
  const auto& d = detail::driver();
  detail::require(reinterpret_cast<const void*>(d.cuIpcOpenEventHandle), 4010, "sharing events (IPC)");
  // The current context (its box, for Event::context and to keep a green
  // context alive), else device 0's made current for the call: one
  // cuCtxGetCurrent in the usual case.
  detail::IpcContext in(nullptr);
  detail::ContextHandle ctx = detail::find_primary(in.get());  // the usual one, found without a lock
  if (!ctx) ctx = Context::from_handle(in.get()).box();
  // What the driver opens behaves as an event made with CU_EVENT_DISABLE_TIMING.
  unsigned flags = CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (descriptor.blocking_sync) flags |= CU_EVENT_BLOCKING_SYNC;
  return Event(detail::open_ipc_event(ctx, descriptor.handle.data(), flags));
}

}  // namespace cucore
