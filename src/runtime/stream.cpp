#include <cucore/stream.hpp>

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

void StreamRef::sync() const {
  require_open("sync");
  check(driver().cuStreamSynchronize(handle_), "cuStreamSynchronize");
}

bool StreamRef::is_done() const {
  require_open("is_done");
  CUresult r = driver().cuStreamQuery(handle_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuStreamQuery");
  return true;
}

CUstreamCaptureStatus StreamRef::capture_status() const {
  require_open("capture_status");
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(driver().cuStreamIsCapturing(handle_, &status), "cuStreamIsCapturing");
  return status;
}

void StreamRef::wait(const Event& event) const {
  require_open("wait");
  if (event.is_closed()) detail::throw_closed("Event", "Stream::wait");
  check(driver().cuStreamWaitEvent(handle_, event.handle(), 0), "cuStreamWaitEvent");
}

void StreamRef::wait(StreamRef other) const {
  require_open("wait");
  other.require_open("Stream::wait (the stream waited for)");
  if (other.handle_ == handle_) return;  // a stream is always ordered after itself
  // Mark the point reached on `other` and make this stream wait for it; the
  // event may be destroyed at once, the driver keeps it until the wait resolves.
  Event marker(other.context(), EventOptions{});
  other.record(marker);
  wait(marker);
}

Event StreamRef::record(const EventOptions& options) const {
  require_open("record");
  Event e(context(), options);
  record(e);
  return e;
}

const Event& StreamRef::record(const Event& event) const {
  require_open("record");
  if (event.is_closed()) detail::throw_closed("Event", "Stream::record");
  check(driver().cuEventRecord(event.handle(), handle_), "cuEventRecord");
  return event;
}

Context StreamRef::context() const {
  require_open("context");
  CUcontext ctx = nullptr;
  check(driver().cuStreamGetCtx(handle_, &ctx), "cuStreamGetCtx");
  if (!ctx) {
    // The legacy/per-thread default streams belong to whatever is current; with
    // nothing current, cucore's convention is device 0.
    return Device(0).context();
  }
  Context c = Context::from_handle(ctx);
  if (!c.is_primary() && !c.is_green()) {
    // A green context cucore did not make (another library's): adopt it as green.
    const auto& d = driver();
    CUgreenCtx green = nullptr;
    if (d.cuStreamGetGreenCtx && d.cuStreamGetGreenCtx(handle_, &green) == CUDA_SUCCESS && green)
      return Context(detail::adopt_green_context(green, ctx));
  }
  return c;
}

Device StreamRef::device() const { return context().device(); }

int StreamRef::priority() const {
  require_open("priority");
  int p = 0;
  check(driver().cuStreamGetPriority(handle_, &p), "cuStreamGetPriority");
  return p;
}

bool StreamRef::is_nonblocking() const {
  require_open("is_nonblocking");
  unsigned flags = 0;
  check(driver().cuStreamGetFlags(handle_, &flags), "cuStreamGetFlags");
  return (flags & CU_STREAM_NON_BLOCKING) != 0;
}

unsigned long long StreamRef::id() const {
  require_open("id");
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuStreamGetId), 12000, "StreamRef::id (cuStreamGetId)");
  unsigned long long id = 0;
  check(d.cuStreamGetId(handle_, &id), "cuStreamGetId");
  return id;
}

// ---- Stream ----

Stream::Stream(std::shared_ptr<const detail::StreamBox> box) noexcept
    : StreamRef(box->stream), box_(std::move(box)) {}

Stream::Stream(const StreamOptions& options) : Stream(detail::current_context_or_device0(), options) {}

Stream::Stream(const Context& ctx, const StreamOptions& options) : Stream(ctx.box(), options) {}

Stream::Stream(const detail::ContextHandle& ctx, const StreamOptions& options)
    : StreamRef(detail::closed_stream()) {
  if (!ctx) throw InvalidArgumentError("Stream: the context is empty");
  ScopedContext scope(ctx->ctx);
  const unsigned flags = options.nonblocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  if (options.priority) {
    // The driver clamps out-of-range priorities; report them instead.
    int least = 0, greatest = 0;
    check(driver().cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange");
    if (*options.priority > least || *options.priority < greatest)
      throw InvalidArgumentError("StreamOptions.priority = " + std::to_string(*options.priority) +
                                  " is outside the device's range [" + std::to_string(greatest) + " (highest), " +
                                  std::to_string(least) + " (lowest)]");
  }
  box_ = detail::create_stream(ctx, flags, options.priority ? &*options.priority : nullptr);
  handle_ = box_->stream;
  // Should the caller's context not come back, the stream goes (box_ is a member).
  scope.restore();
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    handle_ = other.handle_;
    box_ = std::move(other.box_);
    other.handle_ = detail::closed_stream();
  }
  return *this;
}

Stream Stream::from_handle(CUstream handle) {
  if (!handle)
    throw InvalidArgumentError(
        "Stream::from_handle: the handle is null, which the driver takes for the legacy default stream; say "
        "Stream::legacy_default() (or CU_STREAM_LEGACY) when that is meant");
  return from_handle(handle, {});
}

Stream Stream::from_handle(CUstream handle, std::shared_ptr<const void> owner) {
  if (handle == detail::closed_stream()) detail::throw_closed("Stream", "Stream::from_handle");
  return Stream(detail::adopt_stream(handle, std::move(owner)));
}

void Stream::close() noexcept {
  if (handle_ == CU_STREAM_LEGACY || handle_ == CU_STREAM_PER_THREAD) return;  // default streams stay open
  box_.reset();
  handle_ = detail::closed_stream();
}

Context Stream::context() const {
  require_open("context");
  if (box_ && box_->ctx) return Context(box_->ctx);
  return StreamRef::context();
}

Device Stream::device() const { return context().device(); }

const std::shared_ptr<const void>& Stream::owner() const noexcept {
  static const std::shared_ptr<const void> none;
  return box_ ? box_->owner : none;
}

}  // namespace cucore
