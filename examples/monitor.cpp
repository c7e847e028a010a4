// The mission's example 3 in C++ (examples/python/example3_nvml.py is its
// Python twin): device count, name, GPU and memory utilization, memory
// used/total, read through NVML with cucore::system.
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/system.hpp>

#include <cstdio>
#include <exception>


int main() {
  try {
    std::printf("Devices: %d\n", cucore::system::get_num_devices());
    cucore::Device d(0);
    d.set_current();
    cucore::system::Device sd = d.to_system_device();
    auto util = sd.utilization();  // empty where the GPU does not report it (a MIG-enabled GPU)
    auto mem = sd.memory_info();
    if (util)
      std::printf("%s: GPU %u%%, MEM %u%%\n", sd.name().c_str(), util->gpu, util->memory);
    else
      std::printf("%s: GPU N/A, MEM N/A\n", sd.name().c_str());
    if (mem)
      std::printf("Memory: %llu MB / %llu MB\n", static_cast<unsigned long long>(mem->used >> 20),
                  static_cast<unsigned long long>(mem->total >> 20));
    else
      std::printf("Memory: N/A\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "monitor: %s\n", e.what());
    return 1;
  }
}
