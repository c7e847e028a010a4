#include <cucore/context.hpp>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/stream.hpp>

#include <stdexcept>

#include "handles/handles.hpp"
#include "loader/driver.hpp"
#include "runtime/device_state.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

namespace detail {
Context current_context_or_device0() {
  Context c = Context::current();
  return c ? c : Device(0).context();
}

void ensure_current_context_slow() {
  CUcontext ctx = nullptr;
  check(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) Device(0).set_current();
}

void special_or_closed_stream(CUstream s, const char* operation) {
  if (s == closed_stream()) throw_closed("Stream", operation);
  ensure_current_context_slow();
}
}  // namespace detail

Context Context::from_handle(CUcontext ctx) {
  if (!ctx) throw InvalidArgumentError("Context::from_handle: ctx is null");
  if (auto primary = detail::find_primary(ctx)) return Context(std::move(primary));
  if (auto green = detail::find_green_context(ctx)) return Context(std::move(green));
  return Context(detail::adopt_context(ctx));
}

Context Context::current() {
  CUcontext ctx = nullptr;
  detail::check(detail::driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) return Context();
  return from_handle(ctx);
}

CUcontext Context::handle() const noexcept { return box_ ? box_->ctx : nullptr; }
bool Context::is_primary() const noexcept { return box_ && box_->kind == detail::ContextKind::primary; }
bool Context::is_green() const noexcept { return box_ && box_->green; }

int Context::device_id() const {
  if (!box_) throw LogicError("Context::device_id: empty context");
  int ordinal = box_->device_ordinal.load(std::memory_order_relaxed);
  if (ordinal >= 0) return ordinal;
  // An adopted context: ask the driver with it current, then match the device.
  CUdevice dev = 0;
  {
    ScopedContext scope(box_->ctx);
    detail::check(detail::driver().cuCtxGetDevice(&dev), "cuCtxGetDevice");
  }
  for (const auto& s : detail::device_registry().devices) {
    if (s->device == dev) {
      box_->device_ordinal.store(s->ordinal, std::memory_order_relaxed);
      return s->ordinal;
    }
  }
  throw RuntimeError("Context::device_id: the context's device is not among the driver's devices");
}

Device Context::device() const { return Device(device_id()); }

void Context::set_current() const {
  detail::check(detail::driver().cuCtxSetCurrent(handle()), "cuCtxSetCurrent");
}

void Context::sync() const {
  if (!box_) throw LogicError("Context::sync: empty context");
  ScopedContext scope(box_->ctx);
  detail::check(detail::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  scope.restore();
}

Stream Context::create_stream(const StreamOptions& options) const {
  if (!box_) detail::throw_closed("Context", "create_stream");
  return Stream(*this, options);
}
Stream Context::create_stream() const { return create_stream(StreamOptions{}); }

Event Context::create_event(const EventOptions& options) const {
  if (!box_) detail::throw_closed("Context", "create_event");
  return Event(box_, options);
}
Event Context::create_event() const { return create_event(EventOptions{}); }


void Context::close() {
  if (!box_) return;
  CUcontext current = nullptr;
  if (const auto* t = detail::g_driver.load(std::memory_order_acquire))
    detail::check(t->cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current && current == box_->ctx)
    throw RuntimeError("Context::close: the context is current on this thread; make another current first (a green "
                "context must not be destroyed while current)");
  box_.reset();
}

ScopedContext::ScopedContext(CUcontext ctx) {
  if (!ctx) return;
  const auto& d = detail::driver();
  detail::check(d.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (previous_ == ctx) return;
  detail::check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  switched_ = true;
}

void ScopedContext::restore() {
  if (!switched_) return;
  switched_ = false;
  detail::check(detail::driver().cuCtxSetCurrent(previous_), "cuCtxSetCurrent (restoring the caller's context)");
}

ScopedContext::~ScopedContext() {
  // Best effort, and no driver load here: destructors never throw.
  if (!switched_) return;
  if (const auto* t = detail::g_driver.load(std::memory_order_acquire)) t->cuCtxSetCurrent(previous_);
}

}  // namespace cucore
