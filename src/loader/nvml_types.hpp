#pragma once
// The NVML types, constants and entry points cucore uses, declared here because
// nvml.h is not on every machine that builds cucore. Layouts, values and
// signatures follow NVML's ABI (nvml.h of CUDA 12.9-13.x, driver R580);
// tests/gpu/test_system.cpp checks each of them against the real nvml.h on the
// GPU machine. Versioned structs carry their version as NVML_STRUCT_VERSION
// does: sizeof(struct) | (version << 24).
#include <cstdint>

namespace cucore::detail::nvml {

using Return = int;  // nvmlReturn_t
// nvml::SUCCESS, nvml::ERROR_NOT_SUPPORTED, ...: every code of the one table.
#define CUCORE_NVML_RETURN(code, constant, text, py_class, py_base, doc) constexpr Return constant = code;
#include "loader/nvml_returns.inc"
#undef CUCORE_NVML_RETURN

using Device = struct nvmlDevice_st*;      // nvmlDevice_t
using EventSet = struct nvmlEventSet_st*;  // nvmlEventSet_t
using SystemEventSet = struct nvmlSystemEventSet_st*;  // nvmlSystemEventSet_t

constexpr unsigned struct_version(unsigned size, unsigned version) { return size | (version << 24U); }

// Buffer sizes (NVML_*_BUFFER_SIZE).
constexpr unsigned kSystemDriverVersionBufferSize = 80;
constexpr unsigned kSystemNvmlVersionBufferSize = 80;
constexpr unsigned kDeviceNameV2BufferSize = 96;
constexpr unsigned kDeviceUuidV2BufferSize = 96;
constexpr unsigned kDeviceSerialBufferSize = 30;
constexpr unsigned kDevicePciBusIdBufferSize = 32;
constexpr unsigned kNvlinkMaxLinks = 18;                               // NVML_NVLINK_MAX_LINKS
constexpr unsigned long long kValueNotAvailable = ~0ULL;               // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned kInstanceIdNone = 0xFFFFFFFFu;                      // a process's MIG ids outside MIG
constexpr unsigned kFieldNvlinkLinkCount = 91;                         // NVML_FI_DEV_NVLINK_LINK_COUNT

struct Memory_v2 {  // nvmlMemory_v2_t
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned kMemory_v2 = struct_version(sizeof(Memory_v2), 2);  // nvmlMemory_v2

struct BAR1Memory {  // nvmlBAR1Memory_t
  unsigned long long bar1Total, bar1Free, bar1Used;
};

struct Utilization {  // nvmlUtilization_t
  unsigned int gpu, memory;
};

struct ProcessInfo {  // nvmlProcessInfo_t (the layout nvmlDeviceGetComputeRunningProcesses_v3 fills)
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};

struct PciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[kDevicePciBusIdBufferSize];
};

struct PciInfoExt_v1 {  // nvmlPciInfoExt_v1_t
  unsigned int version, domain, bus, device, pciDeviceId, pciSubSystemId, baseClass, subClass;
  char busId[kDevicePciBusIdBufferSize];
};
constexpr unsigned kPciInfoExt_v1 = struct_version(sizeof(PciInfoExt_v1), 1);  // nvmlPciInfoExt_v1

struct SystemDriverBranchInfo_v1 {  // nvmlSystemDriverBranchInfo_v1_t
  unsigned int version;
  char branch[kSystemDriverVersionBufferSize];
};
constexpr unsigned kSystemDriverBranchInfo_v1 = struct_version(sizeof(SystemDriverBranchInfo_v1), 1);

struct Temperature_v1 {  // nvmlTemperature_v1_t
  unsigned int version;
  int sensorType;  // nvmlTemperatureSensors_t
  int temperature;
};
constexpr unsigned kTemperature_v1 = struct_version(sizeof(Temperature_v1), 1);  // nvmlTemperature_v1

struct MarginTemperature_v1 {  // nvmlMarginTemperature_v1_t
  unsigned int version;
  int marginTemperature;
};
constexpr unsigned kMarginTemperature_v1 = struct_version(sizeof(MarginTemperature_v1), 1);

struct EventData {  // nvmlEventData_t
  Device device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
};

// System events (driver bind / unbind of a GPU): the nvmlSystemEventSet*
// requests, each carrying its version.
struct SystemEventSetCreateRequest_v1 {  // nvmlSystemEventSetCreateRequest_v1_t
  unsigned int version;
  SystemEventSet set;
};
constexpr unsigned kSystemEventSetCreateRequest_v1 = struct_version(sizeof(SystemEventSetCreateRequest_v1), 1);
struct SystemEventSetFreeRequest_v1 {  // nvmlSystemEventSetFreeRequest_v1_t
  unsigned int version;
  SystemEventSet set;
};
constexpr unsigned kSystemEventSetFreeRequest_v1 = struct_version(sizeof(SystemEventSetFreeRequest_v1), 1);
struct SystemRegisterEventRequest_v1 {  // nvmlSystemRegisterEventRequest_v1_t
  unsigned int version;
  unsigned long long eventTypes;
  SystemEventSet set;
};
constexpr unsigned kSystemRegisterEventRequest_v1 = struct_version(sizeof(SystemRegisterEventRequest_v1), 1);
struct SystemEventData_v1 {  // nvmlSystemEventData_v1_t
  unsigned long long eventType;
  unsigned int gpuId;  // ((PCI domain & 0xffff) << 16) | (bus << 8) | device
};
struct SystemEventSetWaitRequest_v1 {  // nvmlSystemEventSetWaitRequest_v1_t
  unsigned int version;
  unsigned int timeoutms;  // 0: NVML does not wait
  SystemEventSet set;
  SystemEventData_v1* data;
  unsigned int dataSize;
  unsigned int numEvent;  // out
};
constexpr unsigned kSystemEventSetWaitRequest_v1 = struct_version(sizeof(SystemEventSetWaitRequest_v1), 1);

struct ClockOffset_v1 {  // nvmlClockOffset_v1_t
  unsigned int version;
  int type;    // nvmlClockType_t (in)
  int pstate;  // nvmlPstates_t (in)
  int clockOffsetMHz, minClockOffsetMHz, maxClockOffsetMHz;
};
constexpr unsigned kClockOffset_v1 = struct_version(sizeof(ClockOffset_v1), 1);

struct FanSpeedInfo_v1 {  // nvmlFanSpeedInfo_v1_t
  unsigned int version;
  unsigned int fan;    // in
  unsigned int speed;  // out: RPM
};
constexpr unsigned kFanSpeedInfo_v1 = struct_version(sizeof(FanSpeedInfo_v1), 1);

union Value {  // nvmlValue_t
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;  // nvmlValueType_t
  Return nvmlReturn;
  Value value;
};
enum ValueType : int {  // nvmlValueType_t
  VALUE_TYPE_DOUBLE = 0, VALUE_TYPE_UNSIGNED_INT = 1, VALUE_TYPE_UNSIGNED_LONG = 2,
  VALUE_TYPE_UNSIGNED_LONG_LONG = 3, VALUE_TYPE_SIGNED_LONG_LONG = 4, VALUE_TYPE_SIGNED_INT = 5,
  VALUE_TYPE_UNSIGNED_SHORT = 6,
};

struct C2cModeInfo_v1 {  // nvmlC2cModeInfo_v1_t (unversioned: NVML reads no version field)
  unsigned int isC2cEnabled;
};

struct DeviceAddressingMode_v1 {  // nvmlDeviceAddressingMode_v1_t
  unsigned int version, value;
};
constexpr unsigned kDeviceAddressingMode_v1 = struct_version(sizeof(DeviceAddressingMode_v1), 1);

struct RepairStatus_v1 {  // nvmlRepairStatus_v1_t
  unsigned int version, bChannelRepairPending, bTpcRepairPending;
};
constexpr unsigned kRepairStatus_v1 = struct_version(sizeof(RepairStatus_v1), 1);

struct DeviceAttributes {  // nvmlDeviceAttributes_t
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount,
      sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};

constexpr unsigned kMaxGpuUtilizations = 8;  // NVML_MAX_GPU_UTILIZATIONS
struct GpuDynamicPstatesInfo {  // nvmlGpuDynamicPstatesInfo_t
  unsigned int flags;
  struct {
    unsigned int bIsPresent, percentage, incThreshold, decThreshold;
  } utilization[kMaxGpuUtilizations];
};

struct CoolerInfo_v1 {  // nvmlCoolerInfo_v1_t
  unsigned int version, index;
  int signalType;  // nvmlCoolerControl_t
  int target;      // nvmlCoolerTarget_t
};
constexpr unsigned kCoolerInfo_v1 = struct_version(sizeof(CoolerInfo_v1), 1);

constexpr unsigned kMaxThermalSensorsPerGpu = 3;  // NVML_MAX_THERMAL_SENSORS_PER_GPU
struct GpuThermalSettings {  // nvmlGpuThermalSettings_t
  unsigned int count;
  struct {
    int controller, defaultMinTemp, defaultMaxTemp, currentTemp, target;
  } sensor[kMaxThermalSensorsPerGpu];
};

constexpr unsigned kDeviceInforomVersionBufferSize = 16;  // NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE
constexpr unsigned kDevicePartNumberBufferSize = 80;      // NVML_DEVICE_PART_NUMBER_BUFFER_SIZE

// Enumerations passed by value (C enums: int-sized).
constexpr int kFeatureEnabled = 1;          // NVML_FEATURE_ENABLED
constexpr int kTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU
constexpr int kPstateUnknown = 32;          // NVML_PSTATE_UNKNOWN
constexpr int kPcieUtilTxBytes = 0;         // NVML_PCIE_UTIL_TX_BYTES
constexpr int kPcieUtilRxBytes = 1;         // NVML_PCIE_UTIL_RX_BYTES
constexpr int kMaxPstates = 16;             // NVML_MAX_GPU_PERF_PSTATES

}  // namespace cucore::detail::nvml

// The entry points: X(symbol, required, (parameters)). Required ones must exist
// for NVML to count as usable; the others are null when this NVML lacks them,
// and calling one then throws NvmlError(NVML_ERROR_FUNCTION_NOT_FOUND).
#define CUCORE_NVML_FUNCTIONS(X)                                                                                  \
  X(nvmlInit_v2, true, ())                                                                                        \
  X(nvmlSystemGetDriverVersion, true, (char*, unsigned int))                                                      \
  X(nvmlSystemGetNVMLVersion, true, (char*, unsigned int))                                                        \
  X(nvmlSystemGetCudaDriverVersion_v2, false, (int*))                                                             \
  X(nvmlSystemGetProcessName, false, (unsigned int, char*, unsigned int))                                         \
  X(nvmlSystemGetDriverBranch, false, (nvml::SystemDriverBranchInfo_v1*, unsigned int))                           \
  X(nvmlDeviceGetCount_v2, true, (unsigned int*))                                                                 \
  X(nvmlDeviceGetHandleByIndex_v2, true, (unsigned int, nvml::Device*))                                           \
  X(nvmlDeviceGetHandleByUUID, false, (const char*, nvml::Device*))                                               \
  X(nvmlDeviceGetHandleByPciBusId_v2, false, (const char*, nvml::Device*))                                        \
  X(nvmlDeviceGetIndex, false, (nvml::Device, unsigned int*))                                                     \
  X(nvmlDeviceGetName, true, (nvml::Device, char*, unsigned int))                                                 \
  X(nvmlDeviceGetBrand, false, (nvml::Device, int*))                                                              \
  X(nvmlDeviceGetUUID, true, (nvml::Device, char*, unsigned int))                                                 \
  X(nvmlDeviceGetSerial, false, (nvml::Device, char*, unsigned int))                                              \
  X(nvmlDeviceGetModuleId, false, (nvml::Device, unsigned int*))                                                  \
  X(nvmlDeviceGetMinorNumber, false, (nvml::Device, unsigned int*))                                               \
  X(nvmlDeviceGetNumaNodeId, false, (nvml::Device, unsigned int*))                                                \
  X(nvmlDeviceGetArchitecture, false, (nvml::Device, unsigned int*))                                              \
  X(nvmlDeviceGetCudaComputeCapability, false, (nvml::Device, int*, int*))                                        \
  X(nvmlDeviceGetPersistenceMode, false, (nvml::Device, int*))                                                    \
  X(nvmlDeviceSetPersistenceMode, false, (nvml::Device, int))                                                     \
  X(nvmlDeviceGetC2cModeInfoV, false, (nvml::Device, nvml::C2cModeInfo_v1*))                                      \
  X(nvmlDeviceGetAddressingMode, false, (nvml::Device, nvml::DeviceAddressingMode_v1*))                           \
  X(nvmlDeviceGetDisplayMode, false, (nvml::Device, int*))                                                        \
  X(nvmlDeviceGetDisplayActive, false, (nvml::Device, int*))                                                      \
  X(nvmlDeviceGetAttributes_v2, false, (nvml::Device, nvml::DeviceAttributes*))                                   \
  X(nvmlDeviceGetRepairStatus, false, (nvml::Device, nvml::RepairStatus_v1*))                                     \
  X(nvmlDeviceGetInforomVersion, false, (nvml::Device, int, char*, unsigned int))                                 \
  X(nvmlDeviceGetInforomImageVersion, false, (nvml::Device, char*, unsigned int))                                 \
  X(nvmlDeviceGetInforomConfigurationChecksum, false, (nvml::Device, unsigned int*))                              \
  X(nvmlDeviceValidateInforom, false, (nvml::Device))                                                             \
  X(nvmlDeviceGetLastBBXFlushTime, false, (nvml::Device, unsigned long long*, unsigned long*))                    \
  X(nvmlDeviceGetBoardPartNumber, false, (nvml::Device, char*, unsigned int))                                     \
  X(nvmlDeviceGetAutoBoostedClocksEnabled, false, (nvml::Device, int*, int*))                                     \
  X(nvmlDeviceGetCpuAffinityWithinScope, false, (nvml::Device, unsigned int, unsigned long*, unsigned int))       \
  X(nvmlDeviceGetMemoryAffinity, false, (nvml::Device, unsigned int, unsigned long*, unsigned int))               \
  X(nvmlDeviceSetCpuAffinity, false, (nvml::Device))                                                              \
  X(nvmlDeviceClearCpuAffinity, false, (nvml::Device))                                                            \
  X(nvmlSystemGetTopologyGpuSet, false, (unsigned int, unsigned int*, nvml::Device*))                             \
  X(nvmlDeviceGetTopologyNearestGpus, false, (nvml::Device, int, unsigned int*, nvml::Device*))                   \
  X(nvmlDeviceClearFieldValues, false, (nvml::Device, int, nvml::FieldValue*))                                    \
  X(nvmlDeviceGetDynamicPstatesInfo, false, (nvml::Device, nvml::GpuDynamicPstatesInfo*))                         \
  X(nvmlDeviceGetCoolerInfo, false, (nvml::Device, nvml::CoolerInfo_v1*))                                         \
  X(nvmlDeviceGetThermalSettings, false, (nvml::Device, unsigned int, nvml::GpuThermalSettings*))                 \
  X(nvmlDeviceGetPciInfoExt, false, (nvml::Device, nvml::PciInfoExt_v1*))                                         \
  X(nvmlDeviceGetMaxPcieLinkGeneration, false, (nvml::Device, unsigned int*))                                     \
  X(nvmlDeviceGetGpuMaxPcieLinkGeneration, false, (nvml::Device, unsigned int*))                                  \
  X(nvmlDeviceGetMaxPcieLinkWidth, false, (nvml::Device, unsigned int*))                                          \
  X(nvmlDeviceGetCurrPcieLinkGeneration, false, (nvml::Device, unsigned int*))                                    \
  X(nvmlDeviceGetCurrPcieLinkWidth, false, (nvml::Device, unsigned int*))                                         \
  X(nvmlDeviceGetPcieThroughput, false, (nvml::Device, int, unsigned int*))                                       \
  X(nvmlDeviceGetPcieReplayCounter, false, (nvml::Device, unsigned int*))                                         \
  X(nvmlDeviceGetMigMode, false, (nvml::Device, unsigned int*, unsigned int*))                                    \
  X(nvmlDeviceIsMigDeviceHandle, false, (nvml::Device, unsigned int*))                                            \
  X(nvmlDeviceGetMaxMigDeviceCount, false, (nvml::Device, unsigned int*))                                         \
  X(nvmlDeviceGetMigDeviceHandleByIndex, false, (nvml::Device, unsigned int, nvml::Device*))                      \
  X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, false, (nvml::Device, nvml::Device*))                           \
  X(nvmlDeviceGetClockInfo, false, (nvml::Device, int, unsigned int*))                                            \
  X(nvmlDeviceGetMaxClockInfo, false, (nvml::Device, int, unsigned int*))                                         \
  X(nvmlDeviceGetClock, false, (nvml::Device, int, int, unsigned int*))                                           \
  X(nvmlDeviceGetMaxCustomerBoostClock, false, (nvml::Device, int, unsigned int*))                                \
  X(nvmlDeviceGetMinMaxClockOfPState, false, (nvml::Device, int, int, unsigned int*, unsigned int*))               \
  X(nvmlDeviceGetClockOffsets, false, (nvml::Device, nvml::ClockOffset_v1*))                                      \
  X(nvmlDeviceGetPerformanceState, false, (nvml::Device, int*))                                                   \
  X(nvmlDeviceGetSupportedPerformanceStates, false, (nvml::Device, int*, unsigned int))                           \
  X(nvmlDeviceGetCurrentClocksEventReasons, false, (nvml::Device, unsigned long long*))                           \
  X(nvmlDeviceGetSupportedClocksEventReasons, false, (nvml::Device, unsigned long long*))                         \
  X(nvmlDeviceGetTemperatureV, false, (nvml::Device, nvml::Temperature_v1*))                                      \
  X(nvmlDeviceGetTemperatureThreshold, false, (nvml::Device, int, unsigned int*))                                 \
  X(nvmlDeviceGetMarginTemperature, false, (nvml::Device, nvml::MarginTemperature_v1*))                           \
  X(nvmlDeviceGetNumFans, false, (nvml::Device, unsigned int*))                                                   \
  X(nvmlDeviceGetFanSpeed_v2, false, (nvml::Device, unsigned int, unsigned int*))                                 \
  X(nvmlDeviceGetFanSpeedRPM, false, (nvml::Device, nvml::FanSpeedInfo_v1*))                                      \
  X(nvmlDeviceGetTargetFanSpeed, false, (nvml::Device, unsigned int, unsigned int*))                              \
  X(nvmlDeviceGetMinMaxFanSpeed, false, (nvml::Device, unsigned int*, unsigned int*))                             \
  X(nvmlDeviceGetFanControlPolicy_v2, false, (nvml::Device, unsigned int, unsigned int*))                         \
  X(nvmlDeviceSetFanSpeed_v2, false, (nvml::Device, unsigned int, unsigned int))                                  \
  X(nvmlDeviceSetDefaultFanSpeed_v2, false, (nvml::Device, unsigned int))                                         \
  X(nvmlDeviceGetPowerUsage, false, (nvml::Device, unsigned int*))                                                \
  X(nvmlDeviceGetPowerManagementLimit, false, (nvml::Device, unsigned int*))                                      \
  X(nvmlDeviceGetPowerManagementDefaultLimit, false, (nvml::Device, unsigned int*))                               \
  X(nvmlDeviceGetPowerManagementLimitConstraints, false, (nvml::Device, unsigned int*, unsigned int*))            \
  X(nvmlDeviceGetEnforcedPowerLimit, false, (nvml::Device, unsigned int*))                                        \
  X(nvmlDeviceGetTotalEnergyConsumption, false, (nvml::Device, unsigned long long*))                              \
  X(nvmlDeviceGetMemoryInfo_v2, false, (nvml::Device, nvml::Memory_v2*))                                          \
  X(nvmlDeviceGetBAR1MemoryInfo, false, (nvml::Device, nvml::BAR1Memory*))                                        \
  X(nvmlDeviceGetUtilizationRates, false, (nvml::Device, nvml::Utilization*))                                     \
  X(nvmlDeviceGetEncoderUtilization, false, (nvml::Device, unsigned int*, unsigned int*))                         \
  X(nvmlDeviceGetDecoderUtilization, false, (nvml::Device, unsigned int*, unsigned int*))                         \
  X(nvmlDeviceGetComputeRunningProcesses_v3, false, (nvml::Device, unsigned int*, nvml::ProcessInfo*))            \
  X(nvmlDeviceGetEccMode, false, (nvml::Device, int*, int*))                                                      \
  X(nvmlDeviceGetTotalEccErrors, false, (nvml::Device, int, int, unsigned long long*))                            \
  X(nvmlDeviceGetFieldValues, false, (nvml::Device, int, nvml::FieldValue*))                                      \
  X(nvmlDeviceGetNvLinkState, false, (nvml::Device, unsigned int, int*))                                          \
  X(nvmlDeviceGetNvLinkVersion, false, (nvml::Device, unsigned int, unsigned int*))                               \
  X(nvmlDeviceGetNvLinkRemotePciInfo_v2, false, (nvml::Device, unsigned int, nvml::PciInfo*))                     \
  X(nvmlDeviceGetTopologyCommonAncestor, false, (nvml::Device, nvml::Device, int*))                               \
  X(nvmlDeviceGetP2PStatus, false, (nvml::Device, nvml::Device, int, int*))                                       \
  X(nvmlDeviceGetSupportedEventTypes, false, (nvml::Device, unsigned long long*))                                 \
  X(nvmlEventSetCreate, false, (nvml::EventSet*))                                                                 \
  X(nvmlDeviceRegisterEvents, false, (nvml::Device, unsigned long long, nvml::EventSet))                          \
  X(nvmlEventSetWait_v2, false, (nvml::EventSet, nvml::EventData*, unsigned int))                                 \
  X(nvmlEventSetFree, false, (nvml::EventSet))                                                                    \
  X(nvmlSystemEventSetCreate, false, (nvml::SystemEventSetCreateRequest_v1*))                                     \
  X(nvmlSystemRegisterEvents, false, (nvml::SystemRegisterEventRequest_v1*))                                      \
  X(nvmlSystemEventSetWait, false, (nvml::SystemEventSetWaitRequest_v1*))                                         \
  X(nvmlSystemEventSetFree, false, (nvml::SystemEventSetFreeRequest_v1*))

// Older entry points some nvml.h releases no longer declare; used only when the
// newer one above is missing.
#define CUCORE_NVML_LEGACY_FUNCTIONS(X)                                 \
  X(nvmlDeviceGetTemperature, false, (nvml::Device, int, unsigned int*)) \
  X(nvmlDeviceGetApplicationsClock, false, (nvml::Device, int, unsigned int*))

namespace cucore::detail::nvml {
#define X(name, required, params) using PFN_##name = Return(*) params;
CUCORE_NVML_FUNCTIONS(X)
CUCORE_NVML_LEGACY_FUNCTIONS(X)
#undef X
using PFN_nvmlErrorString = const char* (*)(Return);
}  // namespace cucore::detail::nvml
