#pragma once
// A fake driver table for fault injection on machines without a GPU. Installing
// a FakeDriver routes every cucore driver call through `table`, whose entries
// default to a plausible single-GPU machine (an H200-like device 0) with host
// memory standing in for device memory. Tests override single entries
// (captureless lambdas) to inject failures. Only one FakeDriver at a time.
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

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
  static inline std::mutex live_mutex;
  static inline std::map<std::uintptr_t, std::size_t> live;  // fake allocations

  static void reset_counters();
};

}  // namespace cucore::test
