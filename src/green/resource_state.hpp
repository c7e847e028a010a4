#pragma once
// What an SMResource holds: the driver's descriptors of its SMs and where they
// came from. Immutable once made; SMResource values share it.
#include <cuda.h>

#include <cucore/resources.hpp>

#include <cstdint>
#include <vector>

#include "handles/handles.hpp"

namespace cucore::detail {

struct SMResourceState {
  int device = -1;
  // What cuDevResourceGenerateDesc gets: one descriptor, or one per unit of a
  // group built from equal units (a split with different counts per group).
  std::vector<CUdevResource> parts;
  unsigned sm_count = 0;
  unsigned min_partition = 0;
  unsigned alignment = 0;
  unsigned flags = 0;
  unsigned requested = 0;    // the count asked for (groups of a split), else sm_count
  std::uint64_t split = 0;   // the groups and remainder of one split share a nonzero id
  bool usable = true;        // false for a dry run's results
  ContextHandle source;      // the green context it was read from, kept alive with it
};

// The SM fields of a driver descriptor. CUDA 13.1 adds `flags` after
// smCoscheduledAlignment; in 13.0's cuda.h those bytes are padding (zero).
unsigned sm_flags(const CUdevResource& r) noexcept;

}  // namespace cucore::detail
