// System monitoring (NVML) against NVML called directly, one process,
// alternating, after warm-up, medians:
//   utilization: system::Device::utilization vs nvmlDeviceGetUtilizationRates (goal <= 1.05x)
//   memory info: system::Device::memory_info vs nvmlDeviceGetMemoryInfo_v2 (goal <= 1.05x)
//   one `cucore smi` sample of every field of every device (system::sample) vs
//   the same fields through NVML's own calls (goal <= 1.05x)
#include <cucore/device.hpp>
#include <cucore/system.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <vector>

#include "common.hpp"
#include "loader/nvml_types.hpp"

namespace nvml = cucore::detail::nvml;

int main() {
  if (!bench::have_gpu("bench_system")) return 0;
  cucore::system::Device sd = cucore::Device(0).to_system_device();

  // The peer: NVML as an application would call it, through its own dlopen.
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) {
    std::printf("bench_system: libnvidia-ml.so.1 not loadable (%s); nothing measured\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<nvml::PFN_nvmlInit_v2>(dlsym(lib, "nvmlInit_v2"));
  auto util = reinterpret_cast<nvml::PFN_nvmlDeviceGetUtilizationRates>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
  auto mem = reinterpret_cast<nvml::PFN_nvmlDeviceGetMemoryInfo_v2>(dlsym(lib, "nvmlDeviceGetMemoryInfo_v2"));
  if (!init || !util || !mem || init() != nvml::SUCCESS) {
    std::printf("bench_system: NVML's entry points are missing or nvmlInit failed\n");
    return 1;
  }
  auto h = static_cast<nvml::Device>(sd.handle());
  volatile unsigned long long sink = 0;

  auto u = bench::compare(
      "NVML utilization query", "nvmlDeviceGetUtilizationRates", [&] { sink = sink + sd.utilization()->gpu; },
      [&] {
        nvml::Utilization v{};
        util(h, &v);
        sink = sink + v.gpu;
      },
      31, 200);
  bench::report(u, 1.05);

  auto m = bench::compare(
      "NVML memory info query", "nvmlDeviceGetMemoryInfo_v2", [&] { sink = sink + sd.memory_info()->used; },
      [&] {
        nvml::Memory_v2 v{};
        v.version = nvml::kMemory_v2;
        mem(h, &v);
        sink = sink + v.used;
      },
      31, 200);
  bench::report(m, 1.05);

  // The peer of one full sample: the same fields through NVML's own calls, as
  // a monitoring tool would make them (strings, counts and the process list
  // included; a field that fails is skipped, as cucore records and skips it).
#define CUCORE_BENCH_NVML(name) auto name = reinterpret_cast<nvml::PFN_##name>(dlsym(lib, #name))
  CUCORE_BENCH_NVML(nvmlSystemGetDriverVersion);
  CUCORE_BENCH_NVML(nvmlSystemGetNVMLVersion);
  CUCORE_BENCH_NVML(nvmlSystemGetCudaDriverVersion_v2);
  CUCORE_BENCH_NVML(nvmlSystemGetProcessName);
  CUCORE_BENCH_NVML(nvmlDeviceGetCount_v2);
  CUCORE_BENCH_NVML(nvmlDeviceGetHandleByIndex_v2);
  CUCORE_BENCH_NVML(nvmlDeviceGetName);
  CUCORE_BENCH_NVML(nvmlDeviceGetUUID);
  CUCORE_BENCH_NVML(nvmlDeviceGetPciInfoExt);
  CUCORE_BENCH_NVML(nvmlDeviceGetTemperature);
  CUCORE_BENCH_NVML(nvmlDeviceGetNumFans);
  CUCORE_BENCH_NVML(nvmlDeviceGetFanSpeed_v2);
  CUCORE_BENCH_NVML(nvmlDeviceGetPowerUsage);
  CUCORE_BENCH_NVML(nvmlDeviceGetPowerManagementLimit);
  CUCORE_BENCH_NVML(nvmlDeviceGetPerformanceState);
  CUCORE_BENCH_NVML(nvmlDeviceGetClockInfo);
  CUCORE_BENCH_NVML(nvmlDeviceGetMaxClockInfo);
  CUCORE_BENCH_NVML(nvmlDeviceGetMigMode);
  CUCORE_BENCH_NVML(nvmlDeviceGetCurrentClocksEventReasons);
  CUCORE_BENCH_NVML(nvmlDeviceGetComputeRunningProcesses_v3);
#undef CUCORE_BENCH_NVML
  const bool direct_ok = nvmlSystemGetDriverVersion && nvmlSystemGetNVMLVersion && nvmlDeviceGetCount_v2 &&
                         nvmlDeviceGetHandleByIndex_v2 && nvmlDeviceGetName && nvmlDeviceGetUUID;
  auto direct_sample = [&] {
    char text[nvml::kSystemNvmlVersionBufferSize];
    nvmlSystemGetDriverVersion(text, sizeof text);
    nvmlSystemGetNVMLVersion(text, sizeof text);
    int cuda = 0;
    if (nvmlSystemGetCudaDriverVersion_v2) nvmlSystemGetCudaDriverVersion_v2(&cuda);
    unsigned count = 0;
    nvmlDeviceGetCount_v2(&count);
    for (unsigned i = 0; i < count; ++i) {
      nvml::Device d = nullptr;
      if (nvmlDeviceGetHandleByIndex_v2(i, &d) != nvml::SUCCESS) continue;
      char name[nvml::kDeviceNameV2BufferSize], uuid[nvml::kDeviceUuidV2BufferSize];
      nvmlDeviceGetName(d, name, sizeof name);
      nvmlDeviceGetUUID(d, uuid, sizeof uuid);
      unsigned v = 0, w = 0;
      int ps = 0;
      unsigned long long reasons = 0;
      if (nvmlDeviceGetPciInfoExt) {
        nvml::PciInfoExt_v1 pci{};
        pci.version = nvml::kPciInfoExt_v1;
        nvmlDeviceGetPciInfoExt(d, &pci);
      }
      if (nvmlDeviceGetTemperature) nvmlDeviceGetTemperature(d, 0 /* NVML_TEMPERATURE_GPU */, &v);
      if (nvmlDeviceGetNumFans && nvmlDeviceGetNumFans(d, &w) == nvml::SUCCESS && w > 0 && nvmlDeviceGetFanSpeed_v2)
        nvmlDeviceGetFanSpeed_v2(d, 0, &v);
      if (nvmlDeviceGetPowerUsage) nvmlDeviceGetPowerUsage(d, &v);
      if (nvmlDeviceGetPowerManagementLimit) nvmlDeviceGetPowerManagementLimit(d, &v);
      if (nvmlDeviceGetPerformanceState) nvmlDeviceGetPerformanceState(d, &ps);
      nvml::Memory_v2 memory{};
      memory.version = nvml::kMemory_v2;
      mem(d, &memory);
      nvml::Utilization rates{};
      util(d, &rates);
      for (int clock : {1 /* NVML_CLOCK_SM */, 2 /* NVML_CLOCK_MEM */}) {
        if (nvmlDeviceGetClockInfo) nvmlDeviceGetClockInfo(d, clock, &v);
        if (nvmlDeviceGetMaxClockInfo) nvmlDeviceGetMaxClockInfo(d, clock, &v);
      }
      if (nvmlDeviceGetMigMode) nvmlDeviceGetMigMode(d, &v, &w);
      if (nvmlDeviceGetCurrentClocksEventReasons) nvmlDeviceGetCurrentClocksEventReasons(d, &reasons);
      if (nvmlDeviceGetComputeRunningProcesses_v3) {
        std::vector<nvml::ProcessInfo> procs;
        unsigned n = 0;
        for (;;) {  // n: the array's room in, the process count out
          n = static_cast<unsigned>(procs.size());
          if (nvmlDeviceGetComputeRunningProcesses_v3(d, &n, procs.empty() ? nullptr : procs.data()) !=
              nvml::ERROR_INSUFFICIENT_SIZE)
            break;
          procs.resize(n + 4);
        }
        for (unsigned k = 0; k < n && k < procs.size(); ++k) {
          char pname[256];
          if (nvmlSystemGetProcessName) nvmlSystemGetProcessName(procs[k].pid, pname, sizeof pname);
        }
      }
      sink = sink + v + static_cast<unsigned>(ps) + rates.gpu + memory.used + reasons + static_cast<unsigned>(name[0]);
    }
    sink = sink + static_cast<unsigned>(cuda) + count;
  };
  std::size_t devices = 0;
  if (direct_ok) {
    auto full = bench::compare(
        "smi sample, every field of every device", "the same fields through NVML directly",
        [&] { devices = cucore::system::sample().devices.size(); }, direct_sample, 21, 5);
    bench::report(full, 1.05);
  } else {
    std::vector<double> samples;
    for (int i = 0; i < 21; ++i)
      samples.push_back(bench::time_ns([&] { devices = cucore::system::sample().devices.size(); }, 5) / 1000.0);
    bench::report_value("smi sample, every field of " + std::to_string(devices) + " device(s)",
                        bench::median(samples), "us");
  }
  return 0;
}
