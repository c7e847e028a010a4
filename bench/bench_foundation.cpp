// Foundation benchmarks against the raw driver, one process, alternating,
// after warm-up, medians:
//   1 MiB allocate+free: DeviceMemoryResource vs cuMemAllocAsync+cuMemFreeAsync (goal ≤ 1.05×)
//   stream create+destroy: Device::create_stream vs cuStreamCreate+cuStreamDestroy (goal ≤ 1.05×)
//   Device(0) construction (goal ≤ 50 ns)
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

#include <cstdio>
#include <exception>

#include "common.hpp"
#include "loader/driver.hpp"

using namespace cucore;

int main() {
  if (!bench::have_gpu("bench_foundation")) return 0;
  const auto& drv = detail::driver();
  Device dev(0);
  dev.set_current();
  Stream s = dev.create_stream();
  CUstream raw_stream = s.handle();
  DeviceMemoryResource mr(dev);
  const size_t mib = size_t(1) << 20;

  auto alloc = bench::compare(
      "allocate+free 1 MiB (device pool)", "cuMemAllocAsync+Free",
      [&] {
        Buffer b = mr.allocate(mib, s);
        b.close();
      },
      [&] {
        CUdeviceptr p = 0;
        drv.cuMemAllocAsync(&p, mib, raw_stream);
        drv.cuMemFreeAsync(p, raw_stream);
      },
      41, 2000);
  s.sync();
  bench::report(alloc, 1.05);

  auto streams = bench::compare(
      "stream create+destroy", "cuStreamCreate+Destroy", [&] { Stream t = dev.create_stream(); },
      [&] {
        CUstream t = nullptr;
        drv.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING);
        drv.cuStreamDestroy(t);
      },
      31, 200);
  bench::report(streams, 1.05);

  std::vector<double> samples;
  volatile int sink = 0;
  for (int i = 0; i < 41; ++i)
    samples.push_back(bench::time_ns([&] { sink = sink + Device(0).ordinal(); }, 100000));
  bench::report_value("Device(0) construction", bench::median(samples), "ns", 50);
  return 0;
}
