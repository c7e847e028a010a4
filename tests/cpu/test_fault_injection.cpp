// The object model against a fake driver table: error paths (out of memory,
// driver too old, device lost) and bookkeeping, on machines without a GPU.
// The fake's "device memory" is host memory, so copies and fills really move
// bytes and can be checked.
#include <cucore/adaptors.hpp>
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/log.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/fake_driver.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

namespace {
std::vector<std::uint32_t> random_words(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint32_t> v(n);
  for (auto& x : v) x = rng() | 1u;  // never zero
  return v;
}
}  // namespace

TEST(FakeDriverTest, DeviceOutOfRangeNamesTheCount) {
  FakeDriver fake;
  EXPECT_EQ(Device::count(), 1);
  try {
    Device d(99);
    FAIL() << "Device(99) did not throw";
  } catch (const std::out_of_range& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("99"), std::string::npos) << what;
    EXPECT_NE(what.find("1 CUDA device"), std::string::npos) << what;
  }
  EXPECT_THROW(Device(-1), std::out_of_range);
  Device d(0);
  EXPECT_EQ(d.ordinal(), 0);
  EXPECT_EQ(d.arch(), "90");
  EXPECT_EQ(d.compute_capability(), (ComputeCapability{9, 0}));
  EXPECT_EQ(d.properties().multiprocessor_count(), 132);
  EXPECT_EQ(d.name(), "Fake H200");
}

TEST(FakeDriverTest, AttributesAreReadOnceThenCached) {
  FakeDriver fake;
  static std::atomic<int> reads{0};
  reads = 0;
  fake.table.cuDeviceGetAttribute = [](int* v, CUdevice_attribute, CUdevice) {
    ++reads;
    *v = 77;
    return CUDA_SUCCESS;
  };
  Device d(0);
  EXPECT_EQ(d.properties().warp_size(), 77);
  EXPECT_EQ(d.properties().warp_size(), 77);
  EXPECT_EQ(Device(0).properties().warp_size(), 77);
  EXPECT_EQ(reads.load(), 1);
}

TEST(FakeDriverTest, PoolOutOfMemoryIsCudaErrorAndThePoolServesTheNextRequest) {
  FakeDriver fake;
  Device d(0);
  Stream s = d.create_stream();
  DeviceMemoryResource mr(d);
  FakeDriver::fail_next_pool_allocs = 1;
  try {
    auto b = mr.allocate(1 << 20, s);
    FAIL() << "allocation did not fail";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(e.call(), "cuMemAllocFromPoolAsync");
  }
  EXPECT_EQ(FakeDriver::pool_allocs.load(), 0);
  {
    Buffer b = mr.allocate(1 << 20, s);
    EXPECT_EQ(b.size(), size_t(1) << 20);
    EXPECT_NE(b.handle(), 0u);
    EXPECT_EQ(FakeDriver::pool_allocs.load(), 1);
  }
  EXPECT_EQ(FakeDriver::pool_frees.load(), 1);  // the destructor freed it
}

TEST(FakeDriverTest, DriverTooOldForPoolsIsFeatureUnavailable) {
  FakeDriver fake;
  fake.table.version = 11000;
  fake.table.cuMemAllocFromPoolAsync = nullptr;
  try {
    DeviceMemoryResource mr(0);
    FAIL() << "no throw";
  } catch (const FeatureUnavailableError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("memory pools"), std::string::npos) << what;
    EXPECT_NE(what.find("CUDA driver 11.2"), std::string::npos) << what;
    EXPECT_NE(what.find("11.0"), std::string::npos) << what;  // the driver we have
  }
}

TEST(FakeDriverTest, DeviceLostSurfacesAsCudaErrorAndObjectsStayDestructible) {
  FakeDriver fake;
  const auto working_free = fake.table.cuMemFreeAsync;
  fake.table.cuStreamSynchronize = [](CUstream) { return CUDA_ERROR_DEVICE_UNAVAILABLE; };
  fake.table.cuMemFreeAsync = [](CUdeviceptr, CUstream) { return CUDA_ERROR_DEVICE_UNAVAILABLE; };
  Device d(0);
  Stream s = d.create_stream();
  try {
    s.sync();
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.name(), "CUDA_ERROR_DEVICE_UNAVAILABLE");
    EXPECT_EQ(e.call(), "cuStreamSynchronize");
  }
  DeviceMemoryResource mr(d);
  Buffer b = mr.allocate(256, s);
  // close() reports the failure and keeps ownership, so nothing is lost...
  EXPECT_THROW(b.close(), CudaError);
  EXPECT_FALSE(b.is_closed());
  // ...and once the device is back the same buffer frees normally.
  fake.table.cuMemFreeAsync = working_free;
  EXPECT_NO_THROW(b.close());
  EXPECT_TRUE(b.is_closed());
}

TEST(FakeDriverTest, BufferDestructorNeverThrows) {
  FakeDriver fake;
  fake.table.cuMemFreeAsync = [](CUdeviceptr, CUstream) { return CUDA_ERROR_LAUNCH_FAILED; };
  Stream s = Device(0).create_stream();
  EXPECT_NO_THROW({
    Buffer b = DeviceMemoryResource(0).allocate(64, s);
    (void)b;
  });
}

TEST(FakeDriverTest, CopiesRoundTripRandomData) {
  FakeDriver fake;
  Device d(0);
  Stream s = d.create_stream();
  DeviceMemoryResource mr(d);
  const size_t n = 4096;
  auto host = random_words(n, 7);
  Buffer a = mr.allocate(n * 4, s);
  Buffer b = mr.allocate(n * 4, s);
  a.copy_from(std::span<const std::uint32_t>(host), s);
  b.copy_from(a, s);
  Buffer c = b.copy_to(s);  // a new buffer from the same resource
  EXPECT_EQ(c.memory_resource(), mr);
  std::vector<std::uint32_t> out(n, 0);
  c.copy_to(std::span<std::uint32_t>(out), s);
  s.sync();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], host[i]) << "element " << i;
}

TEST(FakeDriverTest, CopySizeMismatchNamesBothSizes) {
  FakeDriver fake;
  Stream s = Device(0).create_stream();
  DeviceMemoryResource mr(0);
  Buffer a = mr.allocate(100, s), b = mr.allocate(200, s);
  try {
    a.copy_to(b, s);
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("100"), std::string::npos);
    EXPECT_NE(what.find("200"), std::string::npos);
  }
  std::vector<std::byte> host(99);
  EXPECT_THROW(a.copy_from(std::span<const std::byte>(host), s), std::invalid_argument);
  EXPECT_THROW(a.copy_to(std::span<std::byte>(host), s), std::invalid_argument);
}

TEST(FakeDriverTest, FillPatternsAndWidthChecks) {
  FakeDriver fake;
  // The fake implements 8-bit memset directly; 16/32 go through these.
  fake.table.cuMemsetD16Async = [](CUdeviceptr d, unsigned short v, size_t n, CUstream) {
    auto* p = reinterpret_cast<unsigned short*>(d);
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return CUDA_SUCCESS;
  };
  fake.table.cuMemsetD32Async = [](CUdeviceptr d, unsigned v, size_t n, CUstream) {
    auto* p = reinterpret_cast<unsigned*>(d);
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return CUDA_SUCCESS;
  };
  Stream s = Device(0).create_stream();
  DeviceMemoryResource mr(0);
  Buffer b = mr.allocate(1024, s);
  b.fill(std::uint32_t{0xdeadbeef}, s);
  std::vector<std::uint32_t> w(256);
  b.copy_to(std::span<std::uint32_t>(w), s);
  for (auto x : w) ASSERT_EQ(x, 0xdeadbeefu);
  b.fill(std::uint16_t{0xa5c3}, s);
  std::vector<std::uint16_t> h(512);
  b.copy_to(std::span<std::uint16_t>(h), s);
  for (auto x : h) ASSERT_EQ(x, 0xa5c3u);
  b.fill(std::uint8_t{0x5a}, s);
  std::vector<std::uint8_t> c(1024);
  b.copy_to(std::span<std::uint8_t>(c), s);
  for (auto x : c) ASSERT_EQ(x, 0x5au);
  Buffer odd = mr.allocate(1023, s);
  EXPECT_THROW(odd.fill(std::uint16_t{1}, s), std::invalid_argument);
  EXPECT_THROW(odd.fill(std::uint32_t{1}, s), std::invalid_argument);
}

TEST(FakeDriverTest, UseAfterCloseThrowsAndDoubleCloseIsHarmless) {
  FakeDriver fake;
  Stream s = Device(0).create_stream();
  Buffer b = DeviceMemoryResource(0).allocate(64, s);
  b.close();
  EXPECT_TRUE(b.is_closed());
  EXPECT_NO_THROW(b.close());
  EXPECT_EQ(FakeDriver::pool_frees.load(), 1);
  std::vector<std::byte> host(64);
  EXPECT_THROW(b.copy_to(std::span<std::byte>(host), s), std::logic_error);
  EXPECT_THROW(b.fill(std::uint8_t{1}, s), std::logic_error);
  EXPECT_THROW(b.device_id(), std::logic_error);
}

TEST(FakeDriverTest, StreamsAreDestroyedExactlyOnce) {
  FakeDriver fake;
  {
    Stream a = Device(0).create_stream();
    Stream b = std::move(a);
    Stream c = Device(0).create_stream();
    c = std::move(b);  // c's first stream is destroyed here
    EXPECT_EQ(FakeDriver::streams_destroyed.load(), 1);
    c.close();
    c.close();
  }
  EXPECT_EQ(FakeDriver::streams_created.load(), 2);
  EXPECT_EQ(FakeDriver::streams_destroyed.load(), 2);
}

TEST(FakeDriverTest, StreamPriorityOutsideTheRangeIsRefused) {
  FakeDriver fake;  // range [-5, 0]
  EXPECT_NO_THROW(Device(0).create_stream({.priority = -5}));
  try {
    Device(0).create_stream({.priority = 3});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("priority = 3"), std::string::npos) << e.what();
  }
}

TEST(FakeDriverTest, ElapsedTimeNeedsTimingOnBothEvents) {
  FakeDriver fake;
  Event timed = Device(0).create_event({.timing_enabled = true});
  Event untimed = Device(0).create_event();
  try {
    (void)(untimed - timed);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("end event"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)(timed - untimed), std::invalid_argument);
  EXPECT_THROW(Device(0).create_event({.timing_enabled = true, .ipc_enabled = true}), std::invalid_argument);
}

TEST(FakeDriverTest, StatisticsAdaptorCounts) {
  FakeDriver fake;
  Stream s = Device(0).create_stream();
  StatisticsResourceAdaptor stats(DeviceMemoryResource(0));
  {
    Buffer a = stats.allocate(1000, s);
    Buffer b = stats.allocate(24, s);
    auto c = stats.counts();
    EXPECT_EQ(c.current_bytes, 1024);
    EXPECT_EQ(c.current_count, 2);
    a.close();
    c = stats.counts();
    EXPECT_EQ(c.current_bytes, 24);
    EXPECT_EQ(c.peak_bytes, 1024);
  }
  auto c = stats.counts();
  EXPECT_EQ(c.current_bytes, 0);
  EXPECT_EQ(c.total_bytes, 1024);
  EXPECT_EQ(c.total_count, 2);
  EXPECT_EQ(c.peak_count, 2);
}

TEST(FakeDriverTest, LimitingAdaptorRefusesPastTheLimitAndStaysUsable) {
  FakeDriver fake;
  Stream s = Device(0).create_stream();
  LimitingResourceAdaptor limited(StatisticsResourceAdaptor(DeviceMemoryResource(0)), 1000);
  Buffer a = limited.allocate(600, s);
  try {
    Buffer b = limited.allocate(500, s);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_NE(std::string(e.what()).find("limit 1000"), std::string::npos) << e.what();
  }
  EXPECT_EQ(limited.allocated_bytes(), 600u);
  Buffer c = limited.allocate(400, s);
  EXPECT_EQ(limited.allocated_bytes(), 1000u);
  a.close();
  EXPECT_EQ(limited.allocated_bytes(), 400u);
}

TEST(FakeDriverTest, MemoryResourcesAreSharedHandles) {
  FakeDriver fake;
  DeviceMemoryResource a(0), b(Device(0));
  EXPECT_EQ(a, b);  // the device's pool: one state
  EXPECT_FALSE(a.owns_pool());
  DeviceMemoryResource own(0, DeviceMemoryResourceOptions{});
  EXPECT_FALSE(own == a);
  EXPECT_TRUE(own.owns_pool());
  MemoryResource erased = own;  // copies share the pool
  EXPECT_EQ(erased, own);
  EXPECT_TRUE(erased.is_device_accessible());
  EXPECT_EQ(erased.device_id(), 0);
  Stream s = Device(0).create_stream();
  Buffer buf = erased.allocate(8, s);
  EXPECT_EQ(buf.memory_resource(), own);
  MemoryResource empty;
  EXPECT_THROW(empty.allocate(8, s), std::logic_error);
}

// A release that fails where nothing can throw (a destructor) is reported
// through the log hook as a release failure naming the call and the error;
// CUDA_ERROR_DEINITIALIZED (the driver shutting down) and successes are not.
TEST(FakeDriverTest, FailedReleasesInDestructorsAreReported) {
  FakeDriver fake;
  std::vector<std::string> reports;
  LogHandler previous = set_log_handler([&reports](LogLevel level, std::string_view m) {
    if (level == LogLevel::release_failure) reports.emplace_back(m);
  });
  {
    Stream ok = Device(0).create_stream();
    Event e = Device(0).create_event();
  }
  EXPECT_TRUE(reports.empty()) << reports.front();

  const auto working_destroy = fake.table.cuStreamDestroy;
  fake.table.cuStreamDestroy = [](CUstream) { return CUDA_ERROR_INVALID_HANDLE; };
  { Stream s = Device(0).create_stream(); }
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("cuStreamDestroy failed: CUDA_ERROR_INVALID_HANDLE"), std::string::npos) << reports[0];
  fake.table.cuStreamDestroy = working_destroy;

  fake.table.cuEventDestroy = [](CUevent) { return CUDA_ERROR_DEINITIALIZED; };
  { Event e = Device(0).create_event(); }
  EXPECT_EQ(reports.size(), 1u) << reports.back();

  fake.table.cuMemFreeAsync = [](CUdeviceptr, CUstream) { return CUDA_ERROR_LAUNCH_FAILED; };
  Stream s = Device(0).create_stream();
  EXPECT_NO_THROW({ Buffer b = DeviceMemoryResource(0).allocate(64, s); });
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_NE(reports[1].find("freeing a Buffer's memory"), std::string::npos) << reports[1];
  EXPECT_NE(reports[1].find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << reports[1];
  set_log_handler(previous);
}
