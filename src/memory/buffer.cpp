#include <cucore/buffer.hpp>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/ipc.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "loader/driver.hpp"
#include "runtime/call_in_context.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

using detail::check;
using detail::driver;

Buffer Buffer::from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr, std::shared_ptr<const void> owner) {
  if (!ptr && size) throw std::invalid_argument("Buffer::from_handle: ptr is null but size is " + std::to_string(size));
  if (mr && owner)
    throw std::invalid_argument("Buffer::from_handle: give a memory resource (to free the memory) or an owner (to "
                                "keep it alive), not both");
  Buffer b(ptr, size, std::move(mr), Stream::legacy_default());
  b.owner_ = std::move(owner);
  return b;
}

Buffer Buffer::from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr, const Stream& free_on) {
  if (!ptr && size) throw std::invalid_argument("Buffer::from_handle: ptr is null but size is " + std::to_string(size));
  if (free_on.is_closed()) detail::throw_closed("Stream", "Buffer::from_handle (the stream to free on)");
  return Buffer(ptr, size, std::move(mr), free_on);
}

namespace {
// Takes a Buffer's cached IPC descriptor, if any. Plain loads and stores: a
// Buffer is not moved or closed while another thread uses it, and the common
// Buffer (never exported) must not pay a locked exchange on every free or move.
const IPCBufferDescriptor* take_ipc_export(std::atomic<const IPCBufferDescriptor*>& a) noexcept {
  const IPCBufferDescriptor* p = a.load(std::memory_order_relaxed);
  if (p) [[unlikely]]
    a.store(nullptr, std::memory_order_relaxed);
  return p;
}
}  // namespace

inline void Buffer::reset() noexcept {
  ptr_ = 0;
  size_ = 0;
  mr_ = MemoryResource();
  stream_ = Stream::legacy_default();
  stream_box_.reset();
  owner_.reset();
  delete take_ipc_export(ipc_export_);
  open_ = false;
  mapped_ = false;
}

namespace {
// The context a Buffer's free runs in when the driver refuses it for want of
// one: its stream's (a special stream gets the current one, or device 0's, from
// StreamContextGuard, so none is offered for it). Asked only after a refusal.
CUcontext stream_context_for_free(CUstream stream) noexcept {
  if (detail::is_special_stream(stream)) return nullptr;
  const auto* t = detail::g_driver.load(std::memory_order_acquire);
  CUcontext ctx = nullptr;
  if (!t || t->cuStreamGetCtx(stream, &ctx) != CUDA_SUCCESS) return nullptr;
  return ctx;
}
}  // namespace

void Buffer::destroy() noexcept {
  // A Buffer may die on a thread with no current context (cucore's graph
  // release thread, a finalizer, a user's worker): the free is made as it is,
  // and only where the driver refuses it is it made again in its stream's
  // context (call_in_context), so the usual path makes no extra call.
  try {
    detail::RetryScope scope;
    detail::call_in_context(scope, [&] { return stream_context_for_free(stream_.handle()); }, [&] { close(); });
  } catch (...) {
    // Destructors never throw; a failed free leaves the memory to the pool's owner.
  }
  delete take_ipc_export(ipc_export_);  // close() left it when the free failed
}

Buffer::Buffer(Buffer&& other) noexcept
    : ptr_(other.ptr_),
      size_(other.size_),
      mr_(std::move(other.mr_)),
      stream_(other.stream_),
      stream_box_(std::move(other.stream_box_)),
      owner_(std::move(other.owner_)),
      ipc_export_(take_ipc_export(other.ipc_export_)),
      open_(other.open_),
      mapped_(other.mapped_) {
  other.reset();
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (open_) destroy();
    ptr_ = other.ptr_;
    size_ = other.size_;
    mr_ = std::move(other.mr_);
    stream_ = other.stream_;
    stream_box_ = std::move(other.stream_box_);
    owner_ = std::move(other.owner_);
    delete take_ipc_export(ipc_export_);
    ipc_export_.store(take_ipc_export(other.ipc_export_), std::memory_order_relaxed);
    open_ = other.open_;
    mapped_ = other.mapped_;
    other.reset();
  }
  return *this;
}

void Buffer::close() {
  if (!open_) return;
  // Free first, forget after: if the free fails the buffer still owns the memory.
  // (stream_ is never closed: allocation refused a closed stream.) A mapped
  // Buffer's share of its mapping (owner_) unmaps it when it is the last.
  if (MemoryResource::Impl* impl = mr_.impl(); impl && ptr_ && !mapped_) impl->deallocate(ptr_, size_, stream_);
  reset();
}

void Buffer::close(StreamRef stream) {
  if (!open_) return;
  if (mr_ && ptr_ && !mapped_) mr_.deallocate(ptr_, size_, stream);
  reset();
}

namespace {
// What the driver says of a pointer cucore did not allocate, read as cuda.core
// reads it: unregistered host memory (memory type 0) is host-only with no
// device; managed and pinned host memory are both; device memory is device-only.
struct PointerInfo {
  bool device = false, host = false, managed = false;
  int device_id = -1;
};
PointerInfo query_pointer(CUdeviceptr ptr) {
  unsigned int type = 0;
  int managed = 0, ordinal = -1;
  CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* values[3] = {&type, &managed, &ordinal};
  // Unlike cuPointerGetAttribute, this does not fail for memory the driver
  // does not know: it reports memory type 0.
  check(driver().cuPointerGetAttributes(3, attrs, values, ptr), "cuPointerGetAttributes");
  PointerInfo info;
  info.managed = managed != 0;
  if (type == 0) {
    info.host = true;
  } else if (managed || type == CU_MEMORYTYPE_HOST) {
    info.host = info.device = true;
    info.device_id = ordinal;
  } else {
    info.device = true;
    info.device_id = ordinal;
  }
  return info;
}
}  // namespace

int Buffer::device_id() const {
  require_open("device_id");
  if (mr_) return mr_.device_id();  // -1: memory not bound to a device (host memory), as cuda.core says
  return query_pointer(ptr_).device_id;
}

bool Buffer::is_device_accessible() const {
  require_open("is_device_accessible");
  if (mr_) return mr_.is_device_accessible();
  return query_pointer(ptr_).device;
}

bool Buffer::is_managed() const {
  require_open("is_managed");
  if (mr_ && mr_.is_managed()) return true;
  return query_pointer(ptr_).managed;
}

bool Buffer::is_host_accessible() const {
  require_open("is_host_accessible");
  if (mr_) return mr_.is_host_accessible();
  return query_pointer(ptr_).host;
}

namespace {
void copy_bytes(CUdeviceptr dst, CUdeviceptr src, std::size_t n, StreamRef stream, const char* operation) {
  detail::StreamContextGuard guard(stream, operation);
  if (n == 0) return;
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
  dst.require_open("copy_to (the destination)");
  require_same_size("copy_to", size_, dst.size_, "destination buffer");
  copy_bytes(dst.ptr_, ptr_, size_, stream, "Buffer::copy_to");
}

namespace {
template <typename S>
Buffer copy_into_new(const Buffer& src, const S& stream) {
  if (!src.memory_resource())
    throw std::invalid_argument(
        "Buffer::copy_to: no destination given and the buffer has no memory resource to allocate one from");
  Buffer dst = src.memory_resource().allocate(src.size(), stream);
  src.copy_to(dst, stream);
  return dst;
}
}  // namespace

Buffer Buffer::copy_to(StreamRef stream) const {
  require_open("copy_to");
  return copy_into_new(*this, stream);
}

Buffer Buffer::copy_to(const Stream& stream) const {
  require_open("copy_to");
  return copy_into_new(*this, stream);
}

void Buffer::copy_from(const Buffer& src, StreamRef stream) {
  require_open("copy_from");
  src.require_open("copy_from (the source)");
  require_same_size("copy_from", size_, src.size_, "source buffer");
  copy_bytes(ptr_, src.ptr_, size_, stream, "Buffer::copy_from");
}

void Buffer::copy_to(std::span<std::byte> host, StreamRef stream) const {
  require_open("copy_to");
  require_same_size("copy_to", size_, host.size(), "host span");
  copy_bytes(reinterpret_cast<CUdeviceptr>(host.data()), ptr_, size_, stream, "Buffer::copy_to");
}

void Buffer::copy_from(std::span<const std::byte> host, StreamRef stream) {
  require_open("copy_from");
  require_same_size("copy_from", size_, host.size(), "host span");
  copy_bytes(ptr_, reinterpret_cast<CUdeviceptr>(host.data()), size_, stream, "Buffer::copy_from");
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
  detail::StreamContextGuard guard(stream, "Buffer::fill");
  if (!size_) return;
  check(driver().cuMemsetD8Async(ptr_, value, size_, stream.handle()), "cuMemsetD8Async");
}

void Buffer::fill(std::uint16_t value, StreamRef stream) {
  require_open("fill");
  require_multiple(size_, 2);
  detail::StreamContextGuard guard(stream, "Buffer::fill");
  if (!size_) return;
  check(driver().cuMemsetD16Async(ptr_, value, size_ / 2, stream.handle()), "cuMemsetD16Async");
}

void Buffer::fill(std::uint32_t value, StreamRef stream) {
  require_open("fill");
  require_multiple(size_, 4);
  detail::StreamContextGuard guard(stream, "Buffer::fill");
  if (!size_) return;
  check(driver().cuMemsetD32Async(ptr_, value, size_ / 4, stream.handle()), "cuMemsetD32Async");
}

}  // namespace cucore
