// cucore._core._system: cucore::system bound with cuda.core.system's names and
// shapes; the package cucore.system (python/cucore/system/) re-exports it with
// the enums (typing.py) and the exception classes (exceptions.py).
//
// Enumerations cross as cuda.core's: arguments accept the enum or its string
// value; results are built from cucore.system.typing. NVML failures raise the
// cuda.core.system exception class of their return code (errors.cpp translates
// them, as every error). Every call runs in a system::UnsupportedAsError scope
// (the `raising` / `release` guards), so a query NVML does not support raises
// NotSupportedError naming the NVML call, as cuda.core.system's do, where the
// C++ API answers empty; None remains where cuda.core answers None too (an
// unknown P-state, no addressing mode, a cooler signal NVML does not name).
#include <cucore/system.hpp>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "common.hpp"
#include "loader/toolkit.hpp"

namespace cucore::python {
namespace {

namespace sys = cucore::system;

// The package's Python modules, imported on first use (never while _core
// itself is being imported) and kept for the process.
nb::object typing_enum(const char* cls, nb::handle value) {
  static nb::module_* typing = new nb::module_(nb::module_::import_("cucore.system.typing"));
  return typing->attr(cls)(value);
}

// The string value of a StrEnum member or a plain str.
std::string enum_arg(nb::handle v, const char* what) {
  if (!PyUnicode_Check(v.ptr()))
    raise_type_error(std::string(what) + " must be a str or a cucore.system.typing enum member, got " +
                     nb::cast<std::string>(nb::repr(v)));
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(v.ptr(), &n);
  if (!s) throw nb::python_error();
  return std::string(s, static_cast<std::size_t>(n));
}

template <typename E, std::size_t N>
E parse_enum(nb::handle v, const char* what, const std::pair<const char*, E> (&table)[N]) {
  std::string s = enum_arg(v, what);
  std::string known;
  for (const auto& [name, e] : table) {
    if (s == name) return e;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  raise_value_error("Invalid " + std::string(what) + ": '" + s + "'. Must be one of: " + known);
}

template <typename E, std::size_t N>
const char* enum_name(E e, const std::pair<const char*, E> (&table)[N]) {
  for (const auto& [name, value] : table)
    if (value == e) return name;
  return "unknown";
}

constexpr std::pair<const char*, sys::ClockType> kClockTypes[] = {
    {"graphics", sys::ClockType::graphics}, {"sm", sys::ClockType::sm},
    {"memory", sys::ClockType::memory},     {"video", sys::ClockType::video}};
constexpr std::pair<const char*, sys::ClockId> kClockIds[] = {{"current", sys::ClockId::current},
                                                              {"customer_boost_max", sys::ClockId::customer_boost_max}};
constexpr std::pair<const char*, sys::TemperatureThresholds> kThresholds[] = {
    {"shutdown", sys::TemperatureThresholds::shutdown},         {"slowdown", sys::TemperatureThresholds::slowdown},
    {"mem_max", sys::TemperatureThresholds::mem_max},           {"gpu_max", sys::TemperatureThresholds::gpu_max},
    {"acoustic_min", sys::TemperatureThresholds::acoustic_min}, {"acoustic_curr", sys::TemperatureThresholds::acoustic_curr},
    {"acoustic_max", sys::TemperatureThresholds::acoustic_max}, {"gps_curr", sys::TemperatureThresholds::gps_curr}};
constexpr std::pair<const char*, sys::GpuTopologyLevel> kTopologyLevels[] = {
    {"internal", sys::GpuTopologyLevel::internal},     {"single", sys::GpuTopologyLevel::single},
    {"multiple", sys::GpuTopologyLevel::multiple},     {"hostbridge", sys::GpuTopologyLevel::hostbridge},
    {"node", sys::GpuTopologyLevel::node},             {"system", sys::GpuTopologyLevel::system}};
constexpr std::pair<const char*, sys::GpuP2PCapsIndex> kP2PCaps[] = {
    {"read", sys::GpuP2PCapsIndex::read}, {"write", sys::GpuP2PCapsIndex::write},
    {"nvlink", sys::GpuP2PCapsIndex::nvlink}, {"atomics", sys::GpuP2PCapsIndex::atomics},
    {"pci", sys::GpuP2PCapsIndex::pci}, {"prop", sys::GpuP2PCapsIndex::prop}, {"unknown", sys::GpuP2PCapsIndex::unknown}};
constexpr std::pair<const char*, sys::GpuP2PStatus> kP2PStatus[] = {
    {"ok", sys::GpuP2PStatus::ok},
    {"chipset not supported", sys::GpuP2PStatus::chipset_not_supported},
    {"GPU not supported", sys::GpuP2PStatus::gpu_not_supported},
    {"IOH topology not supported", sys::GpuP2PStatus::ioh_topology_not_supported},
    {"disabled by regkey", sys::GpuP2PStatus::disabled_by_regkey},
    {"not supported", sys::GpuP2PStatus::not_supported},
    {"unknown", sys::GpuP2PStatus::unknown}};
constexpr std::pair<const char*, sys::AffinityScope> kAffinityScopes[] = {{"node", sys::AffinityScope::node},
                                                                         {"socket", sys::AffinityScope::socket}};
constexpr std::pair<const char*, sys::InforomObject> kInforomObjects[] = {
    {"oem", sys::InforomObject::oem}, {"ecc", sys::InforomObject::ecc},
    {"power", sys::InforomObject::power}, {"den", sys::InforomObject::den}};
constexpr std::pair<const char*, sys::MemoryErrorType> kMemoryErrorTypes[] = {
    {"corrected", sys::MemoryErrorType::corrected}, {"uncorrected", sys::MemoryErrorType::uncorrected}};
constexpr std::pair<const char*, sys::EccCounterType> kEccCounterTypes[] = {
    {"volatile", sys::EccCounterType::volatile_ecc}, {"aggregate", sys::EccCounterType::aggregate_ecc}};

nb::list enum_list(const char* cls, const std::vector<std::string>& names) {
  nb::list out;
  for (const auto& n : names) out.append(typing_enum(cls, nb::str(n.c_str())));
  return out;
}

// Raises cucore.system.<cls>(message), e.g. the class cuda.core raises for a bad device index.
[[noreturn]] void raise_nvml_class(const char* cls, const std::string& message) {
  PyErr_SetString(system_exceptions_attr(cls).ptr(), message.c_str());
  throw nb::python_error();
}

// A fan of a device, as cuda.core's FanInfo.
struct FanInfo {
  sys::Device device;
  unsigned int fan;
};

// The MIG accessor, as cuda.core's MigInfo.
struct MigInfo {
  sys::Device device;
};

// Every binding of an NVML query holds one of these: `raising` where the
// lambda releases the GIL itself, `release` otherwise.
using raising = nb::call_guard<sys::UnsupportedAsError>;
using release = nb::call_guard<sys::UnsupportedAsError, nb::gil_scoped_release>;

// get_field_values' argument: field ids, or (field id, scope id) pairs.
std::vector<std::pair<unsigned int, unsigned int>> field_ids_arg(nb::handle ids) {
  if (PyUnicode_Check(ids.ptr()) || !PySequence_Check(ids.ptr()))
    raise_type_error("field_ids must be a list of field ids or (field id, scope id) pairs, got " +
                     nb::cast<std::string>(nb::repr(ids)));
  auto id = [](nb::handle v, const char* what) {
    if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
      raise_type_error(std::string(what) + " must be an int, got " + nb::cast<std::string>(nb::repr(v)));
    long long i = PyLong_AsLongLong(nb::steal(PyNumber_Index(v.ptr())).ptr());
    if (i == -1 && PyErr_Occurred()) throw nb::python_error();
    if (i < 0 || i > 0xffffffffLL) raise_value_error(std::string(what) + " " + std::to_string(i) + " is out of range");
    return static_cast<unsigned int>(i);
  };
  std::vector<std::pair<unsigned int, unsigned int>> out;
  for (nb::handle item : ids) {
    if (PyTuple_Check(item.ptr())) {
      if (PyTuple_Size(item.ptr()) != 2)
        raise_value_error("a field_ids pair must be (field id, scope id), got " + nb::cast<std::string>(nb::repr(item)));
      out.emplace_back(id(PyTuple_GET_ITEM(item.ptr(), 0), "field id"), id(PyTuple_GET_ITEM(item.ptr(), 1), "scope id"));
    } else {
      out.emplace_back(id(item, "field id"), 0u);
    }
  }
  return out;
}

// A field id as a cucore.system.typing.FieldId member; an id cucore's table
// does not name (a newer NVML's) stays an int.
nb::object field_id_object(unsigned int id) {
  for (const auto& f : sys::field_id_names())
    if (f.id == id) return typing_enum("FieldId", nb::int_(id));
  return nb::int_(id);
}

// A P-state argument (0 = P0 .. 15), checked with cuda.core's words.
int pstate_arg(nb::handle pstate) {
  if (PyBool_Check(pstate.ptr()) || !PyIndex_Check(pstate.ptr()))
    raise_type_error("pstate must be an int, got " + nb::cast<std::string>(nb::repr(pstate)));
  long long p = PyLong_AsLongLong(nb::steal(PyNumber_Index(pstate.ptr())).ptr());
  if (p == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    p = -1;  // too large for a long long: out of range all the same
  }
  if (p < 0 || p > 15)
    raise_value_error("Invalid P-state: " + nb::cast<std::string>(nb::str(pstate)) +
                      ". Must be between 0 and 15 inclusive.");
  return static_cast<int>(p);
}

// An events argument: a member or string of `cls`, or a list of them, as one mask.
std::uint64_t events_mask(nb::handle events, const char* cls, std::uint64_t (*bit)(std::string_view)) {
  std::uint64_t mask = 0;
  if (PyUnicode_Check(events.ptr())) {
    mask = bit(enum_arg(events, "event type"));
  } else if (PyList_Check(events.ptr()) || PyTuple_Check(events.ptr())) {
    for (nb::handle e : events) mask |= bit(enum_arg(e, "event type"));
  } else {
    raise_type_error(std::string("events must be an ") + cls + ", a str, or a list of them, got " +
                     nb::cast<std::string>(nb::repr(events)));
  }
  return mask;
}

// RegisteredSystemEvents.wait's result, as cuda.core's SystemEvents.
struct SystemEvents {
  std::vector<sys::SystemEvent> events;
};

nb::object field_value_object(const sys::FieldValue& f) {
  const auto& v = f.value();  // NvmlError (its class) when this value failed
  if (const auto* d = std::get_if<double>(&v)) return nb::float_(*d);
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return nb::steal(PyLong_FromUnsignedLongLong(*u));
  return nb::steal(PyLong_FromLongLong(std::get<std::int64_t>(v)));
}

// NVML's nvmlThermalController_t / nvmlThermalTarget_t as cucore.system.typing's values.
const char* thermal_controller_name(int c) {
  static const char* const kNames[] = {"gpu_internal", "adm1032", "adt7461", "max6649", "max1617", "lm99", "lm89",
                                       "lm64", "g781", "adt7473", "sbmax6649", "vbiosevt", "os", "nvsyscon_canoas",
                                       "nvsyscon_e551", "max6649r", "adt7473s"};
  return c >= 1 && c <= static_cast<int>(std::size(kNames)) ? kNames[c - 1] : "unknown";
}
constexpr std::pair<const char*, int> kThermalTargets[] = {
    {"none", 0}, {"gpu", 1}, {"memory", 2}, {"power_supply", 4}, {"board", 8},
    {"vcd_board", 9}, {"vcd_inlet", 10}, {"vcd_outlet", 11}, {"all", 15}};

struct DynamicPstatesInfo {
  std::vector<sys::DynamicPstateUtilization> domains;
};
struct ThermalSettings {
  std::vector<sys::ThermalSensor> sensors;
};

template <typename T>
const T& item_at(const std::vector<T>& v, Py_ssize_t i, const char* what) {
  Py_ssize_t n = static_cast<Py_ssize_t>(v.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) throw nb::index_error((std::string(what) + " index out of range").c_str());
  return v[static_cast<std::size_t>(i)];
}

// Device.get_field_values' result, as cuda.core's FieldValues.
struct FieldValues {
  std::vector<sys::FieldValue> values;
};

void bind_values(nb::module_& s) {
  nb::class_<sys::MemoryInfo>(s, "MemoryInfo", "Memory allocation information for a device (bytes).",
                              nb::is_weak_referenceable())
      .def_ro("free", &sys::MemoryInfo::free, "Unallocated device memory (bytes).")
      .def_ro("total", &sys::MemoryInfo::total, "Total physical device memory (bytes).")
      .def_ro("used", &sys::MemoryInfo::used, "Allocated device memory (bytes).")
      .def_ro("reserved", &sys::MemoryInfo::reserved, "Memory reserved for the driver and firmware (bytes).")
      .def("__repr__", [](const sys::MemoryInfo& m) {
        return "MemoryInfo(total=" + std::to_string(m.total) + ", used=" + std::to_string(m.used) +
               ", free=" + std::to_string(m.free) + ", reserved=" + std::to_string(m.reserved) + ")";
      });
  nb::class_<sys::BAR1MemoryInfo>(s, "BAR1MemoryInfo", "BAR1 memory allocation information for a device (bytes).",
                                  nb::is_weak_referenceable())
      .def_ro("free", &sys::BAR1MemoryInfo::free)
      .def_ro("total", &sys::BAR1MemoryInfo::total)
      .def_ro("used", &sys::BAR1MemoryInfo::used)
      // cuda.core's BAR1MemoryInfo is a MemoryInfo; NVML reports no reserved part of BAR1.
      .def_prop_ro("reserved", [](const sys::BAR1MemoryInfo& m) { return m.total - m.free - m.used; },
                   "BAR1 memory neither free nor used (bytes): what total leaves over free and used, 0 as NVML "
                   "reports BAR1.");
  nb::class_<sys::Utilization>(s, "Utilization", "Utilization rates (percent of the last sample period).",
                               nb::is_weak_referenceable())
      .def_ro("gpu", &sys::Utilization::gpu, "Percent of time one or more kernels ran on the GPU.")
      .def_ro("memory", &sys::Utilization::memory, "Percent of time device memory was read or written.")
      .def("__repr__", [](const sys::Utilization& u) {
        return "Utilization(gpu=" + std::to_string(u.gpu) + ", memory=" + std::to_string(u.memory) + ")";
      });
  nb::class_<sys::EngineUtilization>(s, "EngineUtilization", "Encoder or decoder utilization (cucore).",
                                     nb::is_weak_referenceable())
      .def_ro("percent", &sys::EngineUtilization::percent)
      .def_ro("sampling_period_us", &sys::EngineUtilization::sampling_period_us);
  nb::class_<sys::ProcessInfo>(s, "ProcessInfo", "A process with a compute context on the device.",
                               nb::is_weak_referenceable())
      .def_ro("pid", &sys::ProcessInfo::pid)
      .def_ro("used_gpu_memory", &sys::ProcessInfo::used_gpu_memory,
              "GPU memory the process uses (bytes); None where NVML cannot tell.")
      // cuda.core raises NotSupportedError for these outside MIG.
      .def_prop_ro("gpu_instance_id",
                   [](const sys::ProcessInfo& p) {
                     if (!p.gpu_instance_id)
                       raise_nvml_class("NotSupportedError",
                                        "gpu_instance_id: the process runs in no MIG instance (NVML reports none)");
                     return *p.gpu_instance_id;
                   },
                   "The MIG GPU instance; NotSupportedError outside MIG.")
      .def_prop_ro("compute_instance_id",
                   [](const sys::ProcessInfo& p) {
                     if (!p.compute_instance_id)
                       raise_nvml_class("NotSupportedError",
                                        "compute_instance_id: the process runs in no MIG instance (NVML reports none)");
                     return *p.compute_instance_id;
                   },
                   "The MIG compute instance; NotSupportedError outside MIG.")
      .def("__repr__", [](const sys::ProcessInfo& p) {
        return "ProcessInfo(pid=" + std::to_string(p.pid) + ", used_gpu_memory=" +
               (p.used_gpu_memory ? std::to_string(*p.used_gpu_memory) : std::string("None")) + ")";
      });

  nb::class_<sys::PciInfo>(s, "PciInfo", "PCI information about a GPU device.", nb::is_weak_referenceable())
      .def_prop_ro("bus_id", &sys::PciInfo::bus_id, "The domain:bus:device.function PCI identifier.")
      .def_prop_ro("domain", &sys::PciInfo::domain)
      .def_prop_ro("bus", &sys::PciInfo::bus)
      .def_prop_ro("device", &sys::PciInfo::device)
      .def_prop_ro("vendor_id", &sys::PciInfo::vendor_id)
      .def_prop_ro("device_id", &sys::PciInfo::device_id)
      .def_prop_ro("subsystem_id", &sys::PciInfo::subsystem_id)
      .def_prop_ro("base_class", &sys::PciInfo::base_class)
      .def_prop_ro("sub_class", &sys::PciInfo::sub_class)
      .def_prop_ro("link_generation", &sys::PciInfo::link_generation, release())
      .def_prop_ro("max_link_generation", &sys::PciInfo::max_link_generation, release())
      .def_prop_ro("max_link_width", &sys::PciInfo::max_link_width, release())
      .def_prop_ro("current_link_generation", &sys::PciInfo::current_link_generation, release())
      .def_prop_ro("current_link_width", &sys::PciInfo::current_link_width, release())
      .def_prop_ro("tx_throughput", &sys::PciInfo::tx_throughput, release(), "PCIe transmit throughput (KB/s).")
      .def_prop_ro("rx_throughput", &sys::PciInfo::rx_throughput, release(), "PCIe receive throughput (KB/s).")
      .def_prop_ro("replay_counter", &sys::PciInfo::replay_counter, release());

  nb::class_<sys::ClockInfo>(s, "ClockInfo", "One clock domain of a device (MHz).", nb::is_weak_referenceable())
      .def("get_current_mhz",
           [](const sys::ClockInfo& c, nb::handle clock_id) {
             sys::ClockId id = parse_enum(clock_id, "clock id", kClockIds);
             nb::gil_scoped_release r;
             return c.get_current_mhz(id);
           },
           nb::arg("clock_id") = "current", raising())
      .def("get_max_mhz", &sys::ClockInfo::get_max_mhz, release())
      .def("get_max_customer_boost_mhz", &sys::ClockInfo::get_max_customer_boost_mhz, release())
      .def("get_application_mhz", &sys::ClockInfo::get_application_mhz, release(),
           "The applications clock target (cucore).")
      .def("get_min_max_clock_of_pstate_mhz",
           [](const sys::ClockInfo& c, nb::handle pstate) {
             int p = pstate_arg(pstate);
             nb::gil_scoped_release r;
             return c.get_min_max_clock_of_pstate_mhz(p);
           },
           nb::arg("pstate"), raising(), "(min, max) clock (MHz) of this domain at P-state `pstate` (0..15).")
      .def("get_offsets",
           [](const sys::ClockInfo& c, nb::handle pstate) {
             int p = pstate_arg(pstate);
             nb::gil_scoped_release r;
             return c.get_offsets(p);
           },
           nb::arg("pstate"), raising(), "The ClockOffsets of this domain at P-state `pstate` (0..15).");
  nb::class_<sys::ClockOffsets>(s, "ClockOffsets", "A clock domain's offsets at one P-state (MHz).",
                                nb::is_weak_referenceable())
      .def_ro("clock_offset_mhz", &sys::ClockOffsets::clock_offset_mhz, "The current clock offset (MHz).")
      .def_ro("max_offset_mhz", &sys::ClockOffsets::max_offset_mhz, "The largest offset allowed (MHz).")
      .def_ro("min_offset_mhz", &sys::ClockOffsets::min_offset_mhz, "The smallest offset allowed (MHz).")
      .def("__repr__", [](const sys::ClockOffsets& o) {
        return "ClockOffsets(clock_offset_mhz=" + std::to_string(o.clock_offset_mhz) +
               ", min_offset_mhz=" + std::to_string(o.min_offset_mhz) +
               ", max_offset_mhz=" + std::to_string(o.max_offset_mhz) + ")";
      });

  nb::class_<sys::Temperature>(s, "Temperature", "Temperatures of a device (degrees Celsius).",
                               nb::is_weak_referenceable())
      .def("get_sensor", &sys::Temperature::get_sensor, release())
      .def("get_threshold",
           [](const sys::Temperature& t, nb::handle threshold) {
             sys::TemperatureThresholds th = parse_enum(threshold, "temperature threshold", kThresholds);
             nb::gil_scoped_release r;
             return t.get_threshold(th);
           },
           nb::arg("threshold_type"), raising())
      .def_prop_ro("margin", &sys::Temperature::margin, release())
      .def("get_thermal_settings",
           [](const sys::Temperature& t, nb::handle sensor_index) -> nb::object {
             int index = parse_enum(sensor_index, "thermal sensor index", kThermalTargets);
             std::optional<std::vector<sys::ThermalSensor>> sensors;
             {
               nb::gil_scoped_release r;
               sensors = t.get_thermal_settings(index);
             }
             if (!sensors) return nb::none();
             return nb::cast(ThermalSettings{std::move(*sensors)});
           },
           nb::arg("sensor_index"), raising());

  nb::class_<sys::NvlinkInfo>(s, "NvlinkInfo", "NVLink information for a device.", nb::is_weak_referenceable())
      .def_prop_ro("version", &sys::NvlinkInfo::version, release(), "The NVLink version as (major, minor).")
      .def_prop_ro("state", &sys::NvlinkInfo::state, release(), "True if the link is active.")
      .def_prop_ro("remote_pci_bus_id", &sys::NvlinkInfo::remote_pci_bus_id, release(),
                   "The PCI bus id of the device at the other end (cucore).")
      .def_prop_ro("link", &sys::NvlinkInfo::link);
  nb::handle(s.attr("NvlinkInfo")).attr("max_links") = 18;  // NVML_NVLINK_MAX_LINKS

  nb::class_<FanInfo>(s, "FanInfo", "One fan of a device.", nb::is_weak_referenceable())
      .def_prop_rw("speed", [](const FanInfo& f) { return f.device.fan_speed(f.fan); },
                   [](const FanInfo& f, unsigned int percent) { f.device.set_fan_speed(f.fan, percent); }, release(),
                   "Intended fan speed, percent of the maximum (set: the policy becomes manual; needs root).")
      .def_prop_ro("speed_rpm", [](const FanInfo& f) { return f.device.fan_speed_rpm(f.fan); }, release(),
                   "Intended fan speed in rotations per minute.")
      .def_prop_ro("target_speed", [](const FanInfo& f) { return f.device.target_fan_speed(f.fan); }, release(),
                   "The speed (percent) the driver aims the fan at.")
      .def_prop_ro("min_max_speed", [](const FanInfo& f) { return f.device.min_max_fan_speed(); }, release(),
                   "(min, max) fan speed in percent, for all of the device's fans.")
      .def_prop_ro("control_policy", [](const FanInfo& f) -> nb::object {
        std::optional<unsigned int> p;
        {
          sys::UnsupportedAsError scope;
          nb::gil_scoped_release nogil;
          p = f.device.fan_control_policy(f.fan);
        }
        if (!p) return nb::none();
        if (*p == 1) return typing_enum("FanControlPolicy", nb::str("manual"));
        return typing_enum("FanControlPolicy", nb::str("temperature_controlled"));
      }, "The fan control policy: a FanControlPolicy.")
      .def("set_default_speed", [](const FanInfo& f) { f.device.set_default_fan_speed(f.fan); }, release(),
           "Gives the fan back to the driver's default control (needs root).");

  nb::class_<sys::FieldValue>(s, "FieldValue", "One field value (NVML_FI_*) of Device.get_field_values.",
                              nb::is_weak_referenceable())
      .def_prop_ro("field_id", [](const sys::FieldValue& f) { return field_id_object(f.field_id); },
                   "The field id: a FieldId member (an int; a plain int for an id FieldId does not name).")
      .def_ro("scope_id", &sys::FieldValue::scope_id)
      .def_ro("timestamp", &sys::FieldValue::timestamp_us, "CPU time of the sample (microseconds since 1970).")
      .def_ro("latency_usec", &sys::FieldValue::latency_us, "How long NVML took to update the value (us).")
      .def_prop_ro("value", &field_value_object,
                   "The value (int or float); raises this value's NvmlError subclass when NVML failed it.")
      .def("__repr__", [](const sys::FieldValue& f) {
        return "FieldValue(field_id=" + nb::cast<std::string>(nb::repr(field_id_object(f.field_id))) +
               ", scope_id=" + std::to_string(f.scope_id) + ")";
      });
  nb::class_<FieldValues>(s, "FieldValues", "The values of Device.get_field_values, in the order asked.",
                          nb::is_weak_referenceable())
      .def("__len__", [](const FieldValues& f) { return f.values.size(); })
      .def("__getitem__",
           [](const FieldValues& f, Py_ssize_t i) {
             Py_ssize_t n = static_cast<Py_ssize_t>(f.values.size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw nb::index_error("FieldValues index out of range");
             return f.values[static_cast<std::size_t>(i)];
           },
           nb::arg("idx"))
      .def("validate",
           [](const FieldValues& f) {
             for (const auto& v : f.values) v.value();  // the first failure raises
           },
           "Raises the NvmlError of the first value NVML failed, if any.")
      .def("get_all_values",
           [](const FieldValues& f) {
             nb::list out;
             for (const auto& v : f.values) out.append(field_value_object(v));
             return out;
           },
           "Every value (validated), in order.");

  nb::class_<sys::DynamicPstateUtilization>(s, "GpuDynamicPstatesUtilization",
                                            "One utilization domain of Device.dynamic_pstates_info.",
                                            nb::is_weak_referenceable())
      .def_ro("is_present", &sys::DynamicPstateUtilization::is_present)
      .def_ro("percentage", &sys::DynamicPstateUtilization::percentage, "Busy in the last second (percent).")
      .def_ro("inc_threshold", &sys::DynamicPstateUtilization::inc_threshold)
      .def_ro("dec_threshold", &sys::DynamicPstateUtilization::dec_threshold);
  nb::class_<DynamicPstatesInfo>(s, "GpuDynamicPstatesInfo", "Performance monitor samples, one per utilization domain.",
                                 nb::is_weak_referenceable())
      .def("__len__", [](const DynamicPstatesInfo& d) { return d.domains.size(); })
      .def("__getitem__", [](const DynamicPstatesInfo& d, Py_ssize_t i) {
        return item_at(d.domains, i, "GPU dynamic P-states");
      }, nb::arg("idx"));
  nb::class_<sys::CoolerInfo>(s, "CoolerInfo", "A device's cooler.", nb::is_weak_referenceable())
      .def_prop_ro("signal_type",
                   [](const sys::CoolerInfo& c) -> nb::object {
                     if (c.signal_type == 1) return typing_enum("CoolerControl", nb::str("toggle"));
                     if (c.signal_type == 2) return typing_enum("CoolerControl", nb::str("variable"));
                     return nb::none();
                   })
      .def_prop_ro("target", [](const sys::CoolerInfo& c) {
        static const char* const kTargets[] = {"none", "gpu", "memory", "power_supply"};
        nb::list out;
        for (unsigned b = 0; b < 4; ++b)
          if (c.target >> b & 1u) out.append(typing_enum("CoolerTarget", nb::str(kTargets[b])));
        return out;
      }, "What the cooler cools (GPU_RELATED is GPU, MEMORY and POWER_SUPPLY).");
  nb::class_<sys::ThermalSensor>(s, "ThermalSensor", "One thermal sensor (degrees Celsius).",
                                 nb::is_weak_referenceable())
      .def_prop_ro("controller", [](const sys::ThermalSensor& t) {
        return typing_enum("ThermalController", nb::str(thermal_controller_name(t.controller)));
      })
      .def_ro("default_min_temp", &sys::ThermalSensor::default_min_temp)
      .def_ro("default_max_temp", &sys::ThermalSensor::default_max_temp)
      .def_ro("current_temp", &sys::ThermalSensor::current_temp)
      .def_prop_ro("target", [](const sys::ThermalSensor& t) {
        const char* name = "none";
        for (const auto& [n, v] : kThermalTargets)
          if (v == t.target) name = n;
        return typing_enum("ThermalTarget", nb::str(name));
      });
  nb::class_<ThermalSettings>(s, "ThermalSettings", "The sensors of Temperature.get_thermal_settings.",
                              nb::is_weak_referenceable())
      .def("__len__", [](const ThermalSettings& t) { return t.sensors.size(); })
      .def("__getitem__", [](const ThermalSettings& t, Py_ssize_t i) {
        return item_at(t.sensors, i, "Thermal sensor");
      }, nb::arg("idx"));

  nb::class_<sys::DeviceAttributes>(s, "DeviceAttributes", "Engine and slice counts of a device.",
                                    nb::is_weak_referenceable())
      .def_ro("multiprocessor_count", &sys::DeviceAttributes::multiprocessor_count)
      .def_ro("shared_copy_engine_count", &sys::DeviceAttributes::shared_copy_engine_count)
      .def_ro("shared_decoder_count", &sys::DeviceAttributes::shared_decoder_count)
      .def_ro("shared_encoder_count", &sys::DeviceAttributes::shared_encoder_count)
      .def_ro("shared_jpeg_count", &sys::DeviceAttributes::shared_jpeg_count)
      .def_ro("shared_ofa_count", &sys::DeviceAttributes::shared_ofa_count)
      .def_ro("gpu_instance_slice_count", &sys::DeviceAttributes::gpu_instance_slice_count)
      .def_ro("compute_instance_slice_count", &sys::DeviceAttributes::compute_instance_slice_count)
      .def_ro("memory_size_mb", &sys::DeviceAttributes::memory_size_mb, "Device memory (MiB).");
  nb::class_<sys::RepairStatus>(s, "RepairStatus", "Pending TPC / channel repairs of a device.",
                                nb::is_weak_referenceable())
      .def_ro("channel_repair_pending", &sys::RepairStatus::channel_repair_pending)
      .def_ro("tpc_repair_pending", &sys::RepairStatus::tpc_repair_pending);
  nb::class_<sys::InforomInfo>(s, "InforomInfo", "A device's InfoROM (NotSupportedError where the board has none).",
                               nb::is_weak_referenceable())
      .def("get_version",
           [](const sys::InforomInfo& i, nb::handle inforom) {
             sys::InforomObject o = parse_enum(inforom, "InfoROM object", kInforomObjects);
             nb::gil_scoped_release r;
             return i.get_version(o);
           },
           nb::arg("inforom"), raising())
      .def_prop_ro("image_version", &sys::InforomInfo::image_version, release())
      .def_prop_ro("configuration_checksum", &sys::InforomInfo::configuration_checksum, release())
      .def("validate", [](const sys::InforomInfo& i) { (void)i.validate(); }, release(),
           "Reads the InfoROM and checks it: CorruptedInforomError when corrupted, NotSupportedError "
           "without an InfoROM.")
      .def_prop_ro("bbx_flush_time", &sys::InforomInfo::bbx_flush_time, release(),
                   "(timestamp, duration_us) of the last blackbox flush; NotReadyError before the run's first.")
      .def_prop_ro("board_part_number", &sys::InforomInfo::board_part_number, release());

  nb::class_<sys::EventData>(s, "EventData", "One event on a device.", nb::is_weak_referenceable())
      .def_prop_ro("device", [](const sys::EventData& e) { return e.device; })
      .def_prop_ro("event_type",
                   [](const sys::EventData& e) {
                     auto names = sys::event_type_names(e.event_type);
                     return names.empty() ? nb::object(nb::int_(e.event_type))
                                          : typing_enum("EventType", nb::str(names.front().c_str()));
                   })
      .def_prop_ro("event_data",
                   [](const sys::EventData& e) {
                     if (e.event_type != sys::event_types::xid_critical_error)
                       raise_value_error("event_data is the XID of xid_critical_error events only");
                     return e.event_data;
                   })
      .def_prop_ro("gpu_instance_id", [](const sys::EventData& e) { return e.gpu_instance_id; })
      .def_prop_ro("compute_instance_id", [](const sys::EventData& e) { return e.compute_instance_id; });

  nb::class_<sys::DeviceEvents>(s, "DeviceEvents", "Events registered on a device; wait() for the next.",
                                nb::is_weak_referenceable())
      .def("wait",
           [](const sys::DeviceEvents& ev, unsigned int timeout_ms) {
             std::optional<sys::EventData> d;
             {
               nb::gil_scoped_release r;
               d = ev.wait(timeout_ms);
             }
             if (!d)
               raise_nvml_class("TimeoutError", "no event within " + std::to_string(timeout_ms) + " ms");
             return *d;
           },
           nb::arg("timeout_ms") = 0, raising(), "Waits for the next event (0: forever); TimeoutError when none comes.");

  nb::class_<sys::SystemEvent>(s, "SystemEvent", "One system event (a GPU bound to or unbound from the driver).",
                               nb::is_weak_referenceable())
      .def_prop_ro("event_type",
                   [](const sys::SystemEvent& e) {
                     auto names = sys::system_event_type_names(e.event_type);
                     return names.empty() ? nb::object(nb::int_(e.event_type))
                                          : typing_enum("SystemEventType", nb::str(names.front().c_str()));
                   },
                   "The SystemEventType that was triggered.")
      .def_ro("gpu_id", &sys::SystemEvent::gpu_id,
              "The GPU in NVML's PCI form: ((domain & 0xffff) << 16) | (bus << 8) | device.")
      .def_prop_ro("device",
                   [](const sys::SystemEvent& e) {
                     try {
                       nb::gil_scoped_release r;
                       return e.device();
                     } catch (const std::out_of_range& x) {
                       raise_nvml_class("NotFoundError", x.what());  // as Device(pci_bus_id=...)
                     }
                   },
                   raising(), "The Device of gpu_id's PCI bus id; NotFoundError when NVML no longer sees it.")
      .def("__repr__", [](const sys::SystemEvent& e) {
        return "SystemEvent(event_type=" + std::to_string(e.event_type) + ", pci_bus_id=" + e.pci_bus_id() + ")";
      });
  nb::class_<SystemEvents>(s, "SystemEvents", "The events of one RegisteredSystemEvents.wait, in NVML's order.",
                           nb::is_weak_referenceable())
      .def("__len__", [](const SystemEvents& e) { return e.events.size(); })
      .def("__getitem__", [](const SystemEvents& e, Py_ssize_t i) { return item_at(e.events, i, "SystemEvents"); },
           nb::arg("idx"));
  nb::class_<sys::RegisteredSystemEvents>(s, "RegisteredSystemEvents",
                                          "System events registered by cucore.system.register_events; wait() for them.",
                                          nb::is_weak_referenceable())
      .def("wait",
           [](const sys::RegisteredSystemEvents& ev, unsigned int timeout_ms, unsigned int buffer_size) {
             if (buffer_size < 1) raise_value_error("buffer_size must be at least 1, got 0");
             std::optional<std::vector<sys::SystemEvent>> got;
             {
               nb::gil_scoped_release r;
               got = ev.wait(timeout_ms, buffer_size);
             }
             if (!got)
               raise_nvml_class("TimeoutError", "no system event within " + std::to_string(timeout_ms) + " ms");
             return SystemEvents{std::move(*got)};
           },
           nb::arg("timeout_ms") = 0, nb::arg("buffer_size") = 1, raising(),
           "Up to buffer_size events (SystemEvents); TimeoutError when none comes within timeout_ms "
           "(NVML does not wait when timeout_ms is 0).");
}

void bind_device_class(nb::module_& s) {
  auto cls = nb::class_<sys::Device>(s, "Device",
                                     "A GPU as NVML sees it (cuda.core.system.Device). Give exactly one of index, "
                                     "uuid or pci_bus_id.", nb::is_weak_referenceable());
  cls.def("__init__",
          [](sys::Device* self, nb::handle index, nb::handle uuid, nb::handle pci_bus_id) {
            int given = !index.is_none() + !uuid.is_none() + !pci_bus_id.is_none();
            if (given > 1) raise_value_error("Handle requires only one of `index`, `uuid`, or `pci_bus_id`.");
            if (given == 0) raise_value_error("Handle requires either a device `index`, `uuid`, or `pci_bus_id`.");
            auto text = [](nb::handle v, const char* what) {
              if (PyBytes_Check(v.ptr())) return std::string(PyBytes_AsString(v.ptr()), PyBytes_Size(v.ptr()));
              if (!PyUnicode_Check(v.ptr())) raise_type_error(std::string(what) + " must be str or bytes");
              return utf8_arg(v, what);
            };
            try {
              if (!index.is_none()) {
                if (PyBool_Check(index.ptr()) || !PyIndex_Check(index.ptr()))
                  raise_type_error("index must be an int, got " + nb::cast<std::string>(nb::repr(index)));
                long long i = PyLong_AsLongLong(nb::steal(PyNumber_Index(index.ptr())).ptr());
                if (i == -1 && PyErr_Occurred()) throw nb::python_error();
                if (i < 0 || i > 0xffffffffLL)
                  throw std::out_of_range("system::Device(" + std::to_string(i) + "): no such device");
                nb::gil_scoped_release r;
                new (self) sys::Device(static_cast<unsigned int>(i));
              } else if (!uuid.is_none()) {
                std::string u = text(uuid, "uuid");
                nb::gil_scoped_release r;
                new (self) sys::Device(sys::Device::from_uuid(u));
              } else {
                std::string p = text(pci_bus_id, "pci_bus_id");
                nb::gil_scoped_release r;
                new (self) sys::Device(sys::Device::from_pci_bus_id(p));
              }
            } catch (const std::out_of_range& e) {
              // cuda.core: NVML's InvalidArgumentError for an index, NotFoundError for a key.
              raise_nvml_class(index.is_none() ? "NotFoundError" : "InvalidArgumentError", e.what());
            } catch (const std::invalid_argument& e) {
              raise_nvml_class("InvalidArgumentError", e.what());
            }
          },
          nb::arg("index") = nb::none(), nb::kw_only(), nb::arg("uuid") = nb::none(),
          nb::arg("pci_bus_id") = nb::none())
      .def_static("get_device_count", &sys::Device::get_device_count, release())
      .def_static("get_all_devices", &sys::Device::get_all_devices, release())
      .def_prop_ro("handle", [](const sys::Device& d) { return reinterpret_cast<std::uintptr_t>(d.handle()); },
                   "The nvmlDevice_t as an int.")
      // cuda.core's name for it, which NVIDIA's tests pass to cuda.bindings
      // (their unsupported_before(device, arch) reads device._handle).
      .def_prop_ro("_handle", [](const sys::Device& d) { return reinterpret_cast<std::uintptr_t>(d.handle()); },
                   "The nvmlDevice_t as an int (cuda.core.system.Device._handle).")
      .def_prop_ro("index", &sys::Device::index, release())
      .def_prop_ro("name", &sys::Device::name, release())
      .def_prop_ro("brand", &sys::Device::brand, release())
      .def_prop_ro("uuid", &sys::Device::uuid, release())
      .def_prop_ro("uuid_without_prefix", &sys::Device::uuid_without_prefix, release())
      .def_prop_ro("pci_bus_id", &sys::Device::pci_bus_id, release())
      .def_prop_ro("pci_info", &sys::Device::pci_info, release())
      .def_prop_ro("arch",
                   [](const sys::Device& d) {
                     sys::DeviceArch a;
                     {
                       nb::gil_scoped_release r;
                       a = d.arch();
                     }
                     return typing_enum("DeviceArch", nb::int_(static_cast<unsigned int>(a)));
                   },
                   raising())
      .def_prop_ro("cuda_compute_capability",
                   [](const sys::Device& d) {
                     ComputeCapability cc = d.cuda_compute_capability();
                     return std::make_tuple(cc.major, cc.minor);
                   },
                   raising())
      .def_prop_ro("serial", &sys::Device::serial, release())
      .def_prop_ro("module_id", &sys::Device::module_id, release())
      .def_prop_ro("minor_number", &sys::Device::minor_number, release())
      .def_prop_ro("numa_node_id", &sys::Device::numa_node_id, release())
      .def_prop_rw("is_persistence_mode_enabled",
                   [](const sys::Device& d) {
                     nb::gil_scoped_release r;
                     return d.is_persistence_mode_enabled();
                   },
                   [](const sys::Device& d, bool enabled) {
                     nb::gil_scoped_release r;
                     d.set_persistence_mode(enabled);
                   },
                   raising(), "Persistence mode; setting it needs root (NoPermissionError otherwise).")
      .def_prop_ro("is_c2c_enabled", &sys::Device::is_c2c_enabled, release())
      .def_prop_ro("addressing_mode",
                   [](const sys::Device& d) -> nb::object {
                     std::optional<sys::AddressingMode> m;
                     {
                       nb::gil_scoped_release r;
                       m = d.addressing_mode();
                     }
                     if (!m || *m == sys::AddressingMode::none) return nb::none();
                     return typing_enum("AddressingMode", nb::str(*m == sys::AddressingMode::hmm ? "hmm" : "ats"));
                   },
                   raising(), "HMM or ATS when system memory is addressable from the GPU; None otherwise.")
      .def_prop_ro("is_display_connected", &sys::Device::is_display_connected, release())
      .def_prop_ro("is_display_active", &sys::Device::is_display_active, release())
      .def_prop_ro("is_auto_boosted_clocks_enabled", &sys::Device::is_auto_boosted_clocks_enabled, release(),
                   "(current, default) state of auto boosted clocks.")
      .def_prop_ro("attributes", &sys::Device::attributes, release())
      .def_prop_ro("dynamic_pstates_info",
                   [](const sys::Device& d) -> nb::object {
                     std::optional<std::vector<sys::DynamicPstateUtilization>> v;
                     {
                       nb::gil_scoped_release r;
                       v = d.dynamic_pstates_info();
                     }
                     if (!v) return nb::none();
                     return nb::cast(DynamicPstatesInfo{std::move(*v)});
                   },
                   raising())
      .def_prop_ro("cooler", &sys::Device::cooler, release())
      .def_prop_ro("repair_status", &sys::Device::repair_status, release())
      .def_prop_ro("inforom", &sys::Device::inforom)
      .def("get_cpu_affinity",
           [](const sys::Device& d, nb::handle scope) {
             sys::AffinityScope sc = parse_enum(scope, "affinity scope", kAffinityScopes);
             nb::gil_scoped_release r;
             return d.get_cpu_affinity(sc);
           },
           nb::arg("scope") = "node", raising(), "The CPUs nearest the device within the NUMA node or socket.")
      .def("get_memory_affinity",
           [](const sys::Device& d, nb::handle scope) {
             sys::AffinityScope sc = parse_enum(scope, "affinity scope", kAffinityScopes);
             nb::gil_scoped_release r;
             return d.get_memory_affinity(sc);
           },
           nb::arg("scope") = "node", raising(), "The NUMA nodes (or sockets) nearest the device.")
      .def("set_cpu_affinity", &sys::Device::set_cpu_affinity, release(),
           "Binds the calling thread to the device's CPUs.")
      .def("clear_cpu_affinity", &sys::Device::clear_cpu_affinity, release(),
           "Unbinds the calling thread (all CPUs).")
      .def_static("get_all_devices_with_cpu_affinity", &sys::Device::get_all_devices_with_cpu_affinity,
                  nb::arg("cpu_index"), release())
      .def("get_topology_nearest_gpus",
           [](const sys::Device& d, nb::handle level) {
             sys::GpuTopologyLevel l = parse_enum(level, "topology level", kTopologyLevels);
             nb::gil_scoped_release r;
             return d.get_topology_nearest_gpus(l);
           },
           nb::arg("level"), raising())
      .def("get_field_values",
           [](const sys::Device& d, nb::handle field_ids) {
             auto ids = field_ids_arg(field_ids);
             nb::gil_scoped_release r;
             return FieldValues{d.get_field_values(ids)};
           },
           nb::arg("field_ids"), raising())
      .def("clear_field_values",
           [](const sys::Device& d, nb::handle field_ids) {
             auto ids = field_ids_arg(field_ids);
             nb::gil_scoped_release r;
             d.clear_field_values(ids);
           },
           nb::arg("field_ids"), raising())
      .def("to_cuda_device",
           [](const sys::Device& d) {
             int ordinal;
             {
               nb::gil_scoped_release r;
               ordinal = d.to_cuda_device().ordinal();
             }
             return device_object(ordinal);
           },
           raising(), "The cucore.Device (CUDA) of this GPU, found by UUID.")
      .def_prop_ro("mig", [](const sys::Device& d) { return MigInfo{d}; })
      .def("get_clock",
           [](const sys::Device& d, nb::handle clock_type) {
             return d.get_clock(parse_enum(clock_type, "clock type", kClockTypes));
           },
           nb::arg("clock_type"))
      .def_prop_ro("performance_state", &sys::Device::performance_state, release())
      .def_prop_ro("supported_pstates", &sys::Device::supported_pstates, release())
      .def_prop_ro("current_clock_event_reasons",
                   [](const sys::Device& d) -> nb::object {
                     auto r = d.current_clock_event_reasons();
                     if (!r) return nb::none();
                     return enum_list("ClocksEventReasons", sys::clock_event_reason_names(*r));
                   },
                   raising())
      .def_prop_ro("supported_clock_event_reasons",
                   [](const sys::Device& d) -> nb::object {
                     auto r = d.supported_clock_event_reasons();
                     if (!r) return nb::none();
                     return enum_list("ClocksEventReasons", sys::clock_event_reason_names(*r));
                   },
                   raising())
      .def_prop_ro("temperature", &sys::Device::temperature)
      .def_prop_ro("num_fans", &sys::Device::num_fans, release())
      .def("get_fan",
           [](const sys::Device& d, unsigned int fan) {
             unsigned int n;
             {
               nb::gil_scoped_release r;
               n = d.num_fans().value_or(0);  // NotSupportedError where NVML counts no fans, as cuda.core
             }
             if (fan >= n)
               raise_value_error("Fan index " + std::to_string(fan) + " is out of range [0, " + std::to_string(n) + ")");
             return FanInfo{d, fan};
           },
           nb::arg("fan") = 0, raising())
      .def_prop_ro("power_usage_mw", &sys::Device::power_usage_mw, release(), "Power draw in milliwatts (cucore).")
      .def_prop_ro("power_management_limit_mw", &sys::Device::power_management_limit_mw, release())
      .def_prop_ro("power_management_default_limit_mw", &sys::Device::power_management_default_limit_mw, release())
      .def_prop_ro("power_management_limit_constraints_mw", &sys::Device::power_management_limit_constraints_mw,
                   release())
      .def_prop_ro("enforced_power_limit_mw", &sys::Device::enforced_power_limit_mw, release())
      .def_prop_ro("total_energy_consumption_mj", &sys::Device::total_energy_consumption_mj, release())
      .def_prop_ro("memory_info", &sys::Device::memory_info, release())
      .def_prop_ro("bar1_memory_info", &sys::Device::bar1_memory_info, release())
      .def_prop_ro("utilization", &sys::Device::utilization, release())
      .def_prop_ro("encoder_utilization", &sys::Device::encoder_utilization, release())
      .def_prop_ro("decoder_utilization", &sys::Device::decoder_utilization, release())
      .def("get_nvlink_count", &sys::Device::get_nvlink_count, release())
      .def("get_nvlink",
           [](const sys::Device& d, unsigned int link) {
             try {
               return d.get_nvlink(link);
             } catch (const std::out_of_range& e) {
               raise_value_error(e.what());  // cuda.core: ValueError
             }
           },
           nb::arg("link"), raising())
      .def("get_nvlinks", &sys::Device::get_nvlinks, release())
      .def_prop_ro("compute_running_processes", &sys::Device::compute_running_processes, release())
      .def_prop_ro("ecc_mode", &sys::Device::ecc_mode, release(), "(current, pending) ECC mode (cucore).")
      .def("get_total_ecc_errors",
           [](const sys::Device& d, nb::handle error_type, nb::handle counter_type) {
             auto e = parse_enum(error_type, "memory error type", kMemoryErrorTypes);
             auto c = parse_enum(counter_type, "ECC counter type", kEccCounterTypes);
             nb::gil_scoped_release r;
             return d.get_total_ecc_errors(e, c);
           },
           nb::arg("error_type"), nb::arg("counter_type"), raising())
      .def("get_supported_event_types",
           [](const sys::Device& d) -> nb::object {
             auto t = d.supported_event_types();
             if (!t) return nb::none();
             return enum_list("EventType", sys::event_type_names(*t));
           },
           raising())
      .def("register_events",
           [](const sys::Device& d, nb::handle events) {
             std::uint64_t mask = events_mask(events, "EventType", &sys::event_type_bit);
             nb::gil_scoped_release r;
             return d.register_events(mask);
           },
           nb::arg("events"), raising())
      .def("__eq__", [](const sys::Device& a, nb::handle b) {
        return nb::isinstance<sys::Device>(b) && a == nb::cast<const sys::Device&>(b);
      })
      .def("__hash__", [](const sys::Device& d) {
        return nb::hash(nb::make_tuple("system.Device", reinterpret_cast<std::uintptr_t>(d.handle())));
      })
      .def("__repr__", [](const sys::Device& d) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "<cucore.system.Device handle=%p>", d.handle());
        return std::string(buf);
      });

  nb::class_<MigInfo>(s, "MigInfo", "MIG (Multi-Instance GPU) information of a device.", nb::is_weak_referenceable())
      .def_prop_ro("is_mig_device", [](const MigInfo& m) { return m.device.is_mig_device(); }, release())
      .def_prop_ro("mode", [](const MigInfo& m) { return m.device.mig_mode(); }, release())
      .def_prop_ro("pending_mode", [](const MigInfo& m) { return m.device.mig_pending_mode(); }, release())
      .def_prop_ro("device_count", [](const MigInfo& m) { return m.device.mig_device_count(); }, release())
      .def_prop_ro("parent", [](const MigInfo& m) { return m.device.mig_parent(); }, release())
      .def("get_device_by_index", [](const MigInfo& m, unsigned int i) {
        try {
          nb::gil_scoped_release r;
          return m.device.mig_device(i);
        } catch (const std::out_of_range& e) {
          raise_nvml_class("NotFoundError", e.what());
        }
      }, nb::arg("index"), raising())
      .def("get_all_devices", [](const MigInfo& m) { return m.device.mig_devices(); }, release());
}

}  // namespace

void bind_system(nb::module_& m) {
  nb::module_ s = m.def_submodule("_system", "cucore::system (NVML); use the package cucore.system.");
  bind_values(s);
  bind_device_class(s);

  s.def("get_num_devices", &sys::get_num_devices, release(), "Return the number of devices in the system.");
  s.def("get_user_mode_driver_version",
        [] {
          auto v = sys::get_user_mode_driver_version();
          return std::make_tuple(v.first, v.second);
        },
        release(), "The CUDA version the driver supports, e.g. (13, 0).");
  s.def("get_kernel_mode_driver_version",
        [] { return nb::tuple(nb::cast(sys::get_kernel_mode_driver_version())); }, raising(),
        "The kernel-mode driver version, e.g. (580, 159, 4).");
  s.def("get_nvml_version", [] { return nb::tuple(nb::cast(sys::get_nvml_version())); }, raising(),
        "The NVML library version, e.g. (13, 580, 159, 4).");
  s.def("get_driver_branch", &sys::get_driver_branch, release());
  s.def("get_process_name", &sys::get_process_name, nb::arg("pid"), release());
  s.def("get_topology_common_ancestor",
        [](const sys::Device& a, const sys::Device& b) {
          sys::GpuTopologyLevel l;
          {
            nb::gil_scoped_release r;
            l = sys::get_topology_common_ancestor(a, b);
          }
          return typing_enum("GpuTopologyLevel", nb::str(enum_name(l, kTopologyLevels)));
        },
        nb::arg("device1"), nb::arg("device2"), raising());
  s.def("get_p2p_status",
        [](const sys::Device& a, const sys::Device& b, nb::handle index) {
          sys::GpuP2PCapsIndex i = parse_enum(index, "P2P caps index", kP2PCaps);
          sys::GpuP2PStatus st;
          {
            nb::gil_scoped_release r;
            st = sys::get_p2p_status(a, b, i);
          }
          return typing_enum("GpuP2PStatus", nb::str(enum_name(st, kP2PStatus)));
        },
        nb::arg("device1"), nb::arg("device2"), nb::arg("index"), raising());

  s.def("register_events",
        [](nb::handle events) {
          std::uint64_t mask = events_mask(events, "SystemEventType", &sys::system_event_type_bit);
          nb::gil_scoped_release r;
          return sys::register_events(mask);
        },
        nb::arg("events"), raising(),
        "Starts recording system events (SystemEventType: a GPU unbound from or bound to the driver); "
        "NotSupportedError when none of them can be.");
  // NVML's field ids by FieldId's names, from which cucore.system.typing makes FieldId.
  s.def("_field_ids", [] {
    nb::list rows;
    for (const auto& f : sys::field_id_names()) rows.append(nb::make_tuple(f.name, f.id));
    return rows;
  });

  // Fault injection for tests, as tests/cpu/test_system.cpp's substituted
  // table: NVML's entry points become the given addresses (a dict of entry
  // point name -> address, e.g. of ctypes callbacks); those left out are absent
  // (FunctionNotFoundError). None goes back to the real library.
  s.def("_set_nvml_table_for_testing", [](nb::handle entries) {
    static cucore::detail::NvmlTable table;
    cucore::detail::set_nvml_table_for_testing(nullptr);
    if (entries.is_none()) return;
    if (!PyDict_Check(entries.ptr()))
      raise_type_error("entries must be a dict of NVML entry point names to addresses, or None");
    Py_ssize_t used = 0;
    auto address = [&](const char* name) -> void* {
      PyObject* v = PyDict_GetItemString(entries.ptr(), name);  // borrowed
      if (!v) return nullptr;
      ++used;
      void* p = PyLong_AsVoidPtr(v);
      if (!p && PyErr_Occurred()) throw nb::python_error();
      return p;
    };
    cucore::detail::NvmlTable t{};
#define X(name, required, params) t.name = reinterpret_cast<cucore::detail::nvml::PFN_##name>(address(#name));
    CUCORE_NVML_FUNCTIONS(X)
    CUCORE_NVML_LEGACY_FUNCTIONS(X)
#undef X
    t.nvmlErrorString = reinterpret_cast<cucore::detail::nvml::PFN_nvmlErrorString>(address("nvmlErrorString"));
    if (used != PyDict_Size(entries.ptr()))
      raise_value_error("entries names an NVML entry point cucore does not call");
    table = t;
    cucore::detail::set_nvml_table_for_testing(&table);
  }, nb::arg("entries").none());

  // cucore.Device.to_system_device(), as cuda.core.Device has it.
  nb::handle device_cls = m.attr("Device");
  nb::setattr(device_cls, "to_system_device",
              nb::cpp_function(
                  [](nb::handle self) {
                    int ordinal = nb::cast<int>(self.attr("device_id"));
                    nb::gil_scoped_release r;
                    return cucore::Device(ordinal).to_system_device();
                  },
                  nb::is_method(), nb::scope(device_cls), nb::name("to_system_device"),
                  "The cucore.system.Device (NVML) of this GPU, found by UUID."));

  // The rows of loader/nvml_returns.inc with a Python class: (code, class name,
  // extra base, docstring), from which cucore.system.exceptions makes its classes.
  s.def("_nvml_returns", [] {
    nb::list rows;
#define CUCORE_NVML_RETURN(code, constant, text, py_class, py_base, doc) \
    if (*py_class) rows.append(nb::make_tuple(code, py_class, py_base, doc));
#include "loader/nvml_returns.inc"
#undef CUCORE_NVML_RETURN
    return rows;
  });
}

}  // namespace cucore::python
