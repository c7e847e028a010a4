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

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "common/gpu.hpp"
#include "common/random.hpp"
#include "loader/driver.hpp"

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
  host_accessible_round_trip(ManagedMemoryResource());
  host_accessible_round_trip(ManagedMemoryResource(ManagedMemoryResourceOptions{.preferred_location = 0}));
}

namespace {
// A managed pool's allocation, as cuda.core makes it: stream-ordered from the
// pool (the pointer's pool is the resource's), managed memory, written from the
// host after a sync, read on the device (copied to device memory and back),
// every element checked; the pool's attributes count it while it is held.
void managed_pool_round_trip(const ManagedMemoryResource& mr, std::uint32_t seed) {
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  ASSERT_TRUE(mr.is_managed());
  ASSERT_TRUE(mr.is_host_accessible());
  ASSERT_TRUE(mr.is_device_accessible());
  ASSERT_NE(mr.handle(), nullptr);
  const size_t n = (size_t(1) << 20) + 5;
  const auto host = random_floats(n, seed);
  d.sync();  // earlier frees on other streams done: the pool's figures hold still
  const MemoryPoolAttributes before = mr.attributes();
  std::uint64_t held = 0;
  {
    Buffer m = mr.allocate(n * 4, s);
    s.sync();
    const auto& dr = detail::driver();
    CUmemoryPool from = nullptr;
    ASSERT_EQ(dr.cuPointerGetAttribute(&from, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, m.handle()), CUDA_SUCCESS);
    EXPECT_EQ(from, mr.handle()) << "not allocated from the resource's pool";
    int managed = 0;
    ASSERT_EQ(dr.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m.handle()), CUDA_SUCCESS);
    EXPECT_EQ(managed, 1);
    EXPECT_TRUE(m.is_managed());
    EXPECT_TRUE(m.is_host_accessible());
    const MemoryPoolAttributes during = mr.attributes();
    EXPECT_GE(during.used_mem_current, before.used_mem_current + n * 4);
    EXPECT_GE(during.reserved_mem_current, during.used_mem_current);
    EXPECT_GE(during.used_mem_high, n * 4);
    held = during.used_mem_current;
    std::memcpy(m.data(), host.data(), n * 4);
    Buffer dev = DeviceMemoryResource(d).allocate(n * 4, s);
    dev.copy_from(m, s);
    std::vector<float> out(n, std::nanf(""));
    dev.copy_to(std::span<float>(out), s);
    s.sync();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], host[i]) << i;
  }
  s.sync();  // the free is stream-ordered
  EXPECT_LE(mr.attributes().used_mem_current + n * 4, held);
}
}  // namespace

TEST(GpuMemory, ManagedMemoryResourceIsAPool) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  if (!d.properties().attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS))
    GTEST_SKIP() << "the default managed pool needs concurrent managed access";
  // No options: the driver's current managed pool, not owned.
  ManagedMemoryResource current;
  EXPECT_FALSE(current.owns_pool());
  EXPECT_FALSE(current.preferred_location());
  EXPECT_EQ(current.device_id(), -1);
  CUmemLocation none{};
  none.type = CU_MEM_LOCATION_TYPE_NONE;
  none.id = -1;
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(detail::driver().cuMemGetMemPool(&pool, &none, CU_MEM_ALLOCATION_TYPE_MANAGED), CUDA_SUCCESS);
  EXPECT_EQ(current.handle(), pool);
  EXPECT_EQ(ManagedMemoryResource().handle(), pool);
  managed_pool_round_trip(current, 21);
  current.close();  // not its own: no effect
  EXPECT_FALSE(current.is_closed());
  EXPECT_EQ(current.handle(), pool);
  managed_pool_round_trip(current, 22);

  // Options: a pool of its own at each preferred location.
  const std::pair<std::optional<int>, const char*> locations[] = {
      {std::nullopt, ""}, {0, ""}, {-1, ""}, {std::nullopt, "host"}, {0, "device"}};
  for (const auto& [location, type] : locations) {
    ManagedMemoryResourceOptions o;
    o.preferred_location = location;
    o.preferred_location_type = type;
    ManagedMemoryResource own(o);
    EXPECT_TRUE(own.owns_pool());
    EXPECT_NE(own.handle(), pool);
    EXPECT_EQ(own.device_id(), o.preferred_location == 0 ? 0 : -1);
    managed_pool_round_trip(own, 23 + static_cast<std::uint32_t>(o.preferred_location.value_or(7)));
  }
}

TEST(GpuMemory, ClosedManagedPoolRefusesAllocationAndItsBuffersKeepIt) {
  CUCORE_REQUIRE_GPU();
  Device d(0);
  d.set_current();
  Stream s = d.create_stream();
  ManagedMemoryResource own(ManagedMemoryResourceOptions{.preferred_location = 0});
  const size_t n = 4099;
  const auto host = random_floats(n, 31);
  Buffer kept = own.allocate(n * 4, s);
  s.sync();
  std::memcpy(kept.data(), host.data(), n * 4);
  own.close();
  EXPECT_TRUE(own.is_closed());
  EXPECT_EQ(own.handle(), nullptr);
  EXPECT_THROW(own.allocate(64, s), std::logic_error);
  EXPECT_THROW(own.attributes(), ClosedError);
  EXPECT_NO_THROW(own.close());
  // The Buffer holds the pool: its memory stays good until it is freed.
  Buffer dev = DeviceMemoryResource(d).allocate(n * 4, s);
  dev.copy_from(kept, s);
  std::vector<float> out(n, std::nanf(""));
  dev.copy_to(std::span<float>(out), s);
  s.sync();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], host[i]) << i;
  kept.close();
  s.sync();
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
