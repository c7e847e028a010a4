#pragma once
// A CUDA context: a device's primary context (retained once per process and
// kept, as the runtime API does), or one made elsewhere and adopted with
// Context::from_handle (never destroyed by cucore). A thin value over the
// context's shared box: copies share it, and streams and events made in the
// context hold a share too.
#include <cuda.h>

#include <memory>

namespace cucore {

class Device;
class Stream;
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
  bool is_green() const noexcept;  // false: green contexts are a later feature

  void set_current() const;
  void sync() const;  // cuCtxSynchronize in this context
  Stream create_stream(const StreamOptions& options) const;
  Stream create_stream() const;

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
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace cucore
