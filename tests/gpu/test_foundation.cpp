// Devices, contexts, streams, events, memory resources and buffers on a real GPU.
#include <cucore/adaptors.hpp>
#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/gpu.hpp"
#include "common/random.hpp"
#include "loader/driver.hpp"

using namespace cucore;

using test::random_floats;

TEST(GpuDevice, PropertiesOfTheDevice) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  auto cc = d.compute_capability();
  EXPECT_GE(cc.major, 7);
  EXPECT_EQ(d.arch(), std::to_string(cc.major) + std::to_string(cc.minor));
  auto p = d.properties();
  EXPECT_GT(p.multiprocessor_count(), 0);
  EXPECT_EQ(p.warp_size(), 32);
  EXPECT_GE(p.max_threads_per_block(), 1024);
  EXPECT_GE(p.max_shared_memory_per_block_optin(), p.max_shared_memory_per_block());
  EXPECT_GT(p.total_memory(), size_t(1) << 30);
  EXPECT_GT(p.l2_cache_size(), 0);
  EXPECT_FALSE(d.pci_bus_id().empty());
  EXPECT_EQ(d.uuid_string().rfind("GPU-", 0), 0u);
  if (d.name().find("H200") != std::string::npos) {
    EXPECT_EQ(p.multiprocessor_count(), 132);
    EXPECT_EQ(cc, (ComputeCapability{9, 0}));
    EXPECT_TRUE(p.cluster_launch());
    EXPECT_TRUE(p.cooperative_launch());
  }
  EXPECT_THROW(Device(Device::count() + 98), std::out_of_range);
  EXPECT_EQ(static_cast<int>(Device::all().size()), Device::count());
}

TEST(GpuDevice, SetCurrentUsesThePrimaryContext) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  Context ctx = d.set_current();
  EXPECT_TRUE(ctx.is_primary());
  EXPECT_FALSE(ctx.is_green());
  Context cur = Context::current();
  EXPECT_EQ(cur, ctx);
  EXPECT_TRUE(cur.is_primary());
  EXPECT_EQ(Device(), d);
  // The same context the runtime API and other libraries use.
  CUcontext primary = nullptr;
  ASSERT_EQ(detail::driver().cuDevicePrimaryCtxRetain(&primary, d.handle()), CUDA_SUCCESS);
  EXPECT_EQ(primary, ctx.handle());
  detail::driver().cuDevicePrimaryCtxRelease(d.handle());
  EXPECT_EQ(ctx.device_id(), 0);
  // A thread that never set a device sees device 0.
  std::thread([&] { EXPECT_EQ(Device().ordinal(), 0); }).join();
}

TEST(GpuStream, OrderingAcrossStreamsWithEvents) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream a = d.create_stream(), b = d.create_stream();
  DeviceMemoryResource mr(d);
  const size_t n = size_t(64) << 20;  // 256 MiB: big enough that b would overtake a without the wait
  Buffer buf = mr.allocate(n * 4, a);
  buf.fill(std::uint32_t{0x11111111}, a);
  buf.fill(std::uint32_t{0x22222222}, a);
  Event done = a.record();
  b.wait(done);
  std::vector<std::uint32_t> host(n);
  buf.copy_to(std::span<std::uint32_t>(host), b);
  b.sync();
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(host[i], 0x22222222u) << i;
  ASSERT_EQ(host[n - 1], 0x22222222u);
  EXPECT_TRUE(a.is_done());
  EXPECT_TRUE(done.is_done());
  // wait(stream) orders the same way.
  buf.fill(std::uint32_t{0x33333333}, a);
  b.wait(a);
  buf.copy_to(std::span<std::uint32_t>(host), b);
  b.sync();
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(host[i], 0x33333333u) << i;
  buf.close(b);
}

TEST(GpuEvent, TimingOfAKnownAmountOfWork) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  Buffer buf = DeviceMemoryResource(d).allocate(size_t(1) << 30, s);
  Event start = s.record({.timing_enabled = true});
  for (int i = 0; i < 4; ++i) buf.fill(std::uint32_t(i + 1), s);
  Event end = s.record({.timing_enabled = true});
  end.sync();
  float ms = end - start;
  EXPECT_GT(ms, 0.01f);   // 4 GiB of writes take well over 10 µs
  EXPECT_LT(ms, 2000.f);  // and well under 2 s
  EXPECT_TRUE(start.is_timing_enabled());
  Event untimed = s.record();
  untimed.sync();
  EXPECT_THROW((void)(untimed - start), std::invalid_argument);
}

TEST(GpuMemory, PoolAllocateFreeAndAttributes) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  DeviceMemoryResource own(d, DeviceMemoryResourceOptions{});
  EXPECT_TRUE(own.owns_pool());
  auto before = own.attributes();
  EXPECT_EQ(before.release_threshold, ~std::uint64_t{0});
  {
    Buffer b = own.allocate(size_t(8) << 20, s);
    s.sync();
    auto during = own.attributes();
    EXPECT_GE(during.used_mem_current, before.used_mem_current + (size_t(8) << 20));
    EXPECT_GE(during.reserved_mem_current, during.used_mem_current);
    EXPECT_EQ(b.device_id(), 0);
    EXPECT_TRUE(b.is_device_accessible());
    EXPECT_FALSE(b.is_host_accessible());
  }
  s.sync();
  auto after = own.attributes();
  EXPECT_EQ(after.used_mem_current, before.used_mem_current);
  // Freed memory stays reserved for reuse (the raised release threshold).
  EXPECT_GE(after.reserved_mem_current, size_t(8) << 20);
  EXPECT_GE(after.used_mem_high, size_t(8) << 20);
  DeviceMemoryResource def = d.memory_resource();
  EXPECT_FALSE(def.owns_pool());
  EXPECT_EQ(def, DeviceMemoryResource(0));
}

TEST(GpuMemory, CopiesRoundTripRandomData) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  DeviceMemoryResource mr(d);
  const size_t n = (size_t(1) << 22) + 3;
  auto host = random_floats(n, 1234);
  Buffer a = mr.allocate(n * 4, s), b = mr.allocate(n * 4, s);
  a.copy_from(std::span<const float>(host), s);
  a.copy_to(b, s);
  Buffer c = b.copy_to(s);
  std::vector<float> out(n, std::nanf(""));
  c.copy_to(std::span<float>(out), s);
  s.sync();
  ASSERT_EQ(std::memcmp(out.data(), host.data(), n * 4), 0);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], host[i]) << i;
}

TEST(GpuMemory, FillWithEachWidth) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  Buffer b = DeviceMemoryResource(d).allocate(size_t(1) << 20, s);
  std::vector<std::uint8_t> out(size_t(1) << 20);
  b.fill(std::uint8_t{0xa7}, s);
  b.copy_to(std::span<std::uint8_t>(out), s);
  s.sync();
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 0xa7) << i;
  b.fill(std::uint16_t{0x1234}, s);
  std::vector<std::uint16_t> o16(out.size() / 2);
  b.copy_to(std::span<std::uint16_t>(o16), s);
  s.sync();
  for (size_t i = 0; i < o16.size(); ++i) ASSERT_EQ(o16[i], 0x1234) << i;
  b.fill(std::uint32_t{0x89abcdef}, s);
  std::vector<std::uint32_t> o32(out.size() / 4);
  b.copy_to(std::span<std::uint32_t>(o32), s);
  s.sync();
  for (size_t i = 0; i < o32.size(); ++i) ASSERT_EQ(o32[i], 0x89abcdefu) << i;
}

namespace {
// Host-accessible resources: write through the pointer, copy through the device, read back.
void host_accessible_round_trip(const MemoryResource& mr) {
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  const size_t n = 1 << 20;
  auto host = random_floats(n, 99);
  Buffer h = mr.allocate(n * 4, s);
  ASSERT_TRUE(h.is_host_accessible());
  ASSERT_TRUE(h.is_device_accessible());
  s.sync();
  std::memcpy(h.data(), host.data(), n * 4);
  Buffer dev = DeviceMemoryResource(d).allocate(n * 4, s);
  dev.copy_from(h, s);
  Buffer h2 = mr.allocate(n * 4, s);
  h2.copy_from(dev, s);
  s.sync();
  const float* p = static_cast<const float*>(h2.data());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], host[i]) << i;
}
}  // namespace

TEST(GpuMemory, PinnedMemoryResource) {
  CUCORE_REQUIRE_GPU();
  host_accessible_round_trip(PinnedMemoryResource());
}

TEST(GpuMemory, LegacyPinnedMemoryResource) {
  CUCORE_REQUIRE_GPU();
  host_accessible_round_trip(LegacyPinnedMemoryResource());
}

TEST(GpuMemory, ManagedMemoryResource) {
  CUCORE_REQUIRE_GPU();
  host_accessible_round_trip(ManagedMemoryResource(Device(0)));
}

TEST(GpuStream, AdoptsAStreamMadeByTheRawDriver) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  CUstream raw = nullptr;
  ASSERT_EQ(detail::driver().cuStreamCreate(&raw, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  {
    StreamRef s = Stream::from_handle(raw);
    EXPECT_EQ(s.handle(), raw);
    EXPECT_TRUE(s.is_nonblocking());
    EXPECT_EQ(s.device(), d);
    EXPECT_TRUE(s.context().is_primary());
    auto host = random_floats(1000, 5);
    Buffer b = DeviceMemoryResource(d).allocate(4000, s);
    b.copy_from(std::span<const float>(host), s);
    std::vector<float> out(1000);
    b.copy_to(std::span<float>(out), s);
    s.sync();
    EXPECT_EQ(out, host);
    b.close(s);
    s.sync();
  }
  // cucore never destroyed it: the raw handle is still valid.
  EXPECT_EQ(detail::driver().cuStreamQuery(raw), CUDA_SUCCESS);
  EXPECT_EQ(detail::driver().cuStreamDestroy(raw), CUDA_SUCCESS);
}

TEST(GpuStream, PriorityAndDefaultStreams) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  int least = 0, greatest = 0;
  ASSERT_EQ(detail::driver().cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
  Stream hi = d.create_stream({.priority = greatest});
  EXPECT_EQ(hi.priority(), greatest);
  Stream blocking = d.create_stream({.nonblocking = false});
  EXPECT_FALSE(blocking.is_nonblocking());
  StreamRef legacy = Stream::legacy_default();
  Buffer b = DeviceMemoryResource(d).allocate(1024, legacy);
  b.fill(std::uint8_t{3}, legacy);
  legacy.sync();
  Stream::per_thread_default().sync();
  EXPECT_NE(hi.id(), blocking.id());
}

TEST(GpuStream, EightThreadsEachWithItsOwnStream) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        d.set_current();
        Stream s = d.create_stream();
        DeviceMemoryResource mr(d);
        for (int iter = 0; iter < 20; ++iter) {
          const size_t n = 65536 + size_t(t) * 1000 + size_t(iter);
          auto host = random_floats(n, unsigned(t * 100 + iter));
          Buffer a = mr.allocate(n * 4, s);
          Buffer b = mr.allocate(n * 4, s);
          a.copy_from(std::span<const float>(host), s);
          b.copy_from(a, s);
          std::vector<float> out(n);
          b.copy_to(std::span<float>(out), s);
          s.sync();
          if (out != host) ++failures;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(GpuMemory, OutOfMemoryIsCudaErrorAndTheNextAllocationWorks) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  DeviceMemoryResource mr(d);
  const size_t too_much = d.properties().total_memory() * 2;
  try {
    Buffer b = mr.allocate(too_much, s);
    s.sync();
    FAIL() << "allocating " << too_much << " bytes succeeded";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_OUT_OF_MEMORY) << e.what();
  }
  Buffer ok = mr.allocate(size_t(1) << 20, s);
  ok.fill(std::uint8_t{1}, s);
  s.sync();
  EXPECT_FALSE(ok.is_closed());
  ok.close();
  s.sync();
  mr.trim_to(0);  // nothing of the failed attempt stays reserved for later tests
}

TEST(GpuMemory, UseAfterCloseThrowsDoubleCloseIsHarmless) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  Buffer b = DeviceMemoryResource(d).allocate(4096, s);
  b.close();
  EXPECT_NO_THROW(b.close());
  EXPECT_NO_THROW(b.close(s));
  std::vector<std::byte> host(4096);
  EXPECT_THROW(b.copy_to(std::span<std::byte>(host), s), std::logic_error);
  s.sync();
}

TEST(GpuMemory, AdaptorsOverARealPool) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  LimitingResourceAdaptor limited(DeviceMemoryResource(d), size_t(3) << 20);
  Buffer a = limited.allocate(size_t(2) << 20, s);
  EXPECT_THROW(limited.allocate(size_t(2) << 20, s), CudaError);
  Buffer b = limited.allocate(size_t(1) << 20, s);
  b.fill(std::uint8_t{7}, s);
  s.sync();
}
