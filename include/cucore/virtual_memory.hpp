#pragma once
// VirtualMemoryResource, as cuda.core's: memory made with the CUDA virtual
// memory management calls (cuMemCreate, cuMemAddressReserve, cuMemMap,
// cuMemSetAccess) rather than from a pool, so an allocation can grow:
// modify_allocation maps more physical memory right after it (same address)
// when the address space there is free, else remaps everything into a larger
// reservation (a new address; the contents stay, no copy). Each allocation's
// mappings and reservations live in one box that unmaps and frees them all.
// Allocation and free are synchronous (the free first waits for the buffer's
// stream).
#include <cstddef>
#include <vector>

#include <cucore/memory.hpp>

namespace cucore {

class Buffer;
class Device;

enum class VirtualMemoryHandleType { none, posix_fd, fabric };
enum class VirtualMemoryLocationType { device, host, host_numa, host_numa_current };
enum class VirtualMemoryGranularity { minimum, recommended };
enum class VirtualMemoryAccess { none, read, read_write };
enum class VirtualMemoryAllocationType { pinned, managed };

struct VirtualMemoryResourceOptions {
  VirtualMemoryAllocationType allocation_type = VirtualMemoryAllocationType::pinned;
  VirtualMemoryLocationType location_type = VirtualMemoryLocationType::device;
  // Exportable as a POSIX file descriptor (or a fabric handle, where the
  // device supports it: FeatureUnavailableError otherwise); none: not exportable.
  VirtualMemoryHandleType handle_type = VirtualMemoryHandleType::posix_fd;
  VirtualMemoryGranularity granularity = VirtualMemoryGranularity::recommended;
  bool gpu_direct_rdma = false;
  CUdeviceptr addr_hint = 0;     // where to try to reserve; 0: the driver chooses
  std::size_t addr_align = 0;    // 0: the granularity
  std::vector<int> peers{};        // other devices granted peer_access
  VirtualMemoryAccess self_access = VirtualMemoryAccess::read_write;
  VirtualMemoryAccess peer_access = VirtualMemoryAccess::read_write;
};

class VirtualMemoryResource : public MemoryResource {
 public:
  explicit VirtualMemoryResource(const Device& device, const VirtualMemoryResourceOptions& options = {});
  explicit VirtualMemoryResource(int device_id, const VirtualMemoryResourceOptions& options = {});

  const VirtualMemoryResourceOptions& options() const noexcept;
  // cuMemGetAllocationGranularity for this resource's allocations. Sizes are
  // rounded up to granularity(): a Buffer from allocate(n) has that size.
  std::size_t granularity() const;
  std::size_t granularity(VirtualMemoryGranularity kind) const;

  // Grows `buffer` (allocated here) to `new_size` bytes, keeping its contents:
  // in place when the addresses after it can be reserved, else at a new
  // address. A failure leaves the buffer as it was. A size not larger than the
  // buffer's changes nothing. A Buffer whose box is held elsewhere too
  // (Buffer::box()) is std::invalid_argument: its memory may have to move.
  void modify_allocation(Buffer& buffer, std::size_t new_size) const;
};

}  // namespace cucore
