#pragma once
// Buffer: one allocation, held through its box (src/handles/buffer_handles.hpp),
// which keeps the memory resource it came from alive and frees it (on its
// stream) when the last share goes. The Buffer is move-only and holds one
// share; close() frees at once when that share is the last, as cuda.core's
// Buffer.close() does (always, until something else holds the box: a graph
// that uses it may, and then close() gives up this Buffer's share and the
// memory is freed when the last holder lets go, on the Buffer's own stream).
// Allocated on a Stream, the box holds a share of that stream, so destroying
// the Stream first is safe. A closed, moved-from or default-constructed Buffer
// throws ClosedError from every operation.
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

namespace cucore {

class GraphicsResource;
struct IPCBufferDescriptor;
namespace detail {
struct BufferBox;
}

class Buffer {
 public:
  Buffer() noexcept = default;  // closed
  // Takes ownership of `ptr`: freed through `mr` on `stream` when closed (an
  // empty `mr`: never freed). Given a Stream, the Buffer keeps a share of it
  // until then. Should its box not be made (std::bad_alloc), `ptr` is freed.
  Buffer(CUdeviceptr ptr, std::size_t size, MemoryResource mr, StreamRef stream);
  Buffer(CUdeviceptr ptr, std::size_t size, MemoryResource mr, const Stream& stream);
  // Memory cucore did not allocate. With `mr`, the Buffer adopts it (freed
  // through `mr`, on the legacy default stream or `free_on`); with `owner` (the
  // object the memory belongs to, kept alive as long), it is never freed by
  // cucore; with neither, it is a plain view. `mr` and `owner` exclude each
  // other (std::invalid_argument).
  static Buffer from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr = {},
                            std::shared_ptr<const void> owner = {});
  static Buffer from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr, const Stream& free_on);
  static Buffer from_handle(const void* ptr, std::size_t size, MemoryResource mr = {},
                            std::shared_ptr<const void> owner = {}) {
    return from_handle(reinterpret_cast<CUdeviceptr>(ptr), size, std::move(mr), std::move(owner));
  }

  ~Buffer() = default;
  // The box moves; the moved-from Buffer is closed.
  Buffer(Buffer&& other) noexcept
      : box_(std::move(other.box_)), ptr_(std::exchange(other.ptr_, 0)), size_(std::exchange(other.size_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Inspection (safe when closed: 0, 0, empty).
  CUdeviceptr handle() const noexcept { return ptr_; }
  void* data() const noexcept { return reinterpret_cast<void*>(ptr_); }
  std::size_t size() const noexcept { return size_; }
  bool is_closed() const noexcept { return !box_; }
  MemoryResource memory_resource() const noexcept;          // the one it is freed through (empty: none)
  const std::shared_ptr<const void>& owner() const noexcept;  // what the memory belongs to
  StreamRef stream() const noexcept;                          // where it will be freed
  // The allocation's box, to hold the memory alive beyond this Buffer (null
  // when closed). While another share lives, close() defers the free to it.
  std::shared_ptr<const detail::BufferBox> box() const noexcept;

  int device_id() const;  // the resource's (-1: not bound to a device), else from the pointer's attributes
  bool is_device_accessible() const;
  bool is_host_accessible() const;
  bool is_managed() const;

  // Frees the memory (on `stream`, else the stream it was allocated on).
  // Idempotent; a failed free throws and leaves the buffer open, still owning.
  // While another share of its box lives (box()), it closes this Buffer and
  // leaves the free to the last share (on the stream it was allocated on).
  void close();
  void close(StreamRef stream);
  // The stream a later close() without one, or the last share's release,
  // frees on (this and every other share of the allocation), kept alive for
  // that when it is a Stream. No ordering is made: what uses the memory must
  // be ordered before it by the caller. Not concurrently with another use of
  // the same allocation. ClosedError for a closed Buffer or stream.
  void set_deallocation_stream(const Stream& stream);
  void set_deallocation_stream(StreamRef stream);

  // Asynchronous copies on `stream`; sizes must match (std::invalid_argument).
  void copy_to(Buffer& dst, StreamRef stream) const;
  Buffer copy_to(StreamRef stream) const;      // into a new buffer from the same resource
  Buffer copy_to(const Stream& stream) const;  // the same, the new buffer sharing `stream`
  void copy_from(const Buffer& src, StreamRef stream);
  void copy_to(std::span<std::byte> host, StreamRef stream) const;
  void copy_from(std::span<const std::byte> host, StreamRef stream);
  template <typename T>
    requires std::is_trivially_copyable_v<T> && (!std::is_const_v<T>)
  void copy_to(std::span<T> host, StreamRef stream) const {
    copy_to(std::as_writable_bytes(host), stream);
  }
  template <typename T>
    requires std::is_trivially_copyable_v<T>
  void copy_from(std::span<const T> host, StreamRef stream) {
    copy_from(std::as_bytes(host), stream);
  }
  template <typename T>
    requires std::is_trivially_copyable_v<T>
  void copy_from(std::span<T> host, StreamRef stream) {
    copy_from(std::as_bytes(host), stream);
  }

  // Fills with a 1-, 2- or 4-byte pattern; the size must be a multiple of it.
  void fill(std::uint8_t value, StreamRef stream);
  void fill(std::uint16_t value, StreamRef stream);
  void fill(std::uint32_t value, StreamRef stream);

  // ---- sharing with other processes (ipc.hpp, docs/ipc.md) ----
  // Describes this Buffer of an IPC-enabled pool (IpcError otherwise; a
  // ClosedError for a closed Buffer or pool); a mapped Buffer gives the
  // descriptor it was imported from (its payload, its size).
  IPCBufferDescriptor ipc_descriptor() const;
  // The same, as the one object the allocation keeps (in its box): made by the
  // first call, the same on every later one, from any thread (as cuda.core
  // keeps it on the object); the checks above are made on every call. Another
  // allocation has its own. The reference is this Buffer's while it holds the
  // allocation (until it is closed, moved from or assigned): copy it to keep
  // the descriptor longer.
  const std::shared_ptr<const IPCBufferDescriptor>& shared_ipc_descriptor() const;
  // Maps the described Buffer of another process through `mr`, the mapped
  // resource of its pool; freed (unmapped) on `stream` once this and every
  // other import of the same descriptor have closed. The descriptor is
  // untrusted: a short payload or a size beyond the mapping is
  // std::invalid_argument, another pool's descriptor a CudaError
  // (CUDA_ERROR_INVALID_VALUE) naming both pools.
  static Buffer from_ipc_descriptor(const MemoryResource& mr, const IPCBufferDescriptor& descriptor,
                                    const Stream& stream);
  bool is_mapped() const noexcept;  // imported from another process
  // The resource this Buffer is freed through, borrowed from the Buffer's own
  // share (null when closed or with none): for questions on a hot path, where
  // memory_resource()'s copy of the share would cost two atomic operations.
  MemoryResource::Impl* resource_impl() const noexcept;

 private:
  friend class VirtualMemoryResource;  // grows its buffers in place (modify_allocation)
  friend class GraphicsResource;       // its mapped Buffer: closing it unmaps (graphics.hpp)
  explicit Buffer(std::shared_ptr<detail::BufferBox> box) noexcept;
  // A mapped IPC Buffer: never freed by itself; `mapping` (its share of the
  // mapping) unmaps it with the last import. `share_stream`: the Buffer keeps
  // a share of `stream` (false where the mapping holds it already).
  static Buffer mapped(CUdeviceptr ptr, std::size_t size, const MemoryResource& mr, const Stream& stream,
                       std::shared_ptr<const void> mapping, bool share_stream);
  void require_open(const char* operation) const {
    if (!box_) [[unlikely]]
      detail::throw_closed("Buffer", operation);
  }
  // Gives up the share (the box frees if it was the last, swallowing a free's
  // errors: destructors never throw).
  void forget() noexcept;
  std::shared_ptr<detail::BufferBox> box_;  // null: closed
  // The box's pointer and size, read without going to it (launch arguments).
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
};

}  // namespace cucore
