// Pools shared between processes: allocation handles, mapped resources and the
// per-process registry of mapped resources by UUID.
#include <cucore/device.hpp>
#include <cucore/ipc.hpp>
#include <cucore/memory.hpp>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "handles/box_allocator.hpp"
#include "handles/handles.hpp"
#include "ipc/ipc_context.hpp"
#include "loader/driver.hpp"
#include "memory/pool_impl.hpp"

namespace cucore {
namespace detail {
namespace {

const char* kind_name(const PoolImpl& p) noexcept { return p.host_ ? "PinnedMemoryResource" : "DeviceMemoryResource"; }

PoolImpl& pool_of(const MemoryResource& mr) { return static_cast<PoolImpl&>(*mr.impl()); }

// The registry: UUID -> resource, weakly (a resource leaves when its last
// user goes). Closed resources are not found.
struct Registry {
  std::mutex mutex;
  std::map<Uuid, std::weak_ptr<PoolImpl>> entries;
};
Registry& registry() {
  static auto* r = new Registry;  // never destroyed: resources may go during static destruction
  return *r;
}

// Under the registry's lock: the live, open resource registered under `uuid`.
std::shared_ptr<PoolImpl> find_locked(Registry& r, const Uuid& uuid) {
  auto it = r.entries.find(uuid);
  if (it == r.entries.end()) return nullptr;
  auto p = it->second.lock();
  if (!p || p->closed_.load(std::memory_order_acquire)) {
    r.entries.erase(it);
    return nullptr;
  }
  return p;
}

void require_kind(const PoolImpl& found, bool host, const Uuid& uuid) {
  if (found.host_ != host)
    throw InvalidArgumentError("the memory resource registered under " + uuid_to_string(uuid) + " is a " +
                                kind_name(found) + ", not a " +
                                (host ? "PinnedMemoryResource" : "DeviceMemoryResource"));
}

std::shared_ptr<PoolImpl> find_registered(const Uuid& uuid, bool host) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto p = find_locked(r, uuid);
  if (p) require_kind(*p, host, uuid);
  return p;
}

// Registers `p` under `uuid`, or gives the resource registered there already.
std::shared_ptr<PoolImpl> register_pool(std::shared_ptr<PoolImpl> p, const Uuid& uuid) {
  p->require_open(kind_name(*p), "register");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (auto existing = find_locked(r, uuid)) {
    require_kind(*existing, p->host_, uuid);
    return existing;
  }
  if (!p->ipc_) throw IpcError("Memory resource is not IPC-enabled");
  if (auto own = p->uuid(); own && *own != uuid)
    throw InvalidArgumentError(std::string(kind_name(*p)) + " " + uuid_to_string(*own) +
                                " cannot be registered under another UUID (" + uuid_to_string(uuid) + ")");
  p->set_uuid(uuid);
  r.entries[uuid] = p;
  return p;
}

std::shared_ptr<PoolImpl> from_registry(const Uuid& uuid, bool host) {
  auto p = find_registered(uuid, host);
  if (!p) throw IpcError("Memory resource " + uuid_to_string(uuid) + " was not found");
  return p;
}

AllocationHandle export_pool(const PoolImpl& p) {
  p.require_open(kind_name(p), "allocation_handle");
  if (!p.ipc_) throw IpcError("Memory resource is not IPC-enabled");
  // A mapped pool passes on the descriptor it was mapped from.
  if (p.mapped()) return AllocationHandle(FileDescriptor::duplicate(p.mapped_from_.get()), p.uuid());
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuMemPoolExportToShareableHandle), 11020, "sharing memory pools (IPC)");
  IpcContext in(pool_context(p));
  int fd = -1;
  check(d.cuMemPoolExportToShareableHandle(&fd, p.pool_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemPoolExportToShareableHandle");
  return AllocationHandle(FileDescriptor(fd), p.uuid());
}

std::shared_ptr<AllocationHandle> pool_handle(const PoolImpl& p) {
  p.require_open(kind_name(p), "get_allocation_handle");
  std::lock_guard lock(p.handle_mutex_);
  if (!p.handle_ || p.handle_->is_closed()) p.handle_ = std::make_shared<AllocationHandle>(export_pool(p));
  return p.handle_;
}

}  // namespace

void PoolImpl::prepare_pointer_export() const {
  if (mapped()) return;  // the exporting process did it
  std::call_once(exported_once_, [this] { (void)export_pool(*this); });
}

namespace {

// Maps another process's pool from `fd` (which stays the caller's).
std::shared_ptr<PoolImpl> map_pool(int fd, int device, bool host, const std::optional<Uuid>& uuid) {
  // Refused before the driver sees it: a closed or never-open descriptor.
  FileDescriptor own = FileDescriptor::duplicate(fd);
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuMemPoolImportFromShareableHandle), 11020, "sharing memory pools (IPC)");
  // Imported in the current context, as cuda.core imports it (the pool is
  // its device's whichever context that is); where none is current, in the
  // device's primary context.
  PoolHandle box;
  RetryScope scope;
  call_in_context(scope, [&] { return context_or_device0(host ? nullptr : primary_of(device)); },
                  [&] { box = import_pool(own.get()); });
  auto p = make_box<PoolImpl>(std::move(box), device, /*ipc=*/true, host, std::move(own));
  if (!uuid) return p;
  p->set_uuid(*uuid);
  // Two threads mapping one UUID at once: the first registered wins, the other's mapping goes.
  return register_pool(std::move(p), *uuid);
}

std::shared_ptr<PoolImpl> map_from_handle(const AllocationHandle& handle, int device, bool host,
                                          const char* operation) {
  if (handle.is_closed()) throw_closed("AllocationHandle", operation);
  if (handle.uuid())
    if (auto hit = find_registered(*handle.uuid(), host)) return hit;
  return map_pool(handle.fd(), device, host, handle.uuid());
}

}  // namespace
}  // namespace detail

// ---- DeviceMemoryResource ------------------------------------------------------

namespace {
// `mr`'s pool, or ClosedError when close() dropped this copy's share.
template <typename R>
detail::PoolImpl& open_pool(const R& mr, const char* object, const char* operation) {
  if (!mr) detail::throw_closed(object, operation);
  return detail::pool_of(mr);
}
template <typename R>
bool closed(const R& mr) noexcept {
  return !mr || detail::pool_of(mr).closed_.load(std::memory_order_acquire);
}
}  // namespace

std::shared_ptr<AllocationHandle> DeviceMemoryResource::get_allocation_handle() const {
  return detail::pool_handle(open_pool(*this, "DeviceMemoryResource", "get_allocation_handle"));
}

AllocationHandle DeviceMemoryResource::allocation_handle() const {
  return detail::export_pool(open_pool(*this, "DeviceMemoryResource", "allocation_handle"));
}

DeviceMemoryResource DeviceMemoryResource::from_allocation_handle(const Device& device, const AllocationHandle& handle) {
  DeviceMemoryResource mr;
  mr.impl_ = detail::map_from_handle(handle, device.ordinal(), false, "DeviceMemoryResource::from_allocation_handle");
  return mr;
}

DeviceMemoryResource DeviceMemoryResource::from_allocation_handle(const Device& device, int fd) {
  DeviceMemoryResource mr;
  mr.impl_ = detail::map_pool(fd, device.ordinal(), false, std::nullopt);
  return mr;
}

bool DeviceMemoryResource::is_mapped() const noexcept { return impl_ && detail::pool_of(*this).mapped(); }
std::optional<Uuid> DeviceMemoryResource::uuid() const {
  return impl_ ? detail::pool_of(*this).uuid() : std::nullopt;
}

DeviceMemoryResource DeviceMemoryResource::register_as(const Uuid& uuid) const {
  DeviceMemoryResource mr;
  open_pool(*this, "DeviceMemoryResource", "register");
  mr.impl_ = detail::register_pool(std::static_pointer_cast<detail::PoolImpl>(impl_), uuid);
  return mr;
}

DeviceMemoryResource DeviceMemoryResource::from_registry(const Uuid& uuid) {
  DeviceMemoryResource mr;
  mr.impl_ = detail::from_registry(uuid, false);
  return mr;
}

bool DeviceMemoryResource::is_closed() const noexcept { return closed(*this); }

// ---- PinnedMemoryResource ------------------------------------------------------

std::shared_ptr<AllocationHandle> PinnedMemoryResource::get_allocation_handle() const {
  return detail::pool_handle(open_pool(*this, "PinnedMemoryResource", "get_allocation_handle"));
}

AllocationHandle PinnedMemoryResource::allocation_handle() const {
  return detail::export_pool(open_pool(*this, "PinnedMemoryResource", "allocation_handle"));
}

PinnedMemoryResource PinnedMemoryResource::from_allocation_handle(const AllocationHandle& handle) {
  return PinnedMemoryResource(detail::map_from_handle(handle, -1, true, "PinnedMemoryResource::from_allocation_handle"));
}

PinnedMemoryResource PinnedMemoryResource::from_allocation_handle(int fd) {
  return PinnedMemoryResource(detail::map_pool(fd, -1, true, std::nullopt));
}

bool PinnedMemoryResource::is_mapped() const noexcept { return impl_ && detail::pool_of(*this).mapped(); }
std::optional<Uuid> PinnedMemoryResource::uuid() const {
  return impl_ ? detail::pool_of(*this).uuid() : std::nullopt;
}

PinnedMemoryResource PinnedMemoryResource::register_as(const Uuid& uuid) const {
  open_pool(*this, "PinnedMemoryResource", "register");
  return PinnedMemoryResource(detail::register_pool(std::static_pointer_cast<detail::PoolImpl>(impl_), uuid));
}

PinnedMemoryResource PinnedMemoryResource::from_registry(const Uuid& uuid) {
  return PinnedMemoryResource(detail::from_registry(uuid, true));
}

bool PinnedMemoryResource::is_closed() const noexcept { return closed(*this); }

}  // namespace cucore
