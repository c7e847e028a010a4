#pragma once
// Shared by launch.cpp and kernel.cpp (occupancy queries take a launch config).
#include <cuda.h>

#include <string>
#include <typeinfo>

#include <cucore/launch.hpp>

#include "errors/demangle.hpp"

namespace cucore::detail {

// A CUlaunchConfig and the attributes it points at (so: filled in place, never copied).
struct NativeLaunchConfig {
  CUlaunchConfig config;
  CUlaunchAttribute attrs[3];
  NativeLaunchConfig() = default;
  NativeLaunchConfig(const NativeLaunchConfig&) = delete;
  NativeLaunchConfig& operator=(const NativeLaunchConfig&) = delete;
};

// Validates `cfg` (std::invalid_argument naming the field) and fills `out`:
// with a cluster, the grid counts clusters (cuda.core's convention), so the
// driver gets grid × cluster blocks and a cluster-dimension attribute.
void to_native(const LaunchConfig& cfg, CUstream stream, NativeLaunchConfig& out);

// The kernel's facts after the one argument check every launch makes (count
// and sizes against its layout): for graph kernel nodes, which launch later.
struct KernelInfo;
KernelInfo& checked_kernel(const Kernel& kernel, const ArgDesc* descs, std::size_t count);

// launch(stream, config, kernel, args) with programmatic stream serialization
// (compute capability 9.0+), for cucore's own kernels (cucore.compute), as CUB
// launches its kernels there: the grid may start once the previous kernel in
// the stream has triggered (griddepcontrol.launch_dependents) or exited, so it
// must run griddepcontrol.wait before touching memory that earlier work writes
// or reads. Not a LaunchConfig field: cuda.core 1.2's LaunchConfig has none.
void launch_programmatic(StreamRef stream, const LaunchConfig& config, const Kernel& kernel, const KernelArgs& args);

std::string type_display_name(const std::type_info* type);  // "double", "Buffer", "float const*"

}  // namespace cucore::detail
