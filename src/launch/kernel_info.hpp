#pragma once
// A kernel's facts, cached so launching needs no driver call but the launch
// itself, over its box (the CUkernel and its library's share:
// handles/kernel_handles.hpp). One KernelInfo per (ObjectCode, symbol);
// Kernels share it.
#include <cuda.h>

#include <cstdint>
#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cucore/kernel.hpp>

#include "handles/kernel_handles.hpp"

namespace cucore::detail {

struct KernelInfo : KernelBox {
  using KernelBox::KernelBox;
  std::string name;          // as asked for: a name expression or the symbol
  std::string mangled_name;  // the symbol in the image

  // Parameter layout, read once (first launch or arguments_info()).
  std::once_flag params_once;
  std::atomic<bool> params_ready{false};
  bool params_known = false;  // false when the driver cannot tell (older than 12.4): launches go unchecked
  std::vector<ParamInfo> params;

  // Read-only attributes, per (device, attribute); guarded by `mutex`.
  std::mutex mutex;
  std::map<std::pair<int, int>, int> attributes;
  // The last cooperative limit computed, so repeated cooperative launches of
  // one shape ask the occupancy API once.
  struct CooperativeLimit {
    int device = -1;
    std::uint64_t block = 0;
    std::size_t shmem = 0;
    std::uint64_t max_blocks = 0;
  } cooperative;

  // Hot path: one acquire load once the layout is known.
  const KernelInfo& layout() {
    if (!params_ready.load(std::memory_order_acquire)) [[unlikely]]
      load_params();
    return *this;
  }
  void load_params();
};

// The kernel's attribute on `device` (in its primary context); `cache` keeps
// read-only ones.
int kernel_attribute(KernelInfo& info, int device, CUfunction_attribute attribute, bool cache);
// The CUfunction of `info` in `device`'s primary context, which must be current.
CUfunction kernel_function_in_current_context(const KernelInfo& info);

}  // namespace cucore::detail
