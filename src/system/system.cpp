// cucore::system's machine-wide queries, topology, and the sample behind
// `cucore smi`.
#include <cucore/system.hpp>

#include <algorithm>
#include <cstdint>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "handles/nvml_handles.hpp"
#include "system/nvml_call.hpp"

namespace cucore::system {

namespace nvml = detail::nvml;

namespace {

// "580.159.04" -> {580, 159, 4}; stops at the first part that is not a number.
std::vector<int> parse_version(const std::string& s) {
  std::vector<int> out;
  const char* p = s.data();
  const char* end = s.data() + s.size();
  while (p < end) {
    int v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || next == p) break;
    out.push_back(v);
    if (next == end || *next != '.') break;
    p = next + 1;
  }
  return out;
}

struct NamedBit {
  std::uint64_t bit;
  const char* name;
};

constexpr NamedBit kClockEventReasons[] = {
    {clocks_event_reasons::gpu_idle, "gpu_idle"},
    {clocks_event_reasons::applications_clocks_setting, "applications_clocks_setting"},
    {clocks_event_reasons::sw_power_cap, "sw_power_cap"},
    {clocks_event_reasons::hw_slowdown, "hw_slowdown"},
    {clocks_event_reasons::sync_boost, "sync_boost"},
    {clocks_event_reasons::sw_thermal_slowdown, "sw_thermal_slowdown"},
    {clocks_event_reasons::hw_thermal_slowdown, "hw_thermal_slowdown"},
    {clocks_event_reasons::hw_power_brake_slowdown, "hw_power_brake_slowdown"},
    {clocks_event_reasons::display_clock_setting, "display_clock_setting"},
};

constexpr NamedBit kEventTypes[] = {
    {event_types::single_bit_ecc_error, "single_bit_ecc_error"},
    {event_types::double_bit_ecc_error, "double_bit_ecc_error"},
    {event_types::pstate, "pstate"},
    {event_types::xid_critical_error, "xid_critical_error"},
    {event_types::clock, "clock"},
    {event_types::power_source_change, "power_source_change"},
    {event_types::mig_config_change, "mig_config_change"},
    {event_types::single_bit_ecc_error_storm, "single_bit_ecc_error_storm"},
    {event_types::dram_retirement_event, "dram_retirement_event"},
    {event_types::dram_retirement_failure, "dram_retirement_failure"},
    {event_types::non_fatal_poison_error, "non_fatal_poison_error"},
    {event_types::fatal_poison_error, "fatal_poison_error"},
    {event_types::gpu_unavailable_error, "gpu_unavailable_error"},
    {event_types::gpu_recovery_action, "gpu_recovery_action"},
};

constexpr NamedBit kSystemEventTypes[] = {
    {system_event_types::gpu_driver_unbind, "unbind"},
    {system_event_types::gpu_driver_bind, "bind"},
};

constexpr FieldIdName kFieldIds[] = {
#define CUCORE_NVML_FIELD(id, name) {id, #name},
#include "loader/nvml_fields.inc"
#undef CUCORE_NVML_FIELD
};

template <std::size_t N>
std::uint64_t bit_of(std::string_view name, const NamedBit (&table)[N], const char* what) {
  std::string known;
  for (const auto& e : table) {
    if (name == e.name) return e.bit;
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  throw InvalidArgumentError(std::string("unknown ") + what + " '" + std::string(name) + "' (known: " + known +
                              ")");
}

template <std::size_t N>
std::vector<std::string> names_of(std::uint64_t mask, const NamedBit (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& e : table)
    if (mask & e.bit) out.emplace_back(e.name);
  return out;
}

}  // namespace

std::vector<std::string> clock_event_reason_names(std::uint64_t reasons) { return names_of(reasons, kClockEventReasons); }
std::vector<std::string> event_type_names(std::uint64_t types) { return names_of(types, kEventTypes); }

std::vector<std::string> system_event_type_names(std::uint64_t types) { return names_of(types, kSystemEventTypes); }
std::uint64_t event_type_bit(std::string_view name) { return bit_of(name, kEventTypes, "event type"); }
std::uint64_t system_event_type_bit(std::string_view name) {
  return bit_of(name, kSystemEventTypes, "system event type");
}

std::span<const FieldIdName> field_id_names() noexcept { return kFieldIds; }

// ---- system events ---------------------------------------------------------------------------

std::string SystemEvent::pci_bus_id() const {
  char buf[nvml::kDevicePciBusIdBufferSize];
  std::snprintf(buf, sizeof buf, "%08X:%02X:%02X.0", gpu_id >> 16, (gpu_id >> 8) & 0xffu, gpu_id & 0xffu);
  return buf;
}

Device SystemEvent::device() const { return Device::from_pci_bus_id(pci_bus_id()); }

RegisteredSystemEvents register_events(std::uint64_t system_event_types) {
  // Each entry point's absence named as itself, before a set exists.
  (void)CUCORE_NVML(nvmlSystemEventSetFree);
  auto register_fn = CUCORE_NVML(nvmlSystemRegisterEvents);
  std::shared_ptr<detail::NvmlSystemEventSetBox> set;
  detail::nvml_check(detail::create_nvml_system_event_set(detail::nvml_for_system(), set),
                     "nvmlSystemEventSetCreate");
  nvml::SystemRegisterEventRequest_v1 request{nvml::kSystemRegisterEventRequest_v1, system_event_types, set->get()};
  // A refused registration leaves the set to its box, which frees it here.
  detail::nvml_check(register_fn(&request), "nvmlSystemRegisterEvents");
  return RegisteredSystemEvents(std::move(set));
}

RegisteredSystemEvents::RegisteredSystemEvents(std::shared_ptr<detail::NvmlSystemEventSetBox> set) noexcept
    : set_(std::move(set)) {}

std::optional<std::vector<SystemEvent>> RegisteredSystemEvents::wait(unsigned int timeout_ms,
                                                                     unsigned int buffer_size) const {
  if (!set_) throw RuntimeError("system::RegisteredSystemEvents::wait: these events were moved from");
  constexpr unsigned int kMaxBuffer = 65536;  // a bound on the caller's buffer, not NVML's
  if (buffer_size < 1 || buffer_size > kMaxBuffer)
    throw InvalidArgumentError("system::RegisteredSystemEvents::wait: buffer_size " + std::to_string(buffer_size) +
                                " is not 1.." + std::to_string(kMaxBuffer));
  auto wait_fn = set_->table().nvmlSystemEventSetWait;
  if (!wait_fn) detail::throw_nvml_missing("nvmlSystemEventSetWait");
  std::vector<nvml::SystemEventData_v1> data(buffer_size);
  nvml::SystemEventSetWaitRequest_v1 request{};
  request.version = nvml::kSystemEventSetWaitRequest_v1;
  request.timeoutms = timeout_ms;
  request.set = set_->get();
  request.data = data.data();
  request.dataSize = buffer_size;
  nvml::Return r = wait_fn(&request);
  if (r == nvml::ERROR_TIMEOUT) return std::nullopt;
  detail::nvml_check(r, "nvmlSystemEventSetWait");
  std::vector<SystemEvent> out;
  const unsigned int n = std::min(request.numEvent, buffer_size);  // never past what NVML was given
  out.reserve(n);
  for (unsigned int i = 0; i < n; ++i) out.push_back({data[i].eventType, data[i].gpuId});
  return out;
}

int get_num_devices() {
  unsigned int n = 0;
  CUCORE_NVML_CHECK(nvmlDeviceGetCount_v2, &n);
  return static_cast<int>(n);
}

std::pair<int, int> get_user_mode_driver_version() {
  int v = 0;
  CUCORE_NVML_CHECK(nvmlSystemGetCudaDriverVersion_v2, &v);
  return {v / 1000, (v % 1000) / 10};
}

std::string driver_version() {
  char buf[nvml::kSystemDriverVersionBufferSize] = {};
  CUCORE_NVML_CHECK(nvmlSystemGetDriverVersion, buf, sizeof buf);
  return std::string(buf, strnlen(buf, sizeof buf));
}

std::vector<int> get_kernel_mode_driver_version() { return parse_version(driver_version()); }

std::string nvml_version() {
  char buf[nvml::kSystemNvmlVersionBufferSize] = {};
  CUCORE_NVML_CHECK(nvmlSystemGetNVMLVersion, buf, sizeof buf);
  return std::string(buf, strnlen(buf, sizeof buf));
}

std::vector<int> get_nvml_version() { return parse_version(nvml_version()); }

std::string get_driver_branch() {
  nvml::SystemDriverBranchInfo_v1 info{};
  info.version = nvml::kSystemDriverBranchInfo_v1;
  CUCORE_NVML_CHECK(nvmlSystemGetDriverBranch, &info, static_cast<unsigned int>(sizeof info.branch));
  return std::string(info.branch, strnlen(info.branch, sizeof info.branch));
}

std::string get_process_name(unsigned int pid) {
  char buf[1024] = {};
  CUCORE_NVML_CHECK(nvmlSystemGetProcessName, pid, buf, sizeof buf);
  return std::string(buf, strnlen(buf, sizeof buf));
}

GpuTopologyLevel get_topology_common_ancestor(const Device& a, const Device& b) {
  int level = 0;
  CUCORE_NVML_CHECK(nvmlDeviceGetTopologyCommonAncestor, detail::nvml_handle(a.handle()),
                    detail::nvml_handle(b.handle()), &level);
  return static_cast<GpuTopologyLevel>(level);
}

GpuP2PStatus get_p2p_status(const Device& a, const Device& b, GpuP2PCapsIndex index) {
  int status = 0;
  CUCORE_NVML_CHECK(nvmlDeviceGetP2PStatus, detail::nvml_handle(a.handle()), detail::nvml_handle(b.handle()),
                    static_cast<int>(index), &status);
  return status >= 0 && status <= static_cast<int>(GpuP2PStatus::unknown) ? static_cast<GpuP2PStatus>(status)
                                                                           : GpuP2PStatus::unknown;
}

// ---- sample ------------------------------------------------------------------------

namespace {

// Runs `query` for one field; a failure (an NvmlError, a device without PCI
// attributes) leaves the field empty and is noted.
template <typename T, typename Query>
void field(DeviceSample& s, const char* name, T& out, Query&& query) {
  try {
    out = query();
  } catch (const Error& e) {
    s.errors.push_back(std::string(name) + ": " + e.what());
  }
}

DeviceSample sample_device(unsigned int index) {
  DeviceSample s;
  s.index = index;
  std::optional<Device> found;
  field(s, "device", found, [&] { return Device(index); });  // a lost GPU fails here
  if (!found) return s;
  const Device& d = *found;
  field(s, "name", s.name, [&] { return d.name(); });
  field(s, "uuid", s.uuid, [&] { return d.uuid(); });
  field(s, "pci_bus_id", s.pci_bus_id, [&] { return d.pci_bus_id(); });
  field(s, "temperature", s.temperature_c, [&] { return d.temperature().get_sensor(); });
  field(s, "fan", s.fan_percent, [&]() -> std::optional<unsigned int> {
    auto n = d.num_fans();
    if (!n || *n == 0) return std::nullopt;
    return d.fan_speed(0);
  });
  field(s, "power_usage", s.power_usage_mw, [&] { return d.power_usage_mw(); });
  field(s, "power_limit", s.power_limit_mw, [&] { return d.power_management_limit_mw(); });
  field(s, "performance_state", s.performance_state, [&] { return d.performance_state(); });
  field(s, "memory", s.memory, [&] { return d.memory_info(); });
  field(s, "utilization", s.utilization, [&] { return d.utilization(); });
  field(s, "sm_clock", s.sm_clock_mhz, [&] { return d.get_clock(ClockType::sm).get_current_mhz(); });
  field(s, "memory_clock", s.memory_clock_mhz, [&] { return d.get_clock(ClockType::memory).get_current_mhz(); });
  field(s, "max_sm_clock", s.max_sm_clock_mhz, [&] { return d.get_clock(ClockType::sm).get_max_mhz(); });
  field(s, "max_memory_clock", s.max_memory_clock_mhz, [&] { return d.get_clock(ClockType::memory).get_max_mhz(); });
  field(s, "mig_mode", s.mig_mode, [&] { return d.mig_mode(); });
  field(s, "mig_pending_mode", s.mig_pending_mode, [&] { return d.mig_pending_mode(); });
  field(s, "clock_event_reasons", s.clock_event_reasons, [&] { return d.current_clock_event_reasons(); });
  std::optional<std::vector<ProcessInfo>> procs;
  field(s, "processes", procs, [&] { return d.compute_running_processes(); });
  for (const ProcessInfo& p : procs.value_or(std::vector<ProcessInfo>{})) {
    ProcessSample ps{p, {}};
    try {
      ps.name = get_process_name(p.pid);
    } catch (const NvmlError&) {
      // Gone already, or another user's: the table shows the pid alone.
    }
    s.processes.push_back(std::move(ps));
  }
  return s;
}

}  // namespace

Sample sample() {
  Sample out;
  out.driver_version = driver_version();
  out.nvml_version = nvml_version();
  try {
    out.cuda_version = get_user_mode_driver_version();
  } catch (const NvmlError&) {
    // An NVML without the entry point: the CUDA version stays (0, 0).
  }
  int n = get_num_devices();
  for (int i = 0; i < n; ++i) out.devices.push_back(sample_device(static_cast<unsigned int>(i)));
  return out;
}

}  // namespace cucore::system
