#include <cucore/buffer.hpp>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/ipc.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "errors/demangle.hpp"
#include "handles/buffer_handles.hpp"
#include "loader/driver.hpp"
#include "runtime/call_in_context.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

using detail::check;
using detail::driver;

void detail::throw_bad_typed_view(std::size_t size, CUdeviceptr ptr, std::size_t element_size, std::size_t alignment,
                                  const std::type_info& type) {
  const std::string t = demangle(type.name());
  if (size % element_size)
    throw InvalidArgumentError("Buffer::as<" + t + ">: the buffer's " + std::to_string(size) +
                                " bytes are not a multiple of sizeof(" + t + ") = " + std::to_string(element_size));
  throw InvalidArgumentError("Buffer::as<" + t + ">: the buffer's address " + std::to_string(ptr) +
                              " is not a multiple of alignof(" + t + ") = " + std::to_string(alignment));
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

// The free of memory a MemoryResource owns: its deallocate. A box may go on a
// thread with no current context (cucore's graph release thread, a finalizer,
// a user's worker): the free is made as it is, and only where the driver
// refuses it is it made again in its stream's context (call_in_context), so
// the usual path makes no extra call.
// The retrying path is out of line: close()'s plain free then pays no frame for it.
[[gnu::noinline]] void free_in_stream_context(MemoryResource::Impl* impl, const detail::BufferBox& box,
                                              CUstream stream) {
  detail::RetryScope scope;
  detail::call_in_context(scope, [&] { return stream_context_for_free(stream); },
                          [&] { impl->deallocate(box.ptr, box.size, stream); });
}

void free_through_resource(const detail::BufferBox& box, CUstream stream, bool dropping) {
  auto* impl = static_cast<MemoryResource::Impl*>(box.resource.get());
  if (!dropping) return impl->deallocate(box.ptr, box.size, stream);
  free_in_stream_context(impl, box, stream);
}

// The box of memory given to a Buffer: freed through `mr` when it has one.
// Should the box not be made, the memory is freed (the Buffer took it).
// (References, not values: each share is moved once, into the box.)
[[gnu::always_inline]] inline detail::BufferHandle box_for(CUdeviceptr ptr, std::size_t size, std::shared_ptr<MemoryResource::Impl>&& mr,
                             StreamRef stream, detail::StreamHandle&& stream_box, detail::Owner&& owner = {}) {
  detail::BufferFree free = mr ? &free_through_resource : nullptr;
  std::shared_ptr<void> resource = std::move(mr);
  try {
    return detail::make_buffer_box(ptr, size, free, std::move(resource), stream.handle(), std::move(stream_box),
                                   std::move(owner), false);
  } catch (...) {
    if (free && ptr) {
      try {
        static_cast<MemoryResource::Impl*>(resource.get())->deallocate(ptr, size, stream);
      } catch (...) {
        // The box's failure is the one reported.
      }
    }
    throw;
  }
}
}  // namespace

Buffer::Buffer(std::shared_ptr<detail::BufferBox> box) noexcept
    : box_(std::move(box)), ptr_(box_->ptr), size_(box_->size) {}

Buffer::Buffer(CUdeviceptr ptr, std::size_t size, MemoryResource mr, StreamRef stream)
    : Buffer(box_for(ptr, size, std::move(mr.impl_), stream, nullptr)) {}

Buffer::Buffer(CUdeviceptr ptr, std::size_t size, MemoryResource mr, const Stream& stream)
    : Buffer(box_for(ptr, size, std::move(mr.impl_), stream, detail::StreamHandle(stream.box()))) {}

Buffer Buffer::mapped(CUdeviceptr ptr, std::size_t size, const MemoryResource& mr, const Stream& stream,
                      std::shared_ptr<const void> mapping, bool share_stream) {
  return Buffer(detail::make_buffer_box(ptr, size, nullptr, std::shared_ptr<void>(mr.impl_), stream.handle(),
                                        share_stream ? detail::StreamHandle(stream.box()) : nullptr, std::move(mapping),
                                        true));
}

Buffer Buffer::from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr, std::shared_ptr<const void> owner) {
  if (!ptr && size) throw InvalidArgumentError("Buffer::from_handle: ptr is null but size is " + std::to_string(size));
  if (mr && owner)
    throw InvalidArgumentError("Buffer::from_handle: give a memory resource (to free the memory) or an owner (to "
                                "keep it alive), not both");
  return Buffer(box_for(ptr, size, std::move(mr.impl_), Stream::legacy_default(), nullptr, std::move(owner)));
}

Buffer Buffer::from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr, const Stream& free_on) {
  if (!ptr && size) throw InvalidArgumentError("Buffer::from_handle: ptr is null but size is " + std::to_string(size));
  if (free_on.is_closed()) detail::throw_closed("Stream", "Buffer::from_handle (the stream to free on)");
  return Buffer(ptr, size, std::move(mr), free_on);
}

MemoryResource Buffer::memory_resource() const noexcept {
  if (!box_) return MemoryResource();
  return MemoryResource(std::static_pointer_cast<MemoryResource::Impl>(box_->resource));
}

MemoryResource::Impl* Buffer::resource_impl() const noexcept {
  return box_ ? static_cast<MemoryResource::Impl*>(box_->resource.get()) : nullptr;
}

const std::shared_ptr<const void>& Buffer::owner() const noexcept {
  static const std::shared_ptr<const void> none;
  return box_ ? box_->owner : none;
}

StreamRef Buffer::stream() const noexcept { return box_ ? StreamRef(box_->stream) : Stream::legacy_default(); }

bool Buffer::is_mapped() const noexcept { return box_ && box_->mapped; }

std::shared_ptr<const detail::BufferBox> Buffer::box() const noexcept { return box_; }

void Buffer::forget() noexcept {
  box_.reset();
  ptr_ = 0;
  size_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (box_) forget();
    box_ = std::move(other.box_);
    ptr_ = std::exchange(other.ptr_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

// Free first, forget after: if the free fails the buffer still owns the memory.
// Only the last share frees; with others alive the free is theirs.
void Buffer::close() {
  if (!box_) return;
  if (detail::BufferBox& b = *box_; b.free && b.ptr && box_.use_count() == 1) {
    b.free(b, b.stream, false);  // (the stream is never closed: allocation refused a closed stream)
    b.ptr = 0;                   // freed: the box has nothing left to free
  }
  forget();
}

void Buffer::close(StreamRef stream) {
  if (!box_) return;
  if (detail::BufferBox& b = *box_; b.free && b.ptr && box_.use_count() == 1) {
    if (stream.is_closed()) detail::throw_closed("Stream", "MemoryResource::deallocate");
    b.free(b, stream.handle(), false);
    b.ptr = 0;
  }
  forget();
}

void Buffer::set_deallocation_stream(const Stream& stream) {
  require_open("set_deallocation_stream");
  if (stream.is_closed()) detail::throw_closed("Stream", "Buffer::set_deallocation_stream");
  box_->stream_box = stream.box();  // the new stream is kept before it is used
  box_->stream = stream.handle();
}

void Buffer::set_deallocation_stream(StreamRef stream) {
  require_open("set_deallocation_stream");
  if (stream.is_closed()) detail::throw_closed("Stream", "Buffer::set_deallocation_stream");
  box_->stream = stream.handle();
  box_->stream_box.reset();
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
  if (MemoryResource::Impl* mr = resource_impl()) return mr->device_id();  // -1: memory not bound to a device (host memory), as cuda.core says
  return query_pointer(ptr_).device_id;
}

bool Buffer::is_device_accessible() const {
  require_open("is_device_accessible");
  if (MemoryResource::Impl* mr = resource_impl()) return mr->is_device_accessible();
  return query_pointer(ptr_).device;
}

bool Buffer::is_managed() const {
  require_open("is_managed");
  if (MemoryResource::Impl* mr = resource_impl(); mr && mr->is_managed()) return true;
  return query_pointer(ptr_).managed;
}

bool Buffer::is_host_accessible() const {
  require_open("is_host_accessible");
  if (MemoryResource::Impl* mr = resource_impl()) return mr->is_host_accessible();
  return query_pointer(ptr_).host;
}

namespace {
void copy_bytes(CUdeviceptr dst, CUdeviceptr src, std::size_t n, StreamRef stream, const char* operation) {
  detail::copy_bytes(dst, src, n, stream, false, operation);
}

void require_same_size(const char* what, std::size_t ours, std::size_t theirs, const char* their_name) {
  if (ours != theirs)
    throw InvalidArgumentError(std::string("Buffer::") + what + ": size mismatch: the buffer has " +
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
  const MemoryResource mr = src.memory_resource();
  if (!mr)
    throw InvalidArgumentError(
        "Buffer::copy_to: no destination given and the buffer has no memory resource to allocate one from");
  Buffer dst = mr.allocate(src.size(), stream);
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
    throw InvalidArgumentError("Buffer::fill: the buffer's " + std::to_string(size) +
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
