#include "handles/vmm_handles.hpp"

#include <cucore/errors.hpp>

#include "errors/release.hpp"
#include "loader/driver.hpp"

namespace cucore::detail {

PhysicalAllocation::PhysicalAllocation(std::size_t size, const CUmemAllocationProp& prop) {
  check(driver().cuMemCreate(&h_, size, &prop, 0), "cuMemCreate");
}

PhysicalAllocation::~PhysicalAllocation() {
  if (!h_) return;
  if (const DriverTable* t = g_driver.load(std::memory_order_acquire))
    report_release(t->cuMemRelease(h_), "cuMemRelease");
}

VmmAllocationBox::~VmmAllocationBox() {
  const DriverTable* t = g_driver.load(std::memory_order_acquire);
  if (!t) return;  // no driver table: left to the process's end, as every release
  for (const VaRange& m : mappings) report_release(t->cuMemUnmap(m.ptr, m.size), "cuMemUnmap");
  for (const VaRange& r : reservations) report_release(t->cuMemAddressFree(r.ptr, r.size), "cuMemAddressFree");
}

}  // namespace cucore::detail
