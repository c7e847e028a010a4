#pragma once
// A CUDA context. Devices use their primary context (retained once per process
// and kept, as the runtime API does); Context::from_handle adopts a context made
// elsewhere without owning it. Copies share one state.
#include <cuda.h>

#include <memory>

namespace cucore {

class Device;
class Stream;
struct StreamOptions;

namespace detail {
struct ContextState;
}

class Context {
 public:
  // Adopts `ctx` without owning it: it is never destroyed by cucore.
  static Context from_handle(CUcontext ctx);
  // The context current on this thread, or an empty Context.
  static Context current();

  CUcontext handle() const noexcept;
  explicit operator bool() const noexcept { return handle() != nullptr; }
  int device_id() const;
  Device device() const;
  bool is_primary() const noexcept;
  bool is_green() const noexcept;

  void set_current() const;
  void sync() const;  // cuCtxSynchronize in this context
  Stream create_stream(const StreamOptions& options) const;
  Stream create_stream() const;

  friend bool operator==(const Context& a, const Context& b) noexcept { return a.handle() == b.handle(); }

  // Internal: built by Device and the green-context code.
  explicit Context(std::shared_ptr<const detail::ContextState> state) noexcept : state_(std::move(state)) {}
  Context() = default;

 private:
  std::shared_ptr<const detail::ContextState> state_;
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
