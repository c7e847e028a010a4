#pragma once
// Streams. StreamRef is a non-owning view of any CUstream (one made by cucore,
// PyTorch, CuPy or the raw driver) and carries every operation; Stream owns the
// stream it created, destroys it when it goes, and keeps its context alive.
#include <cuda.h>

#include <optional>

#include <cucore/context.hpp>
#include <cucore/event.hpp>

namespace cucore {

class Device;

struct StreamOptions {
  bool nonblocking = true;      // no implicit synchronization with the legacy default stream
  std::optional<int> priority;  // lower is higher priority; clamped by the driver's range
};

class StreamRef {
 public:
  // Implicit, as cuda::stream_ref: any CUstream can be passed where a StreamRef is taken.
  constexpr StreamRef(CUstream handle) noexcept : handle_(handle) {}  // NOLINT(google-explicit-constructor)

  CUstream handle() const noexcept { return handle_; }

  void sync() const;
  bool is_done() const;  // cuStreamQuery: all work finished
  // Later work on this stream waits for `event` (or for all work queued on `other` so far).
  void wait(const Event& event) const;
  void wait(StreamRef other) const;
  // Records a new event (or `event`) at this point of the stream.
  Event record(const EventOptions& options = {}) const;
  const Event& record(const Event& event) const;

  Context context() const;
  Device device() const;
  int priority() const;
  bool is_nonblocking() const;
  unsigned long long id() const;  // cuStreamGetId: unique per process, for legacy streams too

  friend bool operator==(StreamRef a, StreamRef b) noexcept { return a.handle_ == b.handle_; }

 protected:
  CUstream handle_;
};

class Stream : public StreamRef {
 public:
  // A new stream in the current context's device (device 0 when none is current).
  explicit Stream(const StreamOptions& options = {});
  // A new stream in `ctx`.
  Stream(const Context& ctx, const StreamOptions& options);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Views of streams cucore does not own.
  static StreamRef from_handle(CUstream handle) noexcept { return StreamRef(handle); }
  static StreamRef legacy_default() noexcept { return StreamRef(CU_STREAM_LEGACY); }
  static StreamRef per_thread_default() noexcept { return StreamRef(CU_STREAM_PER_THREAD); }

  // Destroys the stream now (idempotent); pending work still completes.
  void close() noexcept;
  const Context& owning_context() const noexcept { return ctx_; }

 private:
  Context ctx_;
};

}  // namespace cucore
