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
#include <vector>

#include "handles/box_allocator.hpp"
#include "handles/handles.hpp"
#include "ipc/ipc_context.hpp"
#include "loader/driver.hpp"
#include "memory/pool_impl.hpp"

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
  using Table = std::map<Payload, std::weak_ptr<const MappingBox>>;
  std::mutex mutex;
  std::condition_variable released;
  Table entries;
  // Nodes of entries gone, for the next imports: a steady import/unmap cycle allocates no node.
  static constexpr std::size_t kSpareNodes = 16;
  std::vector<Table::node_type> spare;
  Mappings() { spare.reserve(kSpareNodes); }

  void add(const Payload& key, const std::shared_ptr<const MappingBox>& box) {  // under the lock; `key` is not in
    if (spare.empty()) {
      entries.emplace(key, box);
      return;
    }
    Table::node_type node = std::move(spare.back());
    spare.pop_back();
    node.key() = key;
    node.mapped() = box;
    entries.insert(std::move(node));
  }
  void remove(Table::iterator it) {  // under the lock
    Table::node_type node = entries.extract(it);
    node.mapped().reset();
    if (spare.size() < kSpareNodes) spare.push_back(std::move(node));
  }
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
  int device = -1;  // the pool's device (-1: a pinned pool): its context unmaps where none is current

  MappingBox() noexcept {}  // not = default: make_box would zero the whole box first
  MappingBox(const MappingBox&) = delete;
  MappingBox& operator=(const MappingBox&) = delete;
  ~MappingBox() {
    if (!ptr) return;  // never mapped (nor entered in the table)
    Mappings& m = mappings();
    {
      std::lock_guard lock(m.mutex);
      // Expired entries are this box's: importers wait rather than replace them.
      if (auto it = m.entries.find(descriptor.payload); it != m.entries.end() && it->second.expired())
        m.remove(it);
      unmap();
    }
    m.released.notify_all();
  }

  void unmap() noexcept {
    const DriverTable* t = g_driver.load(std::memory_order_acquire);
    if (!t) return;  // no driver any more: the mapping goes with the process
    try {
      RetryScope scope;
      call_in_context(scope, [&] { return primary_of(device < 0 ? 0 : device); },
                      [&] { return t->cuMemFreeAsync(ptr, stream); });
    } catch (...) {
      // no context to free in: left to the process's end
    }
  }
};

// The mapping of `d` through `pool`, new or shared; the calls run in the
// current context, else in the pool's (call_in_context). Call without holding
// the mappings' lock; the result may be the only share (drop it unlocked).
std::shared_ptr<const MappingBox> map_pointer(const PoolImpl& pool, const IPCBufferDescriptor& d,
                                              const Stream& stream) {
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
  auto box = make_box<MappingBox>();  // recycled: an import/unmap cycle mallocs no box
  box->descriptor = d;
  box->pool = pool.box_;
  box->stream_box = stream.box();
  box->stream = stream.handle();
  box->device = pool.host_ ? -1 : pool.device_;
  CUmemPoolPtrExportData data;
  std::memcpy(data.reserved, d.payload.data(), sizeof data.reserved);
  CUdeviceptr ptr = 0;
  RetryScope scope;
  auto context = [&] { return context_or_device0(pool_context(pool)); };
  check(call_in_context(scope, context, [&] { return dr.cuMemPoolImportPointer(&ptr, pool.pool_, &data); }),
        "cuMemPoolImportPointer");
  box->ptr = ptr;
  try {
    // The descriptor's size is the peer's word: it is checked against what was mapped (the one
    // driver call cucore adds to the import; bench_ipc reports its cost).
    check(call_in_context(scope, context, [&] {
            return dr.cuPointerGetAttribute(&box->extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, box->ptr);
          }),
          "cuPointerGetAttribute(RANGE_SIZE) of an imported Buffer");
    m.add(d.payload, box);
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
  if (mapped_) return static_cast<const detail::MappingBox*>(owner_.get())->descriptor;
  // Made once (below), then a load and a copy. Only pool Buffers have one.
  if (const IPCBufferDescriptor* made = ipc_export_.load(std::memory_order_acquire)) [[likely]] {
    const auto& pool = static_cast<const detail::PoolImpl&>(*mr_.impl());
    pool.require_open(detail::kind_name(pool), "Buffer::ipc_descriptor");
    return *made;
  }
  detail::PoolImpl* pool = detail::pool_impl(mr_);
  if (!pool || !pool->ipc_) throw IpcError("Memory resource is not IPC-enabled");
  pool->require_open(detail::kind_name(*pool), "Buffer::ipc_descriptor");
  const auto& d = detail::driver();
  detail::require(reinterpret_cast<const void*>(d.cuMemPoolExportPointer), 11020, "sharing memory pools (IPC)");
  // The first export of a Buffer asks the driver (rare, so one lock for all Buffers).
  static std::mutex* first_export = new std::mutex;  // never destroyed: Buffers may go during static destruction
  std::lock_guard lock(*first_export);
  if (const IPCBufferDescriptor* made = ipc_export_.load(std::memory_order_relaxed)) return *made;
  detail::IpcContext in(detail::pool_context(*pool));
  pool->prepare_pointer_export();
  CUmemPoolPtrExportData data{};
  detail::check(d.cuMemPoolExportPointer(&data, ptr_), "cuMemPoolExportPointer");
  auto out = std::make_unique<IPCBufferDescriptor>();
  std::memcpy(out->payload.data(), data.reserved, out->payload.size());
  out->size = size_;
  out->pool_uuid = pool->uuid();  // set once, at the pool's creation
  ipc_export_.store(out.get(), std::memory_order_release);
  return *out.release();
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
