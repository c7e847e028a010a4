#pragma once
// Where memory lives, or is advised, prefetched or hinted to: a device, or the
// host (any NUMA node, a given node, or the calling thread's). cuda.core spells
// these Device(n), Host(), Host(numa_id=n) and Host.numa_current().
#include <cuda.h>

namespace cucore {

class Device;

struct Location {
  enum class Kind { device, host, host_numa, host_numa_current };
  Kind kind = Kind::host;
  int id = 0;  // the device ordinal or the NUMA node

  static Location device(int ordinal) noexcept { return {Kind::device, ordinal}; }
  static Location device(const Device& device) noexcept;
  static Location host() noexcept { return {Kind::host, 0}; }
  static Location host_numa(int node) noexcept { return {Kind::host_numa, node}; }
  static Location host_numa_current() noexcept { return {Kind::host_numa_current, 0}; }

  CUmemLocation to_driver() const noexcept;
  friend bool operator==(const Location&, const Location&) = default;
};

}  // namespace cucore
