// cucore::system::Device and its accessors: one NVML call each, NOT_SUPPORTED
// as an empty optional, or NvmlError within an UnsupportedAsError scope
// (nvml_call.hpp).
#include <cucore/system.hpp>

#include <cucore/device.hpp>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "handles/nvml_handles.hpp"
#include "system/nvml_call.hpp"

namespace cucore::system {

using detail::nvml_handle;
namespace nvml = detail::nvml;

namespace {

std::string from_buffer(const char* buf, std::size_t size) { return std::string(buf, strnlen(buf, size)); }

// NVML takes NUL-terminated strings: a NUL inside would silently shorten the key.
std::string c_string_arg(std::string_view s, const char* what) {
  if (s.find('\0') != std::string_view::npos)
    throw InvalidArgumentError(std::string("system::Device: the ") + what + " contains a NUL character");
  return std::string(s);
}

// `value` is read after the call that fills it: by reference, of its own type
// (a by-value or converted argument could be copied before the call runs).
template <typename V>
std::optional<V> optional_uint(nvml::Return r, const V& value, const char* call) {
  if (!detail::nvml_supported(r, call)) return std::nullopt;
  return value;
}

// Device lookups: an unknown device is std::out_of_range, a malformed key
// std::invalid_argument (NVML's NOT_FOUND / INVALID_ARGUMENT).
void* lookup(nvml::Return r, nvml::Device h, const char* call, const std::string& what) {
  if (r == nvml::SUCCESS) return h;
  if (r == nvml::ERROR_NOT_FOUND) throw OutOfRangeError("system::Device: no device has " + what);
  if (r == nvml::ERROR_INVALID_ARGUMENT) throw InvalidArgumentError("system::Device: malformed " + what);
  detail::throw_nvml_error(r, call);
}

}  // namespace

// ---- Device: lookup ------------------------------------------------------------

Device::Device(unsigned int index) {
  unsigned int count = 0;
  CUCORE_NVML_CHECK(nvmlDeviceGetCount_v2, &count);
  if (index >= count)
    throw OutOfRangeError("system::Device(" + std::to_string(index) + "): no such device; NVML reports " +
                            std::to_string(count) + " device" + (count == 1 ? "" : "s") +
                            (count ? " (indices 0.." + std::to_string(count - 1) + ")" : ""));
  nvml::Device h = nullptr;
  CUCORE_NVML_CHECK(nvmlDeviceGetHandleByIndex_v2, index, &h);
  handle_ = h;
}

Device Device::from_uuid(std::string_view uuid) {
  std::string key = c_string_arg(uuid, "UUID");
  // CUDA prints UUIDs without NVML's "GPU-" / "MIG-" prefix; accept both.
  if (key.rfind("GPU-", 0) != 0 && key.rfind("MIG-", 0) != 0) key = "GPU-" + key;
  nvml::Device h = nullptr;
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetHandleByUUID)(key.c_str(), &h);
  return from_handle(lookup(r, h, "nvmlDeviceGetHandleByUUID", "UUID " + key));
}

Device Device::from_pci_bus_id(std::string_view pci_bus_id) {
  std::string key = c_string_arg(pci_bus_id, "PCI bus id");
  nvml::Device h = nullptr;
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetHandleByPciBusId_v2)(key.c_str(), &h);
  return from_handle(lookup(r, h, "nvmlDeviceGetHandleByPciBusId_v2", "PCI bus id " + key));
}

int Device::get_device_count() { return get_num_devices(); }

std::vector<Device> Device::get_all_devices() {
  std::vector<Device> out;
  int n = get_num_devices();
  for (int i = 0; i < n; ++i) out.emplace_back(static_cast<unsigned int>(i));
  return out;
}

// ---- identity -------------------------------------------------------------------

unsigned int Device::index() const {
  unsigned int i = 0;
  CUCORE_NVML_CHECK(nvmlDeviceGetIndex, nvml_handle(handle_), &i);
  return i;
}

std::string Device::name() const {
  char buf[nvml::kDeviceNameV2BufferSize] = {};
  CUCORE_NVML_CHECK(nvmlDeviceGetName, nvml_handle(handle_), buf, sizeof buf);
  return from_buffer(buf, sizeof buf);
}

std::string Device::brand() const {
  // nvmlBrandType_t, named as cuda.core names them.
  static const char* const kBrands[] = {"Unknown", "Quadro", "Tesla", "NVS", "GRID", "GeForce", "Titan",
                                        "NVIDIA vApps", "NVIDIA VPC", "NVIDIA VCS", "NVIDIA VWS",
                                        "NVIDIA Cloud Gaming", "Quadro RTX", "NVIDIA RTX", "NVIDIA",
                                        "GeForce RTX", "Titan RTX"};
  int b = 0;
  CUCORE_NVML_CHECK(nvmlDeviceGetBrand, nvml_handle(handle_), &b);
  return b >= 0 && b < static_cast<int>(std::size(kBrands)) ? kBrands[b] : "Unknown";
}

std::string Device::uuid() const {
  char buf[nvml::kDeviceUuidV2BufferSize] = {};
  CUCORE_NVML_CHECK(nvmlDeviceGetUUID, nvml_handle(handle_), buf, sizeof buf);
  return from_buffer(buf, sizeof buf);
}

std::string Device::uuid_without_prefix() const {
  std::string u = uuid();
  return u.rfind("GPU-", 0) == 0 || u.rfind("MIG-", 0) == 0 ? u.substr(4) : u;
}

PciInfo Device::pci_info() const {
  nvml::PciInfoExt_v1 p{};
  p.version = nvml::kPciInfoExt_v1;
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetPciInfoExt)(nvml_handle(handle_), &p);
  if (r == nvml::ERROR_NOT_SUPPORTED && detail::unsupported_is_error())
    detail::throw_nvml_error(r, "nvmlDeviceGetPciInfoExt");
  // MIG devices have no PCI attributes of their own (cuda.core: RuntimeError).
  if (r == nvml::ERROR_INVALID_ARGUMENT || r == nvml::ERROR_NOT_SUPPORTED)
    throw RuntimeError("system::Device::pci_info: this device has no PCI attributes (a MIG device?)");
  detail::nvml_check(r, "nvmlDeviceGetPciInfoExt");
  PciInfo out;
  out.handle_ = handle_;
  out.bus_id_ = from_buffer(p.busId, sizeof p.busId);
  out.domain_ = p.domain;
  out.bus_ = p.bus;
  out.device_ = p.device;
  out.vendor_id_ = p.pciDeviceId & 0xffffu;  // pciDeviceId is device id << 16 | vendor id
  out.device_id_ = p.pciDeviceId >> 16;
  out.subsystem_id_ = p.pciSubSystemId;
  out.base_class_ = p.baseClass;
  out.sub_class_ = p.subClass;
  return out;
}

std::string Device::pci_bus_id() const { return pci_info().bus_id(); }

DeviceArch Device::arch() const {
  unsigned int a = 0;
  CUCORE_NVML_CHECK(nvmlDeviceGetArchitecture, nvml_handle(handle_), &a);
  if (a >= static_cast<unsigned>(DeviceArch::kepler) && a <= static_cast<unsigned>(DeviceArch::blackwell))
    return static_cast<DeviceArch>(a);
  return DeviceArch::unknown;
}

ComputeCapability Device::cuda_compute_capability() const {
  int major = 0, minor = 0;
  CUCORE_NVML_CHECK(nvmlDeviceGetCudaComputeCapability, nvml_handle(handle_), &major, &minor);
  return {major, minor};
}

std::optional<std::string> Device::serial() const {
  char buf[nvml::kDeviceSerialBufferSize] = {};
  if (!CUCORE_NVML_OK(nvmlDeviceGetSerial, nvml_handle(handle_), buf, sizeof buf)) return std::nullopt;
  return from_buffer(buf, sizeof buf);
}

std::optional<unsigned int> Device::module_id() const {
  unsigned int v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetModuleId)(nvml_handle(handle_), &v), v, "nvmlDeviceGetModuleId");
}

std::optional<unsigned int> Device::minor_number() const {
  unsigned int v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetMinorNumber)(nvml_handle(handle_), &v), v,
                       "nvmlDeviceGetMinorNumber");
}

std::optional<int> Device::numa_node_id() const {
  unsigned int v = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetNumaNodeId, nvml_handle(handle_), &v)) return std::nullopt;
  return static_cast<int>(v);  // NVML reports "none" as (unsigned)-1
}

std::optional<bool> Device::is_persistence_mode_enabled() const {
  int v = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetPersistenceMode, nvml_handle(handle_), &v)) return std::nullopt;
  return v == nvml::kFeatureEnabled;
}

cucore::Device Device::to_cuda_device() const {
  std::string u = uuid();
  for (const cucore::Device& d : cucore::Device::all())
    if (d.uuid_string() == u) return d;
  throw RuntimeError("system::Device::to_cuda_device: CUDA has no device with UUID " + u +
              " (a MIG-enabled GPU is not a CUDA device itself, or CUDA_VISIBLE_DEVICES hides it)");
}

// ---- MIG ----------------------------------------------------------------------------

std::optional<bool> Device::mig_mode() const {
  unsigned int current = 0, pending = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetMigMode, nvml_handle(handle_), &current, &pending)) return std::nullopt;
  return current != 0;
}

std::optional<bool> Device::mig_pending_mode() const {
  unsigned int current = 0, pending = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetMigMode, nvml_handle(handle_), &current, &pending)) return std::nullopt;
  return pending != 0;
}

bool Device::is_mig_device() const {
  unsigned int v = 0;
  return CUCORE_NVML_OK(nvmlDeviceIsMigDeviceHandle, nvml_handle(handle_), &v) && v != 0;
}

unsigned int Device::mig_device_count() const {
  unsigned int v = 0;
  return CUCORE_NVML_OK(nvmlDeviceGetMaxMigDeviceCount, nvml_handle(handle_), &v) ? v : 0;
}

std::vector<Device> Device::mig_devices() const {
  std::vector<Device> out;
  unsigned int n = mig_device_count();
  for (unsigned int i = 0; i < n; ++i) {
    nvml::Device h = nullptr;
    nvml::Return r = CUCORE_NVML(nvmlDeviceGetMigDeviceHandleByIndex)(nvml_handle(handle_), i, &h);
    if (r == nvml::ERROR_NOT_FOUND) continue;  // an empty slot
    if (!detail::nvml_supported(r, "nvmlDeviceGetMigDeviceHandleByIndex")) break;  // MIG off
    out.push_back(from_handle(h));
  }
  return out;
}

Device Device::mig_device(unsigned int index) const {
  nvml::Device h = nullptr;
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetMigDeviceHandleByIndex)(nvml_handle(handle_), index, &h);
  if (r == nvml::ERROR_NOT_SUPPORTED && detail::unsupported_is_error())
    detail::throw_nvml_error(r, "nvmlDeviceGetMigDeviceHandleByIndex");
  if (r == nvml::ERROR_NOT_FOUND || r == nvml::ERROR_INVALID_ARGUMENT || r == nvml::ERROR_NOT_SUPPORTED)
    throw OutOfRangeError("system::Device::mig_device: no MIG device at index " + std::to_string(index) +
                            " (this GPU holds at most " + std::to_string(mig_device_count()) + ")");
  detail::nvml_check(r, "nvmlDeviceGetMigDeviceHandleByIndex");
  return from_handle(h);
}

Device Device::mig_parent() const {
  nvml::Device h = nullptr;
  CUCORE_NVML_CHECK(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, nvml_handle(handle_), &h);
  return from_handle(h);
}

// ---- clocks and performance -------------------------------------------------------

std::optional<unsigned int> ClockInfo::get_current_mhz(ClockId id) const {
  unsigned int v = 0;
  if (id == ClockId::current)  // the query nvidia-smi's clocks.* use
    return optional_uint(CUCORE_NVML(nvmlDeviceGetClockInfo)(nvml_handle(handle_), static_cast<int>(type_), &v), v,
                         "nvmlDeviceGetClockInfo");
  return optional_uint(
      CUCORE_NVML(nvmlDeviceGetClock)(nvml_handle(handle_), static_cast<int>(type_), static_cast<int>(id), &v), v,
      "nvmlDeviceGetClock");
}

std::optional<unsigned int> ClockInfo::get_max_mhz() const {
  unsigned int v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetMaxClockInfo)(nvml_handle(handle_), static_cast<int>(type_), &v), v,
                       "nvmlDeviceGetMaxClockInfo");
}

std::optional<unsigned int> ClockInfo::get_max_customer_boost_mhz() const {
  unsigned int v = 0;
  return optional_uint(
      CUCORE_NVML(nvmlDeviceGetMaxCustomerBoostClock)(nvml_handle(handle_), static_cast<int>(type_), &v), v,
      "nvmlDeviceGetMaxCustomerBoostClock");
}

std::optional<unsigned int> ClockInfo::get_application_mhz() const {
  unsigned int v = 0;
  return optional_uint(
      CUCORE_NVML(nvmlDeviceGetApplicationsClock)(nvml_handle(handle_), static_cast<int>(type_), &v), v,
      "nvmlDeviceGetApplicationsClock");
}

namespace {
// NVML's nvmlPstates_t of P-state `pstate` (NVML_PSTATE_0 is 0 .. NVML_PSTATE_15 is 15).
int pstate_arg(int pstate, const char* what) {
  if (pstate < 0 || pstate > 15)
    throw InvalidArgumentError(std::string("system::ClockInfo::") + what + ": P-state " + std::to_string(pstate) +
                                " is not 0..15");
  return pstate;
}
}  // namespace

std::optional<std::pair<unsigned int, unsigned int>> ClockInfo::get_min_max_clock_of_pstate_mhz(int pstate) const {
  const int p = pstate_arg(pstate, "get_min_max_clock_of_pstate_mhz");
  unsigned int lo = 0, hi = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetMinMaxClockOfPState, nvml_handle(handle_), static_cast<int>(type_), p, &lo, &hi))
    return std::nullopt;
  return std::pair{lo, hi};
}

std::optional<ClockOffsets> ClockInfo::get_offsets(int pstate) const {
  nvml::ClockOffset_v1 info{};
  info.version = nvml::kClockOffset_v1;
  info.type = static_cast<int>(type_);
  info.pstate = pstate_arg(pstate, "get_offsets");
  if (!CUCORE_NVML_OK(nvmlDeviceGetClockOffsets, nvml_handle(handle_), &info)) return std::nullopt;
  return ClockOffsets{info.clockOffsetMHz, info.minClockOffsetMHz, info.maxClockOffsetMHz};
}

std::optional<int> Device::performance_state() const {
  int p = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetPerformanceState, nvml_handle(handle_), &p) || p < 0 || p > 15)
    return std::nullopt;  // NVML_PSTATE_UNKNOWN is 32
  return p;
}

std::optional<std::vector<int>> Device::supported_pstates() const {
  // NVML documents `size` ambiguously (bytes or entries): a 64-entry buffer
  // with size = 16 entries' bytes is safe either way.
  int pstates[4 * nvml::kMaxPstates];
  std::fill(std::begin(pstates), std::end(pstates), nvml::kPstateUnknown);
  if (!CUCORE_NVML_OK(nvmlDeviceGetSupportedPerformanceStates, nvml_handle(handle_), pstates,
                      static_cast<unsigned int>(nvml::kMaxPstates * sizeof(int))))
    return std::nullopt;
  std::vector<int> out;
  for (int i = 0; i < nvml::kMaxPstates && pstates[i] >= 0 && pstates[i] <= 15; ++i) out.push_back(pstates[i]);
  return out;
}

std::optional<std::uint64_t> Device::current_clock_event_reasons() const {
  unsigned long long v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetCurrentClocksEventReasons)(nvml_handle(handle_), &v),
                                      v, "nvmlDeviceGetCurrentClocksEventReasons");
}

std::optional<std::uint64_t> Device::supported_clock_event_reasons() const {
  unsigned long long v = 0;
  return optional_uint(
      CUCORE_NVML(nvmlDeviceGetSupportedClocksEventReasons)(nvml_handle(handle_), &v), v,
      "nvmlDeviceGetSupportedClocksEventReasons");
}

// ---- thermals --------------------------------------------------------------------------

std::optional<unsigned int> Temperature::get_sensor() const {
  const auto& t = detail::nvml_for_system();
  if (t.nvmlDeviceGetTemperatureV || !t.nvmlDeviceGetTemperature) {
    nvml::Temperature_v1 v{};
    v.version = nvml::kTemperature_v1;
    v.sensorType = nvml::kTemperatureGpu;
    if (!CUCORE_NVML_OK(nvmlDeviceGetTemperatureV, nvml_handle(handle_), &v)) return std::nullopt;
    return static_cast<unsigned int>(std::max(v.temperature, 0));
  }
  unsigned int c = 0;  // a driver older than the versioned entry point
  return optional_uint(t.nvmlDeviceGetTemperature(nvml_handle(handle_), nvml::kTemperatureGpu, &c), c,
                       "nvmlDeviceGetTemperature");
}

std::optional<unsigned int> Temperature::get_threshold(TemperatureThresholds threshold) const {
  unsigned int v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetTemperatureThreshold)(nvml_handle(handle_),
                                                                      static_cast<int>(threshold), &v),
                       v, "nvmlDeviceGetTemperatureThreshold");
}

std::optional<int> Temperature::margin() const {
  nvml::MarginTemperature_v1 m{};
  m.version = nvml::kMarginTemperature_v1;
  if (!CUCORE_NVML_OK(nvmlDeviceGetMarginTemperature, nvml_handle(handle_), &m)) return std::nullopt;
  return m.marginTemperature;
}

std::optional<unsigned int> Device::num_fans() const {
  unsigned int v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetNumFans)(nvml_handle(handle_), &v), v, "nvmlDeviceGetNumFans");
}

std::optional<unsigned int> Device::fan_speed(unsigned int fan) const {
  unsigned int v = 0;
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetFanSpeed_v2)(nvml_handle(handle_), fan, &v);
  if (r == nvml::ERROR_INVALID_ARGUMENT)
    throw OutOfRangeError("system::Device::fan_speed: fan " + std::to_string(fan) + " is not a fan of this device");
  return optional_uint(r, v, "nvmlDeviceGetFanSpeed_v2");
}

namespace {
// A fan index NVML refuses (INVALID_ARGUMENT) is the caller's bad index.
void check_fan(nvml::Return r, unsigned int fan, const char* what) {
  if (r == nvml::ERROR_INVALID_ARGUMENT)
    throw OutOfRangeError(std::string("system::Device::") + what + ": fan " + std::to_string(fan) +
                          " is not a fan of this device");
}
}  // namespace

std::optional<unsigned int> Device::fan_speed_rpm(unsigned int fan) const {
  nvml::FanSpeedInfo_v1 info{nvml::kFanSpeedInfo_v1, fan, 0};
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetFanSpeedRPM)(nvml_handle(handle_), &info);
  check_fan(r, fan, "fan_speed_rpm");
  return optional_uint(r, info.speed, "nvmlDeviceGetFanSpeedRPM");
}

std::optional<unsigned int> Device::target_fan_speed(unsigned int fan) const {
  unsigned int v = 0;
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetTargetFanSpeed)(nvml_handle(handle_), fan, &v);
  check_fan(r, fan, "target_fan_speed");
  return optional_uint(r, v, "nvmlDeviceGetTargetFanSpeed");
}

std::optional<std::pair<unsigned int, unsigned int>> Device::min_max_fan_speed() const {
  unsigned int lo = 0, hi = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetMinMaxFanSpeed, nvml_handle(handle_), &lo, &hi)) return std::nullopt;
  return std::pair(lo, hi);
}

std::optional<unsigned int> Device::fan_control_policy(unsigned int fan) const {
  unsigned int v = 0;
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetFanControlPolicy_v2)(nvml_handle(handle_), fan, &v);
  check_fan(r, fan, "fan_control_policy");
  return optional_uint(r, v, "nvmlDeviceGetFanControlPolicy_v2");
}

void Device::set_fan_speed(unsigned int fan, unsigned int percent) const {
  nvml::Return r = CUCORE_NVML(nvmlDeviceSetFanSpeed_v2)(nvml_handle(handle_), fan, percent);
  check_fan(r, fan, "set_fan_speed");
  detail::nvml_check(r, "nvmlDeviceSetFanSpeed_v2");
}

void Device::set_default_fan_speed(unsigned int fan) const {
  nvml::Return r = CUCORE_NVML(nvmlDeviceSetDefaultFanSpeed_v2)(nvml_handle(handle_), fan);
  check_fan(r, fan, "set_default_fan_speed");
  detail::nvml_check(r, "nvmlDeviceSetDefaultFanSpeed_v2");
}

// ---- power ----------------------------------------------------------------------------

#define CUCORE_UINT_QUERY(method, fn)                                                           \
  std::optional<unsigned int> Device::method() const {                                         \
    unsigned int v = 0;                                                                         \
    return optional_uint(CUCORE_NVML(fn)(nvml_handle(handle_), &v), v, #fn);                    \
  }
CUCORE_UINT_QUERY(power_usage_mw, nvmlDeviceGetPowerUsage)
CUCORE_UINT_QUERY(power_management_limit_mw, nvmlDeviceGetPowerManagementLimit)
CUCORE_UINT_QUERY(power_management_default_limit_mw, nvmlDeviceGetPowerManagementDefaultLimit)
CUCORE_UINT_QUERY(enforced_power_limit_mw, nvmlDeviceGetEnforcedPowerLimit)
#undef CUCORE_UINT_QUERY

std::optional<std::pair<unsigned int, unsigned int>> Device::power_management_limit_constraints_mw() const {
  unsigned int lo = 0, hi = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetPowerManagementLimitConstraints, nvml_handle(handle_), &lo, &hi))
    return std::nullopt;
  return std::pair{lo, hi};
}

std::optional<std::uint64_t> Device::total_energy_consumption_mj() const {
  unsigned long long v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetTotalEnergyConsumption)(nvml_handle(handle_), &v), v,
                                      "nvmlDeviceGetTotalEnergyConsumption");
}

// ---- memory and utilization ----------------------------------------------------------

std::optional<MemoryInfo> Device::memory_info() const {
  nvml::Memory_v2 m{};
  m.version = nvml::kMemory_v2;
  if (!CUCORE_NVML_OK(nvmlDeviceGetMemoryInfo_v2, nvml_handle(handle_), &m)) return std::nullopt;
  return MemoryInfo{m.total, m.used, m.free, m.reserved};
}

std::optional<BAR1MemoryInfo> Device::bar1_memory_info() const {
  nvml::BAR1Memory m{};
  if (!CUCORE_NVML_OK(nvmlDeviceGetBAR1MemoryInfo, nvml_handle(handle_), &m)) return std::nullopt;
  return BAR1MemoryInfo{m.bar1Total, m.bar1Used, m.bar1Free};
}

std::optional<Utilization> Device::utilization() const {
  nvml::Utilization u{};
  if (!CUCORE_NVML_OK(nvmlDeviceGetUtilizationRates, nvml_handle(handle_), &u)) return std::nullopt;
  return Utilization{u.gpu, u.memory};
}

std::optional<EngineUtilization> Device::encoder_utilization() const {
  EngineUtilization e;
  if (!CUCORE_NVML_OK(nvmlDeviceGetEncoderUtilization, nvml_handle(handle_), &e.percent, &e.sampling_period_us))
    return std::nullopt;
  return e;
}

std::optional<EngineUtilization> Device::decoder_utilization() const {
  EngineUtilization e;
  if (!CUCORE_NVML_OK(nvmlDeviceGetDecoderUtilization, nvml_handle(handle_), &e.percent, &e.sampling_period_us))
    return std::nullopt;
  return e;
}

// ---- PCIe ----------------------------------------------------------------------------

#define CUCORE_PCI_QUERY(method, fn)                                                           \
  std::optional<unsigned int> PciInfo::method() const {                                       \
    unsigned int v = 0;                                                                        \
    return optional_uint(CUCORE_NVML(fn)(nvml_handle(handle_), &v), v, #fn);                   \
  }
CUCORE_PCI_QUERY(link_generation, nvmlDeviceGetMaxPcieLinkGeneration)
CUCORE_PCI_QUERY(max_link_generation, nvmlDeviceGetGpuMaxPcieLinkGeneration)
CUCORE_PCI_QUERY(max_link_width, nvmlDeviceGetMaxPcieLinkWidth)
CUCORE_PCI_QUERY(current_link_generation, nvmlDeviceGetCurrPcieLinkGeneration)
CUCORE_PCI_QUERY(current_link_width, nvmlDeviceGetCurrPcieLinkWidth)
CUCORE_PCI_QUERY(replay_counter, nvmlDeviceGetPcieReplayCounter)
#undef CUCORE_PCI_QUERY

std::optional<unsigned int> PciInfo::tx_throughput() const {
  unsigned int v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetPcieThroughput)(nvml_handle(handle_), nvml::kPcieUtilTxBytes, &v), v,
                       "nvmlDeviceGetPcieThroughput");
}

std::optional<unsigned int> PciInfo::rx_throughput() const {
  unsigned int v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetPcieThroughput)(nvml_handle(handle_), nvml::kPcieUtilRxBytes, &v), v,
                       "nvmlDeviceGetPcieThroughput");
}

// ---- NVLink ------------------------------------------------------------------------------

unsigned int Device::get_nvlink_count() const {
  nvml::FieldValue f{};
  f.fieldId = nvml::kFieldNvlinkLinkCount;
  if (!CUCORE_NVML_OK(nvmlDeviceGetFieldValues, nvml_handle(handle_), 1, &f)) return 0;
  if (f.nvmlReturn == nvml::ERROR_NOT_SUPPORTED && !detail::unsupported_is_error()) return 0;  // no NVLink
  detail::nvml_check(f.nvmlReturn, "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_LINK_COUNT)");
  switch (f.valueType) {
    case nvml::VALUE_TYPE_UNSIGNED_LONG: return static_cast<unsigned int>(f.value.ulVal);
    case nvml::VALUE_TYPE_UNSIGNED_LONG_LONG: return static_cast<unsigned int>(f.value.ullVal);
    case nvml::VALUE_TYPE_SIGNED_LONG_LONG: return static_cast<unsigned int>(std::max(f.value.sllVal, 0LL));
    case nvml::VALUE_TYPE_SIGNED_INT: return static_cast<unsigned int>(std::max(f.value.siVal, 0));
    default: return f.value.uiVal;
  }
}

NvlinkInfo Device::get_nvlink(unsigned int link) const {
  unsigned int n = get_nvlink_count();
  if (link >= n)
    throw OutOfRangeError("system::Device::get_nvlink: link index " + std::to_string(link) +
                            " is out of range [0, " + std::to_string(n) + ")");
  return NvlinkInfo(handle_, link);
}

std::vector<NvlinkInfo> Device::get_nvlinks() const {
  std::vector<NvlinkInfo> out;
  unsigned int n = get_nvlink_count();
  for (unsigned int i = 0; i < n; ++i) out.push_back(NvlinkInfo(handle_, i));
  return out;
}

std::optional<bool> NvlinkInfo::state() const {
  int v = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetNvLinkState, nvml_handle(handle_), link_, &v)) return std::nullopt;
  return v == nvml::kFeatureEnabled;
}

std::optional<std::pair<int, int>> NvlinkInfo::version() const {
  // nvmlNvlinkVersion_t: 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0, 8 = 6.0.
  static constexpr std::pair<int, int> kVersions[] = {{1, 0}, {2, 0}, {2, 2}, {3, 0}, {3, 1}, {4, 0}, {5, 0}, {6, 0}};
  unsigned int v = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetNvLinkVersion, nvml_handle(handle_), link_, &v) || v == 0) return std::nullopt;
  if (v > std::size(kVersions)) throw RuntimeError("system::NvlinkInfo::version: NVML reports an unknown NVLink version " +
                                            std::to_string(v));
  return kVersions[v - 1];
}

std::optional<std::string> NvlinkInfo::remote_pci_bus_id() const {
  nvml::PciInfo p{};
  if (!CUCORE_NVML_OK(nvmlDeviceGetNvLinkRemotePciInfo_v2, nvml_handle(handle_), link_, &p)) return std::nullopt;
  return from_buffer(p.busId, sizeof p.busId);
}

// ---- processes ------------------------------------------------------------------------------

std::optional<std::vector<ProcessInfo>> Device::compute_running_processes() const {
  auto fn = CUCORE_NVML(nvmlDeviceGetComputeRunningProcesses_v3);
  // The list changes between calls: grow until one call fits it.
  std::vector<nvml::ProcessInfo> raw(16);
  for (;;) {
    unsigned int count = static_cast<unsigned int>(raw.size());
    nvml::Return r = fn(nvml_handle(handle_), &count, raw.data());
    if (r == nvml::ERROR_INSUFFICIENT_SIZE && count >= raw.size()) {
      raw.resize(count + 16);
      continue;
    }
    if (!detail::nvml_supported(r, "nvmlDeviceGetComputeRunningProcesses_v3")) return std::nullopt;
    raw.resize(std::min<std::size_t>(count, raw.size()));
    break;
  }
  std::vector<ProcessInfo> out;
  out.reserve(raw.size());
  for (const auto& p : raw) {
    ProcessInfo info;
    info.pid = p.pid;
    if (p.usedGpuMemory != nvml::kValueNotAvailable) info.used_gpu_memory = p.usedGpuMemory;
    if (p.gpuInstanceId != nvml::kInstanceIdNone) info.gpu_instance_id = p.gpuInstanceId;
    if (p.computeInstanceId != nvml::kInstanceIdNone) info.compute_instance_id = p.computeInstanceId;
    out.push_back(info);
  }
  return out;
}

// ---- ECC ---------------------------------------------------------------------------------

std::optional<std::pair<bool, bool>> Device::ecc_mode() const {
  int current = 0, pending = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetEccMode, nvml_handle(handle_), &current, &pending)) return std::nullopt;
  return std::pair{current == nvml::kFeatureEnabled, pending == nvml::kFeatureEnabled};
}

std::optional<std::uint64_t> Device::get_total_ecc_errors(MemoryErrorType error, EccCounterType counter) const {
  unsigned long long v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetTotalEccErrors)(nvml_handle(handle_),
                                                                              static_cast<int>(error),
                                                                              static_cast<int>(counter), &v),
                                      v, "nvmlDeviceGetTotalEccErrors");
}

// ---- events ----------------------------------------------------------------------------------

std::optional<std::uint64_t> Device::supported_event_types() const {
  unsigned long long v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetSupportedEventTypes)(nvml_handle(handle_), &v), v,
                                      "nvmlDeviceGetSupportedEventTypes");
}

DeviceEvents Device::register_events(std::uint64_t event_types) const {
  // Each entry point's absence named as itself, before a set exists.
  (void)CUCORE_NVML(nvmlEventSetFree);
  auto register_fn = CUCORE_NVML(nvmlDeviceRegisterEvents);
  std::shared_ptr<detail::NvmlEventSetBox> set;
  detail::nvml_check(detail::create_nvml_event_set(detail::nvml_for_system(), set), "nvmlEventSetCreate");
  // A refused registration leaves the set to its box, which frees it here.
  detail::nvml_check(register_fn(nvml_handle(handle_), event_types, set->get()), "nvmlDeviceRegisterEvents");
  return DeviceEvents(std::move(set));
}

DeviceEvents::DeviceEvents(std::shared_ptr<detail::NvmlEventSetBox> set) noexcept : set_(std::move(set)) {}

std::optional<EventData> DeviceEvents::wait(unsigned int timeout_ms) const {
  if (!set_) throw RuntimeError("system::DeviceEvents::wait: these events were moved from");
  auto wait_fn = set_->table().nvmlEventSetWait_v2;
  if (!wait_fn) detail::throw_nvml_missing("nvmlEventSetWait_v2");
  nvml::EventData d{};
  nvml::Return r = wait_fn(set_->get(), &d, timeout_ms);
  if (r == nvml::ERROR_TIMEOUT) return std::nullopt;
  detail::nvml_check(r, "nvmlEventSetWait_v2");
  return EventData{Device::from_handle(d.device), d.eventType, d.eventData, d.gpuInstanceId, d.computeInstanceId};
}

// ---- modes and attributes ------------------------------------------------------------

namespace {
std::optional<bool> enabled_state(nvml::Return r, const int& state, const char* call) {
  if (!detail::nvml_supported(r, call)) return std::nullopt;
  return state == nvml::kFeatureEnabled;
}
}  // namespace

void Device::set_persistence_mode(bool enabled) const {
  CUCORE_NVML_CHECK(nvmlDeviceSetPersistenceMode, nvml_handle(handle_), enabled ? nvml::kFeatureEnabled : 0);
}

std::optional<bool> Device::is_c2c_enabled() const {
  nvml::C2cModeInfo_v1 info{};
  if (!CUCORE_NVML_OK(nvmlDeviceGetC2cModeInfoV, nvml_handle(handle_), &info)) return std::nullopt;
  return info.isC2cEnabled != 0;
}

std::optional<AddressingMode> Device::addressing_mode() const {
  nvml::DeviceAddressingMode_v1 m{};
  m.version = nvml::kDeviceAddressingMode_v1;
  if (!CUCORE_NVML_OK(nvmlDeviceGetAddressingMode, nvml_handle(handle_), &m)) return std::nullopt;
  if (m.value > static_cast<unsigned>(AddressingMode::ats)) return AddressingMode::none;  // a mode cucore does not know
  return static_cast<AddressingMode>(m.value);
}

std::optional<bool> Device::is_display_connected() const {
  int v = 0;
  return enabled_state(CUCORE_NVML(nvmlDeviceGetDisplayMode)(nvml_handle(handle_), &v), v, "nvmlDeviceGetDisplayMode");
}

std::optional<bool> Device::is_display_active() const {
  int v = 0;
  return enabled_state(CUCORE_NVML(nvmlDeviceGetDisplayActive)(nvml_handle(handle_), &v), v,
                       "nvmlDeviceGetDisplayActive");
}

std::optional<std::pair<bool, bool>> Device::is_auto_boosted_clocks_enabled() const {
  int current = 0, by_default = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetAutoBoostedClocksEnabled, nvml_handle(handle_), &current, &by_default))
    return std::nullopt;
  return std::pair{current == nvml::kFeatureEnabled, by_default == nvml::kFeatureEnabled};
}

std::optional<DeviceAttributes> Device::attributes() const {
  nvml::DeviceAttributes a{};
  if (!CUCORE_NVML_OK(nvmlDeviceGetAttributes_v2, nvml_handle(handle_), &a)) return std::nullopt;
  return DeviceAttributes{a.multiprocessorCount, a.sharedCopyEngineCount, a.sharedDecoderCount,
                          a.sharedEncoderCount,  a.sharedJpegCount,       a.sharedOfaCount,
                          a.gpuInstanceSliceCount, a.computeInstanceSliceCount, a.memorySizeMB};
}

std::optional<RepairStatus> Device::repair_status() const {
  nvml::RepairStatus_v1 r{};
  r.version = nvml::kRepairStatus_v1;
  if (!CUCORE_NVML_OK(nvmlDeviceGetRepairStatus, nvml_handle(handle_), &r)) return std::nullopt;
  return RepairStatus{r.bChannelRepairPending != 0, r.bTpcRepairPending != 0};
}

std::optional<std::vector<DynamicPstateUtilization>> Device::dynamic_pstates_info() const {
  nvml::GpuDynamicPstatesInfo info{};
  if (!CUCORE_NVML_OK(nvmlDeviceGetDynamicPstatesInfo, nvml_handle(handle_), &info)) return std::nullopt;
  std::vector<DynamicPstateUtilization> out;
  for (const auto& u : info.utilization)
    out.push_back({u.bIsPresent != 0, u.percentage, u.incThreshold, u.decThreshold});
  return out;
}

std::optional<CoolerInfo> Device::cooler() const {
  nvml::CoolerInfo_v1 c{};
  c.version = nvml::kCoolerInfo_v1;
  c.index = 0;
  if (!CUCORE_NVML_OK(nvmlDeviceGetCoolerInfo, nvml_handle(handle_), &c)) return std::nullopt;
  return CoolerInfo{c.signalType, static_cast<unsigned int>(c.target)};
}

std::optional<std::vector<ThermalSensor>> Temperature::get_thermal_settings(int sensor_index) const {
  nvml::GpuThermalSettings t{};
  if (!CUCORE_NVML_OK(nvmlDeviceGetThermalSettings, nvml_handle(handle_), static_cast<unsigned int>(sensor_index), &t))
    return std::nullopt;
  std::vector<ThermalSensor> out;
  for (unsigned i = 0; i < std::min(t.count, nvml::kMaxThermalSensorsPerGpu); ++i) {
    const auto& s = t.sensor[i];
    out.push_back({s.controller, s.defaultMinTemp, s.defaultMaxTemp, s.currentTemp, s.target});
  }
  return out;
}

// ---- InfoROM ------------------------------------------------------------------------------

std::optional<std::string> InforomInfo::get_version(InforomObject object) const {
  char buf[nvml::kDeviceInforomVersionBufferSize] = {};
  if (!CUCORE_NVML_OK(nvmlDeviceGetInforomVersion, nvml_handle(handle_), static_cast<int>(object), buf, sizeof buf))
    return std::nullopt;
  return from_buffer(buf, sizeof buf);
}

std::optional<std::string> InforomInfo::image_version() const {
  char buf[nvml::kDeviceInforomVersionBufferSize] = {};
  if (!CUCORE_NVML_OK(nvmlDeviceGetInforomImageVersion, nvml_handle(handle_), buf, sizeof buf)) return std::nullopt;
  return from_buffer(buf, sizeof buf);
}

std::optional<unsigned int> InforomInfo::configuration_checksum() const {
  unsigned int v = 0;
  return optional_uint(CUCORE_NVML(nvmlDeviceGetInforomConfigurationChecksum)(nvml_handle(handle_), &v), v,
                       "nvmlDeviceGetInforomConfigurationChecksum");
}

bool InforomInfo::validate() const {
  return CUCORE_NVML_OK(nvmlDeviceValidateInforom, nvml_handle(handle_));
}

std::optional<std::pair<std::uint64_t, unsigned long>> InforomInfo::bbx_flush_time() const {
  unsigned long long timestamp = 0;
  unsigned long duration_us = 0;
  nvml::Return r = CUCORE_NVML(nvmlDeviceGetLastBBXFlushTime)(nvml_handle(handle_), &timestamp, &duration_us);
  // No flush yet in this run: no value to report (NotReadyError in cucore.system, as cuda.core).
  if (r == nvml::ERROR_NOT_READY && !detail::unsupported_is_error()) return std::nullopt;
  if (!detail::nvml_supported(r, "nvmlDeviceGetLastBBXFlushTime")) return std::nullopt;
  return std::pair<std::uint64_t, unsigned long>{timestamp, duration_us};
}

std::optional<std::string> InforomInfo::board_part_number() const {
  char buf[nvml::kDevicePartNumberBufferSize] = {};
  if (!CUCORE_NVML_OK(nvmlDeviceGetBoardPartNumber, nvml_handle(handle_), buf, sizeof buf)) return std::nullopt;
  return from_buffer(buf, sizeof buf);
}

// ---- affinity and topology --------------------------------------------------------------------

namespace {

// Words of the CPU / node bitmask: every configured CPU, at least 1024 bits
// (CPU numbers can exceed the count of CPUs online).
unsigned int mask_words() {
  long n = sysconf(_SC_NPROCESSORS_CONF);
  constexpr long kBits = 8 * sizeof(unsigned long);
  return static_cast<unsigned int>((std::max(n, 1024L) + kBits - 1) / kBits);
}

std::vector<unsigned int> unpack_mask(const std::vector<unsigned long>& words) {
  std::vector<unsigned int> out;
  constexpr unsigned kBits = 8 * sizeof(unsigned long);
  for (std::size_t w = 0; w < words.size(); ++w)
    for (unsigned b = 0; b < kBits; ++b)
      if (words[w] >> b & 1UL) out.push_back(static_cast<unsigned int>(w * kBits + b));
  return out;
}

// NVML's "count, array" lists: asks with room for every device, then grows
// to the count NVML reports.
template <typename Call>
std::vector<Device> device_list(Call&& call, const char* name) {
  std::vector<nvml::Device> handles(static_cast<std::size_t>(std::max(get_num_devices(), 1)));
  for (;;) {
    unsigned int count = static_cast<unsigned int>(handles.size());
    nvml::Return r = call(&count, handles.data());
    if (r == nvml::ERROR_INSUFFICIENT_SIZE && count > handles.size()) {
      handles.resize(count);
      continue;
    }
    detail::nvml_check(r, name);
    handles.resize(std::min<std::size_t>(count, handles.size()));
    break;
  }
  std::vector<Device> out;
  out.reserve(handles.size());
  for (nvml::Device h : handles) out.push_back(Device::from_handle(h));
  return out;
}

}  // namespace

std::optional<std::vector<unsigned int>> Device::get_cpu_affinity(AffinityScope scope) const {
  std::vector<unsigned long> mask(mask_words(), 0UL);
  if (!CUCORE_NVML_OK(nvmlDeviceGetCpuAffinityWithinScope, nvml_handle(handle_), static_cast<unsigned int>(mask.size()),
                      mask.data(), static_cast<unsigned int>(scope)))
    return std::nullopt;
  return unpack_mask(mask);
}

std::optional<std::vector<unsigned int>> Device::get_memory_affinity(AffinityScope scope) const {
  std::vector<unsigned long> mask(mask_words(), 0UL);
  if (!CUCORE_NVML_OK(nvmlDeviceGetMemoryAffinity, nvml_handle(handle_), static_cast<unsigned int>(mask.size()),
                      mask.data(), static_cast<unsigned int>(scope)))
    return std::nullopt;
  return unpack_mask(mask);
}

void Device::set_cpu_affinity() const { CUCORE_NVML_CHECK(nvmlDeviceSetCpuAffinity, nvml_handle(handle_)); }
void Device::clear_cpu_affinity() const { CUCORE_NVML_CHECK(nvmlDeviceClearCpuAffinity, nvml_handle(handle_)); }

std::vector<Device> Device::get_all_devices_with_cpu_affinity(unsigned int cpu) {
  auto fn = CUCORE_NVML(nvmlSystemGetTopologyGpuSet);
  return device_list([&](unsigned int* count, nvml::Device* out) { return fn(cpu, count, out); },
                     "nvmlSystemGetTopologyGpuSet");
}

std::vector<Device> Device::get_topology_nearest_gpus(GpuTopologyLevel level) const {
  auto fn = CUCORE_NVML(nvmlDeviceGetTopologyNearestGpus);
  return device_list(
      [&](unsigned int* count, nvml::Device* out) {
        return fn(nvml_handle(handle_), static_cast<int>(level), count, out);
      },
      "nvmlDeviceGetTopologyNearestGpus");
}

// ---- field values --------------------------------------------------------------------------------

const std::variant<std::int64_t, std::uint64_t, double>& FieldValue::value() const {
  if (status != nvml::SUCCESS)
    detail::throw_nvml_error(status, ("nvmlDeviceGetFieldValues(field " + std::to_string(field_id) + ")").c_str());
  return raw;
}

namespace {
std::vector<nvml::FieldValue> field_array(const std::vector<std::pair<unsigned int, unsigned int>>& fields) {
  std::vector<nvml::FieldValue> out(fields.size());
  for (std::size_t i = 0; i < fields.size(); ++i) {
    out[i].fieldId = fields[i].first;
    out[i].scopeId = fields[i].second;
  }
  return out;
}
}  // namespace

std::vector<FieldValue> Device::get_field_values(const std::vector<std::pair<unsigned int, unsigned int>>& fields) const {
  std::vector<FieldValue> out;
  if (fields.empty()) return out;  // NVML refuses an empty request (INVALID_ARGUMENT)
  std::vector<nvml::FieldValue> raw = field_array(fields);
  CUCORE_NVML_CHECK(nvmlDeviceGetFieldValues, nvml_handle(handle_), static_cast<int>(raw.size()), raw.data());
  out.reserve(raw.size());
  for (const auto& f : raw) {
    FieldValue v;
    v.field_id = f.fieldId;
    v.scope_id = f.scopeId;
    v.timestamp_us = f.timestamp;
    v.latency_us = f.latencyUsec;
    v.status = f.nvmlReturn;
    switch (f.valueType) {
      case nvml::VALUE_TYPE_DOUBLE: v.raw = f.value.dVal; break;
      case nvml::VALUE_TYPE_UNSIGNED_INT: v.raw = std::uint64_t{f.value.uiVal}; break;
      case nvml::VALUE_TYPE_UNSIGNED_LONG: v.raw = std::uint64_t{f.value.ulVal}; break;
      case nvml::VALUE_TYPE_UNSIGNED_LONG_LONG: v.raw = std::uint64_t{f.value.ullVal}; break;
      case nvml::VALUE_TYPE_SIGNED_LONG_LONG: v.raw = std::int64_t{f.value.sllVal}; break;
      case nvml::VALUE_TYPE_SIGNED_INT: v.raw = std::int64_t{f.value.siVal}; break;
      case nvml::VALUE_TYPE_UNSIGNED_SHORT: v.raw = std::uint64_t{f.value.usVal}; break;
      default:
        // A failed value's type is unset; a successful one of an unknown type is NVML's error.
        if (v.status == nvml::SUCCESS) v.status = nvml::ERROR_UNKNOWN;
        break;
    }
    out.push_back(v);
  }
  return out;
}

void Device::clear_field_values(const std::vector<std::pair<unsigned int, unsigned int>>& fields) const {
  if (fields.empty()) return;
  std::vector<nvml::FieldValue> raw = field_array(fields);
  CUCORE_NVML_CHECK(nvmlDeviceClearFieldValues, nvml_handle(handle_), static_cast<int>(raw.size()), raw.data());
}

}  // namespace cucore::system

namespace cucore {
// The runtime's Device reaches NVML's view of itself here, above both.
system::Device Device::to_system_device() const { return system::Device::from_uuid(uuid_string()); }
}  // namespace cucore
