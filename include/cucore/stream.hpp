#pragma once
// Streams. StreamRef is a non-owning view of any CUstream (one made by cucore,
// PyTorch, CuPy or the raw driver) and carries every operation; Stream is a
// thin value over a shared stream box: copies share the stream, and it is
// destroyed when the last share goes (a Buffer freed on it holds one, so a
// Buffer may outlive the Stream it was allocated on). libcu++'s cuda::stream /
// stream_ref split, with cuda.core's sharing.
//
// Closed is one state: a closed or moved-from Stream (and any StreamRef taken
// from it after) holds a handle no stream has, and every operation on it
// throws ClosedError; it never falls back to the NULL stream. The default
// streams are named: Stream::legacy_default(), Stream::per_thread_default().
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <cucore/context.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>

namespace cucore {

class Device;
namespace graph {
class GraphBuilder;
}
class DeviceResources;

namespace detail {
struct StreamBox;
struct ContextBox;
// The handle of a closed or moved-from Stream: no stream has it.
inline CUstream closed_stream() noexcept { return reinterpret_cast<CUstream>(~std::uintptr_t{0}); }
// NULL, legacy or per-thread default stream, or closed: one compare.
inline bool is_special_or_closed(CUstream s) noexcept { return reinterpret_cast<std::uintptr_t>(s) + 1 <= 3; }
}  // namespace detail

struct StreamOptions {
  bool nonblocking = true;      // no implicit synchronization with the legacy default stream
  std::optional<int> priority{};  // lower is higher priority; outside the device's range: std::invalid_argument
};

class StreamRef {
 public:
  // Implicit, as cuda::stream_ref: any CUstream can be passed where a StreamRef
  // is taken. A null CUstream value (a foreign library's "0") is the NULL
  // stream, which cucore's driver calls treat as the legacy default stream.
  constexpr StreamRef(CUstream handle) noexcept : handle_(handle) {}  // NOLINT(google-explicit-constructor)
  // A literal 0 or nullptr is not taken for the default stream by accident:
  // say Stream::legacy_default() or Stream::per_thread_default().
  StreamRef(std::nullptr_t) = delete;
  StreamRef(int) = delete;

  CUstream handle() const noexcept { return handle_; }
  bool is_closed() const noexcept { return handle_ == detail::closed_stream(); }

  void sync() const;
  bool is_done() const;  // cuStreamQuery: all work finished
  // cuStreamIsCapturing: NONE, ACTIVE, or INVALIDATED (a capture broken by an
  // unsupported call, which only ending it clears).
  CUstreamCaptureStatus capture_status() const;
  // Later work on this stream waits for `event` (or for all work queued on `other` so far).
  void wait(const Event& event) const;
  void wait(StreamRef other) const;
  // Records a new event (or `event`) at this point of the stream.
  Event record(const EventOptions& options = {}) const;
  const Event& record(const Event& event) const;

  Context context() const;
  Device device() const;
  DeviceResources resources() const;  // its context's: a green context's SMs, else the device's
  int priority() const;
  bool is_nonblocking() const;
  unsigned long long id() const;  // cuStreamGetId: unique per process, for legacy streams too

  friend bool operator==(StreamRef a, StreamRef b) noexcept { return a.handle_ == b.handle_; }

 protected:
  void require_open(const char* operation) const {
    if (is_closed()) [[unlikely]]
      detail::throw_closed("Stream", operation);
  }
  CUstream handle_;
};

class Stream : public StreamRef {
 public:
  // A new stream in the current context's device (device 0 when none is current).
  explicit Stream(const StreamOptions& options = {});
  // A new stream in `ctx`.
  Stream(const Context& ctx, const StreamOptions& options);

  // Copies share the stream; a moved-from Stream is closed.
  Stream(const Stream& other) noexcept = default;
  Stream& operator=(const Stream& other) noexcept = default;
  Stream(Stream&& other) noexcept : StreamRef(other.handle_), box_(std::move(other.box_)) {
    other.handle_ = detail::closed_stream();
  }
  Stream& operator=(Stream&& other) noexcept;
  ~Stream() = default;

  // A Stream over a stream cucore did not make (never destroyed by cucore),
  // keeping `owner` (the foreign object the stream belongs to) alive as long.
  // nullptr is refused: say Stream::legacy_default(); with an owner it is
  // taken, as a foreign library's "stream 0" (its NULL stream).
  static Stream from_handle(CUstream handle);
  static Stream from_handle(CUstream handle, std::shared_ptr<const void> owner);
  // A literal 0 or nullptr does not compile, as for StreamRef.
  static Stream from_handle(std::nullptr_t) = delete;
  static Stream from_handle(int) = delete;
  // Views of the default streams (these are never closed).
  static StreamRef legacy_default() noexcept { return StreamRef(CU_STREAM_LEGACY); }
  static StreamRef per_thread_default() noexcept { return StreamRef(CU_STREAM_PER_THREAD); }

  // Releases this Stream's share (idempotent): the stream is destroyed once no
  // Stream or Buffer shares it; pending work still completes. A Stream over a
  // default stream stays open, as in cuda.core.
  void close() noexcept;

  // The context it was made in (no driver call), or the driver's answer for an adopted stream.
  Context context() const;
  Device device() const;
  // A graph builder capturing this stream (graph.hpp), which shares it.
  graph::GraphBuilder create_graph_builder() const;

  DeviceResources resources() const;
  // The foreign object given to from_handle (empty otherwise).
  const std::shared_ptr<const void>& owner() const noexcept;

  // Internal: the stream's box (Buffers freed on it hold a share).
  Stream(const std::shared_ptr<const detail::ContextBox>& ctx, const StreamOptions& options);
  const std::shared_ptr<const detail::StreamBox>& box() const noexcept { return box_; }

 private:
  explicit Stream(std::shared_ptr<const detail::StreamBox> box) noexcept;
  std::shared_ptr<const detail::StreamBox> box_;
};

}  // namespace cucore
