// Foundation benchmarks against the raw driver, one process, alternating,
// after warm-up, medians:
//   1 MiB allocate+free: DeviceMemoryResource vs cuMemAllocAsync+cuMemFreeAsync (goal ≤ 1.05×),
//     and vs the very call cucore makes (cuMemAllocFromPoolAsync on the same pool)
//   stream create+destroy: Device::create_stream vs cuStreamCreate+cuStreamDestroy (goal ≤ 1.05×)
//   event create+destroy: Device::create_event vs cuEventCreate+cuEventDestroy (goal ≤ 1.05×)
//   Device(0) construction (goal ≤ 50 ns)
// cucore's side goes through its handle layer: the Buffer holds a share of
// the Stream it was allocated on, streams and events live in shared boxes.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/event.hpp>
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

  const CUmemoryPool pool = mr.handle();
  auto alloc_same = bench::compare(
      "allocate+free 1 MiB (device pool), same call", "cuMemAllocFromPoolAsync+Free",
      [&] {
        Buffer b = mr.allocate(mib, s);
        b.close();
      },
      [&] {
        CUdeviceptr p = 0;
        drv.cuMemAllocFromPoolAsync(&p, mib, pool, raw_stream);
        drv.cuMemFreeAsync(p, raw_stream);
      },
      41, 2000);
  s.sync();
  bench::report(alloc_same, 1.05);

  auto streams = bench::compare(
      "stream create+destroy", "cuStreamCreate+Destroy", [&] { Stream t = dev.create_stream(); },
      [&] {
        CUstream t = nullptr;
        drv.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING);
        drv.cuStreamDestroy(t);
      },
      31, 200);
  bench::report(streams, 1.05);

  auto events = bench::compare(
      "event create+destroy", "cuEventCreate+Destroy", [&] { Event e = dev.create_event(); },
      [&] {
        CUevent e = nullptr;
        drv.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
        drv.cuEventDestroy(e);
      },
      31, 1000);
  bench::report(events, 1.05);

  std::vector<double> samples;
  volatile int sink = 0;
  for (int i = 0; i < 41; ++i)
    samples.push_back(bench::time_ns([&] { sink = sink + Device(0).ordinal(); }, 100000));
  bench::report_value("Device(0) construction", bench::median(samples), "ns", 50);
  return 0;
}
