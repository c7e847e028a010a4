// Events shared between processes (cuIpcGetEventHandle / cuIpcOpenEventHandle).
#include <cucore/event.hpp>
#include <cucore/ipc.hpp>

#include <cstring>

#include "handles/handles.hpp"
#include "loader/driver.hpp"
#include "runtime/device_state.hpp"

namespace cucore {

IPCEventDescriptor Event::ipc_descriptor() const {
  const detail::EventBox& box = open_box("ipc_descriptor");
  if (!box.options.ipc_enabled) throw IpcError("Event is not IPC-enabled");
  const auto& d = detail::driver();
  detail::require(reinterpret_cast<const void*>(d.cuIpcGetEventHandle), 4010, "sharing events (IPC)");
  CUipcEventHandle h{};
  detail::check(d.cuIpcGetEventHandle(&h, box.event), "cuIpcGetEventHandle");
  IPCEventDescriptor out;
  std::memcpy(out.handle.data(), h.reserved, out.handle.size());
  out.blocking_sync = box.options.busy_waited_sync;
  return out;
}

Event Event::from_ipc_descriptor(const IPCEventDescriptor& descriptor) {
  const auto& d = detail::driver();
  detail::require(reinterpret_cast<const void*>(d.cuIpcOpenEventHandle), 4010, "sharing events (IPC)");
  Context ctx = detail::current_context_or_device0();
  ScopedContext scope(ctx.handle());
  CUipcEventHandle h{};
  std::memcpy(h.reserved, descriptor.handle.data(), sizeof h.reserved);
  // What the driver opens behaves as an event made with CU_EVENT_DISABLE_TIMING.
  EventOptions options{.timing_enabled = false, .busy_waited_sync = descriptor.blocking_sync, .ipc_enabled = true};
  return Event(detail::open_ipc_event(ctx.box(), h, options));
}

}  // namespace cucore
