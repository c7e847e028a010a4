#pragma once
// Buffer: owns one allocation, keeps the memory resource it came from alive,
// and frees it (on its stream) when closed or destroyed. Move-only: the Buffer
// is the allocation's one owner, so its state lives in it (no box to allocate).
// Allocated on a Stream, it holds a share of that stream, so destroying the
// Stream first is safe. A closed, moved-from or default-constructed Buffer
// throws ClosedError from every operation.
#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>

#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

namespace cucore {

struct IPCBufferDescriptor;

class Buffer {
 public:
  Buffer() noexcept = default;  // closed
  // Takes ownership of `ptr`: freed through `mr` on `stream` when closed.
  // Given a Stream, the Buffer keeps a share of it until then.
  Buffer(CUdeviceptr ptr, std::size_t size, MemoryResource mr, StreamRef stream) noexcept
      : ptr_(ptr), size_(size), mr_(std::move(mr)), stream_(stream), open_(true) {}
  Buffer(CUdeviceptr ptr, std::size_t size, MemoryResource mr, const Stream& stream) noexcept
      : ptr_(ptr), size_(size), mr_(std::move(mr)), stream_(stream), stream_box_(stream.box()), open_(true) {}
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

  ~Buffer() {
    if (open_) destroy();  // a closed Buffer (the common case after close()) costs no call
  }
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Inspection (safe when closed: 0, 0, empty).
  CUdeviceptr handle() const noexcept { return ptr_; }
  void* data() const noexcept { return reinterpret_cast<void*>(ptr_); }
  std::size_t size() const noexcept { return size_; }
  bool is_closed() const noexcept { return !open_; }
  const MemoryResource& memory_resource() const noexcept { return mr_; }
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }
  StreamRef stream() const noexcept { return stream_; }  // where it will be freed

  int device_id() const;  // the resource's (-1: not bound to a device), else from the pointer's attributes
  bool is_device_accessible() const;
  bool is_host_accessible() const;
  bool is_managed() const;

  // Frees the memory (on `stream`, else the stream it was allocated on).
  // Idempotent; a failed free throws and leaves the buffer open, still owning.
  void close();
  void close(StreamRef stream);

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
  // Describes this Buffer of an IPC-enabled pool (IpcError otherwise); a
  // mapped Buffer gives the descriptor it was imported from.
  IPCBufferDescriptor ipc_descriptor() const;
  // Maps the described Buffer of another process through `mr`, the mapped
  // resource of its pool; freed (unmapped) on `stream` once this and every
  // other import of the same descriptor have closed. The descriptor is
  // untrusted: a short payload or a size beyond the mapping is
  // std::invalid_argument, another pool's descriptor a CudaError
  // (CUDA_ERROR_INVALID_VALUE) naming both pools.
  static Buffer from_ipc_descriptor(const MemoryResource& mr, const IPCBufferDescriptor& descriptor,
                                    const Stream& stream);
  bool is_mapped() const noexcept { return mapped_; }  // imported from another process

 private:
  friend class VirtualMemoryResource;  // grows its buffers in place (modify_allocation)
  void require_open(const char* operation) const {
    if (!open_) [[unlikely]]
      detail::throw_closed("Buffer", operation);
  }
  void reset() noexcept;
  void destroy() noexcept;  // frees; errors are swallowed (destructors never throw)
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
  MemoryResource mr_;
  StreamRef stream_{CU_STREAM_LEGACY};
  std::shared_ptr<const detail::StreamBox> stream_box_;  // keeps stream_ alive when it is cucore's
  std::shared_ptr<const void> owner_;  // for a mapped Buffer: its share of the mapping (src/ipc/)
  // An IPC pool's Buffer: its descriptor, fixed for the allocation's life, so
  // made once by the first ipc_descriptor() (owned; freed by reset()).
  mutable std::atomic<const IPCBufferDescriptor*> ipc_export_{nullptr};
  bool open_ = false;
  bool mapped_ = false;
};

}  // namespace cucore
