#pragma once
// Process-wide per-device state behind Device.
#include <cuda.h>

#include <array>
#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include <cucore/context.hpp>

#include "handles/handles.hpp"

namespace cucore::detail {

// Big enough for every CUdevice_attribute cuda.h defines (checked in device.cpp).
inline constexpr int kAttributeSlots = 256;

struct DeviceState {
  int ordinal = 0;
  CUdevice device = 0;
  std::array<std::atomic<int>, kAttributeSlots> attributes;  // INT_MIN: not read yet

  // The primary context, retained once and kept for the process. This state
  // lives as long, so what it hands out are non-owning aliases of `*_owner`:
  // copying them costs no reference count (streams, events, every Buffer from
  // the default pool copy them).
  std::once_flag context_once;
  std::atomic<bool> context_ready{false};  // `primary` is set (checked before call_once, which costs more)
  ContextHandle primary_owner;
  ContextHandle primary;

  // The device's default memory resource, made once by memory/ (which stands
  // above the runtime, so the state is kept here untyped).
  std::once_flag memory_resource_once;
  std::atomic<bool> memory_resource_ready{false};
  std::shared_ptr<const void> memory_resource;

  DeviceState() {
    for (auto& a : attributes) a.store(INT_MIN, std::memory_order_relaxed);
  }
};

// A non-owning alias of `owner` (for state that lives as long as the process).
template <typename T>
std::shared_ptr<T> immortal_alias(const std::shared_ptr<T>& owner) noexcept {
  return std::shared_ptr<T>(std::shared_ptr<T>(), owner.get());
}

struct DeviceRegistry {
  int count = 0;
  std::vector<std::unique_ptr<DeviceState>> devices;
};

// The registry (built on first use; rethrows the driver's load failure).
const DeviceRegistry& device_registry();
DeviceState* device_state(int ordinal);  // std::out_of_range naming the count
const ContextHandle& primary_context(DeviceState& s);
// Tests that swap the driver table start from a fresh registry (the old one is
// leaked on purpose: Device values may still point into it).
void reset_device_registry_for_testing();

// The context current on this thread, else device 0's primary context: where
// objects made without an explicit context or device go (as in the runtime API).
Context current_context_or_device0();

// The primary context's box if `ctx` is a retained primary context, else null.
ContextHandle find_primary(CUcontext ctx);

}  // namespace cucore::detail
