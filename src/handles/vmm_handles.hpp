#pragma once
// The box of one VirtualMemoryResource allocation (handles.hpp's rules): the
// address ranges it reserved and the physical memory it mapped into them. The
// physical handles (PhysicalAllocation) are released as soon as they are
// mapped (a mapping keeps its memory), so unmapping every mapping and freeing
// every reservation, as the destructor does, returns everything.
#include <cuda.h>

#include <cstddef>
#include <vector>

namespace cucore::detail {

// One physical allocation (cuMemCreate), released (cuMemRelease) when it
// goes, also when the mapping that was to use it fails.
class PhysicalAllocation {
 public:
  PhysicalAllocation(std::size_t size, const CUmemAllocationProp& prop);  // cuMemCreate, CudaError if refused
  ~PhysicalAllocation();
  PhysicalAllocation(const PhysicalAllocation&) = delete;
  PhysicalAllocation& operator=(const PhysicalAllocation&) = delete;
  CUmemGenericAllocationHandle handle() const noexcept { return h_; }

 private:
  CUmemGenericAllocationHandle h_ = 0;
};

struct VaRange {
  CUdeviceptr ptr = 0;
  std::size_t size = 0;
};

struct VmmAllocationBox {
  std::vector<VaRange> reservations;  // each as cuMemAddressReserve gave it
  std::vector<VaRange> mappings;      // each as one cuMemMap made it, in address order
  VmmAllocationBox() = default;
  VmmAllocationBox(const VmmAllocationBox&) = delete;
  VmmAllocationBox& operator=(const VmmAllocationBox&) = delete;
  ~VmmAllocationBox();  // cuMemUnmap each mapping, cuMemAddressFree each reservation

  CUdeviceptr base() const noexcept { return mappings.empty() ? 0 : mappings.front().ptr; }
  std::size_t mapped_bytes() const noexcept {
    std::size_t n = 0;
    for (const VaRange& m : mappings) n += m.size;
    return n;
  }
};

}  // namespace cucore::detail
