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
#include <initializer_list>
#include <memory>
#include <ranges>
#include <span>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include <cucore/device_span.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

namespace cucore {

class GraphicsResource;
struct IPCBufferDescriptor;
namespace detail {
struct BufferBox;
// Buffer::as<T>'s refusal (its size not a multiple of sizeof(T), or its
// address not aligned for T): std::invalid_argument naming both.
[[noreturn]] void throw_bad_typed_view(std::size_t size, CUdeviceptr ptr, std::size_t element_size,
                                       std::size_t alignment, const std::type_info& type);
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

  // ---- typed views (device_span.hpp) ----
  // The Buffer's memory as size() / sizeof(T) elements of T: a DeviceSpan<T>,
  // or a DeviceSpan<const T> from a const Buffer, valid while the memory is.
  // A closed Buffer is ClosedError; a size that is not a multiple of
  // sizeof(T), or an address not aligned for T, std::invalid_argument naming
  // both.
  template <typename T>
  DeviceSpan<T> as() {
    check_typed_view<T>();
    return DeviceSpan<T>::from_handle(ptr_, size_ / sizeof(T));
  }
  template <typename T>
  DeviceSpan<const T> as() const {
    check_typed_view<T>();
    return DeviceSpan<const T>::from_handle(ptr_, size_ / sizeof(T));
  }

  // ---- copies on `stream` ----
  // One meaning per name: copy_to(x) copies this buffer's bytes into x,
  // copy_from(x) copies x's bytes into this buffer; the sizes in bytes must be
  // equal (std::invalid_argument naming both). Asynchronous: what a copy reads
  // or writes must stay valid until the stream has reached it, except a host
  // range that is a temporary (an initializer list, an rvalue container),
  // whose copy waits for the stream before returning (device_span.hpp).
  void copy_to(Buffer& dst, StreamRef stream) const;
  Buffer copy_to(StreamRef stream) const;      // into a new buffer from the same resource
  Buffer copy_to(const Stream& stream) const;  // the same, the new buffer sharing `stream`
  void copy_from(const Buffer& src, StreamRef stream);
  void copy_to(std::span<std::byte> host, StreamRef stream) const;
  void copy_from(std::span<const std::byte> host, StreamRef stream);
  // Any contiguous, sized host range of trivially copyable elements (a
  // std::vector, std::array, std::span, C array, ...): its size in bytes is
  // compared. Other ranges (std::list) are a compile error that says so, as is
  // copying into const elements or into a temporary container.
  template <std::ranges::range R>
  void copy_to(R&& host, StreamRef stream) const {
    if constexpr (detail::check_host_destination<R>()) {
      require_open("copy_to");
      using E = std::ranges::range_value_t<R>;
      detail::copy_host(ptr_, size_, std::ranges::data(host), std::ranges::size(host), sizeof(E), typeid(E), false,
                        false, stream, "Buffer");
    }
  }
  template <std::ranges::range R>
  void copy_from(R&& host, StreamRef stream) {
    if constexpr (detail::check_host_range<R>()) {
      require_open("copy_from");
      using E = std::ranges::range_value_t<R>;
      detail::copy_host(ptr_, size_, std::ranges::data(host), std::ranges::size(host), sizeof(E), typeid(E), true,
                        !detail::outlives_call_v<R>, stream, "Buffer");
    }
  }
  // b.copy_from({1.f, 2.f, 3.f}, stream): waits for the stream (the list is a temporary).
  template <typename T>
    requires std::is_trivially_copyable_v<T>
  void copy_from(std::initializer_list<T> host, StreamRef stream) {
    require_open("copy_from");
    detail::copy_host(ptr_, size_, host.begin(), host.size(), sizeof(T), typeid(T), true, true, stream, "Buffer");
  }

  // Fills with a 1-, 2- or 4-byte pattern: the value's bytes, repeated (its
  // type says the width: fill(0, s) writes 4-byte ints, fill<float>(1.f, s)
  // floats, fill(std::uint8_t{7}, s) bytes); the size must be a multiple of it
  // (std::invalid_argument). Other widths do not compile.
  void fill(std::uint8_t value, StreamRef stream);
  void fill(std::uint16_t value, StreamRef stream);
  void fill(std::uint32_t value, StreamRef stream);
  template <typename T>
  void fill(const T& value, StreamRef stream) {
    if constexpr (detail::check_fill_type<T>()) {
      if constexpr (sizeof(T) == 1)
        fill(static_cast<std::uint8_t>(detail::fill_bits(value)), stream);
      else if constexpr (sizeof(T) == 2)
        fill(static_cast<std::uint16_t>(detail::fill_bits(value)), stream);
      else
        fill(detail::fill_bits(value), stream);
    }
  }

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
  template <typename T>
  void check_typed_view() const {
    static_assert(std::is_object_v<T> && std::is_trivially_copyable_v<T>,
                  "Buffer::as<T>: T is a trivially copyable object type");
    require_open("as");
    using V = std::remove_cv_t<T>;
    if (size_ % sizeof(V) != 0 || ptr_ % alignof(V) != 0) [[unlikely]]
      detail::throw_bad_typed_view(size_, ptr_, sizeof(V), alignof(V), typeid(V));
  }
  // Gives up the share (the box frees if it was the last, swallowing a free's
  // errors: destructors never throw).
  void forget() noexcept;
  std::shared_ptr<detail::BufferBox> box_;  // null: closed
  // The box's pointer and size, read without going to it (launch arguments).
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
};

// MemoryResource::allocate<T> (memory.hpp): `count` elements of T.
template <typename T>
Buffer MemoryResource::allocate(std::size_t count, StreamRef stream) const {
  static_assert(std::is_object_v<T> && std::is_trivially_copyable_v<T>,
                "MemoryResource::allocate<T>: T is a trivially copyable object type");
  if (count > static_cast<std::size_t>(-1) / sizeof(T)) [[unlikely]]
    detail::throw_allocate_overflow(count, sizeof(T), typeid(T));
  return allocate(count * sizeof(T), stream);
}
template <typename T>
Buffer MemoryResource::allocate(std::size_t count, const Stream& stream) const {
  static_assert(std::is_object_v<T> && std::is_trivially_copyable_v<T>,
                "MemoryResource::allocate<T>: T is a trivially copyable object type");
  if (count > static_cast<std::size_t>(-1) / sizeof(T)) [[unlikely]]
    detail::throw_allocate_overflow(count, sizeof(T), typeid(T));
  return allocate(count * sizeof(T), stream);
}

}  // namespace cucore
