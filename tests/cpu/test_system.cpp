// cucore::system on any machine, through a substituted NVML table: values pass
// through on random data, NOT_SUPPORTED is an empty optional (NvmlError within
// an UnsupportedAsError scope), real failures are NvmlError, unknown devices std::out_of_range, a missing NVML a
// LibraryNotFoundError naming what was searched.
#include <cucore/log.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/system.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "handles/nvml_handles.hpp"
#include "loader/toolkit.hpp"

namespace {

namespace nvml = cucore::detail::nvml;
namespace sys = cucore::system;
using cucore::detail::NvmlTable;

struct FakeGpu {
  std::string name, uuid, serial, bus_id;
  unsigned index = 0, brand = 0, arch = 0, module_id = 0, minor = 0, numa = 0;
  unsigned domain = 0, bus = 0, dev = 0, pci_device_id = 0, subsystem = 0, base_class = 0, sub_class = 0;
  int cc_major = 0, cc_minor = 0, persistence = 0;
  nvml::Memory_v2 mem{};
  nvml::BAR1Memory bar1{};
  nvml::Utilization util{};
  unsigned enc = 0, enc_period = 0, dec = 0, dec_period = 0;
  unsigned power = 0, limit = 0, default_limit = 0, enforced = 0, min_limit = 0, max_limit = 0;
  unsigned long long energy = 0;
  unsigned clocks[4] = {}, max_clocks[4] = {}, boost_clock[4] = {}, app[4] = {};
  int pstate = 0;
  std::vector<int> pstates;
  unsigned long long reasons = 0, supported_reasons = 0, event_types = 0;
  int temp = 0, margin = 0;
  unsigned thresholds[8] = {};
  std::vector<unsigned> fans, fan_rpm, fan_target, fan_policy;
  unsigned fan_min = 0, fan_max = 0;
  std::vector<std::pair<unsigned, unsigned>> fan_sets;  // (fan, percent) set; percent ~0u: back to the default
  int ecc_current = 0, ecc_pending = 0;
  unsigned long long ecc[2][2] = {};
  unsigned link_gen = 0, gpu_max_gen = 0, max_width = 0, cur_gen = 0, cur_width = 0, tx = 0, rx = 0, replay = 0;
  std::vector<int> link_state;
  std::vector<unsigned> link_version;
  std::vector<std::string> link_remote;
  unsigned mig_current = 0, mig_pending = 0;
  std::vector<nvml::ProcessInfo> procs;
  int c2c = 0, display_mode = 0, display_active = 0, boost = 0, boost_default = 0;
  unsigned addressing = 0, channel_repair = 0, tpc_repair = 0, checksum = 0;
  nvml::DeviceAttributes attrs{};
  std::string inforom[4], image, part_number;
  unsigned long long bbx_time = 0;
  unsigned long bbx_duration = 0;
  std::vector<unsigned> cpus, nodes;       // the CPUs and NUMA nodes near the GPU
  std::vector<unsigned> socket_cpus;       // within its socket
  std::vector<unsigned long long> fields;  // field id i+1000 -> fields[i]
  std::vector<unsigned> cleared;           // field ids cleared
  nvml::GpuDynamicPstatesInfo dyn{};
  nvml::CoolerInfo_v1 cooler{};
  nvml::GpuThermalSettings thermal{};
  // Per clock type and P-state: min/max clock, and offset (current, min, max).
  unsigned pstate_min[4][16] = {}, pstate_max[4][16] = {};
  int offset[4][16][3] = {};
};

FakeGpu& gpu(nvml::Device h) { return *reinterpret_cast<FakeGpu*>(h); }

void copy(char* dst, unsigned n, const std::string& s) {
  std::snprintf(dst, n, "%s", s.c_str());
}

// An NVML of `gpus`, with every entry point answering from them.
class FakeNvml {
 public:
  static inline std::vector<FakeGpu> gpus;
  static inline std::string driver_version, nvml_version, branch;
  static inline int cuda_version = 0;
  static inline int sets_created = 0, sets_freed = 0;
  static inline unsigned long long registered = 0;
  static inline int pending_events = 0;
  // The system event set: how many were made and freed, the set NVML made, the
  // types it records, and the (type, gpu id) events waiting.
  static inline int system_sets_created = 0, system_sets_freed = 0, system_set_storage = 0;
  static inline unsigned long long system_registered = 0, system_supported = 0;
  static inline std::vector<nvml::SystemEventData_v1> system_pending;
  static inline unsigned last_wait_timeout = 0;
  static inline unsigned extra_events_claimed = 0;  // a misbehaving NVML: numEvent past dataSize
  static inline int process_list_growth = 0;  // extra processes appearing after each short call

  NvmlTable table;

  FakeNvml() {
    NvmlTable& t = table;
    t.nvmlErrorString = [](nvml::Return r) -> const char* {
      return r == nvml::ERROR_GPU_IS_LOST ? "fake: the GPU fell off the bus" : "fake: other error";
    };
    t.nvmlInit_v2 = [] { return nvml::SUCCESS; };
    t.nvmlSystemGetDriverVersion = [](char* b, unsigned n) { return copy(b, n, driver_version), nvml::SUCCESS; };
    t.nvmlSystemGetNVMLVersion = [](char* b, unsigned n) { return copy(b, n, nvml_version), nvml::SUCCESS; };
    t.nvmlSystemGetCudaDriverVersion_v2 = [](int* v) { return *v = cuda_version, nvml::SUCCESS; };
    t.nvmlSystemGetProcessName = [](unsigned pid, char* b, unsigned n) {
      if (pid % 7 == 0) return nvml::ERROR_NOT_FOUND;  // gone already
      return copy(b, n, "proc" + std::to_string(pid)), nvml::SUCCESS;
    };
    t.nvmlSystemGetDriverBranch = [](nvml::SystemDriverBranchInfo_v1* b, unsigned n) {
      if (b->version != nvml::kSystemDriverBranchInfo_v1 || n < 80) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      return copy(b->branch, n, branch), nvml::SUCCESS;
    };
    t.nvmlDeviceGetCount_v2 = [](unsigned* c) { return *c = static_cast<unsigned>(gpus.size()), nvml::SUCCESS; };
    t.nvmlDeviceGetHandleByIndex_v2 = [](unsigned i, nvml::Device* h) {
      if (i >= gpus.size()) return nvml::ERROR_INVALID_ARGUMENT;
      return *h = reinterpret_cast<nvml::Device>(&gpus[i]), nvml::SUCCESS;
    };
    t.nvmlDeviceGetHandleByUUID = [](const char* u, nvml::Device* h) {
      if (std::strncmp(u, "GPU-", 4) != 0 || std::strlen(u) != 40) return nvml::ERROR_INVALID_ARGUMENT;
      for (auto& g : gpus)
        if (g.uuid == u) return *h = reinterpret_cast<nvml::Device>(&g), nvml::SUCCESS;
      return nvml::ERROR_NOT_FOUND;
    };
    t.nvmlDeviceGetHandleByPciBusId_v2 = [](const char* b, nvml::Device* h) {
      if (!std::strchr(b, ':')) return nvml::ERROR_INVALID_ARGUMENT;
      for (auto& g : gpus)
        if (g.bus_id == b) return *h = reinterpret_cast<nvml::Device>(&g), nvml::SUCCESS;
      return nvml::ERROR_NOT_FOUND;
    };
    t.nvmlDeviceGetIndex = [](nvml::Device h, unsigned* v) { return *v = gpu(h).index, nvml::SUCCESS; };
    t.nvmlDeviceGetName = [](nvml::Device h, char* b, unsigned n) { return copy(b, n, gpu(h).name), nvml::SUCCESS; };
    t.nvmlDeviceGetBrand = [](nvml::Device h, int* v) { return *v = static_cast<int>(gpu(h).brand), nvml::SUCCESS; };
    t.nvmlDeviceGetUUID = [](nvml::Device h, char* b, unsigned n) { return copy(b, n, gpu(h).uuid), nvml::SUCCESS; };
    t.nvmlDeviceGetSerial = [](nvml::Device h, char* b, unsigned n) {
      return copy(b, n, gpu(h).serial), nvml::SUCCESS;
    };
    t.nvmlDeviceGetModuleId = [](nvml::Device h, unsigned* v) { return *v = gpu(h).module_id, nvml::SUCCESS; };
    t.nvmlDeviceGetMinorNumber = [](nvml::Device h, unsigned* v) { return *v = gpu(h).minor, nvml::SUCCESS; };
    t.nvmlDeviceGetNumaNodeId = [](nvml::Device h, unsigned* v) { return *v = gpu(h).numa, nvml::SUCCESS; };
    t.nvmlDeviceGetArchitecture = [](nvml::Device h, unsigned* v) { return *v = gpu(h).arch, nvml::SUCCESS; };
    t.nvmlDeviceGetCudaComputeCapability = [](nvml::Device h, int* a, int* b) {
      return *a = gpu(h).cc_major, *b = gpu(h).cc_minor, nvml::SUCCESS;
    };
    t.nvmlDeviceGetPersistenceMode = [](nvml::Device h, int* v) { return *v = gpu(h).persistence, nvml::SUCCESS; };
    t.nvmlDeviceGetPciInfoExt = [](nvml::Device h, nvml::PciInfoExt_v1* p) {
      if (p->version != nvml::kPciInfoExt_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      const FakeGpu& g = gpu(h);
      p->domain = g.domain, p->bus = g.bus, p->device = g.dev, p->pciDeviceId = g.pci_device_id;
      p->pciSubSystemId = g.subsystem, p->baseClass = g.base_class, p->subClass = g.sub_class;
      copy(p->busId, sizeof p->busId, g.bus_id);
      return nvml::SUCCESS;
    };
#define UINT_FIELD(fn, field) \
  t.fn = [](nvml::Device h, unsigned* v) { return *v = gpu(h).field, nvml::SUCCESS; };
    UINT_FIELD(nvmlDeviceGetMaxPcieLinkGeneration, link_gen)
    UINT_FIELD(nvmlDeviceGetGpuMaxPcieLinkGeneration, gpu_max_gen)
    UINT_FIELD(nvmlDeviceGetMaxPcieLinkWidth, max_width)
    UINT_FIELD(nvmlDeviceGetCurrPcieLinkGeneration, cur_gen)
    UINT_FIELD(nvmlDeviceGetCurrPcieLinkWidth, cur_width)
    UINT_FIELD(nvmlDeviceGetPcieReplayCounter, replay)
    UINT_FIELD(nvmlDeviceGetPowerUsage, power)
    UINT_FIELD(nvmlDeviceGetPowerManagementLimit, limit)
    UINT_FIELD(nvmlDeviceGetPowerManagementDefaultLimit, default_limit)
    UINT_FIELD(nvmlDeviceGetEnforcedPowerLimit, enforced)
#undef UINT_FIELD
    t.nvmlDeviceGetPcieThroughput = [](nvml::Device h, int counter, unsigned* v) {
      return *v = counter == nvml::kPcieUtilTxBytes ? gpu(h).tx : gpu(h).rx, nvml::SUCCESS;
    };
    t.nvmlDeviceGetMigMode = [](nvml::Device h, unsigned* c, unsigned* p) {
      return *c = gpu(h).mig_current, *p = gpu(h).mig_pending, nvml::SUCCESS;
    };
    t.nvmlDeviceIsMigDeviceHandle = [](nvml::Device, unsigned* v) { return *v = 0, nvml::SUCCESS; };
    t.nvmlDeviceGetMaxMigDeviceCount = [](nvml::Device, unsigned* v) { return *v = 0, nvml::SUCCESS; };
    t.nvmlDeviceGetClockInfo = [](nvml::Device h, int type, unsigned* v) {
      return *v = gpu(h).clocks[type], nvml::SUCCESS;
    };
    t.nvmlDeviceGetMaxClockInfo = [](nvml::Device h, int type, unsigned* v) {
      return *v = gpu(h).max_clocks[type], nvml::SUCCESS;
    };
    t.nvmlDeviceGetClock = [](nvml::Device h, int type, int id, unsigned* v) {
      if (id != static_cast<int>(sys::ClockId::customer_boost_max)) return nvml::ERROR_INVALID_ARGUMENT;
      return *v = gpu(h).boost_clock[type], nvml::SUCCESS;
    };
    t.nvmlDeviceGetMaxCustomerBoostClock = t.nvmlDeviceGetMaxClockInfo;
    t.nvmlDeviceGetApplicationsClock = [](nvml::Device h, int type, unsigned* v) {
      return *v = gpu(h).app[type], nvml::SUCCESS;
    };
    t.nvmlDeviceGetPerformanceState = [](nvml::Device h, int* v) { return *v = gpu(h).pstate, nvml::SUCCESS; };
    t.nvmlDeviceGetSupportedPerformanceStates = [](nvml::Device h, int* p, unsigned size) {
      if (size < 16 * sizeof(int)) return nvml::ERROR_INSUFFICIENT_SIZE;
      const auto& ps = gpu(h).pstates;
      for (std::size_t i = 0; i < 16; ++i) p[i] = i < ps.size() ? ps[i] : nvml::kPstateUnknown;
      return nvml::SUCCESS;
    };
    t.nvmlDeviceGetCurrentClocksEventReasons = [](nvml::Device h, unsigned long long* v) {
      return *v = gpu(h).reasons, nvml::SUCCESS;
    };
    t.nvmlDeviceGetSupportedClocksEventReasons = [](nvml::Device h, unsigned long long* v) {
      return *v = gpu(h).supported_reasons, nvml::SUCCESS;
    };
    t.nvmlDeviceGetTemperatureV = [](nvml::Device h, nvml::Temperature_v1* v) {
      if (v->version != nvml::kTemperature_v1 || v->sensorType != nvml::kTemperatureGpu)
        return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      return v->temperature = gpu(h).temp, nvml::SUCCESS;
    };
    t.nvmlDeviceGetTemperatureThreshold = [](nvml::Device h, int which, unsigned* v) {
      return *v = gpu(h).thresholds[which], nvml::SUCCESS;
    };
    t.nvmlDeviceGetMarginTemperature = [](nvml::Device h, nvml::MarginTemperature_v1* m) {
      if (m->version != nvml::kMarginTemperature_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      return m->marginTemperature = gpu(h).margin, nvml::SUCCESS;
    };
    t.nvmlDeviceGetNumFans = [](nvml::Device h, unsigned* v) {
      return *v = static_cast<unsigned>(gpu(h).fans.size()), nvml::SUCCESS;
    };
    t.nvmlDeviceGetFanSpeed_v2 = [](nvml::Device h, unsigned fan, unsigned* v) {
      if (fan >= gpu(h).fans.size()) return nvml::ERROR_INVALID_ARGUMENT;
      return *v = gpu(h).fans[fan], nvml::SUCCESS;
    };
    t.nvmlDeviceGetFanSpeedRPM = [](nvml::Device h, nvml::FanSpeedInfo_v1* info) {
      if (info->version != nvml::kFanSpeedInfo_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      if (info->fan >= gpu(h).fans.size()) return nvml::ERROR_INVALID_ARGUMENT;
      return info->speed = gpu(h).fan_rpm[info->fan], nvml::SUCCESS;
    };
    t.nvmlDeviceGetTargetFanSpeed = [](nvml::Device h, unsigned fan, unsigned* v) {
      if (fan >= gpu(h).fans.size()) return nvml::ERROR_INVALID_ARGUMENT;
      return *v = gpu(h).fan_target[fan], nvml::SUCCESS;
    };
    t.nvmlDeviceGetMinMaxFanSpeed = [](nvml::Device h, unsigned* lo, unsigned* hi) {
      return *lo = gpu(h).fan_min, *hi = gpu(h).fan_max, nvml::SUCCESS;
    };
    t.nvmlDeviceGetFanControlPolicy_v2 = [](nvml::Device h, unsigned fan, unsigned* v) {
      if (fan >= gpu(h).fans.size()) return nvml::ERROR_INVALID_ARGUMENT;
      return *v = gpu(h).fan_policy[fan], nvml::SUCCESS;
    };
    t.nvmlDeviceSetFanSpeed_v2 = [](nvml::Device h, unsigned fan, unsigned percent) {
      if (fan >= gpu(h).fans.size()) return nvml::ERROR_INVALID_ARGUMENT;
      gpu(h).fan_sets.emplace_back(fan, percent);
      return nvml::SUCCESS;
    };
    t.nvmlDeviceSetDefaultFanSpeed_v2 = [](nvml::Device h, unsigned fan) {
      if (fan >= gpu(h).fans.size()) return nvml::ERROR_INVALID_ARGUMENT;
      gpu(h).fan_sets.emplace_back(fan, ~0u);
      return nvml::SUCCESS;
    };
    t.nvmlDeviceGetPowerManagementLimitConstraints = [](nvml::Device h, unsigned* lo, unsigned* hi) {
      return *lo = gpu(h).min_limit, *hi = gpu(h).max_limit, nvml::SUCCESS;
    };
    t.nvmlDeviceGetTotalEnergyConsumption = [](nvml::Device h, unsigned long long* v) {
      return *v = gpu(h).energy, nvml::SUCCESS;
    };
    t.nvmlDeviceGetMemoryInfo_v2 = [](nvml::Device h, nvml::Memory_v2* m) {
      if (m->version != nvml::kMemory_v2) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      *m = gpu(h).mem;
      return nvml::SUCCESS;
    };
    t.nvmlDeviceGetBAR1MemoryInfo = [](nvml::Device h, nvml::BAR1Memory* m) { return *m = gpu(h).bar1, nvml::SUCCESS; };
    t.nvmlDeviceGetUtilizationRates = [](nvml::Device h, nvml::Utilization* u) {
      return *u = gpu(h).util, nvml::SUCCESS;
    };
    t.nvmlDeviceGetEncoderUtilization = [](nvml::Device h, unsigned* u, unsigned* p) {
      return *u = gpu(h).enc, *p = gpu(h).enc_period, nvml::SUCCESS;
    };
    t.nvmlDeviceGetDecoderUtilization = [](nvml::Device h, unsigned* u, unsigned* p) {
      return *u = gpu(h).dec, *p = gpu(h).dec_period, nvml::SUCCESS;
    };
    t.nvmlDeviceGetComputeRunningProcesses_v3 = [](nvml::Device h, unsigned* count, nvml::ProcessInfo* out) {
      auto& procs = gpu(h).procs;
      if (*count < procs.size()) {
        unsigned needed = static_cast<unsigned>(procs.size());
        // The list grows between this answer and the next call, as real ones do.
        for (int i = 0; i < process_list_growth; ++i)
          procs.push_back({static_cast<unsigned>(900000 + procs.size()), 1ULL << 20, 0, 0});
        process_list_growth = 0;
        *count = needed;
        return nvml::ERROR_INSUFFICIENT_SIZE;
      }
      std::copy(procs.begin(), procs.end(), out);
      *count = static_cast<unsigned>(procs.size());
      return nvml::SUCCESS;
    };
    t.nvmlDeviceGetEccMode = [](nvml::Device h, int* c, int* p) {
      return *c = gpu(h).ecc_current, *p = gpu(h).ecc_pending, nvml::SUCCESS;
    };
    t.nvmlDeviceGetTotalEccErrors = [](nvml::Device h, int e, int c, unsigned long long* v) {
      return *v = gpu(h).ecc[e][c], nvml::SUCCESS;
    };
    t.nvmlDeviceGetFieldValues = [](nvml::Device h, int n, nvml::FieldValue* f) {
      if (n <= 0) return nvml::ERROR_INVALID_ARGUMENT;
      for (int i = 0; i < n; ++i) {
        f[i].timestamp = 1700000000000000LL + f[i].fieldId, f[i].latencyUsec = f[i].scopeId + 3;
        if (f[i].fieldId == nvml::kFieldNvlinkLinkCount) {
          f[i].valueType = nvml::VALUE_TYPE_UNSIGNED_INT, f[i].nvmlReturn = nvml::SUCCESS;
          f[i].value.uiVal = static_cast<unsigned>(gpu(h).link_state.size());
        } else if (f[i].fieldId >= 1000 && f[i].fieldId - 1000 < gpu(h).fields.size()) {
          // Even ids as unsigned long long, odd ones as double (value / 4).
          unsigned long long v = gpu(h).fields[f[i].fieldId - 1000];
          f[i].nvmlReturn = nvml::SUCCESS;
          if (f[i].fieldId % 2 == 0)
            f[i].valueType = nvml::VALUE_TYPE_UNSIGNED_LONG_LONG, f[i].value.ullVal = v + f[i].scopeId;
          else
            f[i].valueType = nvml::VALUE_TYPE_DOUBLE, f[i].value.dVal = static_cast<double>(v) / 4;
        } else {
          f[i].nvmlReturn = nvml::ERROR_NOT_SUPPORTED;
        }
      }
      return nvml::SUCCESS;
    };
    t.nvmlDeviceGetDynamicPstatesInfo = [](nvml::Device h, nvml::GpuDynamicPstatesInfo* d) {
      return *d = gpu(h).dyn, nvml::SUCCESS;
    };
    t.nvmlDeviceGetCoolerInfo = [](nvml::Device h, nvml::CoolerInfo_v1* c) {
      if (c->version != nvml::kCoolerInfo_v1 || c->index != 0) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      return c->signalType = gpu(h).cooler.signalType, c->target = gpu(h).cooler.target, nvml::SUCCESS;
    };
    t.nvmlDeviceGetThermalSettings = [](nvml::Device h, unsigned index, nvml::GpuThermalSettings* out) {
      if (index != 15) return nvml::ERROR_INVALID_ARGUMENT;  // the fake answers for ALL only
      return *out = gpu(h).thermal, nvml::SUCCESS;
    };
    t.nvmlDeviceClearFieldValues = [](nvml::Device h, int n, nvml::FieldValue* f) {
      if (n <= 0) return nvml::ERROR_INVALID_ARGUMENT;
      for (int i = 0; i < n; ++i) gpu(h).cleared.push_back(f[i].fieldId);
      return nvml::SUCCESS;
    };
    t.nvmlDeviceSetPersistenceMode = [](nvml::Device h, int mode) {
      if (mode != 0 && mode != 1) return nvml::ERROR_INVALID_ARGUMENT;
      return gpu(h).persistence = mode, nvml::SUCCESS;
    };
    t.nvmlDeviceGetC2cModeInfoV = [](nvml::Device h, nvml::C2cModeInfo_v1* c) {
      return c->isC2cEnabled = static_cast<unsigned>(gpu(h).c2c), nvml::SUCCESS;
    };
    t.nvmlDeviceGetAddressingMode = [](nvml::Device h, nvml::DeviceAddressingMode_v1* m) {
      if (m->version != nvml::kDeviceAddressingMode_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      return m->value = gpu(h).addressing, nvml::SUCCESS;
    };
    t.nvmlDeviceGetDisplayMode = [](nvml::Device h, int* v) { return *v = gpu(h).display_mode, nvml::SUCCESS; };
    t.nvmlDeviceGetDisplayActive = [](nvml::Device h, int* v) { return *v = gpu(h).display_active, nvml::SUCCESS; };
    t.nvmlDeviceGetAutoBoostedClocksEnabled = [](nvml::Device h, int* c, int* d) {
      return *c = gpu(h).boost, *d = gpu(h).boost_default, nvml::SUCCESS;
    };
    t.nvmlDeviceGetAttributes_v2 = [](nvml::Device h, nvml::DeviceAttributes* a) {
      return *a = gpu(h).attrs, nvml::SUCCESS;
    };
    t.nvmlDeviceGetRepairStatus = [](nvml::Device h, nvml::RepairStatus_v1* r) {
      if (r->version != nvml::kRepairStatus_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      return r->bChannelRepairPending = gpu(h).channel_repair, r->bTpcRepairPending = gpu(h).tpc_repair, nvml::SUCCESS;
    };
    t.nvmlDeviceGetInforomVersion = [](nvml::Device h, int object, char* b, unsigned n) {
      if (object < 0 || object > 3) return nvml::ERROR_INVALID_ARGUMENT;
      if (n < nvml::kDeviceInforomVersionBufferSize) return nvml::ERROR_INSUFFICIENT_SIZE;
      return copy(b, n, gpu(h).inforom[object]), nvml::SUCCESS;
    };
    t.nvmlDeviceGetInforomImageVersion = [](nvml::Device h, char* b, unsigned n) {
      return copy(b, n, gpu(h).image), nvml::SUCCESS;
    };
    t.nvmlDeviceGetInforomConfigurationChecksum = [](nvml::Device h, unsigned* v) {
      return *v = gpu(h).checksum, nvml::SUCCESS;
    };
    t.nvmlDeviceValidateInforom = [](nvml::Device h) {
      return gpu(h).checksum % 2 ? nvml::ERROR_CORRUPTED_INFOROM : nvml::SUCCESS;
    };
    t.nvmlDeviceGetLastBBXFlushTime = [](nvml::Device h, unsigned long long* when, unsigned long* d) {
      if (gpu(h).bbx_time == 0) return nvml::ERROR_NOT_READY;  // not flushed yet
      return *when = gpu(h).bbx_time, *d = gpu(h).bbx_duration, nvml::SUCCESS;
    };
    t.nvmlDeviceGetBoardPartNumber = [](nvml::Device h, char* b, unsigned n) {
      return copy(b, n, gpu(h).part_number), nvml::SUCCESS;
    };
    t.nvmlDeviceGetCpuAffinityWithinScope = [](nvml::Device h, unsigned words, unsigned long* set, unsigned scope) {
      if (words == 0 || scope > 1) return nvml::ERROR_INVALID_ARGUMENT;
      std::fill(set, set + words, 0UL);
      for (unsigned c : scope == 0 ? gpu(h).cpus : gpu(h).socket_cpus) {
        if (c / 64 >= words) return nvml::ERROR_INSUFFICIENT_SIZE;
        set[c / 64] |= 1UL << (c % 64);
      }
      return nvml::SUCCESS;
    };
    t.nvmlDeviceGetMemoryAffinity = [](nvml::Device h, unsigned words, unsigned long* set, unsigned scope) {
      if (words == 0 || scope > 1) return nvml::ERROR_INVALID_ARGUMENT;
      std::fill(set, set + words, 0UL);
      for (unsigned n : gpu(h).nodes) set[n / 64] |= 1UL << (n % 64);
      return nvml::SUCCESS;
    };
    t.nvmlDeviceSetCpuAffinity = [](nvml::Device) { return nvml::ERROR_NO_PERMISSION; };
    t.nvmlDeviceClearCpuAffinity = [](nvml::Device) { return nvml::SUCCESS; };
    t.nvmlSystemGetTopologyGpuSet = [](unsigned cpu, unsigned* count, nvml::Device* out) {
      std::vector<nvml::Device> near;
      for (auto& g : gpus)
        if (std::find(g.cpus.begin(), g.cpus.end(), cpu) != g.cpus.end()) near.push_back(reinterpret_cast<nvml::Device>(&g));
      if (*count < near.size()) return *count = static_cast<unsigned>(near.size()), nvml::ERROR_INSUFFICIENT_SIZE;
      std::copy(near.begin(), near.end(), out);
      return *count = static_cast<unsigned>(near.size()), nvml::SUCCESS;
    };
    // Every other GPU is at NODE; none nearer.
    t.nvmlDeviceGetTopologyNearestGpus = [](nvml::Device h, int level, unsigned* count, nvml::Device* out) {
      std::vector<nvml::Device> near;
      if (level >= 40)
        for (auto& g : gpus)
          if (&g != &gpu(h)) near.push_back(reinterpret_cast<nvml::Device>(&g));
      if (*count < near.size()) return *count = static_cast<unsigned>(near.size()), nvml::ERROR_INSUFFICIENT_SIZE;
      std::copy(near.begin(), near.end(), out);
      return *count = static_cast<unsigned>(near.size()), nvml::SUCCESS;
    };
    t.nvmlDeviceGetNvLinkState = [](nvml::Device h, unsigned link, int* v) {
      return *v = gpu(h).link_state.at(link), nvml::SUCCESS;
    };
    t.nvmlDeviceGetNvLinkVersion = [](nvml::Device h, unsigned link, unsigned* v) {
      return *v = gpu(h).link_version.at(link), nvml::SUCCESS;
    };
    t.nvmlDeviceGetNvLinkRemotePciInfo_v2 = [](nvml::Device h, unsigned link, nvml::PciInfo* p) {
      copy(p->busId, sizeof p->busId, gpu(h).link_remote.at(link));
      return nvml::SUCCESS;
    };
    t.nvmlDeviceGetTopologyCommonAncestor = [](nvml::Device a, nvml::Device b, int* level) {
      return *level = &gpu(a) == &gpu(b) ? 0 : 40, nvml::SUCCESS;
    };
    t.nvmlDeviceGetP2PStatus = [](nvml::Device, nvml::Device, int index, int* status) {
      return *status = index == 2 ? 5 : 0, nvml::SUCCESS;  // no NVLink; PCIe peer access fine
    };
    t.nvmlDeviceGetSupportedEventTypes = [](nvml::Device h, unsigned long long* v) {
      return *v = gpu(h).event_types, nvml::SUCCESS;
    };
    t.nvmlEventSetCreate = [](nvml::EventSet* s) {
      ++sets_created;
      return *s = reinterpret_cast<nvml::EventSet>(&sets_created), nvml::SUCCESS;
    };
    t.nvmlDeviceRegisterEvents = [](nvml::Device h, unsigned long long types, nvml::EventSet) {
      if (types & ~gpu(h).event_types) return nvml::ERROR_NOT_SUPPORTED;
      registered = types;
      return nvml::SUCCESS;
    };
    t.nvmlEventSetWait_v2 = [](nvml::EventSet, nvml::EventData* d, unsigned) {
      if (pending_events == 0) return nvml::ERROR_TIMEOUT;
      --pending_events;
      d->device = reinterpret_cast<nvml::Device>(&gpus[0]);
      d->eventType = sys::event_types::xid_critical_error;
      d->eventData = 79;  // XID 79: fallen off the bus
      return nvml::SUCCESS;
    };
    t.nvmlEventSetFree = [](nvml::EventSet) { return ++sets_freed, nvml::SUCCESS; };
    t.nvmlSystemEventSetCreate = [](nvml::SystemEventSetCreateRequest_v1* r) {
      if (r->version != nvml::kSystemEventSetCreateRequest_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      ++system_sets_created;
      return r->set = reinterpret_cast<nvml::SystemEventSet>(&system_set_storage), nvml::SUCCESS;
    };
    t.nvmlSystemRegisterEvents = [](nvml::SystemRegisterEventRequest_v1* r) {
      if (r->version != nvml::kSystemRegisterEventRequest_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      if (r->set != reinterpret_cast<nvml::SystemEventSet>(&system_set_storage)) return nvml::ERROR_INVALID_ARGUMENT;
      if (r->eventTypes & ~system_supported) return nvml::ERROR_NOT_SUPPORTED;
      system_registered = r->eventTypes;
      return nvml::SUCCESS;
    };
    t.nvmlSystemEventSetWait = [](nvml::SystemEventSetWaitRequest_v1* r) {
      if (r->version != nvml::kSystemEventSetWaitRequest_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      if (r->set != reinterpret_cast<nvml::SystemEventSet>(&system_set_storage) || !r->data || r->dataSize == 0)
        return nvml::ERROR_INVALID_ARGUMENT;
      last_wait_timeout = r->timeoutms;
      if (system_pending.empty()) return nvml::ERROR_TIMEOUT;
      const auto n = static_cast<unsigned>(std::min<std::size_t>(system_pending.size(), r->dataSize));
      std::copy_n(system_pending.begin(), n, r->data);
      system_pending.erase(system_pending.begin(), system_pending.begin() + n);
      r->numEvent = n + extra_events_claimed;
      return nvml::SUCCESS;
    };
    t.nvmlSystemEventSetFree = [](nvml::SystemEventSetFreeRequest_v1* r) {
      if (r->version != nvml::kSystemEventSetFreeRequest_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      if (r->set != reinterpret_cast<nvml::SystemEventSet>(&system_set_storage)) return nvml::ERROR_INVALID_ARGUMENT;
      return ++system_sets_freed, nvml::SUCCESS;
    };
    t.nvmlDeviceGetMinMaxClockOfPState = [](nvml::Device h, int type, int pstate, unsigned* lo, unsigned* hi) {
      if (type < 0 || type > 3 || pstate < 0 || pstate > 15) return nvml::ERROR_INVALID_ARGUMENT;
      return *lo = gpu(h).pstate_min[type][pstate], *hi = gpu(h).pstate_max[type][pstate], nvml::SUCCESS;
    };
    t.nvmlDeviceGetClockOffsets = [](nvml::Device h, nvml::ClockOffset_v1* o) {
      if (o->version != nvml::kClockOffset_v1) return nvml::ERROR_ARGUMENT_VERSION_MISMATCH;
      if (o->type < 0 || o->type > 3 || o->pstate < 0 || o->pstate > 15) return nvml::ERROR_INVALID_ARGUMENT;
      const int* v = gpu(h).offset[o->type][o->pstate];
      o->clockOffsetMHz = v[0], o->minClockOffsetMHz = v[1], o->maxClockOffsetMHz = v[2];
      return nvml::SUCCESS;
    };
    cucore::detail::set_nvml_table_for_testing(&table);
  }
  ~FakeNvml() { cucore::detail::set_nvml_table_for_testing(nullptr); }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;

  // Every entry point that is not required answers NOT_SUPPORTED.
  void make_optional_entries_unsupported() {
#define X(name, required, params) \
  if (!(required)) table.name = &Unsupported<nvml::PFN_##name>::fn;
    CUCORE_NVML_FUNCTIONS(X)
    CUCORE_NVML_LEGACY_FUNCTIONS(X)
#undef X
  }

 private:
  template <typename F>
  struct Unsupported;
  template <typename... A>
  struct Unsupported<nvml::Return (*)(A...)> {
    static nvml::Return fn(A...) { return nvml::ERROR_NOT_SUPPORTED; }
  };
};

std::string hex(std::mt19937& rng, int digits) {
  std::string s;
  for (int i = 0; i < digits; ++i) s += "0123456789abcdef"[rng() % 16];
  return s;
}

// Random GPUs: every field nonzero and different between devices.
std::vector<FakeGpu> random_gpus(std::mt19937& rng, int n) {
  auto r = [&](unsigned lo, unsigned hi) { return lo + static_cast<unsigned>(rng() % (hi - lo + 1)); };
  std::vector<FakeGpu> out(n);
  for (int i = 0; i < n; ++i) {
    FakeGpu& g = out[i];
    g.index = static_cast<unsigned>(i);
    g.name = "NVIDIA Fake " + hex(rng, 6);
    g.uuid = "GPU-" + hex(rng, 8) + "-" + hex(rng, 4) + "-" + hex(rng, 4) + "-" + hex(rng, 4) + "-" + hex(rng, 12);
    g.serial = std::to_string(r(100000, 999999)) + std::to_string(r(100000, 999999));
    g.domain = r(0, 3), g.bus = r(1, 255), g.dev = r(1, 31);
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%08X:%02X:%02X.0", g.domain, g.bus, g.dev);
    g.bus_id = bus_id;
    g.brand = r(1, 16), g.arch = r(2, 10), g.module_id = r(1, 8), g.minor = r(1, 64), g.numa = r(1, 7);
    g.pci_device_id = (r(0x2000, 0x2fff) << 16) | 0x10de;
    g.subsystem = r(1, 0xffffff), g.base_class = r(1, 0xff), g.sub_class = r(1, 0xff);
    g.cc_major = static_cast<int>(r(5, 12)), g.cc_minor = static_cast<int>(r(0, 9)), g.persistence = 1;
    g.mem.reserved = r(1, 1000) * (1ULL << 20);
    g.mem.used = r(1, 50000) * (1ULL << 20);
    g.mem.free = r(1, 90000) * (1ULL << 20);
    g.mem.total = g.mem.reserved + g.mem.used + g.mem.free;
    g.bar1.bar1Used = r(1, 100) << 20, g.bar1.bar1Free = r(1, 100) << 20;
    g.bar1.bar1Total = g.bar1.bar1Used + g.bar1.bar1Free;
    g.util = {r(1, 100), r(1, 100)};
    g.enc = r(1, 100), g.enc_period = r(1000, 200000), g.dec = r(1, 100), g.dec_period = r(1000, 200000);
    g.power = r(50000, 700000), g.limit = r(300000, 700000), g.default_limit = r(300000, 700000);
    g.enforced = r(300000, 700000), g.min_limit = r(100000, 200000), g.max_limit = r(700000, 1000000);
    g.energy = (1ULL << 33) + r(1, 1u << 30);
    for (int k = 0; k < 4; ++k)
      g.clocks[k] = r(100, 2000), g.max_clocks[k] = r(2000, 3000), g.boost_clock[k] = r(1500, 2100), g.app[k] = r(900, 1800);
    g.pstate = static_cast<int>(r(0, 12));
    for (unsigned k = 0, n_ps = r(1, 6); k < n_ps; ++k) g.pstates.push_back(static_cast<int>(k * 2));
    g.reasons = r(1, 0x1ff), g.supported_reasons = 0x1ff, g.event_types = r(1, 0xffff) | sys::event_types::xid_critical_error;
    g.temp = static_cast<int>(r(20, 95)), g.margin = static_cast<int>(r(1, 60)) - 10;
    for (auto& th : g.thresholds) th = r(80, 110);
    for (unsigned k = 0, n_fans = r(1, 3); k < n_fans; ++k) {
      g.fans.push_back(r(1, 100));
      g.fan_rpm.push_back(r(500, 9000));
      g.fan_target.push_back(r(1, 100));
      g.fan_policy.push_back(r(0, 1));
    }
    g.fan_min = r(0, 30), g.fan_max = r(60, 100);
    g.ecc_current = 1, g.ecc_pending = 0;
    for (auto& row : g.ecc)
      for (auto& v : row) v = r(1, 1u << 30);
    g.link_gen = r(1, 5), g.gpu_max_gen = r(1, 6), g.max_width = r(1, 16), g.cur_gen = r(1, 5), g.cur_width = r(1, 16);
    g.tx = r(1, 1u << 20), g.rx = r(1, 1u << 20), g.replay = r(1, 1000);
    for (unsigned k = 0, n_links = r(1, 18); k < n_links; ++k) {
      g.link_state.push_back(static_cast<int>(r(0, 1)));
      g.link_version.push_back(r(1, 8));
      g.link_remote.push_back("00000000:" + hex(rng, 2) + ":00.0");
    }
    g.mig_current = r(0, 1), g.mig_pending = 1 - g.mig_current;
    for (unsigned k = 0, n_procs = r(1, 40); k < n_procs; ++k)
      g.procs.push_back({r(2, 4000000), k % 5 == 4 ? nvml::kValueNotAvailable : (r(1, 80000) * (1ULL << 20)),
                         r(0, 7), r(0, 7)});
    g.c2c = static_cast<int>(r(0, 1)), g.display_mode = static_cast<int>(r(0, 1));
    g.display_active = static_cast<int>(r(0, 1)), g.boost = static_cast<int>(r(0, 1));
    g.boost_default = 1 - g.boost, g.addressing = r(0, 2), g.channel_repair = r(0, 1), g.tpc_repair = r(0, 1);
    g.checksum = r(1, 0x7fffffff);
    g.attrs = {r(1, 200), r(1, 10), r(1, 10), r(1, 10), r(1, 10), r(1, 10), r(1, 8), r(1, 8), r(1, 200000)};
    for (auto& v : g.inforom) v = std::to_string(r(1, 9)) + "." + std::to_string(r(0, 99));
    g.image = "G520." + std::to_string(r(1000, 9999)) + ".00." + std::to_string(r(10, 99));
    g.part_number = "692-2G520-" + hex(rng, 4);
    g.bbx_time = (1ULL << 40) + r(1, 1u << 30), g.bbx_duration = r(1, 100000);
    // CPUs past the first 64 and a socket wider than the node: the mask's later words count.
    for (unsigned k = 0, first = r(0, 100), n_cpus = r(1, 40); k < n_cpus; ++k) g.cpus.push_back(first + 3 * k);
    g.socket_cpus = g.cpus;
    g.socket_cpus.push_back(g.cpus.back() + 1);
    g.nodes = {r(0, 3)};
    g.nodes.push_back(g.nodes[0] + r(1, 70));
    for (unsigned k = 0, n_fields = r(2, 8); k < n_fields; ++k) g.fields.push_back(r(1, 1u << 30));
    for (auto& u : g.dyn.utilization) u = {r(0, 1), r(0, 100), r(1, 100), r(1, 100)};
    g.cooler.signalType = static_cast<int>(r(0, 2)), g.cooler.target = static_cast<int>(r(1, 15));
    for (int type = 0; type < 4; ++type)
      for (int p = 0; p < 16; ++p) {
        g.pstate_min[type][p] = r(100, 900), g.pstate_max[type][p] = r(1000, 3000);
        int lo = -static_cast<int>(r(1, 500)), hi = static_cast<int>(r(1, 500));
        g.offset[type][p][0] = lo + static_cast<int>(r(0, static_cast<unsigned>(hi - lo)));
        g.offset[type][p][1] = lo, g.offset[type][p][2] = hi;
      }
    g.thermal.count = r(1, 5);  // more than the 3 slots: cucore reads 3 at most
    for (auto& sensor : g.thermal.sensor)
      sensor = {static_cast<int>(r(0, 17)), static_cast<int>(r(0, 20)), static_cast<int>(r(80, 110)),
                static_cast<int>(r(20, 90)), static_cast<int>(r(0, 15))};
  }
  return out;
}

class SystemFake : public ::testing::Test {
 protected:
  void SetUp() override {
    unsigned seed = std::random_device{}();
    SCOPED_TRACE("seed " + std::to_string(seed));
    rng.seed(seed);
    FakeNvml::gpus = random_gpus(rng, 2 + static_cast<int>(rng() % 3));
    unsigned a = 500 + rng() % 100, b = rng() % 200, c = rng() % 100;
    FakeNvml::driver_version = std::to_string(a) + "." + std::to_string(b) + "." + (c < 10 ? "0" : "") + std::to_string(c);
    FakeNvml::nvml_version = "13." + FakeNvml::driver_version;
    FakeNvml::branch = "r" + std::to_string(a) + "_" + std::to_string(rng() % 90 + 10);
    FakeNvml::cuda_version = 12000 + static_cast<int>(rng() % 3) * 1000 + static_cast<int>(rng() % 10) * 10;
    FakeNvml::sets_created = FakeNvml::sets_freed = FakeNvml::pending_events = 0;
    FakeNvml::registered = 0;
    FakeNvml::system_sets_created = FakeNvml::system_sets_freed = 0;
    FakeNvml::system_registered = 0;
    FakeNvml::system_supported = sys::system_event_types::gpu_driver_unbind | sys::system_event_types::gpu_driver_bind;
    FakeNvml::system_pending.clear();
    FakeNvml::last_wait_timeout = FakeNvml::extra_events_claimed = 0;
  }
  std::mt19937 rng;
  FakeNvml fake;
};

TEST_F(SystemFake, MachineQueriesParseNvmlsAnswers) {
  EXPECT_EQ(sys::get_num_devices(), static_cast<int>(FakeNvml::gpus.size()));
  EXPECT_EQ(sys::driver_version(), FakeNvml::driver_version);
  std::vector<int> kmd = sys::get_kernel_mode_driver_version();
  ASSERT_EQ(kmd.size(), 3u);
  EXPECT_EQ(std::to_string(kmd[0]) + "." + std::to_string(kmd[1]) + "." + (kmd[2] < 10 ? "0" : "") +
                std::to_string(kmd[2]),
            FakeNvml::driver_version);
  std::vector<int> nv = sys::get_nvml_version();
  ASSERT_EQ(nv.size(), 4u);
  EXPECT_EQ(nv[0], 13);
  EXPECT_EQ(std::vector<int>(nv.begin() + 1, nv.end()), kmd);
  EXPECT_EQ(sys::nvml_version(), FakeNvml::nvml_version);
  auto umd = sys::get_user_mode_driver_version();
  EXPECT_EQ(umd.first, FakeNvml::cuda_version / 1000);
  EXPECT_EQ(umd.second, FakeNvml::cuda_version % 1000 / 10);
  EXPECT_EQ(sys::get_driver_branch(), FakeNvml::branch);
  EXPECT_EQ(sys::get_process_name(1234), "proc1234");
  EXPECT_THROW(sys::get_process_name(7 * 11), cucore::NvmlError);
}

TEST_F(SystemFake, DeviceQueriesPassNvmlValuesThrough) {
  static const char* const kBrands[] = {"Unknown", "Quadro", "Tesla", "NVS", "GRID", "GeForce", "Titan",
                                        "NVIDIA vApps", "NVIDIA VPC", "NVIDIA VCS", "NVIDIA VWS",
                                        "NVIDIA Cloud Gaming", "Quadro RTX", "NVIDIA RTX", "NVIDIA",
                                        "GeForce RTX", "Titan RTX"};
  ASSERT_EQ(sys::Device::get_all_devices().size(), FakeNvml::gpus.size());
  for (const FakeGpu& g : FakeNvml::gpus) {
    SCOPED_TRACE(g.name);
    sys::Device d(g.index);
    EXPECT_EQ(d.handle(), static_cast<const void*>(&g));
    EXPECT_EQ(d.index(), g.index);
    EXPECT_EQ(d.name(), g.name);
    EXPECT_EQ(d.brand(), kBrands[g.brand]);
    EXPECT_EQ(d.uuid(), g.uuid);
    EXPECT_EQ(d.uuid_without_prefix(), g.uuid.substr(4));
    EXPECT_EQ(d.serial(), g.serial);
    EXPECT_EQ(d.module_id(), g.module_id);
    EXPECT_EQ(d.minor_number(), g.minor);
    EXPECT_EQ(d.numa_node_id(), static_cast<int>(g.numa));
    EXPECT_EQ(d.is_persistence_mode_enabled(), true);
    EXPECT_EQ(static_cast<unsigned>(d.arch()), g.arch);
    EXPECT_EQ(d.cuda_compute_capability(), (cucore::ComputeCapability{g.cc_major, g.cc_minor}));

    sys::PciInfo p = d.pci_info();
    EXPECT_EQ(p.bus_id(), g.bus_id);
    EXPECT_EQ(d.pci_bus_id(), g.bus_id);
    EXPECT_EQ(p.domain(), g.domain);
    EXPECT_EQ(p.bus(), g.bus);
    EXPECT_EQ(p.device(), g.dev);
    EXPECT_EQ(p.vendor_id(), 0x10deu);
    EXPECT_EQ(p.device_id(), g.pci_device_id >> 16);
    EXPECT_EQ(p.subsystem_id(), g.subsystem);
    EXPECT_EQ(p.base_class(), g.base_class);
    EXPECT_EQ(p.sub_class(), g.sub_class);
    EXPECT_EQ(p.link_generation(), g.link_gen);
    EXPECT_EQ(p.max_link_generation(), g.gpu_max_gen);
    EXPECT_EQ(p.max_link_width(), g.max_width);
    EXPECT_EQ(p.current_link_generation(), g.cur_gen);
    EXPECT_EQ(p.current_link_width(), g.cur_width);
    EXPECT_EQ(p.tx_throughput(), g.tx);
    EXPECT_EQ(p.rx_throughput(), g.rx);
    EXPECT_EQ(p.replay_counter(), g.replay);

    for (int k = 0; k < 4; ++k) {
      sys::ClockInfo c = d.get_clock(static_cast<sys::ClockType>(k));
      EXPECT_EQ(c.get_current_mhz(), g.clocks[k]);
      EXPECT_EQ(c.get_current_mhz(sys::ClockId::customer_boost_max), g.boost_clock[k]);
      EXPECT_EQ(c.get_max_mhz(), g.max_clocks[k]);
      EXPECT_EQ(c.get_max_customer_boost_mhz(), g.max_clocks[k]);
      EXPECT_EQ(c.get_application_mhz(), g.app[k]);
    }
    EXPECT_EQ(d.performance_state(), g.pstate);
    EXPECT_EQ(d.supported_pstates(), g.pstates);
    EXPECT_EQ(d.current_clock_event_reasons(), g.reasons);
    EXPECT_EQ(d.supported_clock_event_reasons(), g.supported_reasons);

    EXPECT_EQ(d.temperature().get_sensor(), static_cast<unsigned>(g.temp));
    for (int k = 0; k < 8; ++k)
      EXPECT_EQ(d.temperature().get_threshold(static_cast<sys::TemperatureThresholds>(k)), g.thresholds[k]);
    EXPECT_EQ(d.temperature().margin(), g.margin);
    EXPECT_EQ(d.num_fans(), g.fans.size());
    for (unsigned f = 0; f < g.fans.size(); ++f) {
      EXPECT_EQ(d.fan_speed(f), g.fans[f]);
      EXPECT_EQ(d.fan_speed_rpm(f), g.fan_rpm[f]);
      EXPECT_EQ(d.target_fan_speed(f), g.fan_target[f]);
      EXPECT_EQ(d.fan_control_policy(f), g.fan_policy[f]);
    }
    EXPECT_EQ(d.min_max_fan_speed(), std::pair(g.fan_min, g.fan_max));
    const auto past = static_cast<unsigned>(g.fans.size());
    EXPECT_THROW(d.fan_speed(past), std::out_of_range);
    EXPECT_THROW(d.fan_speed_rpm(past), std::out_of_range);
    EXPECT_THROW(d.target_fan_speed(past), std::out_of_range);
    EXPECT_THROW(d.fan_control_policy(past), std::out_of_range);
    EXPECT_THROW(d.set_fan_speed(past, 50), std::out_of_range);
    auto& sets = const_cast<FakeGpu&>(g).fan_sets;  // what the fake's setters recorded
    sets.clear();
    const unsigned last = past - 1, percent = g.fan_target[0];
    d.set_fan_speed(last, percent);
    d.set_default_fan_speed(0);
    EXPECT_EQ(sets, (std::vector<std::pair<unsigned, unsigned>>{{last, percent}, {0u, ~0u}}));

    EXPECT_EQ(d.power_usage_mw(), g.power);
    EXPECT_EQ(d.power_management_limit_mw(), g.limit);
    EXPECT_EQ(d.power_management_default_limit_mw(), g.default_limit);
    EXPECT_EQ(d.enforced_power_limit_mw(), g.enforced);
    EXPECT_EQ(d.power_management_limit_constraints_mw(), std::pair(g.min_limit, g.max_limit));
    EXPECT_EQ(d.total_energy_consumption_mj(), g.energy);

    auto m = d.memory_info();
    ASSERT_TRUE(m);
    EXPECT_EQ(m->total, g.mem.total);
    EXPECT_EQ(m->used, g.mem.used);
    EXPECT_EQ(m->free, g.mem.free);
    EXPECT_EQ(m->reserved, g.mem.reserved);
    auto b1 = d.bar1_memory_info();
    ASSERT_TRUE(b1);
    EXPECT_EQ(b1->total, g.bar1.bar1Total);
    EXPECT_EQ(b1->used, g.bar1.bar1Used);
    EXPECT_EQ(b1->free, g.bar1.bar1Free);
    auto u = d.utilization();
    ASSERT_TRUE(u);
    EXPECT_EQ(u->gpu, g.util.gpu);
    EXPECT_EQ(u->memory, g.util.memory);
    EXPECT_EQ(d.encoder_utilization()->percent, g.enc);
    EXPECT_EQ(d.encoder_utilization()->sampling_period_us, g.enc_period);
    EXPECT_EQ(d.decoder_utilization()->percent, g.dec);
    EXPECT_EQ(d.decoder_utilization()->sampling_period_us, g.dec_period);

    EXPECT_EQ(d.ecc_mode(), std::pair(true, false));
    for (int e = 0; e < 2; ++e)
      for (int c = 0; c < 2; ++c)
        EXPECT_EQ(d.get_total_ecc_errors(static_cast<sys::MemoryErrorType>(e), static_cast<sys::EccCounterType>(c)),
                  g.ecc[e][c]);

    ASSERT_EQ(d.get_nvlink_count(), g.link_state.size());
    auto links = d.get_nvlinks();
    ASSERT_EQ(links.size(), g.link_state.size());
    static constexpr std::pair<int, int> kVersions[] = {{1, 0}, {2, 0}, {2, 2}, {3, 0}, {3, 1}, {4, 0}, {5, 0}, {6, 0}};
    for (unsigned l = 0; l < links.size(); ++l) {
      EXPECT_EQ(links[l].link(), l);
      EXPECT_EQ(links[l].state(), g.link_state[l] == 1);
      EXPECT_EQ(links[l].version(), kVersions[g.link_version[l] - 1]);
      EXPECT_EQ(links[l].remote_pci_bus_id(), g.link_remote[l]);
      EXPECT_EQ(d.get_nvlink(l).remote_pci_bus_id(), g.link_remote[l]);
    }
    EXPECT_THROW(d.get_nvlink(static_cast<unsigned>(links.size())), std::out_of_range);

    EXPECT_EQ(d.mig_mode(), g.mig_current == 1);
    EXPECT_EQ(d.mig_pending_mode(), g.mig_pending == 1);
    EXPECT_FALSE(d.is_mig_device());
    EXPECT_EQ(d.mig_device_count(), 0u);
    EXPECT_TRUE(d.mig_devices().empty());
  }
}

TEST_F(SystemFake, ProcessListGrowsUntilOneCallFitsIt) {
  FakeGpu& g = FakeNvml::gpus[0];
  // More processes than the first buffer holds, and more appear in between.
  g.procs.clear();
  unsigned n = 17 + static_cast<unsigned>(rng() % 200);
  for (unsigned k = 0; k < n; ++k)
    g.procs.push_back({1000 + k * 3, k % 9 == 8 ? nvml::kValueNotAvailable : (k + 1) * (1ULL << 21),
                       k % 5 == 0 ? nvml::kInstanceIdNone : k % 4, k % 5 == 0 ? nvml::kInstanceIdNone : k % 3});
  FakeNvml::process_list_growth = 5;
  auto procs = sys::Device(0).compute_running_processes();
  ASSERT_TRUE(procs);
  ASSERT_EQ(procs->size(), g.procs.size());
  EXPECT_EQ(procs->size(), n + 5);
  for (std::size_t k = 0; k < procs->size(); ++k) {
    const auto& want = g.procs[k];
    EXPECT_EQ((*procs)[k].pid, want.pid);
    if (want.usedGpuMemory == nvml::kValueNotAvailable)
      EXPECT_FALSE((*procs)[k].used_gpu_memory) << k;
    else
      EXPECT_EQ((*procs)[k].used_gpu_memory, want.usedGpuMemory) << k;
    if (want.gpuInstanceId == nvml::kInstanceIdNone) {  // not in MIG
      EXPECT_FALSE((*procs)[k].gpu_instance_id) << k;
      EXPECT_FALSE((*procs)[k].compute_instance_id) << k;
    } else {
      EXPECT_EQ((*procs)[k].gpu_instance_id, want.gpuInstanceId);
      EXPECT_EQ((*procs)[k].compute_instance_id, want.computeInstanceId);
    }
  }
}

TEST_F(SystemFake, NotSupportedIsAnEmptyOptionalNeverAnException) {
  fake.make_optional_entries_unsupported();
  sys::Device d(0);
  EXPECT_EQ(d.name(), FakeNvml::gpus[0].name);  // required entries still answer
  EXPECT_FALSE(d.serial());
  EXPECT_FALSE(d.module_id());
  EXPECT_FALSE(d.minor_number());
  EXPECT_FALSE(d.numa_node_id());
  EXPECT_FALSE(d.is_persistence_mode_enabled());
  EXPECT_FALSE(d.num_fans());
  EXPECT_FALSE(d.fan_speed(0));
  EXPECT_FALSE(d.power_usage_mw());
  EXPECT_FALSE(d.power_management_limit_mw());
  EXPECT_FALSE(d.power_management_default_limit_mw());
  EXPECT_FALSE(d.power_management_limit_constraints_mw());
  EXPECT_FALSE(d.enforced_power_limit_mw());
  EXPECT_FALSE(d.total_energy_consumption_mj());
  EXPECT_FALSE(d.memory_info());
  EXPECT_FALSE(d.bar1_memory_info());
  EXPECT_FALSE(d.utilization());
  EXPECT_FALSE(d.encoder_utilization());
  EXPECT_FALSE(d.decoder_utilization());
  EXPECT_FALSE(d.performance_state());
  EXPECT_FALSE(d.supported_pstates());
  EXPECT_FALSE(d.current_clock_event_reasons());
  EXPECT_FALSE(d.supported_clock_event_reasons());
  EXPECT_FALSE(d.temperature().get_sensor());
  EXPECT_FALSE(d.temperature().get_threshold(sys::TemperatureThresholds::slowdown));
  EXPECT_FALSE(d.temperature().margin());
  EXPECT_FALSE(d.ecc_mode());
  EXPECT_FALSE(d.get_total_ecc_errors(sys::MemoryErrorType::corrected, sys::EccCounterType::volatile_ecc));
  EXPECT_FALSE(d.mig_mode());
  EXPECT_FALSE(d.mig_pending_mode());
  EXPECT_FALSE(d.is_mig_device());
  EXPECT_EQ(d.mig_device_count(), 0u);
  EXPECT_FALSE(d.compute_running_processes());
  EXPECT_FALSE(d.supported_event_types());
  EXPECT_EQ(d.get_nvlink_count(), 0u);
  EXPECT_TRUE(d.get_nvlinks().empty());
  EXPECT_FALSE(d.is_c2c_enabled());
  EXPECT_FALSE(d.addressing_mode());
  EXPECT_FALSE(d.is_display_connected());
  EXPECT_FALSE(d.is_display_active());
  EXPECT_FALSE(d.is_auto_boosted_clocks_enabled());
  EXPECT_FALSE(d.attributes());
  EXPECT_FALSE(d.repair_status());
  EXPECT_FALSE(d.inforom().get_version(sys::InforomObject::ecc));
  EXPECT_FALSE(d.inforom().image_version());
  EXPECT_FALSE(d.inforom().configuration_checksum());
  EXPECT_FALSE(d.inforom().validate());
  EXPECT_FALSE(d.inforom().bbx_flush_time());
  EXPECT_FALSE(d.inforom().board_part_number());
  EXPECT_FALSE(d.get_cpu_affinity());
  EXPECT_FALSE(d.dynamic_pstates_info());
  EXPECT_FALSE(d.cooler());
  EXPECT_FALSE(d.temperature().get_thermal_settings(15));
  EXPECT_FALSE(d.get_memory_affinity(sys::AffinityScope::socket));
  for (int k = 0; k < 4; ++k) {
    sys::ClockInfo c = d.get_clock(static_cast<sys::ClockType>(k));
    EXPECT_FALSE(c.get_current_mhz());
    EXPECT_FALSE(c.get_current_mhz(sys::ClockId::customer_boost_max));
    EXPECT_FALSE(c.get_max_mhz());
    EXPECT_FALSE(c.get_max_customer_boost_mhz());
    EXPECT_FALSE(c.get_application_mhz());
  }
  // A sample of everything is complete: empty fields, no errors.
  sys::Sample s = sys::sample();
  ASSERT_EQ(s.devices.size(), FakeNvml::gpus.size());
  for (const auto& ds : s.devices) {
    EXPECT_TRUE(ds.errors.size() == 1 && ds.errors[0].rfind("pci_bus_id", 0) == 0) << ds.errors.size();
    EXPECT_FALSE(ds.temperature_c || ds.fan_percent || ds.power_usage_mw || ds.power_limit_mw || ds.memory ||
                 ds.utilization || ds.sm_clock_mhz || ds.mig_mode || ds.performance_state);
    EXPECT_TRUE(ds.processes.empty());
  }
  // register_events is an action: unsupported is an error, as cuda.core's NotSupportedError.
  try {
    d.register_events(sys::event_types::xid_critical_error);
    ADD_FAILURE() << "register_events did not throw";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.code(), nvml::ERROR_NOT_SUPPORTED);
  }
  try {
    (void)sys::register_events(sys::system_event_types::gpu_driver_unbind);
    ADD_FAILURE() << "system register_events did not throw";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.code(), nvml::ERROR_NOT_SUPPORTED);
  }
}

// cucore.system's scope (held around every Python call): what NVML declines is
// NvmlError carrying NVML's code and call, as cuda.core.system raises
// NotSupportedError; only on the scope's thread and only while it lives.
TEST_F(SystemFake, UnsupportedAsErrorThrowsWhatNvmlDeclinesInItsScope) {
  fake.make_optional_entries_unsupported();
  // The NVLink count's call succeeds; its field says NOT_SUPPORTED (no NVLink).
  fake.table.nvmlDeviceGetFieldValues = [](nvml::Device, int n, nvml::FieldValue* f) {
    for (int i = 0; i < n; ++i) f[i].nvmlReturn = nvml::ERROR_NOT_SUPPORTED;
    return nvml::SUCCESS;
  };
  fake.table.nvmlDeviceGetLastBBXFlushTime = [](nvml::Device, unsigned long long*, unsigned long*) {
    return nvml::ERROR_NOT_READY;  // no flush yet in this run
  };
  fake.table.nvmlDeviceGetPerformanceState = [](nvml::Device, int* p) { return *p = 32, nvml::SUCCESS; };  // UNKNOWN
  sys::Device d(0);
  // The NvmlError's (code, call), or (0, "") when the query answered.
  auto outcome = [](const std::function<void()>& query) -> std::pair<int, std::string> {
    try {
      query();
    } catch (const cucore::NvmlError& e) {
      return {e.code(), e.call()};
    }
    return {0, ""};
  };
  const int unsupported = nvml::ERROR_NOT_SUPPORTED;
  struct Case {
    const char* what;
    std::function<void()> query;
    int code;
    const char* call;
  };
  const std::vector<Case> cases = {
      {"utilization", [&] { (void)d.utilization(); }, unsupported, "nvmlDeviceGetUtilizationRates"},
      {"memory_info", [&] { (void)d.memory_info(); }, unsupported, "nvmlDeviceGetMemoryInfo_v2"},
      {"num_fans", [&] { (void)d.num_fans(); }, unsupported, "nvmlDeviceGetNumFans"},
      {"fan_speed", [&] { (void)d.fan_speed(0); }, unsupported, "nvmlDeviceGetFanSpeed_v2"},
      {"fan_speed_rpm", [&] { (void)d.fan_speed_rpm(0); }, unsupported, "nvmlDeviceGetFanSpeedRPM"},
      {"target_fan_speed", [&] { (void)d.target_fan_speed(0); }, unsupported, "nvmlDeviceGetTargetFanSpeed"},
      {"min_max_fan_speed", [&] { (void)d.min_max_fan_speed(); }, unsupported, "nvmlDeviceGetMinMaxFanSpeed"},
      {"fan_control_policy", [&] { (void)d.fan_control_policy(0); }, unsupported,
       "nvmlDeviceGetFanControlPolicy_v2"},
      {"temperature", [&] { (void)d.temperature().get_sensor(); }, unsupported, "nvmlDeviceGetTemperatureV"},
      {"power_usage", [&] { (void)d.power_usage_mw(); }, unsupported, "nvmlDeviceGetPowerUsage"},
      {"sm clock", [&] { (void)d.get_clock(sys::ClockType::sm).get_current_mhz(); }, unsupported,
       "nvmlDeviceGetClockInfo"},
      {"processes", [&] { (void)d.compute_running_processes(); }, unsupported,
       "nvmlDeviceGetComputeRunningProcesses_v3"},
      {"event types", [&] { (void)d.supported_event_types(); }, unsupported, "nvmlDeviceGetSupportedEventTypes"},
      {"nvlink count", [&] { (void)d.get_nvlink_count(); }, unsupported,
       "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_LINK_COUNT)"},
      {"nvlinks", [&] { (void)d.get_nvlinks(); }, unsupported,
       "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_LINK_COUNT)"},
      {"mig count", [&] { (void)d.mig_device_count(); }, unsupported, "nvmlDeviceGetMaxMigDeviceCount"},
      {"mig devices", [&] { (void)d.mig_devices(); }, unsupported, "nvmlDeviceGetMaxMigDeviceCount"},
      {"is mig", [&] { (void)d.is_mig_device(); }, unsupported, "nvmlDeviceIsMigDeviceHandle"},
      {"inforom validate", [&] { (void)d.inforom().validate(); }, unsupported, "nvmlDeviceValidateInforom"},
      {"bbx flush time", [&] { (void)d.inforom().bbx_flush_time(); }, nvml::ERROR_NOT_READY,
       "nvmlDeviceGetLastBBXFlushTime"},
      {"mig device", [&] { (void)d.mig_device(0); }, unsupported, "nvmlDeviceGetMigDeviceHandleByIndex"},
      {"pci info", [&] { (void)d.pci_info(); }, unsupported, "nvmlDeviceGetPciInfoExt"},
  };
  {
    sys::UnsupportedAsError scope;
    for (const Case& c : cases) {
      auto [code, call] = outcome(c.query);
      EXPECT_EQ(code, c.code) << c.what;
      EXPECT_EQ(call, c.call) << c.what;
    }
    EXPECT_FALSE(d.performance_state());  // unknown is not declined: still empty
    EXPECT_EQ(d.name(), FakeNvml::gpus[0].name);
    {
      sys::UnsupportedAsError inner;  // scopes nest: the outer one still holds after this
    }
    EXPECT_EQ(outcome([&] { (void)d.utilization(); }).first, unsupported);
    std::thread([&] {  // another thread has no scope
      EXPECT_FALSE(d.utilization());
      EXPECT_EQ(d.get_nvlink_count(), 0u);
    }).join();
  }
  // Out of the scope: empty again (pci_info and mig_device keep their C++ errors).
  for (std::size_t i = 0; i + 2 < cases.size(); ++i) EXPECT_EQ(outcome(cases[i].query).first, 0) << cases[i].what;
  EXPECT_THROW((void)d.mig_device(0), std::out_of_range);
  EXPECT_THROW((void)d.pci_info(), cucore::Error);
  EXPECT_FALSE(d.inforom().bbx_flush_time());
  EXPECT_FALSE(d.inforom().validate());
  EXPECT_EQ(d.get_nvlink_count(), 0u);
}

TEST_F(SystemFake, FailuresAreNvmlErrorsWithCodeNameTextAndCall) {
  fake.table.nvmlDeviceGetPowerUsage = [](nvml::Device, unsigned*) { return nvml::ERROR_GPU_IS_LOST; };
  fake.table.nvmlDeviceGetSerial = [](nvml::Device, char*, unsigned) { return nvml::ERROR_NO_PERMISSION; };
  sys::Device d(1);
  try {
    (void)d.power_usage_mw();
    ADD_FAILURE() << "no NvmlError";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.code(), 15);
    EXPECT_EQ(e.name(), "NVML_ERROR_GPU_IS_LOST");
    EXPECT_EQ(e.description(), "fake: the GPU fell off the bus");
    EXPECT_EQ(e.call(), "nvmlDeviceGetPowerUsage");
    std::string what = e.what();
    for (const char* part : {"nvmlDeviceGetPowerUsage", "NVML_ERROR_GPU_IS_LOST", "(15)", "fell off the bus"})
      EXPECT_NE(what.find(part), std::string::npos) << what;
    const cucore::Error& base = e;  // a cucore::Error like every cucore failure
    EXPECT_STREQ(base.what(), e.what());
  }
  try {
    (void)d.serial();
    ADD_FAILURE() << "no NvmlError";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.name(), "NVML_ERROR_NO_PERMISSION");
  }
  // The sample keeps going: the failed fields are empty and named.
  sys::Sample s = sys::sample();
  ASSERT_EQ(s.devices.size(), FakeNvml::gpus.size());
  for (const auto& ds : s.devices) {
    ASSERT_EQ(ds.errors.size(), 1u);
    EXPECT_EQ(ds.errors[0].rfind("power_usage: ", 0), 0u) << ds.errors[0];
    EXPECT_FALSE(ds.power_usage_mw);
    EXPECT_EQ(ds.power_limit_mw, FakeNvml::gpus[ds.index].limit);
    EXPECT_EQ(ds.name, FakeNvml::gpus[ds.index].name);
  }
}

TEST_F(SystemFake, MissingEntryPointIsFunctionNotFound) {
  fake.table.nvmlDeviceGetTotalEnergyConsumption = nullptr;
  try {
    (void)sys::Device(0).total_energy_consumption_mj();
    ADD_FAILURE() << "no NvmlError";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.code(), nvml::ERROR_FUNCTION_NOT_FOUND);
    EXPECT_EQ(e.call(), "nvmlDeviceGetTotalEnergyConsumption");
  }
  // The versioned temperature query falls back to the legacy one when absent.
  fake.table.nvmlDeviceGetTemperatureV = nullptr;
  fake.table.nvmlDeviceGetTemperature = [](nvml::Device h, int sensor, unsigned* c) {
    return sensor == nvml::kTemperatureGpu ? (*c = static_cast<unsigned>(gpu(h).temp) + 1, nvml::SUCCESS)
                                           : nvml::ERROR_INVALID_ARGUMENT;
  };
  EXPECT_EQ(sys::Device(0).temperature().get_sensor(), static_cast<unsigned>(FakeNvml::gpus[0].temp) + 1);
}

TEST_F(SystemFake, UnknownDevicesAreOutOfRangeMalformedKeysInvalid) {
  const unsigned n = static_cast<unsigned>(FakeNvml::gpus.size());
  try {
    sys::Device d(n);
    ADD_FAILURE() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("NVML reports " + std::to_string(n) + " devices"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(sys::Device(n + 1000), std::out_of_range);
  for (const FakeGpu& g : FakeNvml::gpus) {
    EXPECT_EQ(sys::Device::from_uuid(g.uuid).handle(), static_cast<const void*>(&g));
    EXPECT_EQ(sys::Device::from_uuid(g.uuid.substr(4)).handle(), static_cast<const void*>(&g));  // CUDA's form
    EXPECT_EQ(sys::Device::from_pci_bus_id(g.bus_id).handle(), static_cast<const void*>(&g));
  }
  std::string other = "GPU-" + hex(rng, 8) + "-0000-0000-0000-000000000000";
  EXPECT_THROW(sys::Device::from_uuid(other), std::out_of_range);
  EXPECT_THROW(sys::Device::from_uuid("GPU-nonsense"), std::invalid_argument);
  EXPECT_THROW(sys::Device::from_uuid(std::string(FakeNvml::gpus[0].uuid).insert(10, 1, '\0')), std::invalid_argument);
  EXPECT_THROW(sys::Device::from_pci_bus_id("00000000:FF:1F.7"), std::out_of_range);
  EXPECT_THROW(sys::Device::from_pci_bus_id("not a bus id"), std::invalid_argument);
}

TEST_F(SystemFake, EventsRegisterWaitAndFreeTheirSetOnce) {
  sys::Device d(0);
  ASSERT_EQ(d.supported_event_types(), FakeNvml::gpus[0].event_types);
  {
    sys::DeviceEvents ev = d.register_events(sys::event_types::xid_critical_error);
    EXPECT_EQ(FakeNvml::registered, sys::event_types::xid_critical_error);
    FakeNvml::pending_events = 2;
    for (int k = 0; k < 2; ++k) {
      auto e = ev.wait(10);
      ASSERT_TRUE(e);
      EXPECT_EQ(e->event_type, sys::event_types::xid_critical_error);
      EXPECT_EQ(e->event_data, 79u);
      EXPECT_EQ(e->device, d);
    }
    EXPECT_FALSE(ev.wait(10));  // timeout
    {
      sys::DeviceEvents copy = ev;  // a second share of the one set
      FakeNvml::pending_events = 1;
      EXPECT_TRUE(copy.wait(10));
    }
    EXPECT_EQ(FakeNvml::sets_freed, 0);  // the first share still holds it
    sys::DeviceEvents moved = std::move(ev);
    EXPECT_THROW((void)ev.wait(1), cucore::Error);  // NOLINT(bugprone-use-after-move): the documented state
    EXPECT_EQ(FakeNvml::sets_freed, 0);
  }
  EXPECT_EQ(FakeNvml::sets_created, 1);
  EXPECT_EQ(FakeNvml::sets_freed, 1);
  // A type the device lacks: NOT_SUPPORTED, and the set is not leaked.
  FakeNvml::gpus[0].event_types = sys::event_types::pstate;
  EXPECT_THROW(d.register_events(sys::event_types::xid_critical_error), cucore::NvmlError);
  EXPECT_EQ(FakeNvml::sets_created, 2);
  EXPECT_EQ(FakeNvml::sets_freed, 2);
  // An NVML without the free: refused before any set exists, naming the missing call.
  fake.table.nvmlEventSetFree = nullptr;
  try {
    (void)d.register_events(sys::event_types::pstate);
    ADD_FAILURE() << "registered without nvmlEventSetFree";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.code(), nvml::ERROR_FUNCTION_NOT_FOUND);
    EXPECT_EQ(e.call(), "nvmlEventSetFree");
  }
  EXPECT_EQ(FakeNvml::sets_created, 2);
}

// The handle layer's boxes: a set NVML made is freed once, by its last share,
// through the table it was made with; a set NVML refused is never freed; a
// failed free is reported, never thrown.
TEST_F(SystemFake, EventSetBoxesFreeTheirSetOnceThroughTheirTable) {
  using cucore::detail::NvmlEventSetBox;
  using cucore::detail::NvmlSystemEventSetBox;
  std::shared_ptr<NvmlEventSetBox> box;
  ASSERT_EQ(cucore::detail::create_nvml_event_set(fake.table, box), nvml::SUCCESS);
  ASSERT_TRUE(box && box->get());
  EXPECT_EQ(&box->table(), &fake.table);
  auto share = box;
  box.reset();
  EXPECT_EQ(FakeNvml::sets_freed, 0);
  share.reset();
  EXPECT_EQ(FakeNvml::sets_created, 1);
  EXPECT_EQ(FakeNvml::sets_freed, 1);

  NvmlTable refusing = fake.table;
  refusing.nvmlEventSetCreate = [](nvml::EventSet*) { return nvml::ERROR_INSUFFICIENT_RESOURCES; };
  EXPECT_EQ(cucore::detail::create_nvml_event_set(refusing, box), nvml::ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_FALSE(box);
  EXPECT_EQ(FakeNvml::sets_freed, 1);
  refusing.nvmlEventSetFree = nullptr;  // no free, no set: NVML is not asked to make one
  refusing.nvmlEventSetCreate = fake.table.nvmlEventSetCreate;
  EXPECT_EQ(cucore::detail::create_nvml_event_set(refusing, box), nvml::ERROR_FUNCTION_NOT_FOUND);
  EXPECT_EQ(FakeNvml::sets_created, 1);

  std::shared_ptr<NvmlSystemEventSetBox> sbox;
  ASSERT_EQ(cucore::detail::create_nvml_system_event_set(fake.table, sbox), nvml::SUCCESS);
  EXPECT_EQ(sbox->get(), reinterpret_cast<nvml::SystemEventSet>(&FakeNvml::system_set_storage));
  sbox.reset();
  EXPECT_EQ(FakeNvml::system_sets_created, 1);
  EXPECT_EQ(FakeNvml::system_sets_freed, 1);

  // A free NVML fails goes to the log hook, once, with NVML's code.
  std::vector<std::string> logged;
  auto previous = cucore::set_log_handler([&](cucore::LogLevel level, std::string_view message) {
    if (level == cucore::LogLevel::release_failure) logged.emplace_back(message);
  });
  NvmlTable failing = fake.table;
  failing.nvmlEventSetFree = [](nvml::EventSet) { return nvml::ERROR_GPU_IS_LOST; };
  ASSERT_EQ(cucore::detail::create_nvml_event_set(failing, box), nvml::SUCCESS);
  box.reset();
  cucore::set_log_handler(std::move(previous));
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("nvmlEventSetFree"), std::string::npos) << logged[0];
  EXPECT_NE(logged[0].find(std::to_string(nvml::ERROR_GPU_IS_LOST)), std::string::npos) << logged[0];
}

TEST_F(SystemFake, SystemEventsRegisterWaitAndFreeTheirSetOnce) {
  FakeGpu& g0 = FakeNvml::gpus[0];
  FakeGpu& g1 = FakeNvml::gpus[1];
  if (g1.bus_id == g0.bus_id) {  // random buses may meet: the two must be told apart here
    g1.bus = g0.bus % 255 + 1;
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%08X:%02X:%02X.0", g1.domain, g1.bus, g1.dev);
    g1.bus_id = bus_id;
  }
  auto gpu_id = [](const FakeGpu& g) { return ((g.domain & 0xffffu) << 16) | (g.bus << 8) | g.dev; };
  {
    sys::RegisteredSystemEvents ev = sys::register_events(sys::system_event_types::gpu_driver_unbind |
                                                          sys::system_event_types::gpu_driver_bind);
    EXPECT_EQ(FakeNvml::system_registered, 0x3u);
    EXPECT_FALSE(ev.wait(25));  // timeout
    EXPECT_EQ(FakeNvml::last_wait_timeout, 25u);
    FakeNvml::system_pending = {{sys::system_event_types::gpu_driver_unbind, gpu_id(g1)},
                                {sys::system_event_types::gpu_driver_bind, gpu_id(g0)},
                                {sys::system_event_types::gpu_driver_bind, gpu_id(g1)}};
    auto first = ev.wait(10, 2);  // at most two
    ASSERT_TRUE(first);
    ASSERT_EQ(first->size(), 2u);
    EXPECT_EQ((*first)[0].event_type, sys::system_event_types::gpu_driver_unbind);
    EXPECT_EQ((*first)[0].gpu_id, gpu_id(g1));
    EXPECT_EQ((*first)[0].pci_bus_id(), g1.bus_id);  // NVML's spelling of the same GPU
    EXPECT_EQ((*first)[0].device(), sys::Device(g1.index));
    EXPECT_EQ((*first)[1].device(), sys::Device(g0.index));
    FakeNvml::extra_events_claimed = 5;  // numEvent past the buffer: only what was given is read
    auto rest = ev.wait(10, 4);
    ASSERT_TRUE(rest);
    ASSERT_EQ(rest->size(), 4u);
    EXPECT_EQ((*rest)[0].gpu_id, gpu_id(g1));
    EXPECT_EQ(sys::system_event_type_names((*rest)[0].event_type), std::vector<std::string>{"bind"});
    EXPECT_THROW((void)ev.wait(0, 0), std::invalid_argument);
    EXPECT_THROW((void)ev.wait(0, 65537), std::invalid_argument);
    sys::RegisteredSystemEvents copy = ev;
    sys::RegisteredSystemEvents moved = std::move(ev);
    EXPECT_THROW((void)ev.wait(1), cucore::Error);  // NOLINT(bugprone-use-after-move): the documented state
    EXPECT_EQ(FakeNvml::system_sets_freed, 0);
  }
  EXPECT_EQ(FakeNvml::system_sets_created, 1);
  EXPECT_EQ(FakeNvml::system_sets_freed, 1);
  // An event about a GPU NVML no longer has (the bus id of none of the fakes).
  sys::SystemEvent gone{sys::system_event_types::gpu_driver_unbind, 0xffffu << 16 | 0xff00u | 0x1f};
  EXPECT_EQ(gone.pci_bus_id(), "0000FFFF:FF:1F.0");
  EXPECT_THROW((void)gone.device(), std::out_of_range);
  // A type the system cannot record: NOT_SUPPORTED, and the set is not leaked.
  FakeNvml::system_supported = sys::system_event_types::gpu_driver_bind;
  try {
    (void)sys::register_events(sys::system_event_types::gpu_driver_unbind);
    ADD_FAILURE() << "registered an unsupported system event";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.code(), nvml::ERROR_NOT_SUPPORTED);
    EXPECT_EQ(e.call(), "nvmlSystemRegisterEvents");
  }
  EXPECT_EQ(FakeNvml::system_sets_created, 2);
  EXPECT_EQ(FakeNvml::system_sets_freed, 2);
  // An NVML older than system events: FUNCTION_NOT_FOUND, nothing made.
  fake.table.nvmlSystemRegisterEvents = nullptr;
  try {
    (void)sys::register_events(sys::system_event_types::gpu_driver_bind);
    ADD_FAILURE() << "registered without nvmlSystemRegisterEvents";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.code(), nvml::ERROR_FUNCTION_NOT_FOUND);
    EXPECT_EQ(e.call(), "nvmlSystemRegisterEvents");
  }
  EXPECT_EQ(FakeNvml::system_sets_created, 2);
}

TEST_F(SystemFake, ClockOffsetsAndPstateClocksPassThrough) {
  for (const FakeGpu& g : FakeNvml::gpus) {
    SCOPED_TRACE(g.name);
    sys::Device d(g.index);
    for (int type = 0; type < 4; ++type) {
      sys::ClockInfo c = d.get_clock(static_cast<sys::ClockType>(type));
      for (int p = 0; p < 16; ++p) {
        auto mm = c.get_min_max_clock_of_pstate_mhz(p);
        ASSERT_TRUE(mm);
        EXPECT_EQ(mm->first, g.pstate_min[type][p]);
        EXPECT_EQ(mm->second, g.pstate_max[type][p]);
        auto o = c.get_offsets(p);
        ASSERT_TRUE(o);
        EXPECT_EQ(o->clock_offset_mhz, g.offset[type][p][0]);
        EXPECT_EQ(o->min_offset_mhz, g.offset[type][p][1]);
        EXPECT_EQ(o->max_offset_mhz, g.offset[type][p][2]);
        EXPECT_LT(o->min_offset_mhz, 0);  // negative offsets cross intact
      }
      for (int bad : {-1, 16, 32}) {  // refused before NVML is asked (NVML_PSTATE_UNKNOWN is 32)
        EXPECT_THROW((void)c.get_offsets(bad), std::invalid_argument) << bad;
        EXPECT_THROW((void)c.get_min_max_clock_of_pstate_mhz(bad), std::invalid_argument) << bad;
      }
    }
  }
  fake.make_optional_entries_unsupported();
  sys::ClockInfo c = sys::Device(0).get_clock(sys::ClockType::sm);
  EXPECT_FALSE(c.get_offsets(0));
  EXPECT_FALSE(c.get_min_max_clock_of_pstate_mhz(0));
}

TEST_F(SystemFake, ModesAttributesRepairAndInforomPassThrough) {
  for (FakeGpu& g : FakeNvml::gpus) {
    SCOPED_TRACE(g.name);
    sys::Device d(g.index);
    EXPECT_EQ(d.is_c2c_enabled(), g.c2c == 1);
    EXPECT_EQ(d.addressing_mode(), static_cast<sys::AddressingMode>(g.addressing));
    EXPECT_EQ(d.is_display_connected(), g.display_mode == 1);
    EXPECT_EQ(d.is_display_active(), g.display_active == 1);
    auto boost = d.is_auto_boosted_clocks_enabled();
    ASSERT_TRUE(boost);
    EXPECT_EQ(boost->first, g.boost == 1);
    EXPECT_EQ(boost->second, g.boost_default == 1);
    auto a = d.attributes();
    ASSERT_TRUE(a);
    EXPECT_EQ(a->multiprocessor_count, g.attrs.multiprocessorCount);
    EXPECT_EQ(a->shared_copy_engine_count, g.attrs.sharedCopyEngineCount);
    EXPECT_EQ(a->shared_decoder_count, g.attrs.sharedDecoderCount);
    EXPECT_EQ(a->shared_encoder_count, g.attrs.sharedEncoderCount);
    EXPECT_EQ(a->shared_jpeg_count, g.attrs.sharedJpegCount);
    EXPECT_EQ(a->shared_ofa_count, g.attrs.sharedOfaCount);
    EXPECT_EQ(a->gpu_instance_slice_count, g.attrs.gpuInstanceSliceCount);
    EXPECT_EQ(a->compute_instance_slice_count, g.attrs.computeInstanceSliceCount);
    EXPECT_EQ(a->memory_size_mb, g.attrs.memorySizeMB);
    auto rs = d.repair_status();
    ASSERT_TRUE(rs);
    EXPECT_EQ(rs->channel_repair_pending, g.channel_repair == 1);
    EXPECT_EQ(rs->tpc_repair_pending, g.tpc_repair == 1);
    sys::InforomInfo inf = d.inforom();
    for (int k = 0; k < 4; ++k) EXPECT_EQ(inf.get_version(static_cast<sys::InforomObject>(k)), g.inforom[k]);
    EXPECT_EQ(inf.image_version(), g.image);
    EXPECT_EQ(inf.configuration_checksum(), g.checksum);
    EXPECT_EQ(inf.board_part_number(), g.part_number);
    auto bbx = inf.bbx_flush_time();
    ASSERT_TRUE(bbx);
    EXPECT_EQ(bbx->first, g.bbx_time);
    EXPECT_EQ(bbx->second, g.bbx_duration);
    g.bbx_time = 0;
    EXPECT_FALSE(inf.bbx_flush_time());  // NOT_READY: no flush yet, no value (an H200 answers so)
    g.checksum = 2;
    EXPECT_TRUE(inf.validate());
    g.checksum = 3;  // the fake's corrupted InfoROM
    try {
      inf.validate();
      ADD_FAILURE() << "a corrupted InfoROM validated";
    } catch (const cucore::NvmlError& e) {
      EXPECT_EQ(e.name(), "NVML_ERROR_CORRUPTED_INFOROM");
      EXPECT_EQ(e.call(), "nvmlDeviceValidateInforom");
    }
    auto dyn = d.dynamic_pstates_info();
    ASSERT_TRUE(dyn);
    ASSERT_EQ(dyn->size(), 8u);
    for (unsigned k = 0; k < 8; ++k) {
      EXPECT_EQ((*dyn)[k].is_present, g.dyn.utilization[k].bIsPresent == 1);
      EXPECT_EQ((*dyn)[k].percentage, g.dyn.utilization[k].percentage);
      EXPECT_EQ((*dyn)[k].inc_threshold, g.dyn.utilization[k].incThreshold);
      EXPECT_EQ((*dyn)[k].dec_threshold, g.dyn.utilization[k].decThreshold);
    }
    auto cooler = d.cooler();
    ASSERT_TRUE(cooler);
    EXPECT_EQ(cooler->signal_type, g.cooler.signalType);
    EXPECT_EQ(cooler->target, static_cast<unsigned>(g.cooler.target));
    auto sensors = d.temperature().get_thermal_settings(15);
    ASSERT_TRUE(sensors);
    ASSERT_EQ(sensors->size(), std::min(g.thermal.count, 3u));
    for (std::size_t k = 0; k < sensors->size(); ++k) {
      EXPECT_EQ((*sensors)[k].controller, g.thermal.sensor[k].controller);
      EXPECT_EQ((*sensors)[k].default_min_temp, g.thermal.sensor[k].defaultMinTemp);
      EXPECT_EQ((*sensors)[k].default_max_temp, g.thermal.sensor[k].defaultMaxTemp);
      EXPECT_EQ((*sensors)[k].current_temp, g.thermal.sensor[k].currentTemp);
      EXPECT_EQ((*sensors)[k].target, g.thermal.sensor[k].target);
    }
    EXPECT_THROW(d.temperature().get_thermal_settings(1), cucore::NvmlError);  // INVALID_ARGUMENT is no "unsupported"
    // The persistence mode setter reaches NVML with NVML's enable values.
    d.set_persistence_mode(false);
    EXPECT_EQ(g.persistence, 0);
    EXPECT_EQ(d.is_persistence_mode_enabled(), false);
    d.set_persistence_mode(true);
    EXPECT_EQ(g.persistence, 1);
  }
}

TEST_F(SystemFake, AffinitiesUnpackEveryWordOfNvmlsMasks) {
  for (const FakeGpu& g : FakeNvml::gpus) {
    SCOPED_TRACE(g.name);
    sys::Device d(g.index);
    EXPECT_EQ(d.get_cpu_affinity(), g.cpus);
    EXPECT_EQ(d.get_cpu_affinity(sys::AffinityScope::socket), g.socket_cpus);
    EXPECT_EQ(d.get_memory_affinity(), g.nodes);
    for (unsigned cpu : g.cpus) {
      auto near = sys::Device::get_all_devices_with_cpu_affinity(cpu);
      EXPECT_NE(std::find(near.begin(), near.end(), d), near.end()) << "cpu " << cpu;
      for (const sys::Device& n : near) {
        const auto& cpus = FakeNvml::gpus[n.index()].cpus;
        EXPECT_NE(std::find(cpus.begin(), cpus.end(), cpu), cpus.end());
      }
    }
    EXPECT_NO_THROW(d.clear_cpu_affinity());
    EXPECT_THROW(d.set_cpu_affinity(), cucore::NvmlError);  // the fake refuses: a failure is never swallowed
    // Every other GPU at NODE, none at SINGLE; never itself.
    auto near = d.get_topology_nearest_gpus(sys::GpuTopologyLevel::node);
    EXPECT_EQ(near.size(), FakeNvml::gpus.size() - 1);
    EXPECT_EQ(std::find(near.begin(), near.end(), d), near.end());
    EXPECT_TRUE(d.get_topology_nearest_gpus(sys::GpuTopologyLevel::single).empty());
  }
  EXPECT_TRUE(sys::Device::get_all_devices_with_cpu_affinity(100000).empty());
}

TEST_F(SystemFake, FieldValuesCarryTheirOwnStatusAndType) {
  FakeGpu& g = FakeNvml::gpus[0];
  sys::Device d(0);
  EXPECT_TRUE(d.get_field_values({}).empty());
  std::vector<std::pair<unsigned, unsigned>> ids;
  for (unsigned k = 0; k < g.fields.size(); ++k) ids.push_back({1000 + k, k});
  ids.push_back({nvml::kFieldNvlinkLinkCount, 0});
  ids.push_back({999, 0});  // not a field of the fake: NOT_SUPPORTED for this value alone
  auto values = d.get_field_values(ids);
  ASSERT_EQ(values.size(), ids.size());
  for (unsigned k = 0; k < g.fields.size(); ++k) {
    const sys::FieldValue& v = values[k];
    EXPECT_EQ(v.field_id, 1000 + k);
    EXPECT_EQ(v.scope_id, k);
    EXPECT_EQ(v.timestamp_us, 1700000000000000LL + 1000 + k);
    EXPECT_EQ(v.latency_us, k + 3);
    if ((1000 + k) % 2 == 0)
      EXPECT_EQ(std::get<std::uint64_t>(v.value()), g.fields[k] + k);
    else
      EXPECT_EQ(std::get<double>(v.value()), static_cast<double>(g.fields[k]) / 4);
  }
  EXPECT_EQ(std::get<std::uint64_t>(values[g.fields.size()].value()), g.link_state.size());
  const sys::FieldValue& bad = values.back();
  EXPECT_EQ(bad.status, nvml::ERROR_NOT_SUPPORTED);
  try {
    bad.value();
    ADD_FAILURE() << "a failed field value was readable";
  } catch (const cucore::NvmlError& e) {
    EXPECT_EQ(e.name(), "NVML_ERROR_NOT_SUPPORTED");
    EXPECT_NE(e.call().find("999"), std::string::npos) << e.call();
  }
  d.clear_field_values({});
  EXPECT_TRUE(g.cleared.empty());  // nothing asked of NVML
  d.clear_field_values({{1000, 0}, {1002, 1}});
  EXPECT_EQ(g.cleared, (std::vector<unsigned>{1000, 1002}));
}

TEST_F(SystemFake, TopologyAndPeerStatus) {
  sys::Device a(0), b(1);
  EXPECT_EQ(sys::get_topology_common_ancestor(a, a), sys::GpuTopologyLevel::internal);
  EXPECT_EQ(sys::get_topology_common_ancestor(a, b), sys::GpuTopologyLevel::node);
  EXPECT_EQ(sys::get_p2p_status(a, b, sys::GpuP2PCapsIndex::nvlink), sys::GpuP2PStatus::not_supported);
  EXPECT_EQ(sys::get_p2p_status(a, b, sys::GpuP2PCapsIndex::read), sys::GpuP2PStatus::ok);
}

TEST_F(SystemFake, SampleHoldsEveryFieldOfEveryDevice) {
  sys::Sample s = sys::sample();
  EXPECT_EQ(s.driver_version, FakeNvml::driver_version);
  EXPECT_EQ(s.nvml_version, FakeNvml::nvml_version);
  EXPECT_EQ(s.cuda_version, sys::get_user_mode_driver_version());
  ASSERT_EQ(s.devices.size(), FakeNvml::gpus.size());
  for (const auto& ds : s.devices) {
    const FakeGpu& g = FakeNvml::gpus[ds.index];
    EXPECT_TRUE(ds.errors.empty());
    EXPECT_EQ(ds.name, g.name);
    EXPECT_EQ(ds.uuid, g.uuid);
    EXPECT_EQ(ds.pci_bus_id, g.bus_id);
    EXPECT_EQ(ds.temperature_c, static_cast<unsigned>(g.temp));
    EXPECT_EQ(ds.fan_percent, g.fans[0]);
    EXPECT_EQ(ds.power_usage_mw, g.power);
    EXPECT_EQ(ds.power_limit_mw, g.limit);
    EXPECT_EQ(ds.performance_state, g.pstate);
    ASSERT_TRUE(ds.memory && ds.utilization);
    EXPECT_EQ(ds.memory->used, g.mem.used);
    EXPECT_EQ(ds.utilization->gpu, g.util.gpu);
    EXPECT_EQ(ds.sm_clock_mhz, g.clocks[1]);
    EXPECT_EQ(ds.memory_clock_mhz, g.clocks[2]);
    EXPECT_EQ(ds.max_sm_clock_mhz, g.max_clocks[1]);
    EXPECT_EQ(ds.max_memory_clock_mhz, g.max_clocks[2]);
    EXPECT_EQ(ds.mig_mode, g.mig_current == 1);
    EXPECT_EQ(ds.clock_event_reasons, g.reasons);
    ASSERT_EQ(ds.processes.size(), g.procs.size());
    for (std::size_t k = 0; k < g.procs.size(); ++k) {
      EXPECT_EQ(ds.processes[k].info.pid, g.procs[k].pid);
      EXPECT_EQ(ds.processes[k].name, g.procs[k].pid % 7 == 0 ? "" : "proc" + std::to_string(g.procs[k].pid));
    }
  }
}

TEST(SystemNames, MaskBitsNameAsCudaCore) {
  std::mt19937 rng(std::random_device{}());
  static const char* const kReasons[] = {"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                                         "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
                                         "hw_power_brake_slowdown", "display_clock_setting"};
  for (int trial = 0; trial < 50; ++trial) {
    std::uint64_t mask = rng() & 0x1ff;
    std::vector<std::string> want;
    for (int b = 0; b < 9; ++b)
      if (mask & (1u << b)) want.emplace_back(kReasons[b]);
    EXPECT_EQ(sys::clock_event_reason_names(mask | (1ULL << 40)), want) << mask;  // unknown bits left out
  }
  std::uint64_t all = 0;
  for (std::uint64_t bit = 1; bit <= sys::event_types::gpu_recovery_action; bit <<= 1) {
    auto names = sys::event_type_names(bit);
    if (names.empty()) continue;  // 0x20, 0x40: unused bits
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(sys::event_type_bit(names[0]), bit);
    all |= bit;
  }
  EXPECT_EQ(sys::event_type_names(all).size(), 14u);
  EXPECT_EQ(sys::event_type_bit("xid_critical_error"), 0x8u);
  try {
    (void)sys::event_type_bit("xid");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("xid_critical_error"), std::string::npos);  // lists the names
  }
}

TEST(SystemNames, SystemEventTypesNameAsCudaCore) {
  EXPECT_EQ(sys::system_event_type_names(0x3 | 0x100), (std::vector<std::string>{"unbind", "bind"}));
  EXPECT_EQ(sys::system_event_type_bit("unbind"), sys::system_event_types::gpu_driver_unbind);
  EXPECT_EQ(sys::system_event_type_bit("bind"), sys::system_event_types::gpu_driver_bind);
  try {
    (void)sys::system_event_type_bit("xid_critical_error");  // a device event, not a system one
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unbind, bind"), std::string::npos) << e.what();
  }
}

TEST(SystemNames, FieldIdsAreCudaCoresNamesOfNvmlsNumbers) {
  auto ids = sys::field_id_names();
  ASSERT_EQ(ids.size(), 295u);
  std::vector<std::string> names;
  std::map<unsigned, std::vector<std::string>> by_id;
  for (const auto& f : ids) {
    names.emplace_back(f.name);
    by_id[f.id].emplace_back(f.name);
    EXPECT_GT(f.id, 0u) << f.name;
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "a name twice";
  EXPECT_EQ(by_id.size(), 293u);  // two ids have two names
  auto id_of = [&](std::string_view n) {
    for (const auto& f : ids)
      if (n == f.name) return f.id;
    return 0u;
  };
  EXPECT_EQ(ids[0].id, 1u);
  EXPECT_STREQ(ids[0].name, "DEV_ECC_CURRENT");
  EXPECT_EQ(id_of("DEV_NVLINK_LINK_COUNT"), nvml::kFieldNvlinkLinkCount);
  EXPECT_EQ(id_of("DEV_PERF_POLICY_POWER"), 74u);
  EXPECT_EQ(by_id[74], (std::vector<std::string>{"DEV_PERF_POLICY_POWER", "DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP"}));
  EXPECT_EQ(by_id[76], (std::vector<std::string>{"DEV_PERF_POLICY_SYNC_BOOST", "DEV_CLOCKS_EVENT_REASON_SYNC_BOOST"}));
  EXPECT_EQ(id_of("DEV_PENDING_BANK_REMAPPING"), 307u);  // the newest ids are there too
}

// Runs on every machine: NVML is looked for under a name no machine has.
TEST(SystemNoNvml, MissingLibraryErrorNamesEverythingSearched) {
  const std::string soname = "libnvidia-ml-cucore-absent.so.1";
  cucore::detail::set_nvml_library_for_testing({soname});
  struct Restore {
    ~Restore() { cucore::detail::set_nvml_library_for_testing({}); }
  } restore;
  for (int attempt = 0; attempt < 2; ++attempt) {  // remembered, not retried silently
    try {
      (void)sys::get_num_devices();
      ADD_FAILURE() << "no LibraryNotFoundError";
    } catch (const cucore::LibraryNotFoundError& e) {
      EXPECT_EQ(e.component(), "nvml");
      ASSERT_GE(e.searched().size(), 2u);
      for (const auto& step : e.searched()) EXPECT_NE(step.find(soname), std::string::npos) << step;
      std::string what = e.what();
      EXPECT_NE(what.find("already loaded: " + soname), std::string::npos) << what;
      EXPECT_NE(what.find("OS loader: " + soname), std::string::npos) << what;
      EXPECT_NE(what.find("NVIDIA driver"), std::string::npos) << what;  // the hint
    }
  }
  EXPECT_THROW(sys::Device(0), cucore::LibraryNotFoundError);
  EXPECT_THROW(sys::sample(), cucore::LibraryNotFoundError);
  auto info = cucore::pathfinder::find("nvml");
  EXPECT_FALSE(info.found);
  ASSERT_FALSE(info.searched.empty());
  EXPECT_NE(info.searched[0].find(soname), std::string::npos);
  auto report = cucore::pathfinder::doctor();
  EXPECT_FALSE(report.nvml.available);
  EXPECT_NE(report.nvml.error.find(soname), std::string::npos);
  EXPECT_NE(report.text().find("unavailable: libnvidia-ml.so.1 was not found"), std::string::npos);
}

}  // namespace
