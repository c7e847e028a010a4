#include <cucore/virtual_memory.hpp>

#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "handles/buffer_handles.hpp"
#include "handles/vmm_handles.hpp"
#include "loader/driver.hpp"
#include "runtime/device_state.hpp"

namespace cucore {

using detail::check;
using detail::driver;

namespace detail {
namespace {

std::size_t align_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

CUmemAccess_flags access_flags(VirtualMemoryAccess a) {
  switch (a) {
    case VirtualMemoryAccess::read: return CU_MEM_ACCESS_FLAGS_PROT_READ;
    case VirtualMemoryAccess::read_write: return CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    default: return CU_MEM_ACCESS_FLAGS_PROT_NONE;
  }
}

CUmemLocationType location_type(VirtualMemoryLocationType t) {
  switch (t) {
    case VirtualMemoryLocationType::host: return CU_MEM_LOCATION_TYPE_HOST;
    case VirtualMemoryLocationType::host_numa: return CU_MEM_LOCATION_TYPE_HOST_NUMA;
    case VirtualMemoryLocationType::host_numa_current: return CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    default: return CU_MEM_LOCATION_TYPE_DEVICE;
  }
}

class VmmImpl final : public MemoryResource::Impl {
 public:
  VmmImpl(int device, VirtualMemoryResourceOptions options) : device_(device), options_(std::move(options)) {
    prop_.type = options_.allocation_type == VirtualMemoryAllocationType::managed ? CU_MEM_ALLOCATION_TYPE_MANAGED
                                                                                    : CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = location_type(options_.location_type);
    prop_.location.id = on_device() ? device_ : 0;
    switch (options_.handle_type) {
      case VirtualMemoryHandleType::posix_fd: prop_.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; break;
      case VirtualMemoryHandleType::fabric: prop_.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC; break;
      default: prop_.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE; break;
    }
    prop_.allocFlags.gpuDirectRDMACapable = options_.gpu_direct_rdma ? 1 : 0;
  }

  bool on_device() const noexcept { return options_.location_type == VirtualMemoryLocationType::device; }
  const VirtualMemoryResourceOptions& options() const noexcept { return options_; }

  std::size_t granularity(VirtualMemoryGranularity kind) const {
    std::size_t g = 0;
    check(driver().cuMemGetAllocationGranularity(&g, &prop_,
                                                 kind == VirtualMemoryGranularity::minimum
                                                     ? CU_MEM_ALLOC_GRANULARITY_MINIMUM
                                                     : CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
          "cuMemGetAllocationGranularity");
    if (g == 0) throw RuntimeError("cuMemGetAllocationGranularity reported a granularity of 0");
    return g;
  }

  CUdeviceptr allocate(std::size_t size, StreamRef) override {
    ScopedContext scope(context());
    const std::size_t gran = granularity(options_.granularity);
    const std::size_t aligned = align_up(size, gran);
    auto box = std::make_shared<VmmAllocationBox>();  // releases what is recorded in it, also on failure
    PhysicalAllocation memory(aligned, prop_);
    CUdeviceptr ptr = 0;
    check(driver().cuMemAddressReserve(&ptr, aligned, alignment(gran), options_.addr_hint, 0), "cuMemAddressReserve");
    box->reservations.push_back({ptr, aligned});
    map(*box, ptr, aligned, memory.handle());
    set_access(box->mappings.back());
    std::lock_guard lock(mutex_);
    live_[ptr] = std::move(box);
    return ptr;
  }

  void deallocate(CUdeviceptr ptr, std::size_t, StreamRef stream) override {
    stream.sync();  // not stream-ordered: the stream's work on it finishes first
    std::shared_ptr<VmmAllocationBox> box;
    {
      std::lock_guard lock(mutex_);
      auto it = live_.find(ptr);
      if (it == live_.end())
        throw InvalidArgumentError("VirtualMemoryResource::deallocate: the pointer was not allocated here");
      box = std::move(it->second);
      live_.erase(it);
    }
    // box goes here: unmapped and freed
  }

  // Grows the allocation at `ptr` (mapped_bytes() < new_total); returns its
  // (possibly new) address. The old address stays valid until `before_move`
  // returns, which the caller uses to wait for work still using it.
  template <typename BeforeMove>
  CUdeviceptr grow(CUdeviceptr ptr, std::size_t new_size, BeforeMove&& before_move) {
    std::shared_ptr<VmmAllocationBox> box = find(ptr);
    ScopedContext scope(context());
    const std::size_t gran = granularity(options_.granularity);
    const std::size_t mapped = box->mapped_bytes();
    const std::size_t total = align_up(new_size, gran);
    const std::size_t extra = total - mapped;
    PhysicalAllocation memory(extra, prop_);
    const DriverTable& d = driver();

    // In place: reserve the addresses right after the allocation.
    const CUdeviceptr want = box->base() + mapped;
    CUdeviceptr got = 0;
    check(d.cuMemAddressReserve(&got, extra, alignment(gran), want, 0), "cuMemAddressReserve");
    if (got == want) {
      VmmAllocationBox added;  // what this step made, undone if a later step fails
      added.reservations.push_back({got, extra});
      map(added, got, extra, memory.handle());
      set_access(added.mappings.back());
      std::lock_guard lock(mutex_);
      box->reservations.push_back(added.reservations.back());
      box->mappings.push_back(added.mappings.back());
      added.reservations.clear();
      added.mappings.clear();
      return ptr;
    }
    d.cuMemAddressFree(got, extra);

    // Elsewhere: map the same physical memory into a new, larger reservation
    // (the old mappings stay until it all worked), then drop the old range.
    auto moved = std::make_shared<VmmAllocationBox>();
    CUdeviceptr base = 0;
    check(d.cuMemAddressReserve(&base, total, alignment(gran), 0, 0), "cuMemAddressReserve");
    moved->reservations.push_back({base, total});
    std::size_t offset = 0;
    for (const VaRange& m : box->mappings) {
      CUmemGenericAllocationHandle h = 0;
      check(d.cuMemRetainAllocationHandle(&h, reinterpret_cast<void*>(m.ptr)), "cuMemRetainAllocationHandle");
      const CUresult r = d.cuMemMap(base + offset, m.size, 0, h, 0);
      d.cuMemRelease(h);
      check(r, "cuMemMap");
      moved->mappings.push_back({base + offset, m.size});
      offset += m.size;
    }
    map(*moved, base + offset, extra, memory.handle());
    for (const VaRange& m : moved->mappings) set_access(m);
    before_move();
    {
      std::lock_guard lock(mutex_);
      live_.erase(ptr);
      live_[base] = std::move(moved);
    }
    return base;  // the old box goes with `box`: the old range is unmapped and freed
  }

  std::size_t mapped_bytes(CUdeviceptr ptr) const { return find(ptr)->mapped_bytes(); }

  bool is_device_accessible() const noexcept override { return on_device(); }
  bool is_host_accessible() const noexcept override { return !on_device(); }
  int device_id() const noexcept override { return on_device() ? device_ : -1; }
  bool is_managed() const noexcept override {
    return options_.allocation_type == VirtualMemoryAllocationType::managed;
  }

 private:
  CUcontext context() const {
    return on_device() ? Device(device_).context().handle() : current_context_or_device0().handle();
  }
  std::size_t alignment(std::size_t gran) const { return options_.addr_align ? options_.addr_align : gran; }

  std::shared_ptr<VmmAllocationBox> find(CUdeviceptr ptr) const {
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end())
      throw InvalidArgumentError("VirtualMemoryResource: the buffer's memory was not allocated by this resource");
    return it->second;
  }

  static void map(VmmAllocationBox& box, CUdeviceptr at, std::size_t size, CUmemGenericAllocationHandle h) {
    check(driver().cuMemMap(at, size, 0, h, 0), "cuMemMap");
    box.mappings.push_back({at, size});
  }

  void set_access(const VaRange& range) const {
    CUmemAccessDesc descs[1 + 64];
    std::size_t n = 0;
    if (options_.self_access != VirtualMemoryAccess::none) {
      descs[n].location = prop_.location;
      descs[n].flags = access_flags(options_.self_access);
      ++n;
    }
    if (options_.peer_access != VirtualMemoryAccess::none)
      for (int peer : options_.peers) {
        descs[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        descs[n].location.id = peer;
        descs[n].flags = access_flags(options_.peer_access);
        ++n;
      }
    if (n) check(driver().cuMemSetAccess(range.ptr, range.size, descs, n), "cuMemSetAccess");
  }

  int device_;
  VirtualMemoryResourceOptions options_;
  CUmemAllocationProp prop_{};
  mutable std::mutex mutex_;
  std::unordered_map<CUdeviceptr, std::shared_ptr<VmmAllocationBox>> live_;
};

VmmImpl& vmm_of(const MemoryResource& mr) { return static_cast<VmmImpl&>(*mr.impl()); }

void require_attribute(const Device& device, CUdevice_attribute attribute, const std::string& feature,
                       const std::string& requirement) {
  if (!device.properties().attribute(attribute)) throw FeatureUnavailableError(feature, requirement);
}

}  // namespace
}  // namespace detail

VirtualMemoryResource::VirtualMemoryResource(int device_id, const VirtualMemoryResourceOptions& options)
    : VirtualMemoryResource(Device(device_id), options) {}

VirtualMemoryResource::VirtualMemoryResource(const Device& device, const VirtualMemoryResourceOptions& options) {
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuMemCreate), 10020, "VirtualMemoryResource (cuMemCreate)");
  const std::string dev = "device " + std::to_string(device.ordinal());
  detail::require_attribute(device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                            "VirtualMemoryResource on " + dev, "a device that supports virtual memory management");
  if (options.handle_type == VirtualMemoryHandleType::posix_fd)
    detail::require_attribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                              "VirtualMemoryResource handle_type posix_fd on " + dev,
                              "a device that exports memory as POSIX file descriptors");
  if (options.handle_type == VirtualMemoryHandleType::fabric)
    detail::require_attribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
                              "VirtualMemoryResource handle_type fabric on " + dev,
                              "a device that exports memory as fabric handles (NVLink fabric / IMEX)");
  if (options.gpu_direct_rdma)
    detail::require_attribute(device, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                              "VirtualMemoryResource gpu_direct_rdma on " + dev,
                              "a device that supports GPUDirect RDMA with virtual memory");
  if (options.allocation_type == VirtualMemoryAllocationType::managed)
    detail::require(reinterpret_cast<const void*>(d.cuMemCreate), 13000,
                    "VirtualMemoryResource allocation_type managed");
  if (options.addr_align & (options.addr_align - 1))
    throw InvalidArgumentError("VirtualMemoryResource: addr_align " + std::to_string(options.addr_align) +
                                " is not a power of two");
  if (options.peers.size() > 64) throw InvalidArgumentError("VirtualMemoryResource: more than 64 peers");
  for (int peer : options.peers) {
    const Device p(peer);  // std::out_of_range for a device that does not exist
    if (peer == device.ordinal())
      throw InvalidArgumentError("VirtualMemoryResource: peers lists the owning device " + std::to_string(peer));
    if (!device.can_access_peer(p))
      throw InvalidArgumentError("VirtualMemoryResource: device " + std::to_string(peer) +
                                  " cannot access device " + std::to_string(device.ordinal()) + "'s memory");
  }
  impl_ = std::make_shared<detail::VmmImpl>(device.ordinal(), options);
}

const VirtualMemoryResourceOptions& VirtualMemoryResource::options() const noexcept {
  return detail::vmm_of(*this).options();
}

std::size_t VirtualMemoryResource::granularity() const {
  return granularity(detail::vmm_of(*this).options().granularity);
}

std::size_t VirtualMemoryResource::granularity(VirtualMemoryGranularity kind) const {
  return detail::vmm_of(*this).granularity(kind);
}

void VirtualMemoryResource::modify_allocation(Buffer& buffer, std::size_t new_size) const {
  buffer.require_open("VirtualMemoryResource::modify_allocation");
  if (buffer.resource_impl() != impl_.get())
    throw InvalidArgumentError("VirtualMemoryResource::modify_allocation: the buffer was not allocated by this resource");
  if (new_size <= buffer.size_) return;
  // Growing may move the memory: only the one holder of its box may (a graph
  // that holds it too keeps the address it was given).
  if (buffer.box_.use_count() != 1)
    throw InvalidArgumentError(
        "VirtualMemoryResource::modify_allocation: the buffer's memory is held elsewhere too (Buffer::box())");
  detail::BufferBox& box = *buffer.box_;
  auto& impl = detail::vmm_of(*this);
  if (new_size > impl.mapped_bytes(box.ptr))  // else the granularity's slack already holds it
    box.ptr = impl.grow(box.ptr, new_size, [&] { buffer.stream().sync(); });
  box.size = new_size;
  buffer.ptr_ = box.ptr;
  buffer.size_ = new_size;
}

}  // namespace cucore
