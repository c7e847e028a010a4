#include <cucore/event.hpp>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <stdexcept>
#include <string>

#include "handles/handles.hpp"
#include "loader/driver.hpp"
#include "runtime/device_state.hpp"

namespace cucore {

using detail::check;
using detail::driver;

Event::Event(const EventOptions& options) : Event(detail::current_context_or_device0(), options) {}

Event::Event(const Context& ctx, const EventOptions& options) : Event(ctx.box(), options) {}

Event::Event(const detail::ContextHandle& ctx, const EventOptions& options) {
  if (!ctx) throw InvalidArgumentError("Event: the context is empty");
  if (options.ipc_enabled && options.timing_enabled)
    throw InvalidArgumentError("EventOptions: ipc_enabled events cannot have timing_enabled (the driver forbids it)");
  unsigned flags = 0;
  if (!options.timing_enabled) flags |= CU_EVENT_DISABLE_TIMING;
  if (options.busy_waited_sync) flags |= CU_EVENT_BLOCKING_SYNC;
  if (options.ipc_enabled) flags |= CU_EVENT_INTERPROCESS;
  ScopedContext scope(ctx->ctx);
  box_ = detail::create_event(ctx, flags);
  scope.restore();  // should it throw, the event goes with box_
}

const detail::EventBox& Event::open_box(const char* operation) const {
  if (!box_) [[unlikely]]
    detail::throw_closed("Event", operation);
  return *box_;
}

CUevent Event::handle() const noexcept { return box_ ? box_->event : nullptr; }

void Event::close() noexcept { box_.reset(); }

void Event::sync() const { check(driver().cuEventSynchronize(open_box("sync").event), "cuEventSynchronize"); }

bool Event::is_done() const {
  CUresult r = driver().cuEventQuery(open_box("is_done").event);
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuEventQuery");
  return true;
}

bool Event::is_timing_enabled() const { return !(open_box("is_timing_enabled").flags & CU_EVENT_DISABLE_TIMING); }
bool Event::is_sync_busy_waited() const { return open_box("is_sync_busy_waited").flags & CU_EVENT_BLOCKING_SYNC; }
bool Event::is_ipc_enabled() const { return open_box("is_ipc_enabled").flags & CU_EVENT_INTERPROCESS; }
Context Event::context() const { return Context(open_box("context").ctx); }
Device Event::device() const { return context().device(); }

float elapsed_time_ms(const Event& start, const Event& end) {
  for (auto [e, which] : {std::pair{&start, "start"}, std::pair{&end, "end"}}) {
    if (e->is_closed())
      detail::throw_closed("Event", (std::string("elapsed_time_ms: the ") + which + " event").c_str());
    if (!e->is_timing_enabled())
      throw InvalidArgumentError(std::string("elapsed_time_ms: the ") + which +
                                  " event was created without EventOptions.timing_enabled");
  }
  float ms = 0;
  check(driver().cuEventElapsedTime(&ms, start.handle(), end.handle()), "cuEventElapsedTime");
  return ms;
}

}  // namespace cucore
