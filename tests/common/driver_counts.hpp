#pragma once
// DriverCounts: the real driver's table wrapped to count the driver objects
// made and released through it (streams, events, pools, libraries, pool
// allocations), for as long as it is installed. For GPU tests of ownership.
#include <atomic>
#include <string>

#include "loader/driver.hpp"

namespace cucore::test {

// Wraps the real driver's table and counts the driver objects made and
// released through it, for as long as it is installed.
class DriverCounts {
 public:
  DriverCounts() {
    real_ = &cucore::detail::driver();
    table_ = *real_;
    auto& t = table_;
    t.cuStreamCreate = [](CUstream* s, unsigned f) { return counted(real_->cuStreamCreate(s, f), streams, +1); };
    t.cuStreamCreateWithPriority = [](CUstream* s, unsigned f, int p) {
      return counted(real_->cuStreamCreateWithPriority(s, f, p), streams, +1);
    };
    t.cuStreamDestroy = [](CUstream s) { return counted(real_->cuStreamDestroy(s), streams, -1); };
    t.cuEventCreate = [](CUevent* e, unsigned f) { return counted(real_->cuEventCreate(e, f), events, +1); };
    t.cuEventDestroy = [](CUevent e) { return counted(real_->cuEventDestroy(e), events, -1); };
    t.cuMemPoolCreate = [](CUmemoryPool* p, const CUmemPoolProps* props) {
      return counted(real_->cuMemPoolCreate(p, props), pools, +1);
    };
    t.cuMemPoolDestroy = [](CUmemoryPool p) { return counted(real_->cuMemPoolDestroy(p), pools, -1); };
    t.cuLibraryLoadData = [](CUlibrary* l, const void* c, CUjit_option* jo, void** jv, unsigned jn,
                             CUlibraryOption* lo, void** lv, unsigned ln) {
      return counted(real_->cuLibraryLoadData(l, c, jo, jv, jn, lo, lv, ln), libraries, +1);
    };
    t.cuLibraryUnload = [](CUlibrary l) { return counted(real_->cuLibraryUnload(l), libraries, -1); };
    t.cuMemAllocFromPoolAsync = [](CUdeviceptr* p, size_t n, CUmemoryPool pool, CUstream s) {
      return counted(real_->cuMemAllocFromPoolAsync(p, n, pool, s), allocations, +1);
    };
    t.cuMemFreeAsync = [](CUdeviceptr p, CUstream s) { return counted(real_->cuMemFreeAsync(p, s), allocations, -1); };
    cucore::detail::set_driver_table_for_testing(&table_);
  }
  ~DriverCounts() { cucore::detail::set_driver_table_for_testing(nullptr); }
  DriverCounts(const DriverCounts&) = delete;
  DriverCounts& operator=(const DriverCounts&) = delete;

  // Live objects of each kind, and failed releases (a release of a dead handle fails).
  static inline std::atomic<long> streams{0}, events{0}, pools{0}, libraries{0}, allocations{0}, failures{0};
  static std::string summary() {
    return "streams " + std::to_string(streams) + ", events " + std::to_string(events) + ", pools " +
           std::to_string(pools) + ", libraries " + std::to_string(libraries) + ", allocations " +
           std::to_string(allocations) + ", failed calls " + std::to_string(failures);
  }

 private:
  static CUresult counted(CUresult r, std::atomic<long>& n, int delta) {
    if (r == CUDA_SUCCESS)
      n += delta;
    else
      ++failures;
    return r;
  }
  static inline const cucore::detail::DriverTable* real_ = nullptr;
  cucore::detail::DriverTable table_;
};

}  // namespace cucore::test
