#include <cucore/buffer.hpp>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <stdexcept>
#include <string>

#include "loader/driver.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

using detail::check;
using detail::driver;

Buffer Buffer::from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr) {
  if (!ptr && size) throw std::invalid_argument("Buffer::from_handle: ptr is null but size is " + std::to_string(size));
  return Buffer(ptr, size, std::move(mr), StreamRef(CU_STREAM_LEGACY));
}

Buffer::~Buffer() {
  try {
    close();
  } catch (...) {
    // Destructors never throw; a failed free leaves the memory to the pool's owner.
  }
}

Buffer::Buffer(Buffer&& other) noexcept
    : ptr_(other.ptr_), size_(other.size_), mr_(std::move(other.mr_)), stream_(other.stream_), open_(other.open_) {
  other.ptr_ = 0;
  other.size_ = 0;
  other.open_ = false;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    try {
      close();
    } catch (...) {
    }
    ptr_ = other.ptr_;
    size_ = other.size_;
    mr_ = std::move(other.mr_);
    stream_ = other.stream_;
    open_ = other.open_;
    other.ptr_ = 0;
    other.size_ = 0;
    other.open_ = false;
  }
  return *this;
}

void Buffer::require_open(const char* what) const {
  if (!open_) [[unlikely]]
    throw std::logic_error(std::string("Buffer::") + what + ": the buffer is closed");
}

void Buffer::close() { close(stream_); }

void Buffer::close(StreamRef stream) {
  if (!open_) return;
  // Free first, forget after: if the free fails the buffer still owns the memory.
  if (mr_ && ptr_) mr_.deallocate(ptr_, size_, stream);
  ptr_ = 0;
  size_ = 0;
  mr_ = MemoryResource();
  open_ = false;
}

int Buffer::device_id() const {
  require_open("device_id");
  if (mr_) {
    int id = mr_.device_id();
    if (id >= 0) return id;
  }
  int ordinal = -1;
  check(driver().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr_),
        "cuPointerGetAttribute(DEVICE_ORDINAL)");
  return ordinal;
}

bool Buffer::is_device_accessible() const {
  require_open("is_device_accessible");
  if (mr_) return mr_.is_device_accessible();
  CUmemorytype type{};
  check(driver().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr_),
        "cuPointerGetAttribute(MEMORY_TYPE)");
  return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED || type == CU_MEMORYTYPE_HOST;
}

bool Buffer::is_host_accessible() const {
  require_open("is_host_accessible");
  if (mr_) return mr_.is_host_accessible();
  CUmemorytype type{};
  check(driver().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr_),
        "cuPointerGetAttribute(MEMORY_TYPE)");
  return type == CU_MEMORYTYPE_HOST || type == CU_MEMORYTYPE_UNIFIED;
}

namespace {
void copy_bytes(CUdeviceptr dst, CUdeviceptr src, std::size_t n, StreamRef stream) {
  if (n == 0) return;
  detail::StreamContextGuard guard(stream);
  check(driver().cuMemcpyAsync(dst, src, n, stream.handle()), "cuMemcpyAsync");
}

void require_same_size(const char* what, std::size_t ours, std::size_t theirs, const char* their_name) {
  if (ours != theirs)
    throw std::invalid_argument(std::string("Buffer::") + what + ": size mismatch: the buffer has " +
                                std::to_string(ours) + " bytes, the " + their_name + " has " + std::to_string(theirs));
}
}  // namespace

void Buffer::copy_to(Buffer& dst, StreamRef stream) const {
  require_open("copy_to");
  if (!dst.open_) throw std::invalid_argument("Buffer::copy_to: the destination buffer is closed");
  require_same_size("copy_to", size_, dst.size_, "destination buffer");
  copy_bytes(dst.ptr_, ptr_, size_, stream);
}

Buffer Buffer::copy_to(StreamRef stream) const {
  require_open("copy_to");
  if (!mr_) throw std::invalid_argument("Buffer::copy_to: no destination given and the buffer has no memory resource to allocate one from");
  Buffer dst = mr_.allocate(size_, stream);
  copy_bytes(dst.ptr_, ptr_, size_, stream);
  return dst;
}

void Buffer::copy_from(const Buffer& src, StreamRef stream) {
  require_open("copy_from");
  if (!src.open_) throw std::invalid_argument("Buffer::copy_from: the source buffer is closed");
  require_same_size("copy_from", size_, src.size_, "source buffer");
  copy_bytes(ptr_, src.ptr_, size_, stream);
}

void Buffer::copy_to(std::span<std::byte> host, StreamRef stream) const {
  require_open("copy_to");
  require_same_size("copy_to", size_, host.size(), "host span");
  copy_bytes(reinterpret_cast<CUdeviceptr>(host.data()), ptr_, size_, stream);
}

void Buffer::copy_from(std::span<const std::byte> host, StreamRef stream) {
  require_open("copy_from");
  require_same_size("copy_from", size_, host.size(), "host span");
  copy_bytes(ptr_, reinterpret_cast<CUdeviceptr>(host.data()), size_, stream);
}

namespace {
void require_multiple(std::size_t size, std::size_t width) {
  if (size % width)
    throw std::invalid_argument("Buffer::fill: the buffer's " + std::to_string(size) +
                                " bytes are not a multiple of the " + std::to_string(width) + "-byte pattern");
}
}  // namespace

void Buffer::fill(std::uint8_t value, StreamRef stream) {
  require_open("fill");
  if (!size_) return;
  detail::StreamContextGuard guard(stream);
  check(driver().cuMemsetD8Async(ptr_, value, size_, stream.handle()), "cuMemsetD8Async");
}

void Buffer::fill(std::uint16_t value, StreamRef stream) {
  require_open("fill");
  require_multiple(size_, 2);
  if (!size_) return;
  detail::StreamContextGuard guard(stream);
  check(driver().cuMemsetD16Async(ptr_, value, size_ / 2, stream.handle()), "cuMemsetD16Async");
}

void Buffer::fill(std::uint32_t value, StreamRef stream) {
  require_open("fill");
  require_multiple(size_, 4);
  if (!size_) return;
  detail::StreamContextGuard guard(stream);
  check(driver().cuMemsetD32Async(ptr_, value, size_ / 4, stream.handle()), "cuMemsetD32Async");
}

}  // namespace cucore
