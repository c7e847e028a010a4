#pragma once
// The NVML types and entry points cucore uses, declared here because nvml.h is
// not on every machine that builds cucore. Values match NVML's ABI.
#include <cstdint>

namespace cucore::detail::nvml {

using Return = int;  // nvmlReturn_t
constexpr Return SUCCESS = 0;
constexpr Return ERROR_UNINITIALIZED = 1;
constexpr Return ERROR_NOT_SUPPORTED = 3;
constexpr Return ERROR_INSUFFICIENT_SIZE = 7;
using Device = struct nvmlDevice_st*;

struct Memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct Utilization {  // nvmlUtilization_t
  unsigned int gpu, memory;
};
struct ProcessInfo {  // nvmlProcessInfo_t (v2 layout)
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};

using PFN_init = Return (*)();
using PFN_shutdown = Return (*)();
using PFN_error_string = const char* (*)(Return);
using PFN_system_get_driver_version = Return (*)(char*, unsigned int);
using PFN_system_get_nvml_version = Return (*)(char*, unsigned int);
using PFN_system_get_cuda_driver_version = Return (*)(int*);
using PFN_device_get_count = Return (*)(unsigned int*);
using PFN_device_get_handle_by_index = Return (*)(unsigned int, Device*);
using PFN_device_get_name = Return (*)(Device, char*, unsigned int);
using PFN_device_get_uuid = Return (*)(Device, char*, unsigned int);
using PFN_device_get_utilization_rates = Return (*)(Device, Utilization*);
using PFN_device_get_memory_info = Return (*)(Device, Memory*);
using PFN_device_get_temperature = Return (*)(Device, int, unsigned int*);
using PFN_device_get_power_usage = Return (*)(Device, unsigned int*);
using PFN_device_get_mig_mode = Return (*)(Device, unsigned int*, unsigned int*);
using PFN_device_get_compute_running_processes = Return (*)(Device, unsigned int*, ProcessInfo*);

}  // namespace cucore::detail::nvml

// (member, exported symbol)
#define CUCORE_NVML_FUNCTIONS(X)                                                                         \
  X(init, "nvmlInit_v2") X(shutdown, "nvmlShutdown") X(error_string, "nvmlErrorString")                  \
  X(system_get_driver_version, "nvmlSystemGetDriverVersion")                                             \
  X(system_get_nvml_version, "nvmlSystemGetNVMLVersion")                                                 \
  X(system_get_cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2")                                 \
  X(device_get_count, "nvmlDeviceGetCount_v2") X(device_get_handle_by_index, "nvmlDeviceGetHandleByIndex_v2") \
  X(device_get_name, "nvmlDeviceGetName") X(device_get_uuid, "nvmlDeviceGetUUID")                        \
  X(device_get_utilization_rates, "nvmlDeviceGetUtilizationRates")                                       \
  X(device_get_memory_info, "nvmlDeviceGetMemoryInfo") X(device_get_temperature, "nvmlDeviceGetTemperature") \
  X(device_get_power_usage, "nvmlDeviceGetPowerUsage") X(device_get_mig_mode, "nvmlDeviceGetMigMode")    \
  X(device_get_compute_running_processes, "nvmlDeviceGetComputeRunningProcesses_v3")
