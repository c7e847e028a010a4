#pragma once
// A CUDA context: a device's primary context (retained once per process and
// kept, as the runtime API does), one made elsewhere and adopted with
// Context::from_handle (never destroyed by cucore), or a green context
// (Device::create_context, resources.hpp), destroyed when the last share of it
// goes. A thin value over the context's shared box: copies share it, and
// streams and events made in the context hold a share too.
#include <cuda.h>

#include <memory>

namespace cucore {

class Device;
class DeviceResources;
class Event;
class Stream;
struct EventOptions;
struct StreamOptions;

namespace detail {
struct ContextBox;
}

class Context {
 public:
  // Adopts `ctx` without owning it: it is never destroyed by cucore.
  static Context from_handle(CUcontext ctx);
  // The context current on this thread, or an empty Context.
  static Context current();
  Context() = default;  // empty

  CUcontext handle() const noexcept;
  explicit operator bool() const noexcept { return handle() != nullptr; }
  int device_id() const;
  Device device() const;
  bool is_primary() const noexcept;
  bool is_green() const noexcept;
  bool is_closed() const noexcept { return box_ == nullptr; }

  void set_current() const;
  void sync() const;  // cuCtxSynchronize in this context
  // A green context's streams run on its SMs only (and are always non-blocking).
  Stream create_stream(const StreamOptions& options) const;
  Stream create_stream() const;
  Event create_event(const EventOptions& options) const;
  Event create_event() const;
  // The SMs (and workqueues) a green context was made with; the whole device's
  // for any other context.
  DeviceResources resources() const;
  // Releases this Context's share (idempotent): a green context is destroyed
  // once no Context, Stream or Event shares it. Throws Error while the context
  // is current on this thread (as cuda.core does): make another current first.
  void close();

  friend bool operator==(const Context& a, const Context& b) noexcept { return a.handle() == b.handle(); }

  // Internal: the box (streams and events made here hold a share of it).
  explicit Context(std::shared_ptr<const detail::ContextBox> box) noexcept : box_(std::move(box)) {}
  const std::shared_ptr<const detail::ContextBox>& box() const noexcept { return box_; }

 private:
  std::shared_ptr<const detail::ContextBox> box_;
};

// Makes `ctx` current for the scope when it is not already, restoring the
// previous context after (costs one cuCtxGetCurrent when already current).
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  // Puts the previous context back now; throws CudaError where the driver
  // refuses, so that a call which made something in `ctx` can undo it rather
  // than leave the thread in the wrong context. The destructor's restore is
  // best effort (destructors never throw).
  void restore();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace cucore
