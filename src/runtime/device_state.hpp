#pragma once
// Process-wide per-device state behind Device, and the context state behind Context.
#include <cuda.h>

#include <array>
#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include <cucore/context.hpp>
#include <cucore/memory.hpp>

namespace cucore::detail {

struct ContextState {
  CUcontext ctx = nullptr;
  mutable std::atomic<int> device_ordinal{-1};  // resolved lazily for adopted contexts
  bool primary = false;
  bool green = false;
  ContextState() = default;
  ContextState(CUcontext c, int ordinal, bool is_primary) : ctx(c), device_ordinal(ordinal), primary(is_primary) {}
  virtual ~ContextState() = default;  // owning kinds (green contexts) destroy theirs
};

// Big enough for every CUdevice_attribute cuda.h defines (checked in device.cpp).
inline constexpr int kAttributeSlots = 256;

struct DeviceState {
  int ordinal = 0;
  CUdevice device = 0;
  std::array<std::atomic<int>, kAttributeSlots> attributes;  // INT_MIN: not read yet

  std::once_flag context_once;
  std::shared_ptr<const ContextState> primary;  // retained once, kept for the process

  std::once_flag memory_resource_once;
  MemoryResource default_resource;  // a DeviceMemoryResource over the device's current pool

  DeviceState() {
    for (auto& a : attributes) a.store(INT_MIN, std::memory_order_relaxed);
  }
};

struct DeviceRegistry {
  int count = 0;
  std::vector<std::unique_ptr<DeviceState>> devices;
};

// The registry (built on first use; rethrows the driver's load failure).
const DeviceRegistry& device_registry();
DeviceState* device_state(int ordinal);  // std::out_of_range naming the count
const std::shared_ptr<const ContextState>& primary_context(DeviceState& s);
// Tests that swap the driver table start from a fresh registry (the old one is
// leaked on purpose: Device values may still point into it).
void reset_device_registry_for_testing();

// The context current on this thread, else device 0's primary context: where
// objects made without an explicit context or device go (as in the runtime API).
Context current_context_or_device0();

// The primary context state if `ctx` is a retained primary context, else null.
std::shared_ptr<const ContextState> find_primary(CUcontext ctx);

}  // namespace cucore::detail
