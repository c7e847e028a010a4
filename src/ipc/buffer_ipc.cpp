// Buffers shared between processes: export descriptors, and imports. Every
// import of one descriptor shares one mapping (src/handles/ipc_handles.hpp),
// unmapped exactly once when the last Buffer using it goes, so cucore never
// imports a pointer that is mapped already, as cuda.core does. A Buffer's
// descriptor is made once and kept in its allocation's box
// (buffer_handles.hpp).
#include <cucore/buffer.hpp>
#include <cucore/ipc.hpp>

#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "handles/buffer_handles.hpp"
#include "handles/handles.hpp"
#include "handles/ipc_handles.hpp"
#include "ipc/ipc_context.hpp"
#include "loader/driver.hpp"
#include "memory/pool_impl.hpp"

namespace cucore {
namespace detail {
namespace {

// A mapping's deleter (ipc_handles.hpp): frees the pointer on its stream, in
// the current context, else in the pool's.
void unmap_pointer(const IpcMapping& m) noexcept {
  const DriverTable* t = g_driver.load(std::memory_order_acquire);
  if (!t) return;  // no driver any more: the mapping goes with the process
  try {
    RetryScope scope;
    call_in_context(scope, [&] { return primary_of(m.device < 0 ? 0 : m.device); },
                    [&] { return t->cuMemFreeAsync(m.ptr, m.stream); });
  } catch (...) {
    // no context to free in: left to the process's end
  }
}

// A share of the mapping of `d` through `pool`, new or shared; the calls run
// in the current context, else in the pool's (call_in_context).
MappingHandle map_pointer(const PoolImpl& pool, const IPCBufferDescriptor& d, const Stream& stream) {
  return acquire_mapping(d.payload, [&](IpcMapping& e) {
    const DriverTable& dr = driver();
    require(reinterpret_cast<const void*>(dr.cuMemPoolImportPointer), 11020, "sharing memory pools (IPC)");
    CUmemPoolPtrExportData data;
    std::memcpy(data.reserved, d.payload.data(), sizeof data.reserved);
    RetryScope scope;
    auto context = [&] { return context_or_device0(pool_context(pool)); };
    check(call_in_context(scope, context, [&] { return dr.cuMemPoolImportPointer(&e.ptr, pool.pool_, &data); }),
          "cuMemPoolImportPointer");
    // Mapped: from here a failure unmaps it.
    e.unmap = &unmap_pointer;
    e.pool_uuid = d.pool_uuid;
    e.pool = pool.box_;
    e.stream_box = stream.box();
    e.stream = stream.handle();
    e.device = pool.host_ ? -1 : pool.device_;
    // The descriptor's size is the peer's word: it is checked against what was mapped (the one
    // driver call cucore adds to the import; bench_ipc reports its cost).
    check(call_in_context(scope, context, [&] {
            return dr.cuPointerGetAttribute(&e.extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, e.ptr);
          }),
          "cuPointerGetAttribute(RANGE_SIZE) of an imported Buffer");
  });
}

const char* kind_name(const PoolImpl& p) noexcept { return p.host_ ? "PinnedMemoryResource" : "DeviceMemoryResource"; }

}  // namespace
}  // namespace detail

// The descriptor an allocation keeps in its box, made on its first call; the
// checks run on every call.
const std::shared_ptr<const IPCBufferDescriptor>& Buffer::shared_ipc_descriptor() const {
  require_open("ipc_descriptor");
  const detail::BufferBox& box = *box_;
  if (box.ipc_ready.load(std::memory_order_acquire)) [[likely]] {
    if (!box.mapped) {  // only a pool Buffer has one: its pool's state is the resource
      const auto& pool = static_cast<const detail::PoolImpl&>(*resource_impl());
      pool.require_open(detail::kind_name(pool), "Buffer::ipc_descriptor");
    }
    return box.ipc_descriptor;
  }
  detail::PoolImpl* pool = nullptr;
  if (!box.mapped) {
    pool = detail::pool_impl(memory_resource());
    if (!pool || !pool->ipc_) throw IpcError("Memory resource is not IPC-enabled");
    pool->require_open(detail::kind_name(*pool), "Buffer::ipc_descriptor");
    detail::require(reinterpret_cast<const void*>(detail::driver().cuMemPoolExportPointer), 11020,
                    "sharing memory pools (IPC)");
  }
  // The first call for an allocation makes its descriptor (rare, so one lock for all Buffers).
  static std::mutex* first_export = new std::mutex;  // never destroyed: Buffers may go during static destruction
  std::lock_guard lock(*first_export);
  if (box.ipc_ready.load(std::memory_order_relaxed)) return box.ipc_descriptor;
  auto made = std::make_shared<IPCBufferDescriptor>();
  if (box.mapped) {
    // The descriptor it was imported from: the mapping's payload and pool, this import's size.
    const auto& mapping = *static_cast<const detail::IpcMapping*>(box.owner.get());
    made->payload = mapping.payload;
    made->pool_uuid = mapping.pool_uuid;
    made->size = box.size;
  } else {
    const auto& d = detail::driver();
    detail::IpcContext in(detail::pool_context(*pool));
    pool->prepare_pointer_export();
    CUmemPoolPtrExportData data{};
    detail::check(d.cuMemPoolExportPointer(&data, box.ptr), "cuMemPoolExportPointer");
    std::memcpy(made->payload.data(), data.reserved, made->payload.size());
    made->size = box.size;
    made->pool_uuid = pool->uuid();  // set once, at the pool's creation
  }
  box.ipc_descriptor = std::move(made);
  box.ipc_ready.store(true, std::memory_order_release);
  return box.ipc_descriptor;
}

IPCBufferDescriptor Buffer::ipc_descriptor() const { return *shared_ipc_descriptor(); }

Buffer Buffer::from_ipc_descriptor(const MemoryResource& mr, const IPCBufferDescriptor& descriptor,
                                   const Stream& stream) {
  if (!mr) detail::throw_closed("MemoryResource", "Buffer::from_ipc_descriptor");
  detail::PoolImpl* pool = detail::pool_impl(mr);
  if (!pool)
    throw InvalidArgumentError(
        "Buffer::from_ipc_descriptor: the memory resource must be the DeviceMemoryResource or PinnedMemoryResource "
        "of the pool the Buffer came from (from_allocation_handle)");
  pool->require_open(detail::kind_name(*pool), "Buffer::from_ipc_descriptor");
  if (!pool->ipc_) throw IpcError("Memory resource is not IPC-enabled");
  if (stream.is_closed()) detail::throw_closed("Stream", "Buffer::from_ipc_descriptor");
  if (auto ours = pool->uuid(); ours && descriptor.pool_uuid && *ours != *descriptor.pool_uuid)
    throw CudaError(CUDA_ERROR_INVALID_VALUE, "Buffer::from_ipc_descriptor (the descriptor is of pool " +
                                                  uuid_to_string(*descriptor.pool_uuid) +
                                                  ", the memory resource is pool " + uuid_to_string(*ours) + ")");
  detail::MappingHandle use = detail::map_pointer(*pool, descriptor, stream);
  const detail::IpcMapping& m = *use;  // fixed once made: read without the lock
  if (descriptor.size > m.extent)
    throw InvalidArgumentError("IPC buffer descriptor size (" + std::to_string(descriptor.size) +
                                ") exceeds mapped allocation extent (" + std::to_string(m.extent) + " bytes)");
  // The mapping keeps the stream it is freed on: a Buffer on that stream needs no share of its own.
  return mapped(m.ptr, descriptor.size, mr, stream, std::move(use), m.stream_box != stream.box());
}

}  // namespace cucore
