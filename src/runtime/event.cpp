#include <cucore/event.hpp>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <stdexcept>

#include "runtime/device_state.hpp"
#include "loader/driver.hpp"

namespace cucore {

using detail::check;
using detail::driver;

Event::Event(const EventOptions& options) : Event(detail::current_context_or_device0(), options) {}

Event::Event(const Context& ctx, const EventOptions& options) : options_(options), ctx_(ctx) {
  if (!ctx) throw std::invalid_argument("Event: the context is empty");
  if (options.ipc_enabled && options.timing_enabled)
    throw std::invalid_argument("EventOptions: ipc_enabled events cannot have timing_enabled (the driver forbids it)");
  unsigned flags = 0;
  if (!options.timing_enabled) flags |= CU_EVENT_DISABLE_TIMING;
  // As cuda.core documents it: busy_waited_sync=True selects CU_EVENT_BLOCKING_SYNC.
  if (options.busy_waited_sync) flags |= CU_EVENT_BLOCKING_SYNC;
  if (options.ipc_enabled) flags |= CU_EVENT_INTERPROCESS;
  ScopedContext scope(ctx.handle());
  check(driver().cuEventCreate(&handle_, flags), "cuEventCreate");
}

Event::~Event() { close(); }

Event::Event(Event&& other) noexcept : handle_(other.handle_), options_(other.options_), ctx_(std::move(other.ctx_)) {
  other.handle_ = nullptr;
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    close();
    handle_ = other.handle_;
    options_ = other.options_;
    ctx_ = std::move(other.ctx_);
    other.handle_ = nullptr;
  }
  return *this;
}

void Event::close() noexcept {
  if (!handle_) return;
  if (const auto* t = detail::g_driver.load(std::memory_order_acquire)) t->cuEventDestroy(handle_);
  handle_ = nullptr;
}

void Event::sync() const {
  if (!handle_) throw std::logic_error("Event::sync: the event is closed");
  check(driver().cuEventSynchronize(handle_), "cuEventSynchronize");
}

bool Event::is_done() const {
  if (!handle_) throw std::logic_error("Event::is_done: the event is closed");
  CUresult r = driver().cuEventQuery(handle_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuEventQuery");
  return true;
}

Device Event::device() const { return ctx_.device(); }

float elapsed_time_ms(const Event& start, const Event& end) {
  for (auto [e, which] : {std::pair{&start, "start"}, std::pair{&end, "end"}}) {
    if (!e->handle()) throw std::invalid_argument(std::string("elapsed_time_ms: the ") + which + " event is closed");
    if (!e->is_timing_enabled())
      throw std::invalid_argument(std::string("elapsed_time_ms: the ") + which +
                                  " event was created without EventOptions.timing_enabled");
  }
  float ms = 0;
  check(driver().cuEventElapsedTime(&ms, start.handle(), end.handle()), "cuEventElapsedTime");
  return ms;
}

}  // namespace cucore
