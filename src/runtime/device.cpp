#include <cucore/device.hpp>

#include <cucore/context.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/stream.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "loader/driver.hpp"
#include "runtime/device_state.hpp"

namespace cucore {
namespace detail {

static_assert(CU_DEVICE_ATTRIBUTE_MAX < kAttributeSlots, "grow kAttributeSlots");

namespace {
std::atomic<DeviceRegistry*> g_registry{nullptr};
std::mutex g_registry_mutex;

DeviceRegistry* build_registry() {
  const DriverTable& d = driver();
  auto* r = new DeviceRegistry;
  check(d.cuDeviceGetCount(&r->count), "cuDeviceGetCount");
  for (int i = 0; i < r->count; ++i) {
    auto s = std::make_unique<DeviceState>();
    s->ordinal = i;
    check(d.cuDeviceGet(&s->device, i), "cuDeviceGet");
    r->devices.push_back(std::move(s));
  }
  return r;
}
}  // namespace

const DeviceRegistry& device_registry() {
  if (DeviceRegistry* r = g_registry.load(std::memory_order_acquire)) [[likely]]
    return *r;
  std::lock_guard lock(g_registry_mutex);
  if (DeviceRegistry* r = g_registry.load(std::memory_order_acquire)) return *r;
  DeviceRegistry* r = build_registry();
  g_registry.store(r, std::memory_order_release);
  return *r;
}

void reset_device_registry_for_testing() {
  std::lock_guard lock(g_registry_mutex);
  g_registry.store(nullptr, std::memory_order_release);  // leaked on purpose
}

DeviceState* device_state(int ordinal) {
  const DeviceRegistry& r = device_registry();
  if (ordinal < 0 || ordinal >= r.count) [[unlikely]] {
    throw OutOfRangeError("Device(" + std::to_string(ordinal) + "): no such device; this machine has " +
                            std::to_string(r.count) + " CUDA device" + (r.count == 1 ? "" : "s") +
                            (r.count ? " (ordinals 0.." + std::to_string(r.count - 1) + ")" : ""));
  }
  return r.devices[static_cast<size_t>(ordinal)].get();
}

const ContextHandle& primary_context(DeviceState& s) {
  if (s.context_ready.load(std::memory_order_acquire)) [[likely]]
    return s.primary;
  std::call_once(s.context_once, [&] {
    CUcontext ctx = nullptr;
    check(driver().cuDevicePrimaryCtxRetain(&ctx, s.device), "cuDevicePrimaryCtxRetain");
    s.primary_owner = make_primary_context(ctx, s.ordinal);  // kept for the process, so never released
    s.primary = immortal_alias(s.primary_owner);
    s.context_ready.store(true, std::memory_order_release);
  });
  return s.primary;
}

ContextHandle find_primary(CUcontext ctx) {
  DeviceRegistry* r = g_registry.load(std::memory_order_acquire);
  if (!r || !ctx) return nullptr;
  for (auto& s : r->devices) {
    // Only devices whose primary context cucore retained can match.
    if (s->context_ready.load(std::memory_order_acquire) && s->primary->ctx == ctx) return s->primary;
  }
  return nullptr;
}

}  // namespace detail

int DeviceProperties::attribute(CUdevice_attribute attr) const {
  auto idx = static_cast<size_t>(attr);
  if (idx >= state_->attributes.size()) [[unlikely]]
    throw InvalidArgumentError("DeviceProperties::attribute: unknown attribute " + std::to_string(idx));
  int v = state_->attributes[idx].load(std::memory_order_relaxed);
  if (v != INT_MIN) [[likely]]
    return v;
  detail::check(detail::driver().cuDeviceGetAttribute(&v, attr, state_->device), "cuDeviceGetAttribute");
  state_->attributes[idx].store(v, std::memory_order_relaxed);
  return v;
}

std::array<int, 3> DeviceProperties::max_block_dim() const {
  return {attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
          attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)};
}

std::array<int, 3> DeviceProperties::max_grid_dim() const {
  return {attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
          attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)};
}

std::size_t DeviceProperties::total_memory() const {
  size_t bytes = 0;
  detail::check(detail::driver().cuDeviceTotalMem(&bytes, state_->device), "cuDeviceTotalMem");
  return bytes;
}

Device::Device() : Device(current()) {}

Device::Device(int ordinal) : ordinal_(ordinal), state_(detail::device_state(ordinal)) {}

int Device::count() {
  try {
    return detail::device_registry().count;
  } catch (const CudaError& e) {
    // cuInit reports a machine without devices as an error; to callers it is zero devices.
    if (e.code() == CUDA_ERROR_NO_DEVICE) return 0;
    throw;
  }
}

std::vector<Device> Device::all() {
  std::vector<Device> out;
  int n = count();
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.emplace_back(i);
  return out;
}

Device Device::current() {
  const auto& d = detail::driver();
  CUcontext ctx = nullptr;
  detail::check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) return Device(0);
  CUdevice dev = 0;
  detail::check(d.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  const auto& r = detail::device_registry();
  for (const auto& s : r.devices)
    if (s->device == dev) return Device(s->ordinal);
  return Device(0);
}

CUdevice Device::handle() const { return state_->device; }

std::string Device::name() const {
  char buf[256] = {};
  detail::check(detail::driver().cuDeviceGetName(buf, sizeof buf, state_->device), "cuDeviceGetName");
  return buf;
}

std::array<unsigned char, 16> Device::uuid() const {
  CUuuid u{};
  detail::check(detail::driver().cuDeviceGetUuid(&u, state_->device), "cuDeviceGetUuid");
  std::array<unsigned char, 16> out{};
  for (size_t i = 0; i < 16; ++i) out[i] = static_cast<unsigned char>(u.bytes[i]);
  return out;
}

std::string Device::uuid_string() const {
  auto u = uuid();
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return buf;
}

std::string Device::pci_bus_id() const {
  char buf[64] = {};
  detail::check(detail::driver().cuDeviceGetPCIBusId(buf, sizeof buf, state_->device), "cuDeviceGetPCIBusId");
  return buf;
}

ComputeCapability Device::compute_capability() const {
  auto p = properties();
  return {p.compute_capability_major(), p.compute_capability_minor()};
}

std::string Device::arch() const {
  auto cc = compute_capability();
  return std::to_string(cc.major) + std::to_string(cc.minor);
}

Context Device::context() const { return Context(detail::primary_context(*state_)); }

Context Device::set_current() const {
  Context ctx = context();
  detail::check(detail::driver().cuCtxSetCurrent(ctx.handle()), "cuCtxSetCurrent");
  return ctx;
}

void Device::sync() const { context().sync(); }

// Straight from the device's box: no Context value made and dropped on the way.
Stream Device::create_stream(const StreamOptions& options) const {
  return Stream(detail::primary_context(*state_), options);
}
Stream Device::create_stream() const { return Stream(detail::primary_context(*state_), StreamOptions{}); }
Event Device::create_event(const EventOptions& options) const {
  return Event(detail::primary_context(*state_), options);
}
Event Device::create_event() const { return Event(detail::primary_context(*state_), EventOptions{}); }

bool Device::can_access_peer(const Device& peer) const {
  if (peer.ordinal_ == ordinal_) return true;
  int v = 0;
  detail::check(detail::driver().cuDeviceCanAccessPeer(&v, state_->device, peer.state_->device), "cuDeviceCanAccessPeer");
  return v != 0;
}

}  // namespace cucore
