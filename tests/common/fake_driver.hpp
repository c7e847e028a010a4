#pragma once
// A fake driver table for fault injection on machines without a GPU. Installing
// a FakeDriver routes every cucore driver call through `table`, whose entries
// default to a plausible single-GPU machine (an H200-like device 0) with host
// memory standing in for device memory. Tests override single entries
// (captureless lambdas) to inject failures. Only one FakeDriver at a time.
//
// The default entries keep a ledger of what is alive at the driver (streams,
// events, pools, allocations, libraries) and record as a violation every call
// that a real driver would fault on or that breaks cucore's ownership
// guarantees: a release of a handle that is not alive (twice, or never made),
// a use of a released handle (a free on a destroyed stream, a launch of a
// kernel whose library was unloaded), a pool destroyed with allocations still
// out, a closed Stream's handle reaching the driver. Ownership tests assert
// the ledger ends with nothing alive and no violation.
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "loader/driver.hpp"

namespace cucore::test {

class FakeDriver {
 public:
  FakeDriver();
  ~FakeDriver();
  FakeDriver(const FakeDriver&) = delete;
  FakeDriver& operator=(const FakeDriver&) = delete;

  detail::DriverTable table;  // edit before or after install; installed by the constructor

  // Counters and knobs shared with the default entries.
  static inline std::atomic<int> device_count{1};
  static inline std::atomic<int> pool_allocs{0};       // successful cuMemAllocFromPoolAsync calls
  static inline std::atomic<int> pool_frees{0};
  static inline std::atomic<int> fail_next_pool_allocs{0};  // that many allocations fail with OOM
  static inline std::atomic<int> streams_created{0};
  static inline std::atomic<int> streams_destroyed{0};
  static inline std::atomic<int> events_created{0};
  static inline std::atomic<int> events_destroyed{0};
  static inline std::atomic<int> pools_created{0};
  static inline std::atomic<int> pools_destroyed{0};
  static inline std::atomic<int> libraries_loaded{0};
  static inline std::atomic<int> libraries_unloaded{0};
  static inline std::atomic<int> primary_releases{0};  // cuDevicePrimaryCtxRelease calls (cucore makes none)

  // The ledger (guarded by live_mutex).
  struct Allocation {
    std::size_t size;
    CUmemoryPool pool;
  };
  static inline std::mutex live_mutex;
  static inline std::map<std::uintptr_t, Allocation> live;  // fake allocations
  static inline std::set<CUstream> live_streams;
  static inline std::set<CUevent> live_events;
  static inline std::set<CUmemoryPool> live_pools;
  static inline std::set<CUlibrary> live_libraries;
  static inline std::map<CUkernel, CUlibrary> kernel_library;
  static inline std::vector<std::string> violations;
  static inline std::vector<std::string> releases;  // "stream 0x..", "free 0x.. on 0x..", in call order

  static void reset_counters();
  // Nothing left alive at the driver and no violation: empty; else what is wrong.
  static std::string ledger_problems();
};

}  // namespace cucore::test
