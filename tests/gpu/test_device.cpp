// Devices and their primary contexts on a real GPU: properties, identity, and
// set_current() making the context the runtime API and other libraries use.
#include <cucore/context.hpp>
#include <cucore/device.hpp>

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "common/gpu.hpp"
#include "loader/driver.hpp"

using namespace cucore;

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
