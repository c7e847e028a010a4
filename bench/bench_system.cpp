// System monitoring (NVML) against NVML called directly, one process,
// alternating, after warm-up, medians:
//   utilization: system::Device::utilization vs nvmlDeviceGetUtilizationRates (goal <= 1.05x)
//   memory info: system::Device::memory_info vs nvmlDeviceGetMemoryInfo_v2 (goal <= 1.05x)
//   one `cucore smi` sample of every field of every device (system::sample), as a figure
#include <cucore/device.hpp>
#include <cucore/system.hpp>

#include <dlfcn.h>

#include <cstdio>

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

  std::vector<double> samples;
  std::size_t devices = 0;
  for (int i = 0; i < 21; ++i)
    samples.push_back(bench::time_ns([&] { devices = cucore::system::sample().devices.size(); }, 5) / 1000.0);
  bench::report_value("smi sample, every field of " + std::to_string(devices) + " device(s)", bench::median(samples),
                      "us");
  return 0;
}
