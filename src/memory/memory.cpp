#include <cucore/memory.hpp>

#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
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
    throw std::logic_error(std::string(what) + ": the memory resource is empty");
  return *impl;
}
}  // namespace

namespace {
template <typename S>
Buffer allocate_on(const MemoryResource& mr, std::size_t size, const S& stream) {
  MemoryResource::Impl* impl = mr.impl();
  if (!impl) [[unlikely]]
    throw std::logic_error("MemoryResource::allocate: the memory resource is empty");
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
  if (mapped_) throw MappedResourceError("Cannot allocate from a mapped IPC-enabled memory resource");
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
  return a;
}

PoolImpl& pool_of(const MemoryResource& mr) { return static_cast<PoolImpl&>(*mr.impl()); }

}  // namespace
}  // namespace detail

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
      s->default_resource_owner =
          std::make_shared<detail::PoolImpl>(detail::adopt_pool(pool), device.ordinal(), false, false);
      s->default_resource = MemoryResource(detail::immortal_alias(s->default_resource_owner));
      s->memory_resource_ready.store(true, std::memory_order_release);
    });
  }
  static_cast<MemoryResource&>(*this) = s->default_resource;
}

DeviceMemoryResource::DeviceMemoryResource(int device_id, const DeviceMemoryResourceOptions& options)
    : DeviceMemoryResource(Device(device_id), options) {}

DeviceMemoryResource::DeviceMemoryResource(const Device& device, const DeviceMemoryResourceOptions& options) {
  impl_ = detail::make_pool(CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal(), options.max_size, options.ipc_enabled);
}

DeviceMemoryResource DeviceMemoryResource::from_handle(CUmemoryPool pool, int device_id) {
  if (!pool) throw std::invalid_argument("DeviceMemoryResource::from_handle: pool is null");
  (void)Device(device_id);  // validates the ordinal
  DeviceMemoryResource mr;
  mr.impl_ = std::make_shared<detail::PoolImpl>(detail::adopt_pool(pool), device_id, false, false);
  return mr;
}

CUmemoryPool DeviceMemoryResource::handle() const noexcept { return detail::pool_of(*this).pool_; }
MemoryPoolAttributes DeviceMemoryResource::attributes() const { return detail::pool_attributes(handle()); }
bool DeviceMemoryResource::is_ipc_enabled() const noexcept { return detail::pool_of(*this).ipc_; }
bool DeviceMemoryResource::owns_pool() const noexcept { return detail::pool_of(*this).box_->owned; }

void DeviceMemoryResource::trim_to(std::size_t min_bytes_to_keep) const {
  check(driver().cuMemPoolTrimTo(handle(), min_bytes_to_keep), "cuMemPoolTrimTo");
}

// ---- Pinned host memory ----------------------------------------------------

PinnedMemoryResource::PinnedMemoryResource(const PinnedMemoryResourceOptions& options) {
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuMemPoolCreate), 12060,
                  "PinnedMemoryResource (host-located memory pools)");
  // Sharing needs a host pool on a NUMA node: the current device's.
  CUmemLocationType location = CU_MEM_LOCATION_TYPE_HOST;
  int numa_id = 0;
  if (options.ipc_enabled) {
    location = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    numa_id = std::max(0, Device().properties().attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID));
  }
  auto impl = detail::make_pool(location, numa_id, options.max_size, options.ipc_enabled);
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

CUmemoryPool PinnedMemoryResource::handle() const noexcept { return detail::pool_of(*this).pool_; }
MemoryPoolAttributes PinnedMemoryResource::attributes() const { return detail::pool_attributes(handle()); }

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
  ManagedImpl(int device, unsigned flags) : device_(device), flags_(flags) {}
  CUdeviceptr allocate(std::size_t size, StreamRef) override {
    ScopedContext scope(device_ >= 0 ? Device(device_).context().handle() : current_context_or_device0().handle());
    CUdeviceptr p = 0;
    check(driver().cuMemAllocManaged(&p, size, flags_), "cuMemAllocManaged");
    return p;
  }
  void deallocate(CUdeviceptr ptr, std::size_t, StreamRef stream) override {
    stream.sync();
    check(driver().cuMemFree(ptr), "cuMemFree");
  }
  bool is_device_accessible() const noexcept override { return true; }
  bool is_host_accessible() const noexcept override { return true; }
  int device_id() const noexcept override { return device_; }
  bool is_managed() const noexcept override { return true; }

 private:
  int device_;
  unsigned flags_;
};

}  // namespace
}  // namespace detail

LegacyPinnedMemoryResource::LegacyPinnedMemoryResource() {
  impl_ = std::make_shared<detail::LegacyPinnedImpl>();
}

ManagedMemoryResource::ManagedMemoryResource(const ManagedMemoryResourceOptions& options) {
  impl_ = std::make_shared<detail::ManagedImpl>(-1, options.attach_global ? CU_MEM_ATTACH_GLOBAL : CU_MEM_ATTACH_HOST);
}

ManagedMemoryResource::ManagedMemoryResource(const Device& device, const ManagedMemoryResourceOptions& options) {
  impl_ = std::make_shared<detail::ManagedImpl>(device.ordinal(),
                                                options.attach_global ? CU_MEM_ATTACH_GLOBAL : CU_MEM_ATTACH_HOST);
}

}  // namespace cucore
