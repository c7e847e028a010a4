"""The enumerations of cucore.system, with cuda.core.system.typing's names and values.

String enumerations (ClockType, EventType, ...) accept their member or its
string value wherever an argument takes them: get_clock("sm") equals
get_clock(ClockType.SM). DeviceArch is an IntEnum of NVML's architecture
numbers, ordered (Kepler < ... < Blackwell). FieldId is an IntEnum of NVML's
field ids (NVML_FI_DEV_ECC_CURRENT is FieldId.DEV_ECC_CURRENT, 1), made from
libcucore's one table of them (src/loader/nvml_fields.inc).
"""
import enum

from cucore._core._system import _field_ids

try:
    from enum import StrEnum as _StrEnum
except ImportError:  # Python < 3.11

    class _StrEnum(str, enum.Enum):
        def __str__(self):
            return str(self.value)


__all__ = [
    "AddressingMode",
    "AffinityScope",
    "ClockId",
    "ClockType",
    "ClocksEventReasons",
    "CoolerControl",
    "CoolerTarget",
    "DeviceArch",
    "EccCounterType",
    "EventType",
    "FanControlPolicy",
    "FieldId",
    "GpuP2PCapsIndex",
    "GpuP2PStatus",
    "GpuTopologyLevel",
    "InforomObject",
    "MemoryErrorType",
    "SystemEventType",
    "TemperatureThresholds",
    "ThermalController",
    "ThermalTarget",
]


class AddressingMode(_StrEnum):
    """How system memory (malloc, mmap) is addressable from the GPU: HMM
    (software mirroring of the CPU's page tables) or ATS (one set of page tables)."""

    HMM = "hmm"
    ATS = "ats"


class AffinityScope(_StrEnum):
    """Scope of Device.get_cpu_affinity / get_memory_affinity."""

    NODE = "node"
    SOCKET = "socket"


class InforomObject(_StrEnum):
    """InfoROM objects of InforomInfo.get_version."""

    OEM = "oem"
    ECC = "ecc"
    POWER = "power"
    DEN = "den"


class ClockId(_StrEnum):
    """Which value of a clock: its current one, or the OEM-defined maximum."""

    CURRENT = "current"
    CUSTOMER_BOOST_MAX = "customer_boost_max"


class ClockType(_StrEnum):
    """Clock domains. All speeds are in MHz."""

    GRAPHICS = "graphics"
    SM = "sm"
    MEMORY = "memory"
    VIDEO = "video"


class ClocksEventReasons(_StrEnum):
    """Why clocks are what they are (throttle reasons)."""

    NONE = "none"
    GPU_IDLE = "gpu_idle"
    APPLICATIONS_CLOCKS_SETTING = "applications_clocks_setting"
    SW_POWER_CAP = "sw_power_cap"
    HW_SLOWDOWN = "hw_slowdown"
    SYNC_BOOST = "sync_boost"
    SW_THERMAL_SLOWDOWN = "sw_thermal_slowdown"
    HW_THERMAL_SLOWDOWN = "hw_thermal_slowdown"
    HW_POWER_BRAKE_SLOWDOWN = "hw_power_brake_slowdown"
    DISPLAY_CLOCK_SETTING = "display_clock_setting"
    BOARD_LIMIT = "board_limit"
    RELIABILITY = "reliability"


class CoolerControl(_StrEnum):
    """How a cooler is controlled: on/off (toggle) or over a range (variable)."""

    TOGGLE = "toggle"
    VARIABLE = "variable"


class CoolerTarget(_StrEnum):
    """What a cooler cools (NVML's GPU_RELATED is GPU, MEMORY and POWER_SUPPLY together)."""

    NONE = "none"
    GPU = "gpu"
    MEMORY = "memory"
    POWER_SUPPLY = "power_supply"


class EventType(_StrEnum):
    """Event types a DeviceEvents can wait on."""

    NONE = "none"
    SINGLE_BIT_ECC_ERROR = "single_bit_ecc_error"
    DOUBLE_BIT_ECC_ERROR = "double_bit_ecc_error"
    PSTATE = "pstate"
    XID_CRITICAL_ERROR = "xid_critical_error"
    CLOCK = "clock"
    POWER_SOURCE_CHANGE = "power_source_change"
    MIG_CONFIG_CHANGE = "mig_config_change"
    SINGLE_BIT_ECC_ERROR_STORM = "single_bit_ecc_error_storm"
    DRAM_RETIREMENT_EVENT = "dram_retirement_event"
    DRAM_RETIREMENT_FAILURE = "dram_retirement_failure"
    NON_FATAL_POISON_ERROR = "non_fatal_poison_error"
    FATAL_POISON_ERROR = "fatal_poison_error"
    GPU_UNAVAILABLE_ERROR = "gpu_unavailable_error"
    GPU_RECOVERY_ACTION = "gpu_recovery_action"


class FanControlPolicy(_StrEnum):
    """How a fan is controlled: by the driver from temperature, or set by hand."""

    TEMPERATURE_CONTROLLED = "temperature_controlled"
    MANUAL = "manual"


class GpuP2PCapsIndex(_StrEnum):
    """The peer-to-peer capability asked about by get_p2p_status."""

    READ = "read"
    WRITE = "write"
    NVLINK = "nvlink"
    ATOMICS = "atomics"
    PCI = "pci"
    PROP = "prop"
    UNKNOWN = "unknown"


class GpuP2PStatus(_StrEnum):
    """Peer-to-peer status between two GPUs."""

    OK = "ok"
    CHIPSET_NOT_SUPPORTED = "chipset not supported"
    GPU_NOT_SUPPORTED = "GPU not supported"
    IOH_TOPOLOGY_NOT_SUPPORTED = "IOH topology not supported"
    DISABLED_BY_REGKEY = "disabled by regkey"
    NOT_SUPPORTED = "not supported"
    UNKNOWN = "unknown"


class GpuTopologyLevel(_StrEnum):
    """How two GPUs are connected, nearest first."""

    INTERNAL = "internal"
    SINGLE = "single"
    MULTIPLE = "multiple"
    HOSTBRIDGE = "hostbridge"
    NODE = "node"
    SYSTEM = "system"


class SystemEventType(_StrEnum):
    """System events cucore.system.register_events records: a GPU unbound from, or bound to, the driver."""

    UNBIND = "unbind"
    BIND = "bind"


class TemperatureThresholds(_StrEnum):
    """Temperature thresholds of Temperature.get_threshold."""

    SHUTDOWN = "shutdown"
    SLOWDOWN = "slowdown"
    MEM_MAX = "mem_max"
    GPU_MAX = "gpu_max"
    ACOUSTIC_MIN = "acoustic_min"
    ACOUSTIC_CURR = "acoustic_curr"
    ACOUSTIC_MAX = "acoustic_max"
    GPS_CURR = "gps_curr"


class ThermalController(_StrEnum):
    """The controller of a ThermalSensor."""

    GPU_INTERNAL = "gpu_internal"
    ADM1032 = "adm1032"
    ADT7461 = "adt7461"
    MAX6649 = "max6649"
    MAX1617 = "max1617"
    LM99 = "lm99"
    LM89 = "lm89"
    LM64 = "lm64"
    G781 = "g781"
    ADT7473 = "adt7473"
    SBMAX6649 = "sbmax6649"
    VBIOSEVT = "vbiosevt"
    OS = "os"
    NVSYSCON_CANOAS = "nvsyscon_canoas"
    NVSYSCON_E551 = "nvsyscon_e551"
    MAX6649R = "max6649r"
    ADT7473S = "adt7473s"
    UNKNOWN = "unknown"


class ThermalTarget(_StrEnum):
    """What a thermal sensor measures; Temperature.get_thermal_settings' sensor index."""

    NONE = "none"
    GPU = "gpu"
    MEMORY = "memory"
    POWER_SUPPLY = "power_supply"
    BOARD = "board"
    VCD_BOARD = "vcd_board"
    VCD_INLET = "vcd_inlet"
    VCD_OUTLET = "vcd_outlet"
    ALL = "all"


class MemoryErrorType(_StrEnum):
    """ECC errors counted by Device.get_total_ecc_errors (cucore)."""

    CORRECTED = "corrected"
    UNCORRECTED = "uncorrected"


class EccCounterType(_StrEnum):
    """Since the driver loaded (volatile) or over the board's life (aggregate) (cucore)."""

    VOLATILE = "volatile"
    AGGREGATE = "aggregate"


class DeviceArch(enum.IntEnum):
    """Device architecture (NVML's numbers; ordered)."""

    KEPLER = 2
    MAXWELL = 3
    PASCAL = 4
    VOLTA = 5
    TURING = 6
    AMPERE = 7
    ADA = 8
    HOPPER = 9
    BLACKWELL = 10
    UNKNOWN = 0xFFFFFFFF


# NVML's field ids, for Device.get_field_values / clear_field_values (which
# take them, or any int) and FieldValue.field_id. Two names of one id are
# aliases, the first the member's name.
FieldId = enum.IntEnum("FieldId", _field_ids(), module=__name__)
FieldId.__doc__ = "NVML's field ids (NVML_FI_*), for Device.get_field_values."
del _field_ids
