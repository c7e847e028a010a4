"""cucore.system: GPU monitoring through NVML, as cuda.core.system.

    from cucore import system
    system.get_num_devices()
    sd = cucore.Device(0).to_system_device()     # or system.Device(0)
    sd.utilization.gpu, sd.memory_info.used

Importing needs neither a GPU nor NVML: NVML (libnvidia-ml.so.1, part of the
driver) is loaded on first use; without it calls raise LibraryNotFoundError
listing where cucore looked. As in cuda.core.system, a query the GPU does not
support (NVML's NOT_SUPPORTED, e.g. fans on an H200) raises NotSupportedError
naming the NVML call, and every other NVML failure the NvmlError subclass of its
return code (cucore.system.exceptions).

Beyond cuda.core.system, cucore adds power and energy (power_usage_mw, ...),
encoder/decoder utilization, ECC (ecc_mode, get_total_ecc_errors), application
clocks and NVLink remote PCI ids.
"""
from cucore._core import _system as _s
from cucore.system import exceptions, typing
from cucore.system.exceptions import *  # noqa: F401,F403
from cucore.system.exceptions import __all__ as _exceptions_all
from cucore.system.typing import DeviceArch

# cuda.core's flag for "cuda.bindings has usable NVML bindings"; cucore's NVML
# support is built in.
CUDA_BINDINGS_NVML_IS_COMPATIBLE = True

Device = _s.Device
NvlinkInfo = _s.NvlinkInfo
MemoryInfo = _s.MemoryInfo
BAR1MemoryInfo = _s.BAR1MemoryInfo
Utilization = _s.Utilization
EngineUtilization = _s.EngineUtilization
PciInfo = _s.PciInfo
ProcessInfo = _s.ProcessInfo
ClockInfo = _s.ClockInfo
Temperature = _s.Temperature
FanInfo = _s.FanInfo
MigInfo = _s.MigInfo
DeviceEvents = _s.DeviceEvents
EventData = _s.EventData
RegisteredSystemEvents = _s.RegisteredSystemEvents
SystemEvent = _s.SystemEvent
SystemEvents = _s.SystemEvents
ClockOffsets = _s.ClockOffsets
FieldValue = _s.FieldValue
FieldValues = _s.FieldValues
DeviceAttributes = _s.DeviceAttributes
RepairStatus = _s.RepairStatus
InforomInfo = _s.InforomInfo
GpuDynamicPstatesInfo = _s.GpuDynamicPstatesInfo
GpuDynamicPstatesUtilization = _s.GpuDynamicPstatesUtilization
CoolerInfo = _s.CoolerInfo
ThermalSensor = _s.ThermalSensor
ThermalSettings = _s.ThermalSettings

get_num_devices = _s.get_num_devices
get_user_mode_driver_version = _s.get_user_mode_driver_version
get_kernel_mode_driver_version = _s.get_kernel_mode_driver_version
get_nvml_version = _s.get_nvml_version
get_driver_branch = _s.get_driver_branch
get_process_name = _s.get_process_name
get_topology_common_ancestor = _s.get_topology_common_ancestor
get_p2p_status = _s.get_p2p_status
register_events = _s.register_events

__all__ = [
    "CUDA_BINDINGS_NVML_IS_COMPATIBLE",
    "Device",
    "DeviceArch",
    "NvlinkInfo",
    "get_driver_branch",
    "get_kernel_mode_driver_version",
    "get_num_devices",
    "get_nvml_version",
    "get_p2p_status",
    "get_process_name",
    "get_topology_common_ancestor",
    "get_user_mode_driver_version",
    "register_events",
] + list(_exceptions_all)
