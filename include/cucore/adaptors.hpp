#pragma once
// Memory-resource adaptors: each wraps any MemoryResource and is one itself,
// so they stack (a limit over statistics over a pool). Copies share state.
#include <cstddef>
#include <cstdint>

#include <cucore/memory.hpp>

namespace cucore {

struct AllocationCounts {
  std::int64_t current_bytes = 0, peak_bytes = 0, total_bytes = 0;
  std::int64_t current_count = 0, peak_count = 0, total_count = 0;
};

// Counts what passes through to `upstream`.
class StatisticsResourceAdaptor : public MemoryResource {
 public:
  explicit StatisticsResourceAdaptor(MemoryResource upstream);
  AllocationCounts counts() const;
  const MemoryResource& upstream() const;
};

// Refuses allocations that would take the bytes outstanding through it past
// `limit_bytes` (a CudaError with CUDA_ERROR_OUT_OF_MEMORY naming the limit);
// the adaptor stays usable.
class LimitingResourceAdaptor : public MemoryResource {
 public:
  LimitingResourceAdaptor(MemoryResource upstream, std::size_t limit_bytes);
  std::size_t allocated_bytes() const;
  std::size_t limit_bytes() const;
  const MemoryResource& upstream() const;
};

}  // namespace cucore
