// Streams and events on a real GPU: ordering across streams, timing, streams
// adopted from the raw driver, priorities and the default streams, threads each
// with its own stream.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "common/gpu.hpp"
#include "common/random.hpp"
#include "loader/driver.hpp"

using namespace cucore;

using test::random_floats;

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
