#pragma once
// Buffer: owns one allocation and keeps the memory resource it came from alive;
// frees it (on its stream) when closed or destroyed. Move-only.
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

namespace cucore {

class Buffer {
 public:
  Buffer() noexcept = default;
  // Takes ownership of `ptr`: freed through `mr` on `stream` when closed.
  Buffer(CUdeviceptr ptr, std::size_t size, MemoryResource mr, StreamRef stream) noexcept
      : ptr_(ptr), size_(size), mr_(std::move(mr)), stream_(stream), open_(true) {}
  // Wraps memory cucore does not own (never freed), or adopts it into `mr`.
  static Buffer from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr = {});
  static Buffer from_handle(const void* ptr, std::size_t size, MemoryResource mr = {}) {
    return from_handle(reinterpret_cast<CUdeviceptr>(ptr), size, std::move(mr));
  }

  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  CUdeviceptr handle() const noexcept { return ptr_; }
  void* data() const noexcept { return reinterpret_cast<void*>(ptr_); }
  std::size_t size() const noexcept { return size_; }
  bool is_closed() const noexcept { return !open_; }
  const MemoryResource& memory_resource() const noexcept { return mr_; }
  int device_id() const;  // from the resource, else from the pointer's attributes
  bool is_device_accessible() const;
  bool is_host_accessible() const;
  StreamRef stream() const noexcept { return stream_; }  // where it will be freed

  // Frees the memory (on `stream`, else the stream it was allocated on).
  // Idempotent; using the buffer afterwards throws.
  void close();
  void close(StreamRef stream);

  // Asynchronous copies on `stream`; sizes must match (std::invalid_argument).
  void copy_to(Buffer& dst, StreamRef stream) const;
  Buffer copy_to(StreamRef stream) const;  // into a new buffer from the same resource
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

 private:
  void require_open(const char* what) const;
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
  MemoryResource mr_;
  StreamRef stream_{CU_STREAM_LEGACY};
  bool open_ = false;  // a default-constructed or closed buffer is not
};

}  // namespace cucore
