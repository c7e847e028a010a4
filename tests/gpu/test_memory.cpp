// Memory resources and buffers on a real GPU: pools and their attributes,
// copies and fills, pinned, legacy pinned and managed memory, out of memory,
// use after close, adaptors over a real pool.
#include <cucore/adaptors.hpp>
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/gpu.hpp"
#include "common/random.hpp"

using namespace cucore;

using test::random_floats;

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
