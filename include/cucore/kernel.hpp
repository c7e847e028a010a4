#pragma once
// A kernel taken from a loaded ObjectCode (ObjectCode::get_kernel). Kernel is a
// cheap copyable handle; every copy keeps the library it came from loaded.
// Its facts (parameter layout, per-device attributes) are read from the driver
// once and cached, so launching it costs no extra driver calls.
#include <cucore/errors.hpp>
#include <cuda.h>

#include <concepts>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace cucore {

class Device;
class StreamRef;
struct LaunchConfig;

namespace detail {
struct KernelInfo;
}

// Where one parameter sits in the kernel's device-side parameter block.
struct ParamInfo {
  std::size_t offset = 0;
  std::size_t size = 0;
  friend bool operator==(const ParamInfo&, const ParamInfo&) = default;
};

// The kernel's attributes on one device (cuda.core's KernelAttributes, bound
// to a device). Read-only figures are cached after the first read; the
// settable ones are read fresh each time.
class KernelAttributes {
 public:
  int device_id() const noexcept { return device_; }

  int max_threads_per_block() const;  // the kernel's own limit (registers, launch bounds)
  int shared_size_bytes() const;      // static __shared__ bytes
  int const_size_bytes() const;
  int local_size_bytes() const;  // per thread
  int num_regs() const;          // per thread
  int ptx_version() const;       // 90 for compute_90
  int binary_version() const;    // 90 for sm_90
  bool cache_mode_ca() const;    // compiled with -Xptxas --dlcm=ca
  // Dynamic shared memory a launch may ask for (48 KB unless raised; up to the
  // device's opt-in maximum minus the static shared memory).
  int max_dynamic_shared_size_bytes() const;
  void set_max_dynamic_shared_size_bytes(int bytes) const;
  int preferred_shared_memory_carveout() const;  // percent of the unified L1/shared memory
  void set_preferred_shared_memory_carveout(int percent) const;
  bool cluster_size_must_be_set() const;
  int required_cluster_width() const;
  int required_cluster_height() const;
  int required_cluster_depth() const;
  bool non_portable_cluster_size_allowed() const;
  void set_non_portable_cluster_size_allowed(bool allowed) const;
  int cluster_scheduling_policy_preference() const;  // a CUclusterSchedulingPolicy
  void set_cluster_scheduling_policy_preference(int policy) const;

  // Any attribute by its CUfunction_attribute (not cached).
  int get(CUfunction_attribute attribute) const;
  void set(CUfunction_attribute attribute, int value) const;

 private:
  friend class Kernel;
  KernelAttributes(std::shared_ptr<detail::KernelInfo> info, int device) noexcept
      : info_(std::move(info)), device_(device) {}
  int cached(CUfunction_attribute attribute) const;
  std::shared_ptr<detail::KernelInfo> info_;
  int device_;
};

struct MaxPotentialBlockSize {
  int min_grid_size = 0;   // blocks needed to reach the maximum occupancy
  int max_block_size = 0;  // the block size that reaches it
};

// Occupancy figures for the kernel on one device (cuda.core's KernelOccupancy).
// Each call asks the driver (in the device's primary context).
class KernelOccupancy {
 public:
  int device_id() const noexcept { return device_; }

  int max_active_blocks_per_multiprocessor(int block_size, std::size_t dynamic_shared_memory_size) const;
  // block_size_limit 0: the kernel's and device's own limit. (A template, so
  // a literal 0 means bytes, not a null function.)
  template <std::integral Bytes>
  MaxPotentialBlockSize max_potential_block_size(Bytes dynamic_shared_memory_needed, int block_size_limit = 0) const {
    if constexpr (std::is_signed_v<Bytes>) {
      if (dynamic_shared_memory_needed < 0) throw InvalidArgumentError("max_potential_block_size: negative shared memory size");
    }
    return potential_block_size(nullptr, static_cast<std::size_t>(dynamic_shared_memory_needed), block_size_limit);
  }
  // Dynamic shared memory that depends on the block size: bytes = fn(block_size).
  MaxPotentialBlockSize max_potential_block_size(CUoccupancyB2DSize dynamic_shared_memory_for_block,
                                                 int block_size_limit = 0) const;
  std::size_t available_dynamic_shared_memory_per_block(int num_blocks_per_multiprocessor, int block_size) const;
  // For `config` (its cluster is ignored by the first, used by the second);
  // `stream` (optional) is where the launch would go.
  int max_potential_cluster_size(const LaunchConfig& config) const;
  int max_potential_cluster_size(const LaunchConfig& config, StreamRef stream) const;
  int max_active_clusters(const LaunchConfig& config) const;
  int max_active_clusters(const LaunchConfig& config, StreamRef stream) const;

 private:
  friend class Kernel;
  KernelOccupancy(std::shared_ptr<detail::KernelInfo> info, int device) noexcept
      : info_(std::move(info)), device_(device) {}
  int cluster_query(const LaunchConfig& config, CUstream stream, bool potential_size) const;
  MaxPotentialBlockSize potential_block_size(CUoccupancyB2DSize fn, std::size_t bytes, int block_size_limit) const;
  std::shared_ptr<detail::KernelInfo> info_;
  int device_;
};

class Kernel {
 public:
  Kernel() = default;  // empty: launching it throws

  // Adopts a CUkernel cucore did not load (not unloaded by cucore; the caller
  // keeps its library loaded). `name` is for messages.
  static Kernel from_handle(CUkernel handle, std::string name = {});

  CUkernel handle() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  // The name it was asked for (a name expression such as "scale<float>", or
  // the symbol), and the symbol in the image (mangled for C++ kernels).
  const std::string& name() const;
  const std::string& mangled_name() const;

  // Attributes and occupancy on a device: the current one (Device()) by default.
  KernelAttributes attributes() const;
  KernelAttributes attributes(int device_id) const;
  KernelAttributes attributes(const Device& device) const;
  KernelOccupancy occupancy() const;
  KernelOccupancy occupancy(int device_id) const;
  KernelOccupancy occupancy(const Device& device) const;

  // The parameter layout (cuKernelGetParamInfo, CUDA 12.4 drivers and newer),
  // read once and kept; launch() checks arguments against it.
  std::size_t num_arguments() const;
  const std::vector<ParamInfo>& arguments_info() const;

  // Internal: the cached per-kernel facts (ObjectCode builds Kernels from them).
  explicit Kernel(std::shared_ptr<detail::KernelInfo> info) noexcept;
  detail::KernelInfo* info() const noexcept { return info_.get(); }

  friend bool operator==(const Kernel& a, const Kernel& b) noexcept { return a.handle_ == b.handle_; }

 private:
  void require_valid(const char* what) const;
  std::shared_ptr<detail::KernelInfo> info_;  // shares ownership of the ObjectCode's state
  CUkernel handle_ = nullptr;
};

// A kernel with its C++ signature known at compile time, e.g.
//   TypedKernel<void(float, const float*, const float*, float*, int)> saxpy(kernel);
// The constructor checks the signature against the kernel's parameter layout
// once (std::invalid_argument on a mismatch); launch(stream, config, saxpy, ...)
// then converts each argument to its parameter type and rejects at compile
// time, with a static_assert naming the rule, what does not fit (launch.hpp):
// a const Buffer or a DeviceSpan<const T> bound to a writable pointer, a
// DeviceSpan of another element type, a narrowing conversion (double -> float,
// size_t -> int). Nothing is checked per launch.
template <typename Signature>
class TypedKernel;

template <typename... Params>
class TypedKernel<void(Params...)> {
 public:
  explicit TypedKernel(Kernel kernel);
  const Kernel& kernel() const noexcept { return kernel_; }
  CUkernel handle() const noexcept { return kernel_.handle(); }

 private:
  Kernel kernel_;
};

namespace detail {
// Checks `sizes` (one per parameter) against the kernel's layout; throws
// std::invalid_argument naming the kernel and the first mismatch.
void check_signature(const Kernel& kernel, const std::size_t* sizes, const char* const* type_names, std::size_t n);
}  // namespace detail

template <typename... Params>
TypedKernel<void(Params...)>::TypedKernel(Kernel kernel) : kernel_(std::move(kernel)) {
  static_assert(((std::is_trivially_copyable_v<Params> && !std::is_reference_v<Params>) && ...),
                "TypedKernel: kernel parameters are trivially copyable values (scalars, pointers, structs)");
  constexpr std::size_t n = sizeof...(Params);
  const std::size_t sizes[n ? n : 1] = {sizeof(Params)...};
  const char* const names[n ? n : 1] = {typeid(Params).name()...};
  detail::check_signature(kernel_, sizes, names, n);
}

}  // namespace cucore
