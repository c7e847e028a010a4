#pragma once
// How the parallel algorithms are built and where temporary storage comes from.
//
// Each algorithm object (Reduce, InclusiveScan, ...) generates a small CUDA C++
// translation unit that instantiates CUB's kernels for its types, operator and
// iterators, compiles it with NVRTC to LTO-IR for the device's architecture,
// links it (with any user operator's LTO-IR) by nvJitLink keeping only the
// table the host reads, and loads it (without nvJitLink, NVRTC's own cubin).
// Compilation goes through a program cache (by default the process's memory +
// disk cache), so a second process finds the kernels on disk. The host side
// runs CUB's dispatch logic with CUB's tuning for the architecture, read from
// the compiled code itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include <cucore/memory.hpp>

namespace cucore {
class ProgramCache;
}

namespace cucore::compute {

struct BuildOptions {
  // "sm_90" to build for; empty: the device current at construction (device 0
  // when none is). A call on a device of another architecture builds for it then.
  std::string arch{};
  // Where compiled kernels are kept; nullptr: default_program_cache() (memory +
  // disk). The cache must outlive the algorithm objects built through it.
  ProgramCache* cache = nullptr;
};

// Options of the one-shot functions (reduce(), inclusive_scan(), ...).
struct CallOptions {
  BuildOptions build{};
  // Temporary storage comes from here, on the call's stream; empty: the
  // device's default memory pool.
  MemoryResource memory_resource{};
};

// The one-shot functions keep their algorithm objects in a per-process cache
// (keyed by algorithm, types, operators and iterator kinds); 16 threads asking
// for the same one build it once.
struct BuildCacheStats {
  std::uint64_t hits = 0, builds = 0, waits = 0;  // waits: calls that waited for another thread's build
  std::size_t entries = 0;
};
BuildCacheStats build_cache_stats();
void clear_build_cache();  // objects in use stay valid

// The CCCL version the kernels are built from ("3.0.1"), read from its headers.
std::string cccl_version();

}  // namespace cucore::compute
