// Memory movement: cucore's copy_batch (one cuMemcpyBatchAsync) of 1000 x 4 KiB
// buffers against 1000 cuMemcpyAsync calls, and VirtualMemoryResource's grow
// (modify_allocation) against allocate-new + copy + free, in one process,
// alternating, after warm-up; medians of the whole operation including the
// stream synchronisation, and their ratio.
#include <cucore/copy_batch.hpp>
#include <cucore/device.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>
#include <cucore/virtual_memory.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "common.hpp"
#include "loader/driver.hpp"

using namespace cucore;

int main() {
  if (!bench::have_gpu("bench_memory_ops")) return 0;
  Device dev(0);
  dev.set_current();
  Stream s = dev.create_stream();
  const auto& d = detail::driver();

  // ---- batched copy: 1000 x 4 KiB, device to device ----
  {
    constexpr std::size_t kCount = 1000, kBytes = 4096;
    DeviceMemoryResource mr(dev);
    std::vector<Buffer> src, dst;
    std::vector<const Buffer*> sp;
    std::vector<Buffer*> dp;
    for (std::size_t k = 0; k < kCount; ++k) {
      src.push_back(mr.allocate(kBytes, s));
      dst.push_back(mr.allocate(kBytes, s));
      src.back().fill(std::uint8_t(k), s);
    }
    for (std::size_t k = 0; k < kCount; ++k) {
      sp.push_back(&src[k]);
      dp.push_back(&dst[k]);
    }
    s.sync();
    auto c = bench::compare(
        "copy 1000 x 4 KiB (enqueue + sync)", "1000 cuMemcpyAsync",
        [&] {
          copy_batch(s, sp, dp);
          s.sync();
        },
        [&] {
          for (std::size_t k = 0; k < kCount; ++k)
            detail::check(d.cuMemcpyAsync(dst[k].handle(), src[k].handle(), kBytes, s.handle()), "cuMemcpyAsync");
          s.sync();
        },
        31, 20, 3);
    bench::report(c);
    auto enqueue = bench::compare(
        "copy 1000 x 4 KiB (host enqueue only)", "1000 cuMemcpyAsync",
        [&] { copy_batch(s, sp, dp); },
        [&] {
          for (std::size_t k = 0; k < kCount; ++k)
            detail::check(d.cuMemcpyAsync(dst[k].handle(), src[k].handle(), kBytes, s.handle()), "cuMemcpyAsync");
        },
        31, 5, 3);
    s.sync();
    bench::report(enqueue);
  }

  // ---- growing an allocation: 64 MiB -> 128 MiB ----
  if (dev.properties().attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) {
    constexpr std::size_t kFrom = 64 << 20, kTo = 128 << 20;
    VirtualMemoryResource vmr(dev, {.handle_type = VirtualMemoryHandleType::none});
    DeviceMemoryResource pool(dev);
    auto c = bench::compare(
        "grow 64 MiB -> 128 MiB (allocate, grow, free)", "alloc 128 + copy 64 + free",
        [&] {
          Buffer b = vmr.allocate(kFrom, s);
          vmr.modify_allocation(b, kTo);
          b.close(s);
        },
        [&] {
          Buffer a = pool.allocate(kFrom, s);
          Buffer b = pool.allocate(kTo, s);
          detail::check(d.cuMemcpyAsync(b.handle(), a.handle(), kFrom, s.handle()), "cuMemcpyAsync");
          a.close(s);
          b.close(s);
          s.sync();
        },
        21, 3, 2);
    bench::report(c);
  } else {
    std::printf("grow: the device has no virtual memory management; not measured\n");
  }
  return 0;
}
