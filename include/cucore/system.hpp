#pragma once
// System monitoring through NVML, as cuda.core.system: the driver's versions,
// each GPU's identity, clocks, temperatures, power, memory, utilization, PCIe,
// NVLink, MIG, running processes, throttle reasons, ECC errors and events.
//
// NVML (libnvidia-ml.so.1, part of the driver) is loaded and initialized on
// first use; without it every call throws LibraryNotFoundError listing where it
// looked. A value the GPU does not report (NVML_ERROR_NOT_SUPPORTED, e.g. fans
// on a passively cooled H200) is an empty optional (within an
// UnsupportedAsError scope, an NvmlError instead); any other NVML failure is
// an NvmlError carrying NVML's return code. Calls are thread-safe.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace cucore {

// An NVML call failed: NVML's return code, its name and text, and the call.
class NvmlError : public RuntimeError {
 public:
  NvmlError(int code, std::string call);
  int code() const noexcept { return code_; }                                  // nvmlReturn_t
  const std::string& name() const noexcept { return name_; }                   // "NVML_ERROR_NO_PERMISSION"
  const std::string& description() const noexcept { return description_; }    // nvmlErrorString's text
  const std::string& call() const noexcept { return call_; }                   // "nvmlDeviceGetPowerUsage"

 private:
  int code_;
  std::string name_, description_, call_;
};

// The handle layer's boxes of NVML's event sets (src/handles/nvml_handles.hpp).
namespace detail {
class NvmlEventSetBox;
class NvmlSystemEventSetBox;
}  // namespace detail

namespace system {

// While one lives on a thread, a query there that NVML declines throws
// NvmlError (NVML's code and call) instead of answering empty: an empty
// optional, a count of 0 (get_nvlink_count, mig_device_count, and so
// get_nvlinks, mig_devices), false (is_mig_device, InforomInfo::validate), and
// bbx_flush_time before the run's first flush (NVML_ERROR_NOT_READY); a
// NOT_SUPPORTED lookup is NvmlError rather than std::out_of_range (mig_device)
// or Error (pci_info). What NVML reports as unknown stays empty
// (performance_state's NVML_PSTATE_UNKNOWN, an NVLink version of 0).
// cucore.system holds one around every call: cuda.core.system raises
// NotSupportedError where the C++ API answers empty. Scopes nest.
class UnsupportedAsError {
 public:
  UnsupportedAsError() noexcept;
  ~UnsupportedAsError();
  UnsupportedAsError(const UnsupportedAsError&) = delete;
  UnsupportedAsError& operator=(const UnsupportedAsError&) = delete;
};

// ---- the machine ------------------------------------------------------------

int get_num_devices();
// The CUDA version the driver supports: (13, 0).
std::pair<int, int> get_user_mode_driver_version();
// The kernel-mode driver's version: {580, 159, 4}; driver_version() as text: "580.159.04".
std::vector<int> get_kernel_mode_driver_version();
std::string driver_version();
// NVML's version: {13, 580, 159, 4}; nvml_version() as text: "13.580.159.04".
std::vector<int> get_nvml_version();
std::string nvml_version();
std::string get_driver_branch();  // "r580_00"
std::string get_process_name(unsigned int pid);

// ---- enumerations (the values are NVML's) ------------------------------------

enum class DeviceArch : unsigned {
  kepler = 2, maxwell = 3, pascal = 4, volta = 5, turing = 6, ampere = 7, ada = 8, hopper = 9, blackwell = 10,
  unknown = 0xffffffff,
};
enum class ClockType : int { graphics = 0, sm = 1, memory = 2, video = 3 };
enum class ClockId : int { current = 0, customer_boost_max = 3 };
enum class TemperatureThresholds : int {
  shutdown = 0, slowdown = 1, mem_max = 2, gpu_max = 3, acoustic_min = 4, acoustic_curr = 5, acoustic_max = 6,
  gps_curr = 7,
};
enum class GpuTopologyLevel : int { internal = 0, single = 10, multiple = 20, hostbridge = 30, node = 40, system = 50 };
enum class GpuP2PCapsIndex : int { read = 0, write = 1, nvlink = 2, atomics = 3, pci = 4, prop = 4, unknown = 5 };
enum class GpuP2PStatus : int {
  ok = 0, chipset_not_supported = 1, gpu_not_supported = 2, ioh_topology_not_supported = 3, disabled_by_regkey = 4,
  not_supported = 5, unknown = 6,
};
enum class MemoryErrorType : int { corrected = 0, uncorrected = 1 };
enum class AffinityScope : unsigned { node = 0, socket = 1 };  // NVML_AFFINITY_SCOPE_*
enum class AddressingMode : unsigned { none = 0, hmm = 1, ats = 2 };
enum class InforomObject : int { oem = 0, ecc = 1, power = 2, den = 3 };
enum class EccCounterType : int { volatile_ecc = 0, aggregate_ecc = 1 };  // since the driver loaded; lifetime

// Bits of current/supported_clock_event_reasons (nvmlClocksEventReason*).
namespace clocks_event_reasons {
constexpr std::uint64_t gpu_idle = 0x1, applications_clocks_setting = 0x2, sw_power_cap = 0x4, hw_slowdown = 0x8,
                        sync_boost = 0x10, sw_thermal_slowdown = 0x20, hw_thermal_slowdown = 0x40,
                        hw_power_brake_slowdown = 0x80, display_clock_setting = 0x100;
}
// Bits of register_events / supported_event_types (nvmlEventType*).
namespace event_types {
constexpr std::uint64_t single_bit_ecc_error = 0x1, double_bit_ecc_error = 0x2, pstate = 0x4,
                        xid_critical_error = 0x8, clock = 0x10, power_source_change = 0x80,
                        mig_config_change = 0x100, single_bit_ecc_error_storm = 0x200,
                        dram_retirement_event = 0x400, dram_retirement_failure = 0x800,
                        non_fatal_poison_error = 0x1000, fatal_poison_error = 0x2000,
                        gpu_unavailable_error = 0x4000, gpu_recovery_action = 0x8000;
}

// Bits of system::register_events (nvmlSystemEventType*): a GPU unbound from,
// or bound to, the driver.
namespace system_event_types {
constexpr std::uint64_t gpu_driver_unbind = 0x1, gpu_driver_bind = 0x2;
}

// The names of the bits set in a mask, lowest first ("gpu_idle", "sw_power_cap";
// "xid_critical_error"; "unbind"): the values of cuda.core.system's
// ClocksEventReasons, EventType and SystemEventType. Bits cucore does not know
// are left out.
std::vector<std::string> clock_event_reason_names(std::uint64_t reasons);
std::vector<std::string> event_type_names(std::uint64_t types);
std::vector<std::string> system_event_type_names(std::uint64_t types);
// The bit of an event type name; std::invalid_argument listing the names when unknown.
std::uint64_t event_type_bit(std::string_view name);
std::uint64_t system_event_type_bit(std::string_view name);

// NVML's field ids (NVML_FI_*) by the names of cuda.core.system's FieldId
// ("DEV_ECC_CURRENT" is 1), in FieldId's order; two names may share an id.
struct FieldIdName {
  unsigned int id{};
  const char* name{};
};
std::span<const FieldIdName> field_id_names() noexcept;

// ---- values -------------------------------------------------------------------

struct MemoryInfo {  // bytes; total = reserved + used + free
  std::uint64_t total = 0, used = 0, free = 0, reserved = 0;
};
struct BAR1MemoryInfo {  // bytes
  std::uint64_t total = 0, used = 0, free = 0;
};
struct Utilization {  // percent of the last sample period
  unsigned int gpu = 0, memory = 0;
};
struct EngineUtilization {  // encoder / decoder
  unsigned int percent = 0, sampling_period_us = 0;
};
struct ProcessInfo {
  unsigned int pid = 0;
  std::optional<std::uint64_t> used_gpu_memory{};  // bytes; empty where NVML cannot tell (NVML_VALUE_NOT_AVAILABLE)
  // The MIG instances it runs in; empty outside MIG (NVML reports 0xFFFFFFFF).
  std::optional<unsigned int> gpu_instance_id{}, compute_instance_id{};
};

// One value of Device::get_field_values (nvmlFieldValue_t). Each value carries
// its own NVML status: value() throws NvmlError when it is not NVML_SUCCESS.
struct FieldValue {
  unsigned int field_id = 0, scope_id = 0;
  std::int64_t timestamp_us = 0;  // CPU time of the sample, microseconds since 1970
  std::int64_t latency_us = 0;    // how long NVML took to update it
  int status = 0;                 // nvmlReturn_t of this value
  std::variant<std::int64_t, std::uint64_t, double> raw{};  // by NVML's value type
  const std::variant<std::int64_t, std::uint64_t, double>& value() const;
};

// A clock domain's offsets at one P-state (MHz; may be negative).
struct ClockOffsets {
  int clock_offset_mhz = 0, min_offset_mhz = 0, max_offset_mhz = 0;
};

struct RepairStatus {  // pending TPC / channel repairs
  bool channel_repair_pending = false, tpc_repair_pending = false;
};

// Counts of a device's engines and slices (nvmlDeviceAttributes_t).
struct DeviceAttributes {
  unsigned int multiprocessor_count = 0, shared_copy_engine_count = 0, shared_decoder_count = 0,
               shared_encoder_count = 0, shared_jpeg_count = 0, shared_ofa_count = 0, gpu_instance_slice_count = 0,
               compute_instance_slice_count = 0;
  std::uint64_t memory_size_mb = 0;  // MiB
};

// One utilization domain of Device::dynamic_pstates_info (graphics, frame
// buffer, video, bus, ...: NVML's nvmlGpuUtilizationDomainId_t order).
struct DynamicPstateUtilization {
  bool is_present = false;
  unsigned int percentage = 0;     // busy in the last second
  unsigned int inc_threshold = 0;  // crossing it can raise the P-state
  unsigned int dec_threshold = 0;  // crossing it can lower the P-state
};

// A device's cooler: its control signal (0 none, 1 toggle, 2 variable) and
// the nvmlCoolerTarget_t bits it cools (1 nothing, 2 GPU, 4 memory, 8 power supply).
struct CoolerInfo {
  int signal_type = 0;
  unsigned int target = 0;
};

// One sensor of Temperature::get_thermal_settings (degrees Celsius);
// controller and target are NVML's nvmlThermalController_t / nvmlThermalTarget_t.
struct ThermalSensor {
  int controller = -1, default_min_temp = 0, default_max_temp = 0, current_temp = 0, target = 0;
};

class Device;

// A device's InfoROM (non-volatile board memory), read on each call.
class InforomInfo {
 public:
  std::optional<std::string> get_version(InforomObject object) const;
  std::optional<std::string> image_version() const;
  std::optional<unsigned int> configuration_checksum() const;
  // Reads the InfoROM and checks its checksums: NvmlError
  // (NVML_ERROR_CORRUPTED_INFOROM) when corrupted; false when not supported
  // (NvmlError within an UnsupportedAsError scope).
  bool validate() const;
  // (timestamp, duration in microseconds) of the last blackbox flush; empty
  // also before the first flush of this run (NVML_ERROR_NOT_READY).
  std::optional<std::pair<std::uint64_t, unsigned long>> bbx_flush_time() const;
  std::optional<std::string> board_part_number() const;

 private:
  friend class Device;
  explicit InforomInfo(void* h) : handle_(h) {}
  void* handle_;
};

// A device's PCI identity (read once) and its PCIe link (read on each call).
class PciInfo {
 public:
  const std::string& bus_id() const noexcept { return bus_id_; }  // "00000000:3B:00.0"
  unsigned int domain() const noexcept { return domain_; }
  unsigned int bus() const noexcept { return bus_; }
  unsigned int device() const noexcept { return device_; }
  unsigned int vendor_id() const noexcept { return vendor_id_; }
  unsigned int device_id() const noexcept { return device_id_; }
  unsigned int subsystem_id() const noexcept { return subsystem_id_; }
  unsigned int base_class() const noexcept { return base_class_; }
  unsigned int sub_class() const noexcept { return sub_class_; }
  // PCIe link: generation and width the device and system allow, the GPU's own
  // maximum generation, the current ones, throughput over a 20 ms window (KB/s)
  // and the replay counter.
  std::optional<unsigned int> link_generation() const;
  std::optional<unsigned int> max_link_generation() const;
  std::optional<unsigned int> max_link_width() const;
  std::optional<unsigned int> current_link_generation() const;
  std::optional<unsigned int> current_link_width() const;
  std::optional<unsigned int> tx_throughput() const;
  std::optional<unsigned int> rx_throughput() const;
  std::optional<unsigned int> replay_counter() const;

 private:
  friend class Device;
  void* handle_ = nullptr;
  std::string bus_id_;
  unsigned int domain_ = 0, bus_ = 0, device_ = 0, vendor_id_ = 0, device_id_ = 0, subsystem_id_ = 0,
               base_class_ = 0, sub_class_ = 0;
};

// One clock domain of a device (MHz).
class ClockInfo {
 public:
  std::optional<unsigned int> get_current_mhz(ClockId id = ClockId::current) const;
  std::optional<unsigned int> get_max_mhz() const;
  std::optional<unsigned int> get_max_customer_boost_mhz() const;
  std::optional<unsigned int> get_application_mhz() const;  // the applications clock target
  // At P-state `pstate` (0 = P0 .. 15; std::invalid_argument otherwise): the
  // lowest and highest clock, and the current offset with its bounds.
  std::optional<std::pair<unsigned int, unsigned int>> get_min_max_clock_of_pstate_mhz(int pstate) const;
  std::optional<ClockOffsets> get_offsets(int pstate) const;

 private:
  friend class Device;
  ClockInfo(void* h, ClockType t) : handle_(h), type_(t) {}
  void* handle_;
  ClockType type_;
};

// Temperatures in degrees Celsius.
class Temperature {
 public:
  std::optional<unsigned int> get_sensor() const;  // the GPU's sensor
  std::optional<unsigned int> get_threshold(TemperatureThresholds threshold) const;
  std::optional<int> margin() const;  // distance to the nearest slowdown threshold
  // The sensors NVML reports for `sensor_index` (an nvmlThermalTarget_t), at most 3.
  std::optional<std::vector<ThermalSensor>> get_thermal_settings(int sensor_index) const;

 private:
  friend class Device;
  explicit Temperature(void* h) : handle_(h) {}
  void* handle_;
};

class NvlinkInfo {
 public:
  unsigned int link() const noexcept { return link_; }
  std::optional<bool> state() const;                     // active
  std::optional<std::pair<int, int>> version() const;    // (4, 0)
  std::optional<std::string> remote_pci_bus_id() const;  // the device at the other end

 private:
  friend class Device;
  NvlinkInfo(void* h, unsigned int link) : handle_(h), link_(link) {}
  void* handle_;
  unsigned int link_;
};

struct EventData;

// Events registered on one device: a share of the box that owns NVML's event
// set (copies share it; the last one frees it). A moved-from value holds none.
class DeviceEvents {
 public:
  // Waits up to `timeout_ms` (0: forever) for the next event; empty on timeout.
  std::optional<EventData> wait(unsigned int timeout_ms = 0) const;

 private:
  friend class Device;
  explicit DeviceEvents(std::shared_ptr<detail::NvmlEventSetBox> set) noexcept;
  std::shared_ptr<detail::NvmlEventSetBox> set_;
};

// A GPU as NVML sees it. A cheap value over NVML's device handle, valid for
// the process. NVML's index order need not be CUDA's: map with
// to_cuda_device() / cucore::Device::to_system_device() (by UUID).
class Device {
 public:
  // Throws std::out_of_range naming the device count when `index` is not a device.
  explicit Device(unsigned int index);
  // "GPU-8c3..." (the "GPU-" prefix may be left out, as CUDA prints UUIDs) or
  // a PCI bus id "0000:3B:00.0"; an unknown device is std::out_of_range, a
  // malformed string std::invalid_argument.
  static Device from_uuid(std::string_view uuid);
  static Device from_pci_bus_id(std::string_view pci_bus_id);
  // Adopts an nvmlDevice_t (e.g. from pynvml); not checked.
  static Device from_handle(void* nvml_device) noexcept { return Device(nvml_device, Adopt{}); }
  static int get_device_count();
  static std::vector<Device> get_all_devices();

  void* handle() const noexcept { return handle_; }  // nvmlDevice_t
  friend bool operator==(const Device& a, const Device& b) noexcept { return a.handle_ == b.handle_; }

  // Identity.
  unsigned int index() const;
  std::string name() const;
  std::string brand() const;  // "Tesla", "NVIDIA", ...; "Unknown"
  std::string uuid() const;   // "GPU-..." ("MIG-..." for a MIG device)
  std::string uuid_without_prefix() const;
  std::string pci_bus_id() const;
  PciInfo pci_info() const;
  DeviceArch arch() const;
  ComputeCapability cuda_compute_capability() const;
  std::optional<std::string> serial() const;
  std::optional<unsigned int> module_id() const;
  std::optional<unsigned int> minor_number() const;
  std::optional<int> numa_node_id() const;  // -1 when the GPU is not a NUMA node
  std::optional<bool> is_persistence_mode_enabled() const;
  // Needs root; NvmlError (NVML_ERROR_NO_PERMISSION) otherwise.
  void set_persistence_mode(bool enabled) const;
  std::optional<bool> is_c2c_enabled() const;
  // HMM or ATS (system memory addressable from the GPU); none when neither.
  std::optional<AddressingMode> addressing_mode() const;
  std::optional<bool> is_display_connected() const;  // a monitor on a connector
  std::optional<bool> is_display_active() const;     // a display initialized (e.g. by an X server)
  std::optional<DeviceAttributes> attributes() const;
  std::optional<RepairStatus> repair_status() const;
  InforomInfo inforom() const { return InforomInfo(handle_); }
  cucore::Device to_cuda_device() const;  // throws cucore::Error when CUDA has no device of this UUID

  // MIG.
  std::optional<bool> mig_mode() const;          // current
  std::optional<bool> mig_pending_mode() const;  // after the next reset
  bool is_mig_device() const;
  unsigned int mig_device_count() const;  // the most MIG devices this GPU can hold; 0 without MIG
  std::vector<Device> mig_devices() const;
  Device mig_device(unsigned int index) const;  // std::out_of_range when no MIG device is at `index`
  Device mig_parent() const;  // for a MIG device, its GPU

  // Clocks and performance.
  ClockInfo get_clock(ClockType type) const { return ClockInfo(handle_, type); }
  std::optional<int> performance_state() const;  // 0 (P0) .. 15
  std::optional<std::vector<int>> supported_pstates() const;
  std::optional<std::uint64_t> current_clock_event_reasons() const;  // clocks_event_reasons bits
  std::optional<std::uint64_t> supported_clock_event_reasons() const;
  // Performance monitor samples of each utilization domain (8 entries).
  std::optional<std::vector<DynamicPstateUtilization>> dynamic_pstates_info() const;
  std::optional<CoolerInfo> cooler() const;  // the first cooler's
  // (current, default) state of auto boosted clocks.
  std::optional<std::pair<bool, bool>> is_auto_boosted_clocks_enabled() const;

  // CPU and memory affinity (Linux): the CPUs, or the NUMA nodes, nearest the
  // device within `scope`, ascending. set_cpu_affinity binds the calling
  // thread to the device's CPUs; clear_cpu_affinity unbinds it (all CPUs).
  std::optional<std::vector<unsigned int>> get_cpu_affinity(AffinityScope scope = AffinityScope::node) const;
  std::optional<std::vector<unsigned int>> get_memory_affinity(AffinityScope scope = AffinityScope::node) const;
  void set_cpu_affinity() const;
  void clear_cpu_affinity() const;
  // The GPUs with an affinity to CPU `cpu`.
  static std::vector<Device> get_all_devices_with_cpu_affinity(unsigned int cpu);
  // The GPUs nearest this one at `level` (NVML leaves this device out).
  std::vector<Device> get_topology_nearest_gpus(GpuTopologyLevel level) const;

  // Field values (NVML_FI_*): one call for many, each (field id, scope id)
  // with its own status. An empty list asks NVML nothing.
  std::vector<FieldValue> get_field_values(const std::vector<std::pair<unsigned int, unsigned int>>& fields) const;
  void clear_field_values(const std::vector<std::pair<unsigned int, unsigned int>>& fields) const;

  // Thermals and cooling.
  Temperature temperature() const { return Temperature(handle_); }
  std::optional<unsigned int> num_fans() const;
  std::optional<unsigned int> fan_speed(unsigned int fan = 0) const;  // percent of the maximum
  std::optional<unsigned int> fan_speed_rpm(unsigned int fan = 0) const;
  std::optional<unsigned int> target_fan_speed(unsigned int fan = 0) const;  // percent, what the driver aims at
  std::optional<std::pair<unsigned int, unsigned int>> min_max_fan_speed() const;  // percent, every fan's
  // NVML_FAN_POLICY_TEMPERATURE_CONTINOUS_SW (0) or NVML_FAN_POLICY_MANUAL (1).
  std::optional<unsigned int> fan_control_policy(unsigned int fan = 0) const;
  // Set the fan's intended speed (percent; the policy becomes manual), or back
  // to the driver's default. Need root; NotSupported where the GPU has no fan.
  void set_fan_speed(unsigned int fan, unsigned int percent) const;
  void set_default_fan_speed(unsigned int fan = 0) const;

  // Power (milliwatts) and energy (millijoules since the driver loaded).
  std::optional<unsigned int> power_usage_mw() const;
  std::optional<unsigned int> power_management_limit_mw() const;
  std::optional<unsigned int> power_management_default_limit_mw() const;
  std::optional<std::pair<unsigned int, unsigned int>> power_management_limit_constraints_mw() const;
  std::optional<unsigned int> enforced_power_limit_mw() const;
  std::optional<std::uint64_t> total_energy_consumption_mj() const;

  // Memory and utilization.
  std::optional<MemoryInfo> memory_info() const;
  std::optional<BAR1MemoryInfo> bar1_memory_info() const;
  std::optional<Utilization> utilization() const;
  std::optional<EngineUtilization> encoder_utilization() const;
  std::optional<EngineUtilization> decoder_utilization() const;

  // NVLink: links the device has (0 without NVLink); link >= the count is
  // std::out_of_range.
  unsigned int get_nvlink_count() const;
  NvlinkInfo get_nvlink(unsigned int link) const;
  std::vector<NvlinkInfo> get_nvlinks() const;

  // Processes with a compute context on the device.
  std::optional<std::vector<ProcessInfo>> compute_running_processes() const;

  // ECC: (current, pending) mode, and error counts.
  std::optional<std::pair<bool, bool>> ecc_mode() const;
  std::optional<std::uint64_t> get_total_ecc_errors(MemoryErrorType error, EccCounterType counter) const;

  // Events (XID errors, ...): event_types bits. register_events throws
  // NvmlError (NVML_ERROR_NOT_SUPPORTED) when the device supports none of them.
  std::optional<std::uint64_t> supported_event_types() const;
  DeviceEvents register_events(std::uint64_t event_types) const;

 private:
  struct Adopt {};
  Device(void* h, Adopt) noexcept : handle_(h) {}
  void* handle_ = nullptr;
};

struct EventData {
  Device device;  // no default: a Device is always some device (EventData is only ever given)
  std::uint64_t event_type = 0;  // one event_types bit
  std::uint64_t event_data = 0;  // the XID for xid_critical_error
  unsigned int gpu_instance_id = 0, compute_instance_id = 0;
};

// One system event: its system_event_types bit and the GPU it is about.
struct SystemEvent {
  std::uint64_t event_type = 0;
  unsigned int gpu_id = 0;  // NVML's PCI form: ((domain & 0xffff) << 16) | (bus << 8) | device
  std::string pci_bus_id() const;  // "00000000:3B:00.0", as NVML spells bus ids
  // The GPU of pci_bus_id() (as Device::from_pci_bus_id: std::out_of_range
  // when NVML no longer sees it, e.g. once unbound).
  Device device() const;
};

// Events registered on the whole system (Linux): a share of the box that owns
// NVML's system event set, as DeviceEvents.
class RegisteredSystemEvents {
 public:
  // Up to `buffer_size` events (1 .. 65536; std::invalid_argument otherwise),
  // waiting up to `timeout_ms` for the first; empty on timeout. NVML does not
  // wait at all when `timeout_ms` is 0.
  std::optional<std::vector<SystemEvent>> wait(unsigned int timeout_ms = 0, unsigned int buffer_size = 1) const;

 private:
  friend RegisteredSystemEvents register_events(std::uint64_t system_event_types);
  explicit RegisteredSystemEvents(std::shared_ptr<detail::NvmlSystemEventSetBox> set) noexcept;
  std::shared_ptr<detail::NvmlSystemEventSetBox> set_;
};

// Starts recording `system_event_types` (system_event_types bits); events
// before this call are not recorded. NvmlError (NVML_ERROR_NOT_SUPPORTED)
// when none of them can be.
RegisteredSystemEvents register_events(std::uint64_t system_event_types);

GpuTopologyLevel get_topology_common_ancestor(const Device& a, const Device& b);
GpuP2PStatus get_p2p_status(const Device& a, const Device& b, GpuP2PCapsIndex index);

// ---- one sample of everything `cucore smi` shows ----------------------------

struct ProcessSample {
  ProcessInfo info{};
  std::string name{};  // empty when NVML cannot tell
};
struct DeviceSample {
  unsigned int index = 0;
  std::string name{}, uuid{}, pci_bus_id{};
  std::optional<unsigned int> temperature_c{}, fan_percent{}, power_usage_mw{}, power_limit_mw{};
  std::optional<int> performance_state{};
  std::optional<MemoryInfo> memory{};
  std::optional<Utilization> utilization{};
  std::optional<unsigned int> sm_clock_mhz{}, memory_clock_mhz{}, max_sm_clock_mhz{}, max_memory_clock_mhz{};
  std::optional<bool> mig_mode{}, mig_pending_mode{};
  std::optional<std::uint64_t> clock_event_reasons{};
  std::vector<ProcessSample> processes{};
  std::vector<std::string> errors{};  // fields that failed (their values are empty)
};
struct Sample {
  std::string driver_version{}, nvml_version{};
  std::pair<int, int> cuda_version{0, 0};
  std::vector<DeviceSample> devices{};
};
// Every field of every device; a field whose query fails is left empty and
// the failure recorded in DeviceSample::errors. Throws only when NVML itself
// is unusable.
Sample sample();

}  // namespace system
}  // namespace cucore
