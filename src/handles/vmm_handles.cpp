#include "handles/vmm_handles.hpp"

#include "loader/driver.hpp"

namespace cucore::detail {

VmmAllocationBox::~VmmAllocationBox() {
  const DriverTable* t = g_driver.load(std::memory_order_acquire);
  if (!t) return;  // no driver table: left to the process's end, as every release
  for (const VaRange& m : mappings) t->cuMemUnmap(m.ptr, m.size);
  for (const VaRange& r : reservations) t->cuMemAddressFree(r.ptr, r.size);
}

}  // namespace cucore::detail
