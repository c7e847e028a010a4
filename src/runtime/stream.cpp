#include <cucore/stream.hpp>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <stdexcept>

#include "runtime/device_state.hpp"
#include "loader/driver.hpp"

namespace cucore {

using detail::check;
using detail::driver;

void StreamRef::sync() const { check(driver().cuStreamSynchronize(handle_), "cuStreamSynchronize"); }

bool StreamRef::is_done() const {
  CUresult r = driver().cuStreamQuery(handle_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuStreamQuery");
  return true;
}

void StreamRef::wait(const Event& event) const {
  if (!event.handle()) throw std::invalid_argument("StreamRef::wait: the event is closed");
  check(driver().cuStreamWaitEvent(handle_, event.handle(), 0), "cuStreamWaitEvent");
}

void StreamRef::wait(StreamRef other) const {
  if (other.handle_ == handle_) return;  // a stream is always ordered after itself
  // Mark the point reached on `other` and make this stream wait for it; the
  // event may be destroyed at once, the driver keeps it until the wait resolves.
  Event marker(other.context(), EventOptions{});
  other.record(marker);
  wait(marker);
}

Event StreamRef::record(const EventOptions& options) const {
  Event e(context(), options);
  record(e);
  return e;
}

const Event& StreamRef::record(const Event& event) const {
  if (!event.handle()) throw std::invalid_argument("StreamRef::record: the event is closed");
  check(driver().cuEventRecord(event.handle(), handle_), "cuEventRecord");
  return event;
}

Context StreamRef::context() const {
  CUcontext ctx = nullptr;
  check(driver().cuStreamGetCtx(handle_, &ctx), "cuStreamGetCtx");
  if (!ctx) {
    // The legacy/per-thread default streams belong to whatever is current; with
    // nothing current, cucore's convention is device 0.
    return Device(0).context();
  }
  return Context::from_handle(ctx);
}

Device StreamRef::device() const { return context().device(); }

int StreamRef::priority() const {
  int p = 0;
  check(driver().cuStreamGetPriority(handle_, &p), "cuStreamGetPriority");
  return p;
}

bool StreamRef::is_nonblocking() const {
  unsigned flags = 0;
  check(driver().cuStreamGetFlags(handle_, &flags), "cuStreamGetFlags");
  return (flags & CU_STREAM_NON_BLOCKING) != 0;
}

unsigned long long StreamRef::id() const {
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuStreamGetId), 12000, "StreamRef::id (cuStreamGetId)");
  unsigned long long id = 0;
  check(d.cuStreamGetId(handle_, &id), "cuStreamGetId");
  return id;
}

Stream::Stream(const StreamOptions& options) : Stream(detail::current_context_or_device0(), options) {}

Stream::Stream(const Context& ctx, const StreamOptions& options) : StreamRef(nullptr), ctx_(ctx) {
  if (!ctx) throw std::invalid_argument("Stream: the context is empty");
  const auto& d = driver();
  ScopedContext scope(ctx.handle());
  unsigned flags = options.nonblocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  CUstream h = nullptr;
  if (options.priority) {
    // The driver clamps out-of-range priorities; report them instead.
    int least = 0, greatest = 0;
    check(d.cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange");
    if (*options.priority > least || *options.priority < greatest)
      throw std::invalid_argument("StreamOptions.priority = " + std::to_string(*options.priority) +
                                  " is outside the device's range [" + std::to_string(greatest) + " (highest), " +
                                  std::to_string(least) + " (lowest)]");
    check(d.cuStreamCreateWithPriority(&h, flags, *options.priority), "cuStreamCreateWithPriority");
  } else {
    check(d.cuStreamCreate(&h, flags), "cuStreamCreate");
  }
  handle_ = h;
}

Stream::~Stream() { close(); }

Stream::Stream(Stream&& other) noexcept : StreamRef(other.handle_), ctx_(std::move(other.ctx_)) {
  other.handle_ = nullptr;
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    close();
    handle_ = other.handle_;
    ctx_ = std::move(other.ctx_);
    other.handle_ = nullptr;
  }
  return *this;
}

void Stream::close() noexcept {
  if (!handle_) return;
  if (const auto* t = detail::g_driver.load(std::memory_order_acquire)) t->cuStreamDestroy(handle_);
  handle_ = nullptr;
}

}  // namespace cucore
