#include <cucore/memory.hpp>

#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>
#include <stdexcept>

#include <cucore/ipc.hpp>

#include "handles/handles.hpp"
#include "loader/driver.hpp"
#include "memory/pool_impl.hpp"
#include "runtime/device_state.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

using detail::check;
using detail::driver;

// ---- MemoryResource (the handle) ------------------------------------------

namespace {
MemoryResource::Impl& require_impl(const std::shared_ptr<MemoryResource::Impl>& impl, const char* what) {
  if (!impl) [[unlikely]]
    throw LogicError(std::string(what) + ": the memory resource is empty");
  return *impl;
}
}  // namespace

namespace {
template <typename S>
Buffer allocate_on(const MemoryResource& mr, std::size_t size, const S& stream) {
  MemoryResource::Impl* impl = mr.impl();
  if (!impl) [[unlikely]]
    throw LogicError("MemoryResource::allocate: the memory resource is empty");
  if (stream.is_closed()) [[unlikely]]
    detail::throw_closed("Stream", "MemoryResource::allocate");
  CUdeviceptr p = size ? impl->allocate(size, stream) : 0;
  return Buffer(p, size, mr, stream);
}
}  // namespace

Buffer MemoryResource::allocate(std::size_t size, StreamRef stream) const { return allocate_on(*this, size, stream); }
Buffer MemoryResource::allocate(std::size_t size, const Stream& stream) const {
  return allocate_on(*this, size, stream);
}

void MemoryResource::deallocate(CUdeviceptr ptr, std::size_t size, StreamRef stream) const {
  auto& impl = require_impl(impl_, "MemoryResource::deallocate");
  if (stream.is_closed()) [[unlikely]]
    detail::throw_closed("Stream", "MemoryResource::deallocate");
  if (ptr) impl.deallocate(ptr, size, stream);
}

bool MemoryResource::is_device_accessible() const {
  return require_impl(impl_, "MemoryResource::is_device_accessible").is_device_accessible();
}
bool MemoryResource::is_host_accessible() const {
  return require_impl(impl_, "MemoryResource::is_host_accessible").is_host_accessible();
}
bool MemoryResource::is_managed() const { return require_impl(impl_, "MemoryResource::is_managed").is_managed(); }
int MemoryResource::device_id() const { return require_impl(impl_, "MemoryResource::device_id").device_id(); }

// ---- Pools -----------------------------------------------------------------

namespace detail {

void PoolImpl::refuse_allocation() const {
  if (mapped()) throw MappedResourceError("Cannot allocate from a mapped IPC-enabled memory resource");
  throw_closed(host_ ? "PinnedMemoryResource" : "DeviceMemoryResource", "allocate");
}

namespace {

void require_pools(const DriverTable& d) {
  require(reinterpret_cast<const void*>(d.cuMemAllocFromPoolAsync), 11020, "stream-ordered memory pools");
}

// Keep freed memory in the pool for reuse instead of returning it at each sync.
void raise_release_threshold(CUmemoryPool pool) {
  cuuint64_t threshold = std::numeric_limits<cuuint64_t>::max();
  check(driver().cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
        "cuMemPoolSetAttribute(RELEASE_THRESHOLD)");
}

std::shared_ptr<PoolImpl> make_pool(CUmemLocationType location, int id, std::size_t max_size, bool ipc) {
  const auto& d = driver();
  require_pools(d);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = ipc ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = location;
  props.location.id = id;
  props.maxSize = max_size;
  auto impl = std::make_shared<PoolImpl>(create_pool(props), location == CU_MEM_LOCATION_TYPE_DEVICE ? id : -1, ipc,
                                         location != CU_MEM_LOCATION_TYPE_DEVICE);
  if (ipc) impl->set_uuid(random_uuid());  // its identity in other processes' registries
  raise_release_threshold(impl->pool_);
  return impl;
}

MemoryPoolAttributes pool_attributes(CUmemoryPool pool) {
  MemoryPoolAttributes a;
  auto get = [&](CUmemPool_attribute attr, const char* name) {
    cuuint64_t v = 0;
    check(driver().cuMemPoolGetAttribute(pool, attr, &v), name);
    return static_cast<std::uint64_t>(v);
  };
  a.reserved_mem_current = get(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "cuMemPoolGetAttribute(RESERVED_MEM_CURRENT)");
  a.reserved_mem_high = get(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, "cuMemPoolGetAttribute(RESERVED_MEM_HIGH)");
  a.used_mem_current = get(CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "cuMemPoolGetAttribute(USED_MEM_CURRENT)");
  a.used_mem_high = get(CU_MEMPOOL_ATTR_USED_MEM_HIGH, "cuMemPoolGetAttribute(USED_MEM_HIGH)");
  a.release_threshold = get(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "cuMemPoolGetAttribute(RELEASE_THRESHOLD)");
  auto flag = [&](CUmemPool_attribute attr, const char* name) {
    int v = 0;  // the reuse attributes are ints
    check(driver().cuMemPoolGetAttribute(pool, attr, &v), name);
    return v != 0;
  };
  a.reuse_follow_event_dependencies =
      flag(CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, "cuMemPoolGetAttribute(REUSE_FOLLOW_EVENT_DEPENDENCIES)");
  a.reuse_allow_opportunistic =
      flag(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, "cuMemPoolGetAttribute(REUSE_ALLOW_OPPORTUNISTIC)");
  a.reuse_allow_internal_dependencies = flag(CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                                             "cuMemPoolGetAttribute(REUSE_ALLOW_INTERNAL_DEPENDENCIES)");
  return a;
}

PoolImpl& pool_of(const MemoryResource& mr) { return static_cast<PoolImpl&>(*mr.impl()); }

}  // namespace
}  // namespace detail

namespace {
// A device's default resource (over its current pool), kept in its device
// state for the process: what it hands out is a non-owning alias of `owner`.
struct DefaultResource {
  std::shared_ptr<MemoryResource::Impl> owner;
  MemoryResource resource;
};
}  // namespace

DeviceMemoryResource Device::memory_resource() const { return DeviceMemoryResource(*this); }

DeviceMemoryResource::DeviceMemoryResource(int device_id) : DeviceMemoryResource(Device(device_id)) {}

DeviceMemoryResource::DeviceMemoryResource(const Device& device) {
  // One shared state per device: every DeviceMemoryResource(dev) is the same pool.
  detail::DeviceState* s = detail::device_state(device.ordinal());
  if (!s->memory_resource_ready.load(std::memory_order_acquire)) {
    std::call_once(s->memory_resource_once, [&] {
      const auto& d = detail::driver();
      detail::require_pools(d);
      if (!device.properties().memory_pools_supported())
        throw FeatureUnavailableError("DeviceMemoryResource on device " + std::to_string(device.ordinal()),
                                      "a device that supports memory pools");
      CUmemoryPool pool = nullptr;
      check(d.cuDeviceGetMemPool(&pool, s->device), "cuDeviceGetMemPool");
      detail::raise_release_threshold(pool);
      auto r = std::make_shared<DefaultResource>();
      r->owner = std::make_shared<detail::PoolImpl>(detail::adopt_pool(pool), device.ordinal(), false, false);
      r->resource = MemoryResource(detail::immortal_alias(r->owner));
      s->memory_resource = std::move(r);
      s->memory_resource_ready.store(true, std::memory_order_release);
    });
  }
  static_cast<MemoryResource&>(*this) = static_cast<const DefaultResource*>(s->memory_resource.get())->resource;
}

DeviceMemoryResource::DeviceMemoryResource(int device_id, const DeviceMemoryResourceOptions& options)
    : DeviceMemoryResource(Device(device_id), options) {}

DeviceMemoryResource::DeviceMemoryResource(const Device& device, const DeviceMemoryResourceOptions& options) {
  impl_ = detail::make_pool(CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal(), options.max_size, options.ipc_enabled);
}

DeviceMemoryResource DeviceMemoryResource::from_handle(CUmemoryPool pool, int device_id) {
  if (!pool) throw InvalidArgumentError("DeviceMemoryResource::from_handle: pool is null");
  (void)Device(device_id);  // validates the ordinal
  DeviceMemoryResource mr;
  mr.impl_ = std::make_shared<detail::PoolImpl>(detail::adopt_pool(pool), device_id, false, false);
  return mr;
}

CUmemoryPool DeviceMemoryResource::handle() const noexcept { return impl_ ? detail::pool_of(*this).pool_ : nullptr; }
MemoryPoolAttributes DeviceMemoryResource::attributes() const {
  if (!impl_) detail::throw_closed("DeviceMemoryResource", "attributes");
  return detail::pool_attributes(handle());
}
bool DeviceMemoryResource::is_ipc_enabled() const noexcept { return impl_ && detail::pool_of(*this).ipc_; }
bool DeviceMemoryResource::owns_pool() const noexcept { return impl_ && detail::pool_of(*this).box_->release == detail::Release::destroy; }
void DeviceMemoryResource::close() noexcept {
  if (!owns_pool()) return;
  if (detail::pool_of(*this).ipc_) detail::pool_of(*this).closed_.store(true, std::memory_order_release);
  impl_.reset();
}

void DeviceMemoryResource::trim_to(std::size_t min_bytes_to_keep) const {
  if (!impl_) detail::throw_closed("DeviceMemoryResource", "trim_to");
  check(driver().cuMemPoolTrimTo(handle(), min_bytes_to_keep), "cuMemPoolTrimTo");
}

// ---- Peer access ----

namespace {
CUmemAccess_flags pool_access(CUmemoryPool pool, int device) {
  CUmemLocation where{};
  where.type = CU_MEM_LOCATION_TYPE_DEVICE;
  where.id = device;
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  check(driver().cuMemPoolGetAccess(&flags, pool, &where), "cuMemPoolGetAccess");
  return flags;
}
}  // namespace

std::vector<int> DeviceMemoryResource::peer_accessible_by() const {
  const int owner = device_id();
  std::vector<int> peers;
  for (int d = 0, n = Device::count(); d < n; ++d)
    if (d != owner && pool_access(handle(), d) != CU_MEM_ACCESS_FLAGS_PROT_NONE) peers.push_back(d);
  return peers;
}

void DeviceMemoryResource::update_peer_access(std::span<const int> add, std::span<const int> remove) const {
  const Device owner(device_id());
  std::vector<CUmemAccessDesc> descs;
  auto push = [&](int device, CUmemAccess_flags flags) {
    for (CUmemAccessDesc& d : descs)
      if (d.location.id == device) {
        if (flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) d.flags = flags;  // granted wins
        return;
      }
    CUmemAccessDesc d{};
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = device;
    d.flags = flags;
    descs.push_back(d);
  };
  for (int device : add) {
    if (device == owner.ordinal()) continue;
    if (!owner.can_access_peer(Device(device)))  // Device(n): std::out_of_range for no such device
      throw InvalidArgumentError("DeviceMemoryResource peer access: device " + std::to_string(device) +
                                  " cannot access device " + std::to_string(owner.ordinal()) + "'s memory");
    push(device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  }
  for (int device : remove) {
    if (device == owner.ordinal()) continue;
    (void)Device(device);
    push(device, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  }
  if (descs.empty()) return;
  check(driver().cuMemPoolSetAccess(handle(), descs.data(), descs.size()), "cuMemPoolSetAccess");
}

void DeviceMemoryResource::set_peer_accessible_by(std::span<const int> devices) const {
  const std::vector<int> current = peer_accessible_by();
  std::vector<int> remove;
  for (int c : current)
    if (std::find(devices.begin(), devices.end(), c) == devices.end()) remove.push_back(c);
  std::vector<int> add;
  for (int d : devices)
    if (std::find(current.begin(), current.end(), d) == current.end()) add.push_back(d);
  update_peer_access(add, remove);
}

// ---- Pinned host memory ----------------------------------------------------

PinnedMemoryResource::PinnedMemoryResource(const PinnedMemoryResourceOptions& options) {
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuMemPoolCreate), 12060,
                  "PinnedMemoryResource (host-located memory pools)");
  if (options.numa_id && *options.numa_id < 0)
    throw InvalidArgumentError("PinnedMemoryResourceOptions::numa_id must be >= 0 (or unset), got " +
                                std::to_string(*options.numa_id));
  // A NUMA node when one is named, or when IPC needs one (the current device's).
  std::optional<int> numa = options.numa_id;
  if (!numa && options.ipc_enabled) {
    const int node = Device().properties().attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
    if (node < 0)
      throw FeatureUnavailableError("an IPC-enabled PinnedMemoryResource", "a host NUMA node (this system reports none)");
    numa = node;
  }
  auto impl = numa ? detail::make_pool(CU_MEM_LOCATION_TYPE_HOST_NUMA, *numa, options.max_size, options.ipc_enabled)
                   : detail::make_pool(CU_MEM_LOCATION_TYPE_HOST, 0, options.max_size, options.ipc_enabled);
  impl->numa_ = numa.value_or(-1);
  // Host pools are not device-accessible until access is granted per device.
  for (const Device& dev : Device::all()) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev.ordinal();
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(d.cuMemPoolSetAccess(impl->pool_, &access, 1), "cuMemPoolSetAccess");
  }
  impl_ = std::move(impl);
}

CUmemoryPool PinnedMemoryResource::handle() const noexcept { return impl_ ? detail::pool_of(*this).pool_ : nullptr; }
MemoryPoolAttributes PinnedMemoryResource::attributes() const {
  if (!impl_) detail::throw_closed("PinnedMemoryResource", "attributes");
  return detail::pool_attributes(handle());
}
bool PinnedMemoryResource::is_ipc_enabled() const noexcept { return impl_ && detail::pool_of(*this).ipc_; }
int PinnedMemoryResource::numa_id() const noexcept { return impl_ ? detail::pool_of(*this).numa_ : -1; }
void PinnedMemoryResource::close() noexcept {
  if (impl_ && detail::pool_of(*this).ipc_) detail::pool_of(*this).closed_.store(true, std::memory_order_release);
  impl_.reset();
}

// ---- Synchronous allocators -------------------------------------------------

namespace detail {
namespace {

class LegacyPinnedImpl final : public MemoryResource::Impl {
 public:
  CUdeviceptr allocate(std::size_t size, StreamRef) override {
    ScopedContext scope(current_context_or_device0().handle());
    void* p = nullptr;
    check(driver().cuMemAllocHost(&p, size), "cuMemAllocHost");
    return reinterpret_cast<CUdeviceptr>(p);
  }
  void deallocate(CUdeviceptr ptr, std::size_t, StreamRef stream) override {
    // Not stream-ordered: wait for the stream's work on it first.
    stream.sync();
    check(driver().cuMemFreeHost(reinterpret_cast<void*>(ptr)), "cuMemFreeHost");
  }
  bool is_device_accessible() const noexcept override { return true; }
  bool is_host_accessible() const noexcept override { return true; }
  int device_id() const noexcept override { return -1; }
};

class ManagedImpl final : public MemoryResource::Impl {
 public:
  ManagedImpl(int device, unsigned flags, std::optional<ManagedLocation> preferred)
      : device_(device), flags_(flags), preferred_(std::move(preferred)) {}
  CUdeviceptr allocate(std::size_t size, StreamRef) override {
    ScopedContext scope(device_ >= 0 ? Device(device_).context().handle() : current_context_or_device0().handle());
    CUdeviceptr p = 0;
    check(driver().cuMemAllocManaged(&p, size, flags_), "cuMemAllocManaged");
    if (preferred_ && size > 0) {
      CUmemLocation loc{};
      loc.type = preferred_->type == "device"      ? CU_MEM_LOCATION_TYPE_DEVICE
                 : preferred_->type == "host_numa" ? CU_MEM_LOCATION_TYPE_HOST_NUMA
                                                   : CU_MEM_LOCATION_TYPE_HOST;
      loc.id = preferred_->id.value_or(0);
      if (CUresult r = driver().cuMemAdvise(p, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc); r != CUDA_SUCCESS) {
        (void)driver().cuMemFree(p);
        check(r, "cuMemAdvise(SET_PREFERRED_LOCATION)");
      }
    }
    return p;
  }
  const std::optional<ManagedLocation>& preferred() const noexcept { return preferred_; }
  void deallocate(CUdeviceptr ptr, std::size_t, StreamRef stream) override {
    stream.sync();
    check(driver().cuMemFree(ptr), "cuMemFree");
  }
  bool is_device_accessible() const noexcept override { return true; }
  bool is_host_accessible() const noexcept override { return true; }
  int device_id() const noexcept override {
    if (preferred_ && preferred_->type == "device") return *preferred_->id;
    return device_;
  }
  bool is_managed() const noexcept override { return true; }

 private:
  int device_;
  unsigned flags_;
  std::optional<ManagedLocation> preferred_;
};

// The preferred location the options name (cuda.core's reading), checked.
std::optional<ManagedLocation> managed_location(const ManagedMemoryResourceOptions& o) {
  const auto& loc = o.preferred_location;
  const std::string& type = o.preferred_location_type;
  auto bad = [](const std::string& why) {
    throw InvalidArgumentError("ManagedMemoryResourceOptions: " + why);
  };
  if (type.empty()) {  // the legacy reading: an ordinal, -1 for the host
    if (!loc) return std::nullopt;
    if (*loc == -1) return ManagedLocation{"host", std::nullopt};
    if (*loc < 0) bad("preferred_location must be a device ordinal, -1 (the host) or None, got " + std::to_string(*loc));
    (void)Device(*loc);  // an ordinal that exists
    return ManagedLocation{"device", *loc};
  }
  if (type == "device") {
    if (!loc || *loc < 0) bad("preferred_location_type 'device' needs preferred_location to be a device ordinal (>= 0)");
    (void)Device(*loc);
    return ManagedLocation{"device", *loc};
  }
  if (type == "host") {
    if (loc) bad("preferred_location_type 'host' takes no preferred_location (None), got " + std::to_string(*loc));
    return ManagedLocation{"host", std::nullopt};
  }
  if (type == "host_numa") {
    if (loc && *loc < 0) bad("preferred_location_type 'host_numa' needs a NUMA node id >= 0 (or None), got " +
                             std::to_string(*loc));
    int node = loc ? *loc : Device().properties().attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
    if (node < 0) throw FeatureUnavailableError("a host_numa preferred location", "a host NUMA node (none reported)");
    return ManagedLocation{"host_numa", node};
  }
  bad("preferred_location_type must be 'device', 'host', 'host_numa' or None, got '" + type + "'");
  return std::nullopt;
}

}  // namespace
}  // namespace detail

LegacyPinnedMemoryResource::LegacyPinnedMemoryResource() {
  impl_ = std::make_shared<detail::LegacyPinnedImpl>();
}

ManagedMemoryResource::ManagedMemoryResource(const ManagedMemoryResourceOptions& options) {
  impl_ = std::make_shared<detail::ManagedImpl>(-1, options.attach_global ? CU_MEM_ATTACH_GLOBAL : CU_MEM_ATTACH_HOST,
                                                detail::managed_location(options));
}

ManagedMemoryResource::ManagedMemoryResource(const Device& device, const ManagedMemoryResourceOptions& options) {
  impl_ = std::make_shared<detail::ManagedImpl>(
      device.ordinal(), options.attach_global ? CU_MEM_ATTACH_GLOBAL : CU_MEM_ATTACH_HOST,
      detail::managed_location(options));
}

std::optional<ManagedLocation> ManagedMemoryResource::preferred_location() const {
  if (!impl_) return std::nullopt;
  return static_cast<const detail::ManagedImpl&>(*impl_).preferred();
}

}  // namespace cucore
