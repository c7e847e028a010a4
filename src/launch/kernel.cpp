// Kernel, its attributes and occupancy. Everything here is off the launch hot
// path: facts are read once and cached in KernelInfo, which launch.cpp reads.
#include <cucore/kernel.hpp>

#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/launch.hpp>
#include <cucore/stream.hpp>

#include <stdexcept>
#include <string>

#include "launch/kernel_info.hpp"
#include "launch/launch_internal.hpp"
#include "loader/driver.hpp"

namespace cucore {
namespace detail {

std::string type_display_name(const std::type_info* type) {
  if (!type) return "?";
  if (*type == typeid(Buffer)) return "Buffer";
  std::string s = demangle(type->name());
  if (s == "decltype(nullptr)") return "nullptr";
  return s;
}

void KernelInfo::load_params() {
  std::call_once(params_once, [this] {
    const DriverTable& d = driver();
    if (!d.cuKernelGetParamInfo || d.version < 12040) {
      params_known = false;  // an old driver cannot tell: launches go unchecked
    } else {
      auto read_all = [&](std::vector<ParamInfo>& out) -> CUresult {
        out.clear();
        // The layout ends where the driver says the index is out of range. A
        // kernel's parameters take at most 32764 bytes, so at most as many.
        for (std::size_t i = 0; i <= 32764; ++i) {
          std::size_t offset = 0, size = 0;
          CUresult r = d.cuKernelGetParamInfo(handle, i, &offset, &size);
          if (r == CUDA_ERROR_INVALID_VALUE) return CUDA_SUCCESS;
          if (r != CUDA_SUCCESS) return r;
          out.push_back({offset, size});
        }
        throw RuntimeError("cuKernelGetParamInfo: kernel " + name + " reports more parameters than a kernel can have");
      };
      std::vector<ParamInfo> layout;
      CUresult r = read_all(layout);
      if (r == CUDA_ERROR_INVALID_CONTEXT) {
        // Should a driver want a context for it, use the current device's.
        ScopedContext scope(Device().context().handle());
        r = read_all(layout);
      }
      check(r, "cuKernelGetParamInfo");
      params = std::move(layout);
      params_known = true;
    }
    params_ready.store(true, std::memory_order_release);
  });
}

int kernel_attribute(KernelInfo& info, int device, CUfunction_attribute attribute, bool cache) {
  if (cache) {
    std::lock_guard lock(info.mutex);
    if (auto it = info.attributes.find({device, int(attribute)}); it != info.attributes.end()) return it->second;
  }
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuKernelGetAttribute), 12000, "kernel attributes (cuKernelGetAttribute)");
  Device dev(device);
  // With lazy loading the kernel reaches a device through its primary context.
  ScopedContext scope(dev.context().handle());
  int value = 0;
  check(d.cuKernelGetAttribute(&value, attribute, info.handle, dev.handle()), "cuKernelGetAttribute");
  if (cache) {
    std::lock_guard lock(info.mutex);
    info.attributes[{device, int(attribute)}] = value;
  }
  return value;
}

CUfunction kernel_function_in_current_context(const KernelInfo& info) {
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuKernelGetFunction), 12000, "cuKernelGetFunction");
  CUfunction f = nullptr;
  check(d.cuKernelGetFunction(&f, info.handle), "cuKernelGetFunction");
  return f;
}

void check_signature(const Kernel& kernel, const std::size_t* sizes, const char* const* type_names, std::size_t n) {
  KernelInfo* info = kernel.info();
  if (!info) throw InvalidArgumentError("TypedKernel: the Kernel is empty");
  const KernelInfo& l = info->layout();
  if (!l.params_known) return;  // the driver cannot tell; nothing to check against
  if (l.params.size() != n)
    throw InvalidArgumentError(info->name + ": the kernel takes " + std::to_string(l.params.size()) +
                                " parameters, the TypedKernel signature has " + std::to_string(n));
  for (std::size_t i = 0; i < n; ++i) {
    if (l.params[i].size != sizes[i])
      throw InvalidArgumentError(info->name + ": parameter " + std::to_string(i) + " is " +
                                  std::to_string(l.params[i].size) + " bytes, the TypedKernel signature says " +
                                  std::to_string(sizes[i]) + " (" + demangle(type_names[i]) + ")");
  }
}

}  // namespace detail

using detail::check;
using detail::driver;
using detail::KernelInfo;

// ---- Kernel ----

Kernel::Kernel(std::shared_ptr<KernelInfo> info) noexcept : info_(std::move(info)), handle_(info_ ? info_->handle : nullptr) {}

Kernel Kernel::from_handle(CUkernel handle, std::string name) {
  if (!handle) throw InvalidArgumentError("Kernel::from_handle: handle is null");
  auto info = std::make_shared<KernelInfo>(handle, nullptr);  // adopted: no library of cucore's
  const char* symbol = nullptr;
  const detail::DriverTable& d = driver();
  if (d.cuKernelGetName && d.cuKernelGetName(&symbol, handle) == CUDA_SUCCESS && symbol) info->mangled_name = symbol;
  info->name = !name.empty() ? std::move(name) : !info->mangled_name.empty() ? info->mangled_name : "kernel";
  return Kernel(std::move(info));
}

void Kernel::require_valid(const char* what) const {
  if (!info_) throw InvalidArgumentError(std::string("Kernel::") + what + ": the Kernel is empty");
}

const std::string& Kernel::name() const {
  static const std::string empty;
  return info_ ? info_->name : empty;
}

const std::string& Kernel::mangled_name() const {
  static const std::string empty;
  return info_ ? info_->mangled_name : empty;
}

KernelAttributes Kernel::attributes() const { return attributes(Device().ordinal()); }
KernelAttributes Kernel::attributes(const Device& device) const { return attributes(device.ordinal()); }
KernelAttributes Kernel::attributes(int device_id) const {
  require_valid("attributes");
  (void)Device(device_id);  // std::out_of_range for a device that is not there
  return KernelAttributes(info_, device_id);
}

KernelOccupancy Kernel::occupancy() const { return occupancy(Device().ordinal()); }
KernelOccupancy Kernel::occupancy(const Device& device) const { return occupancy(device.ordinal()); }
KernelOccupancy Kernel::occupancy(int device_id) const {
  require_valid("occupancy");
  (void)Device(device_id);
  return KernelOccupancy(info_, device_id);
}

std::size_t Kernel::num_arguments() const { return arguments_info().size(); }

const std::vector<ParamInfo>& Kernel::arguments_info() const {
  require_valid("arguments_info");
  const KernelInfo& l = info_->layout();
  if (!l.params_known) {
    char buf[16];
    throw FeatureUnavailableError(
        "kernel parameter info (cuKernelGetParamInfo; the driver is CUDA " +
            std::string(detail::format_cuda_version(driver().version, buf)) + ")",
        "CUDA driver 12.4");
  }
  return l.params;
}

// ---- KernelAttributes ----

int KernelAttributes::cached(CUfunction_attribute attribute) const {
  return detail::kernel_attribute(*info_, device_, attribute, true);
}

int KernelAttributes::get(CUfunction_attribute attribute) const {
  return detail::kernel_attribute(*info_, device_, attribute, false);
}

void KernelAttributes::set(CUfunction_attribute attribute, int value) const {
  const detail::DriverTable& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuKernelSetAttribute), 12000, "cuKernelSetAttribute");
  Device dev(device_);
  ScopedContext scope(dev.context().handle());
  check(d.cuKernelSetAttribute(attribute, value, info_->handle, dev.handle()), "cuKernelSetAttribute");
  std::lock_guard lock(info_->mutex);
  info_->attributes.erase({device_, int(attribute)});
}

int KernelAttributes::max_threads_per_block() const { return cached(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); }
int KernelAttributes::shared_size_bytes() const { return cached(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES); }
int KernelAttributes::const_size_bytes() const { return cached(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES); }
int KernelAttributes::local_size_bytes() const { return cached(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES); }
int KernelAttributes::num_regs() const { return cached(CU_FUNC_ATTRIBUTE_NUM_REGS); }
int KernelAttributes::ptx_version() const { return cached(CU_FUNC_ATTRIBUTE_PTX_VERSION); }
int KernelAttributes::binary_version() const { return cached(CU_FUNC_ATTRIBUTE_BINARY_VERSION); }
bool KernelAttributes::cache_mode_ca() const { return cached(CU_FUNC_ATTRIBUTE_CACHE_MODE_CA) != 0; }
bool KernelAttributes::cluster_size_must_be_set() const { return cached(CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET) != 0; }
// Settable ones are read fresh: they change under us.
int KernelAttributes::max_dynamic_shared_size_bytes() const { return get(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); }
int KernelAttributes::preferred_shared_memory_carveout() const {
  return get(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
}
int KernelAttributes::required_cluster_width() const { return get(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH); }
int KernelAttributes::required_cluster_height() const { return get(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT); }
int KernelAttributes::required_cluster_depth() const { return get(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH); }
bool KernelAttributes::non_portable_cluster_size_allowed() const {
  return get(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) != 0;
}
int KernelAttributes::cluster_scheduling_policy_preference() const {
  return get(CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
}

void KernelAttributes::set_max_dynamic_shared_size_bytes(int bytes) const {
  if (bytes < 0)
    throw InvalidArgumentError(info_->name + ": max_dynamic_shared_size_bytes must be >= 0, got " +
                                std::to_string(bytes));
  // Say what the device allows instead of the driver's bare INVALID_VALUE.
  const int optin = Device(device_).properties().max_shared_memory_per_block_optin();
  const int static_bytes = shared_size_bytes();
  if (optin > 0 && bytes > optin - static_bytes)
    throw InvalidArgumentError(info_->name + ": max_dynamic_shared_size_bytes of " + std::to_string(bytes) +
                                " bytes exceeds what device " + std::to_string(device_) + " allows this kernel (" +
                                std::to_string(optin - static_bytes) + " = the opt-in maximum " +
                                std::to_string(optin) + " minus " + std::to_string(static_bytes) + " static)");
  set(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

void KernelAttributes::set_preferred_shared_memory_carveout(int percent) const {
  if (percent < -1 || percent > 100)
    throw InvalidArgumentError(info_->name + ": preferred_shared_memory_carveout is a percentage (0-100, or -1 "
                                "for no preference), got " + std::to_string(percent));
  set(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent);
}

void KernelAttributes::set_non_portable_cluster_size_allowed(bool allowed) const {
  set(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, allowed ? 1 : 0);
}

void KernelAttributes::set_cluster_scheduling_policy_preference(int policy) const {
  set(CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, policy);
}

// ---- KernelOccupancy ----
// The occupancy API takes a CUfunction: the kernel's in the device's primary
// context, made current for the query.

namespace {
template <typename F>
auto with_function(const KernelInfo& info, int device, F&& f) {
  Device dev(device);
  ScopedContext scope(dev.context().handle());
  return f(detail::kernel_function_in_current_context(info));
}

void require_positive(const KernelInfo& info, const char* what, long long v) {
  if (v <= 0) throw InvalidArgumentError(info.name + ": " + what + " must be positive, got " + std::to_string(v));
}
}  // namespace

int KernelOccupancy::max_active_blocks_per_multiprocessor(int block_size, std::size_t dynamic_shared_memory_size) const {
  require_positive(*info_, "block_size", block_size);
  const detail::DriverTable& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuOccupancyMaxActiveBlocksPerMultiprocessor), 6050,
                  "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return with_function(*info_, device_, [&](CUfunction f) {
    int n = 0;
    check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, block_size, dynamic_shared_memory_size),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    return n;
  });
}

MaxPotentialBlockSize KernelOccupancy::max_potential_block_size(CUoccupancyB2DSize dynamic_shared_memory_for_block,
                                                                int block_size_limit) const {
  if (!dynamic_shared_memory_for_block)
    throw InvalidArgumentError(info_->name +
                                ": max_potential_block_size: the block-size-to-shared-memory function is null");
  return potential_block_size(dynamic_shared_memory_for_block, 0, block_size_limit);
}

MaxPotentialBlockSize KernelOccupancy::potential_block_size(CUoccupancyB2DSize fn, std::size_t bytes,
                                                            int block_size_limit) const {
  if (block_size_limit < 0)
    throw InvalidArgumentError(info_->name + ": block_size_limit must be >= 0 (0: no limit)");
  const detail::DriverTable& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuOccupancyMaxPotentialBlockSize), 6050,
                  "cuOccupancyMaxPotentialBlockSize");
  return with_function(*info_, device_, [&](CUfunction f) {
    MaxPotentialBlockSize r;
    check(d.cuOccupancyMaxPotentialBlockSize(&r.min_grid_size, &r.max_block_size, f, fn, bytes, block_size_limit),
          "cuOccupancyMaxPotentialBlockSize");
    return r;
  });
}

std::size_t KernelOccupancy::available_dynamic_shared_memory_per_block(int num_blocks_per_multiprocessor,
                                                                       int block_size) const {
  require_positive(*info_, "num_blocks_per_multiprocessor", num_blocks_per_multiprocessor);
  require_positive(*info_, "block_size", block_size);
  const detail::DriverTable& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuOccupancyAvailableDynamicSMemPerBlock), 10020,
                  "cuOccupancyAvailableDynamicSMemPerBlock");
  return with_function(*info_, device_, [&](CUfunction f) {
    std::size_t bytes = 0;
    check(d.cuOccupancyAvailableDynamicSMemPerBlock(&bytes, f, num_blocks_per_multiprocessor, block_size),
          "cuOccupancyAvailableDynamicSMemPerBlock");
    return bytes;
  });
}

int KernelOccupancy::cluster_query(const LaunchConfig& config, CUstream stream, bool potential_size) const {
  const detail::DriverTable& d = driver();
  auto fn_potential = d.cuOccupancyMaxPotentialClusterSize;
  auto fn_active = d.cuOccupancyMaxActiveClusters;
  detail::require(potential_size ? reinterpret_cast<const void*>(fn_potential) : reinterpret_cast<const void*>(fn_active),
                  11070, potential_size ? "cuOccupancyMaxPotentialClusterSize" : "cuOccupancyMaxActiveClusters");
  detail::NativeLaunchConfig native;
  detail::to_native(config, stream, native);
  return with_function(*info_, device_, [&](CUfunction f) {
    int n = 0;
    if (potential_size)
      check(fn_potential(&n, f, &native.config), "cuOccupancyMaxPotentialClusterSize");
    else
      check(fn_active(&n, f, &native.config), "cuOccupancyMaxActiveClusters");
    return n;
  });
}

int KernelOccupancy::max_potential_cluster_size(const LaunchConfig& config) const {
  return cluster_query(config, nullptr, true);
}
int KernelOccupancy::max_potential_cluster_size(const LaunchConfig& config, StreamRef stream) const {
  return cluster_query(config, stream.handle(), true);
}
int KernelOccupancy::max_active_clusters(const LaunchConfig& config) const {
  return cluster_query(config, nullptr, false);
}
int KernelOccupancy::max_active_clusters(const LaunchConfig& config, StreamRef stream) const {
  return cluster_query(config, stream.handle(), false);
}

}  // namespace cucore
