// Buffers shared between processes: export descriptors, and the mappings of
// imported ones. Every import of one descriptor shares one mapping, unmapped
// exactly once when the last Buffer using it goes: the driver does not count
// repeated imports of a pool pointer (the first free unmaps them all) and
// refuses a second import of a pinned one, so cucore never imports a pointer
// that is mapped already, as cuda.core does. A Buffer's descriptor is made
// once and kept in its allocation's box (buffer_handles.hpp).
#include <cucore/buffer.hpp>
#include <cucore/ipc.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "handles/box_allocator.hpp"
#include "handles/buffer_handles.hpp"
#include "handles/handles.hpp"
#include "ipc/ipc_context.hpp"
#include "loader/driver.hpp"
#include "memory/pool_impl.hpp"

namespace cucore {
namespace detail {
namespace {

using Payload = std::array<unsigned char, IPCBufferDescriptor::kPayloadSize>;

// One imported pointer, in the table's node while any Buffer uses it.
struct Mapping {
  CUdeviceptr ptr = 0;
  std::size_t extent = 0;  // the mapped allocation's size
  IPCBufferDescriptor descriptor;
  PoolHandle pool;          // the mapped pool stays imported while the pointer is
  StreamHandle stream_box;  // the stream it is freed on (when cucore's)
  CUstream stream = nullptr;
  int device = -1;     // the pool's device (-1: a pinned pool): its context unmaps where none is current
  unsigned users = 0;  // the MappingUses (Buffers) of it; under the table's lock

  void unmap() const noexcept {
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

// The live mappings, by the export data they were imported from. Users are
// counted under the lock, and the last one unmaps and removes its entry under
// it too, so an importer finds either a live mapping or none (never one being
// unmapped, whose free would undo a new import). Plain counts under the lock
// the import and the unmap take anyway: no weak references, no atomics.
struct Mappings {
  using Table = std::map<Payload, Mapping>;
  std::mutex mutex;
  Table entries;
  // Nodes of entries gone, for the next imports: a steady import/unmap cycle allocates no node.
  static constexpr std::size_t kSpareNodes = 16;
  std::vector<Table::node_type> spare;
  Mappings() { spare.reserve(kSpareNodes); }

  // An entry for `key` (not in) whose Mapping the caller fills in, every field
  // (a recycled node keeps its last one's); under the lock.
  Table::iterator add(const Payload& key) {
    if (spare.empty()) return entries.try_emplace(key).first;
    Table::node_type node = std::move(spare.back());
    spare.pop_back();
    node.key() = key;
    return entries.insert(std::move(node)).position;
  }
};
Mappings& mappings() {
  static auto* m = new Mappings;  // never destroyed: Buffers may go during static destruction
  return *m;
}

// A Buffer's use of a mapping (its owner_): the last use unmaps it. The entry
// (a map node: its address is stable) lives while a use does.
struct MappingUse {
  Mappings::Table::iterator entry{};
  bool live = false;  // counted in entry's users

  MappingUse() noexcept = default;
  MappingUse(const MappingUse&) = delete;
  MappingUse& operator=(const MappingUse&) = delete;
  const Mapping& mapping() const noexcept { return entry->second; }
  ~MappingUse() {
    if (!live) return;
    Mappings& m = mappings();
    PoolHandle pool;  // the shares the entry held, dropped after the lock
    StreamHandle stream;
    {
      std::lock_guard lock(m.mutex);
      Mapping& e = entry->second;
      if (--e.users) return;
      e.unmap();
      pool = std::move(e.pool);
      stream = std::move(e.stream_box);
      Mappings::Table::node_type node = m.entries.extract(entry);
      if (m.spare.size() < Mappings::kSpareNodes) m.spare.push_back(std::move(node));
    }
  }
};

// A use of the mapping of `d` through `pool`, new or shared; the calls run in
// the current context, else in the pool's (call_in_context). Call without
// holding the mappings' lock; the result may be the only use (drop it unlocked).
std::shared_ptr<const MappingUse> map_pointer(const PoolImpl& pool, const IPCBufferDescriptor& d,
                                              const Stream& stream) {
  // Before the lock, so that an error after it is counted releases the use
  // after the lock is given up (locals go in reverse order).
  auto use = make_box<MappingUse>();  // recycled: an import/unmap cycle mallocs no box
  Mappings& m = mappings();
  std::lock_guard lock(m.mutex);
  if (auto it = m.entries.find(d.payload); it != m.entries.end()) {
    ++it->second.users;
    use->entry = it;
    use->live = true;
    return use;
  }
  const DriverTable& dr = driver();
  require(reinterpret_cast<const void*>(dr.cuMemPoolImportPointer), 11020, "sharing memory pools (IPC)");
  // The entry first (it may allocate), so that nothing can fail between the
  // import and the entry owning what it mapped. No one sees it without users:
  // the lock is held throughout.
  const Mappings::Table::iterator it = m.add(d.payload);
  Mapping& e = it->second;
  CUmemPoolPtrExportData data;
  std::memcpy(data.reserved, d.payload.data(), sizeof data.reserved);
  CUdeviceptr ptr = 0;
  RetryScope scope;
  auto context = [&] { return context_or_device0(pool_context(pool)); };
  try {
    check(call_in_context(scope, context, [&] { return dr.cuMemPoolImportPointer(&ptr, pool.pool_, &data); }),
          "cuMemPoolImportPointer");
  } catch (...) {
    Mappings::Table::node_type node = m.entries.extract(it);
    if (m.spare.size() < Mappings::kSpareNodes) m.spare.push_back(std::move(node));
    throw;
  }
  // Owned from here: entered with one user, so a failure below unmaps it.
  use->entry = it;
  use->live = true;
  e.ptr = ptr;
  e.extent = 0;
  e.descriptor = d;
  e.pool = pool.box_;
  e.stream_box = stream.box();
  e.stream = stream.handle();
  e.device = pool.host_ ? -1 : pool.device_;
  e.users = 1;
  // The descriptor's size is the peer's word: it is checked against what was mapped (the one
  // driver call cucore adds to the import; bench_ipc reports its cost).
  check(call_in_context(scope, context, [&] {
          return dr.cuPointerGetAttribute(&e.extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, e.ptr);
        }),
        "cuPointerGetAttribute(RANGE_SIZE) of an imported Buffer");
  return use;
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
    *made = static_cast<const detail::MappingUse*>(box.owner.get())->mapping().descriptor;
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
  auto use = detail::map_pointer(*pool, descriptor, stream);
  const detail::Mapping& m = use->mapping();  // fixed once made: read without the lock
  if (descriptor.size > m.extent)
    throw std::invalid_argument("IPC buffer descriptor size (" + std::to_string(descriptor.size) +
                                ") exceeds mapped allocation extent (" + std::to_string(m.extent) + " bytes)");
  // The mapping keeps the stream it is freed on: a Buffer on that stream needs no share of its own.
  return mapped(m.ptr, descriptor.size, mr, stream, std::move(use), m.stream_box != stream.box());
}

}  // namespace cucore
