// Buffers shared between processes: export descriptors, and the mappings of
// imported ones. Every import of one descriptor shares one mapping (a box
// held by each mapped Buffer), unmapped exactly once when the last goes: the
// driver does not count repeated imports of a pool pointer (the first free
// unmaps them all) and refuses a second import of a pinned one, so cucore
// never imports a pointer that is mapped already, as cuda.core does.
#include <cucore/buffer.hpp>
#include <cucore/ipc.hpp>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "handles/handles.hpp"
#include "loader/driver.hpp"
#include "memory/pool_impl.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {
namespace detail {
namespace {

using Payload = std::array<unsigned char, IPCBufferDescriptor::kPayloadSize>;
struct MappingBox;

// The live mappings, by the export data they were imported from. An entry
// whose box is going (expired) stays until the box has unmapped its pointer,
// and importers of the same data wait for that: importing it again before
// the free would be undone by the free.
struct Mappings {
  std::mutex mutex;
  std::condition_variable released;
  std::map<Payload, std::weak_ptr<const MappingBox>> entries;
};
Mappings& mappings() {
  static auto* m = new Mappings;  // never destroyed: boxes may go during static destruction
  return *m;
}

struct MappingBox {
  CUdeviceptr ptr = 0;
  std::size_t extent = 0;  // the mapped allocation's size
  IPCBufferDescriptor descriptor;
  PoolHandle pool;          // the mapped pool stays imported while the pointer is
  StreamHandle stream_box;  // the stream it is freed on (when cucore's)
  CUstream stream = nullptr;

  MappingBox() = default;
  MappingBox(const MappingBox&) = delete;
  MappingBox& operator=(const MappingBox&) = delete;
  ~MappingBox() {
    if (!ptr) return;  // never mapped (nor entered in the table)
    Mappings& m = mappings();
    {
      std::lock_guard lock(m.mutex);
      // Expired entries are this box's: importers wait rather than replace them.
      if (auto it = m.entries.find(descriptor.payload); it != m.entries.end() && it->second.expired())
        m.entries.erase(it);
      unmap();
    }
    m.released.notify_all();
  }

  void unmap() noexcept {
    const DriverTable* t = g_driver.load(std::memory_order_acquire);
    if (!t) return;  // no driver any more: the mapping goes with the process
    try {
      StreamContextGuard guard(StreamRef(stream), "unmapping an imported Buffer");
    } catch (...) {
      return;  // no context to free in: left to the process's end
    }
    t->cuMemFreeAsync(ptr, stream);
  }
};

// The mapping of `d` through `pool`, new or shared. Call without holding the
// mappings' lock; the result may be the only share (drop it unlocked).
std::shared_ptr<const MappingBox> map_pointer(const PoolImpl& pool, const IPCBufferDescriptor& d, const Stream& stream) {
  Mappings& m = mappings();
  std::unique_lock lock(m.mutex);
  for (;;) {
    auto it = m.entries.find(d.payload);
    if (it == m.entries.end()) break;
    if (auto live = it->second.lock()) return live;
    m.released.wait(lock);  // its last Buffer is unmapping it
  }
  const DriverTable& dr = driver();
  require(reinterpret_cast<const void*>(dr.cuMemPoolImportPointer), 11020, "sharing memory pools (IPC)");
  // The box first, so the pointer is owned the moment it exists. Once it has
  // one, the box's destructor takes the lock: unlock before it can run.
  auto box = std::make_shared<MappingBox>();
  box->descriptor = d;
  box->pool = pool.box_;
  box->stream_box = stream.box();
  box->stream = stream.handle();
  CUmemPoolPtrExportData data;
  std::memcpy(data.reserved, d.payload.data(), sizeof data.reserved);
  CUdeviceptr ptr = 0;
  check(dr.cuMemPoolImportPointer(&ptr, pool.pool_, &data), "cuMemPoolImportPointer");
  box->ptr = ptr;
  try {
    check(dr.cuPointerGetAttribute(&box->extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, box->ptr),
          "cuPointerGetAttribute(RANGE_SIZE) of an imported Buffer");
    m.entries[d.payload] = box;
  } catch (...) {
    lock.unlock();
    throw;
  }
  return box;
}

const char* kind_name(const PoolImpl& p) noexcept { return p.host_ ? "PinnedMemoryResource" : "DeviceMemoryResource"; }

}  // namespace
}  // namespace detail

IPCBufferDescriptor Buffer::ipc_descriptor() const {
  require_open("ipc_descriptor");
  if (mapped_) return std::static_pointer_cast<const detail::MappingBox>(owner_)->descriptor;
  detail::PoolImpl* pool = detail::pool_impl(mr_);
  if (!pool || !pool->ipc_) throw IpcError("Memory resource is not IPC-enabled");
  pool->require_open(detail::kind_name(*pool), "Buffer::ipc_descriptor");
  const auto& d = detail::driver();
  detail::require(reinterpret_cast<const void*>(d.cuMemPoolExportPointer), 11020, "sharing memory pools (IPC)");
  pool->prepare_pointer_export();
  CUmemPoolPtrExportData data{};
  detail::check(d.cuMemPoolExportPointer(&data, ptr_), "cuMemPoolExportPointer");
  IPCBufferDescriptor out;
  std::memcpy(out.payload.data(), data.reserved, out.payload.size());
  out.size = size_;
  out.pool_uuid = pool->uuid();
  return out;
}

Buffer Buffer::from_ipc_descriptor(const MemoryResource& mr, const IPCBufferDescriptor& descriptor,
                                   const Stream& stream) {
  if (!mr) detail::throw_closed("MemoryResource", "Buffer::from_ipc_descriptor");
  detail::PoolImpl* pool = detail::pool_impl(mr);
  if (!pool)
    throw std::invalid_argument(
        "Buffer::from_ipc_descriptor: the memory resource must be the DeviceMemoryResource or PinnedMemoryResource "
        "of the pool the Buffer came from (from_allocation_handle)");
  pool->require_open(detail::kind_name(*pool), "Buffer::from_ipc_descriptor");
  if (!pool->ipc_) throw IpcError("Memory resource is not IPC-enabled");
  if (stream.is_closed()) detail::throw_closed("Stream", "Buffer::from_ipc_descriptor");
  if (auto ours = pool->uuid(); ours && descriptor.pool_uuid && *ours != *descriptor.pool_uuid)
    throw CudaError(CUDA_ERROR_INVALID_VALUE, "Buffer::from_ipc_descriptor (the descriptor is of pool " +
                                                  uuid_to_string(*descriptor.pool_uuid) +
                                                  ", the memory resource is pool " + uuid_to_string(*ours) + ")");
  auto box = detail::map_pointer(*pool, descriptor, stream);
  if (descriptor.size > box->extent)
    throw std::invalid_argument("IPC buffer descriptor size (" + std::to_string(descriptor.size) +
                                ") exceeds mapped allocation extent (" + std::to_string(box->extent) + " bytes)");
  Buffer b(box->ptr, descriptor.size, mr, stream);
  b.owner_ = std::move(box);
  b.mapped_ = true;
  return b;
}

}  // namespace cucore
