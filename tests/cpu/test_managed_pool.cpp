// ManagedMemoryResource as cuda.core 1.2 makes it, against the fake driver: a
// stream-ordered managed memory pool, the driver's current one (no options,
// not owned) or one of its own (options, owned), with the pool properties each
// option form gives; stream-ordered allocation and free; the pool attributes;
// close() and the pool's release; the typed error where the driver has no
// managed pools. And ObjectCode::get_module (cuLibraryGetModule).
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/ipc.hpp>
#include <cucore/errors.hpp>
#include <cucore/kernel.hpp>
#include <cucore/log.hpp>
#include <cucore/managed.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/fake_driver.hpp"
#include "memory/pool_impl.hpp"
#include "runtime/device_state.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

namespace {

// What the fakes below saw.
struct Seen {
  int get_pool_calls = 0;
  CUmemLocation get_pool_location{};
  CUmemAllocationType get_pool_type{};
  int create_calls = 0;
  CUmemPoolProps props{};
  std::vector<CUmemoryPool> attribute_pools;
  int set_attribute_calls = 0;
};
Seen g_seen;

// Records what cuMemGetMemPool and cuMemPoolCreate are asked, then does what the fake does.
void record_pool_calls(FakeDriver& fake) {
  g_seen = {};
  static CUresult (*get_pool)(CUmemoryPool*, CUmemLocation*, CUmemAllocationType);
  static CUresult (*create)(CUmemoryPool*, const CUmemPoolProps*);
  get_pool = fake.table.cuMemGetMemPool;
  create = fake.table.cuMemPoolCreate;
  fake.table.cuMemGetMemPool = [](CUmemoryPool* p, CUmemLocation* where, CUmemAllocationType type) {
    ++g_seen.get_pool_calls;
    g_seen.get_pool_location = *where;
    g_seen.get_pool_type = type;
    return get_pool(p, where, type);
  };
  fake.table.cuMemPoolCreate = [](CUmemoryPool* p, const CUmemPoolProps* props) {
    ++g_seen.create_calls;
    g_seen.props = *props;
    return create(p, props);
  };
  fake.table.cuMemPoolSetAttribute = [](CUmemoryPool, CUmemPool_attribute, void*) {
    ++g_seen.set_attribute_calls;
    return CUDA_SUCCESS;
  };
}

CUmemoryPool current_managed_pool(FakeDriver& fake) {
  CUmemLocation none{};
  none.type = CU_MEM_LOCATION_TYPE_NONE;
  none.id = -1;
  CUmemoryPool pool = nullptr;
  EXPECT_EQ(fake.table.cuMemGetMemPool(&pool, &none, CU_MEM_ALLOCATION_TYPE_MANAGED), CUDA_SUCCESS);
  return pool;
}

}  // namespace

TEST(ManagedPool, NoOptionsIsTheDriversCurrentManagedPoolNotOwned) {
  FakeDriver fake;
  record_pool_calls(fake);
  const CUmemoryPool current = current_managed_pool(fake);
  g_seen = {};
  {
    Stream s = Device(0).create_stream();
    ManagedMemoryResource mr;
    EXPECT_EQ(g_seen.get_pool_calls, 1);
    EXPECT_EQ(g_seen.get_pool_type, CU_MEM_ALLOCATION_TYPE_MANAGED);
    EXPECT_EQ(g_seen.get_pool_location.type, CU_MEM_LOCATION_TYPE_NONE);  // no preferred location
    EXPECT_EQ(g_seen.create_calls, 0);
    EXPECT_EQ(g_seen.set_attribute_calls, 0) << "the shared pool's attributes are left as they are, as cuda.core";
    EXPECT_EQ(mr.handle(), current);
    EXPECT_FALSE(mr.owns_pool());
    EXPECT_FALSE(mr.is_closed());
    EXPECT_FALSE(mr.preferred_location());
    EXPECT_TRUE(mr.is_managed());
    EXPECT_TRUE(mr.is_device_accessible());
    EXPECT_TRUE(mr.is_host_accessible());
    EXPECT_EQ(mr.device_id(), -1);

    // Stream-ordered from that pool, freed on the stream.
    Buffer b = mr.allocate(4096, s);
    EXPECT_EQ(FakeDriver::pool_allocs.load(), 1);
    {
      std::lock_guard lock(FakeDriver::live_mutex);
      ASSERT_EQ(FakeDriver::live.count(b.handle()), 1u);
      EXPECT_EQ(FakeDriver::live[b.handle()].pool, current);
    }
    EXPECT_TRUE(b.is_managed());
    EXPECT_TRUE(b.is_host_accessible());
    EXPECT_EQ(b.device_id(), -1);
    ManagedBuffer mb(std::move(b));  // managed memory, as ManagedBuffer requires
    mb.close();
    EXPECT_EQ(FakeDriver::pool_frees.load(), 1);
    ASSERT_FALSE(FakeDriver::releases.empty());
    EXPECT_NE(FakeDriver::releases.back().find("free "), std::string::npos) << FakeDriver::releases.back();

    mr.close();  // not its own: no effect
    EXPECT_FALSE(mr.is_closed());
    EXPECT_EQ(mr.handle(), current);
    mr.allocate(64, s).close();
    EXPECT_EQ(FakeDriver::pool_allocs.load(), 2);
  }
  EXPECT_EQ(FakeDriver::pools_destroyed.load(), 0) << "the driver's pool is never destroyed by cucore";
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(ManagedPool, OptionsMakeAnOwnedManagedPoolAtEachPreferredLocation) {
  FakeDriver fake;
  FakeDriver::device_count = 2;
  fake.table.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) {
    *v = a == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID                 ? 1  // the current device's NUMA node
         : a == CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS ? 1
         : a == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED    ? 1
                                                              : 0;
    return CUDA_SUCCESS;
  };
  record_pool_calls(fake);
  struct Case {
    ManagedMemoryResourceOptions options;
    CUmemLocationType type;
    int id;
    std::optional<ManagedLocation> preferred;
    int device_id;
  };
  std::vector<Case> cases;
  auto add = [&cases](std::optional<int> location, const char* location_type, CUmemLocationType type, int id,
                      const char* preferred_type, std::optional<int> preferred_id, int device_id) {
    Case c;
    c.options.preferred_location = location;
    c.options.preferred_location_type = location_type;
    c.type = type;
    c.id = id;
    if (preferred_type) c.preferred = ManagedLocation{preferred_type, preferred_id};
    c.device_id = device_id;
    cases.push_back(std::move(c));
  };
  add(std::nullopt, "", CU_MEM_LOCATION_TYPE_NONE, -1, nullptr, std::nullopt, -1);
  add(1, "", CU_MEM_LOCATION_TYPE_DEVICE, 1, "device", 1, 1);
  add(0, "device", CU_MEM_LOCATION_TYPE_DEVICE, 0, "device", 0, 0);
  add(-1, "", CU_MEM_LOCATION_TYPE_HOST, -1, "host", std::nullopt, -1);
  add(std::nullopt, "host", CU_MEM_LOCATION_TYPE_HOST, -1, "host", std::nullopt, -1);
  add(3, "host_numa", CU_MEM_LOCATION_TYPE_HOST_NUMA, 3, "host_numa", 3, -1);
  add(std::nullopt, "host_numa", CU_MEM_LOCATION_TYPE_HOST_NUMA, 1, "host_numa", 1, -1);  // the current device's
  {
    Stream s = Device(0).create_stream();
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      g_seen = {};
      const int made = FakeDriver::pools_created.load();
      {
        ManagedMemoryResource mr(c.options);
        EXPECT_EQ(g_seen.get_pool_calls, 0) << i;
        ASSERT_EQ(g_seen.create_calls, 1) << i;
        EXPECT_EQ(g_seen.props.allocType, CU_MEM_ALLOCATION_TYPE_MANAGED) << i;
        EXPECT_EQ(g_seen.props.handleTypes, CU_MEM_HANDLE_TYPE_NONE) << i << ": no IPC";
        EXPECT_EQ(g_seen.props.location.type, c.type) << i;
        EXPECT_EQ(g_seen.props.location.id, c.id) << i;
        EXPECT_EQ(g_seen.props.maxSize, 0u) << i;
        EXPECT_EQ(FakeDriver::pools_created.load(), made + 1) << i;
        EXPECT_TRUE(mr.owns_pool()) << i;
        EXPECT_NE(mr.handle(), nullptr) << i;
        EXPECT_EQ(mr.preferred_location(), c.preferred) << i;
        EXPECT_EQ(mr.device_id(), c.device_id) << i;
        EXPECT_TRUE(mr.is_managed() && mr.is_host_accessible() && mr.is_device_accessible()) << i;
        Buffer b = mr.allocate(256, s);
        {
          std::lock_guard lock(FakeDriver::live_mutex);
          EXPECT_EQ(FakeDriver::live[b.handle()].pool, mr.handle()) << i;
        }
        EXPECT_EQ(b.device_id(), c.device_id) << i;
      }
      EXPECT_EQ(FakeDriver::pools_destroyed.load(), made + 1) << i << ": an owned pool goes with its last share";
    }
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(ManagedPool, BadPreferredLocationsAreRefusedBeforeAnyPool) {
  FakeDriver fake;
  record_pool_calls(fake);
  const std::pair<std::optional<int>, const char*> bad[] = {
      {std::nullopt, "device"}, {0, "host"}, {-2, "host_numa"}, {std::nullopt, "gpu"}, {-5, ""}};
  for (const auto& [location, type] : bad) {
    ManagedMemoryResourceOptions o;
    o.preferred_location = location;
    o.preferred_location_type = type;
    EXPECT_THROW(ManagedMemoryResource{o}, std::invalid_argument) << type;
  }
  EXPECT_THROW(ManagedMemoryResource(ManagedMemoryResourceOptions{.preferred_location = 7}), std::out_of_range);
  EXPECT_EQ(g_seen.create_calls, 0);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(ManagedPool, CloseDropsAnOwnedPoolOnceItsBuffersAreFreed) {
  FakeDriver fake;
  {
    Stream s = Device(0).create_stream();
    std::optional<ManagedMemoryResource> mr(ManagedMemoryResourceOptions{.preferred_location = 0});
    const CUmemoryPool pool = mr->handle();
    Buffer kept = mr->allocate(1024, s);
    ManagedMemoryResource copy = *mr;  // another share of the same pool
    mr->close();
    EXPECT_TRUE(mr->is_closed());
    EXPECT_EQ(mr->handle(), nullptr);
    EXPECT_FALSE(mr->owns_pool());
    EXPECT_THROW(mr->allocate(16, s), std::logic_error);
    EXPECT_THROW(mr->attributes(), ClosedError);
    EXPECT_NO_THROW(mr->close());  // idempotent
    EXPECT_FALSE(copy.is_closed()) << "close() drops this resource's share only";
    EXPECT_EQ(copy.handle(), pool);
    copy.close();
    EXPECT_EQ(FakeDriver::pools_destroyed.load(), 0) << "the Buffer still holds the pool";
    std::memset(kept.data(), 0x5a, 1024);  // its memory stays usable
    kept.close();
    EXPECT_EQ(FakeDriver::pools_destroyed.load(), 1);
    ASSERT_GE(FakeDriver::releases.size(), 2u);
    const auto& r = FakeDriver::releases;
    EXPECT_EQ(r[r.size() - 2].rfind("free ", 0), 0u) << r[r.size() - 2];
    EXPECT_EQ(r.back().rfind("pool ", 0), 0u) << "the pool goes after its allocation's free: " << r.back();
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

namespace {
// Distinct values per attribute, for the pool the test made.
std::map<int, std::uint64_t> g_attr_values;
CUmemoryPool g_attr_pool = nullptr;
}  // namespace

TEST(ManagedPool, AttributesReadTheResourcesPool) {
  FakeDriver fake;
  fake.table.cuMemPoolGetAttribute = [](CUmemoryPool pool, CUmemPool_attribute a, void* v) {
    if (pool != g_attr_pool) return CUDA_ERROR_INVALID_HANDLE;
    const std::uint64_t value = g_attr_values.at(static_cast<int>(a));
    if (a == CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES || a == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ||
        a == CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
      *static_cast<int*>(v) = static_cast<int>(value);
    else
      *static_cast<cuuint64_t*>(v) = value;
    return CUDA_SUCCESS;
  };
  std::mt19937_64 rng(26);
  for (int round = 0; round < 2; ++round) {
    std::optional<ManagedMemoryResource> mr;
    if (round == 0) mr.emplace();
    else mr.emplace(ManagedMemoryResourceOptions{.preferred_location = 0});
    g_attr_pool = mr->handle();
    for (CUmemPool_attribute a : {CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                                  CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                                  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD})
      g_attr_values[a] = rng() | 1;
    g_attr_values[CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = round;
    g_attr_values[CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC] = 1 - round;
    g_attr_values[CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES] = round;
    const MemoryPoolAttributes got = mr->attributes();
    EXPECT_EQ(got.reserved_mem_current, g_attr_values[CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT]);
    EXPECT_EQ(got.reserved_mem_high, g_attr_values[CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH]);
    EXPECT_EQ(got.used_mem_current, g_attr_values[CU_MEMPOOL_ATTR_USED_MEM_CURRENT]);
    EXPECT_EQ(got.used_mem_high, g_attr_values[CU_MEMPOOL_ATTR_USED_MEM_HIGH]);
    EXPECT_EQ(got.release_threshold, g_attr_values[CU_MEMPOOL_ATTR_RELEASE_THRESHOLD]);
    EXPECT_EQ(got.reuse_follow_event_dependencies, round == 1);
    EXPECT_EQ(got.reuse_allow_opportunistic, round == 0);
    EXPECT_EQ(got.reuse_allow_internal_dependencies, round == 1);
  }
  g_attr_pool = nullptr;
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(ManagedPool, ADriverWithoutManagedPoolsIsAFeatureUnavailableErrorNotAFallback) {
  FakeDriver fake;
  record_pool_calls(fake);
  auto expect_unavailable = [](auto make) {
    try {
      make();
      ADD_FAILURE() << "no FeatureUnavailableError";
    } catch (const FeatureUnavailableError& e) {
      EXPECT_NE(std::string(e.what()).find("ManagedMemoryResource"), std::string::npos) << e.what();
      EXPECT_NE(e.requirement().find("13.0"), std::string::npos) << e.what();
    }
  };
  fake.table.cuMemGetMemPool = nullptr;  // a CUDA 12 driver: no managed pools
  expect_unavailable([] { ManagedMemoryResource mr; });
  expect_unavailable([] { ManagedMemoryResource mr(ManagedMemoryResourceOptions{.preferred_location = 0}); });
  record_pool_calls(fake);  // the entry point is back...
  fake.table.version = 12080;  // ...but the driver is older
  g_seen = {};
  expect_unavailable([] { ManagedMemoryResource mr; });
  expect_unavailable([] { ManagedMemoryResource mr(ManagedMemoryResourceOptions{}); });
  EXPECT_EQ(g_seen.create_calls, 0);
  EXPECT_EQ(g_seen.get_pool_calls, 0);
  EXPECT_EQ(FakeDriver::pool_allocs.load(), 0);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(ManagedPool, TheDefaultPoolRefusedWithoutConcurrentManagedAccessSaysSo) {
  FakeDriver fake;
  fake.table.cuMemGetMemPool = [](CUmemoryPool*, CUmemLocation*, CUmemAllocationType) {
    return CUDA_ERROR_NOT_SUPPORTED;
  };
  // With concurrent managed access the driver's error is the error...
  try {
    ManagedMemoryResource mr;
    ADD_FAILURE() << "no error";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_NE(e.call().find("cuMemGetMemPool"), std::string::npos) << e.what();
  }
  // ...without it, cuda.core's reading: a dedicated pool is what works.
  fake.table.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) {
    *v = a == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED ? 1 : 0;
    return CUDA_SUCCESS;
  };
  detail::reset_device_registry_for_testing();  // device properties are read again
  try {
    ManagedMemoryResource mr;
    ADD_FAILURE() << "no error";
  } catch (const FeatureUnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("concurrent managed access"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ManagedMemoryResourceOptions"), std::string::npos) << e.what();
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(ManagedPool, WarnsOnceWithoutConcurrentManagedAccess) {
  FakeDriver fake;
  std::vector<std::string> warnings;
  LogHandler previous = set_log_handler([&warnings](LogLevel level, std::string_view m) {
    if (level == LogLevel::warning) warnings.emplace_back(m);
  });
  detail::reset_concurrent_access_warning_for_testing();
  { ManagedMemoryResource mr(ManagedMemoryResourceOptions{}); }
  EXPECT_TRUE(warnings.empty()) << "the fake H200 has concurrent managed access: " << warnings.front();
  detail::reset_concurrent_access_warning_for_testing();
  fake.table.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) {
    *v = a == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED ? 1 : 0;
    return CUDA_SUCCESS;
  };
  { ManagedMemoryResource mr(ManagedMemoryResourceOptions{.preferred_location = 0}); }
  { ManagedMemoryResource mr(ManagedMemoryResourceOptions{}); }
  set_log_handler(previous);
  ASSERT_EQ(warnings.size(), 1u) << "once per process";
  EXPECT_NE(warnings[0].find("concurrent managed memory access"), std::string::npos) << warnings[0];
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(ManagedPool, IsNeverSharedWithOtherProcesses) {
  FakeDriver fake;
  {
    ManagedMemoryResource mr(ManagedMemoryResourceOptions{});
    Stream s = Device(0).create_stream();
    Buffer b = mr.allocate(64, s);
    EXPECT_THROW(b.ipc_descriptor(), IpcError);
    EXPECT_THROW(Buffer::from_ipc_descriptor(mr, IPCBufferDescriptor{}, s), std::invalid_argument);
    b.close();
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

// ---- ObjectCode::get_module ----

namespace {
std::vector<std::byte> fake_cubin() {
  std::vector<std::byte> b(64, std::byte{0});
  std::memcpy(b.data(), "\x7f" "ELF", 4);
  return b;
}
CUlibrary g_module_of = nullptr;
}  // namespace

TEST(ObjectCodeModule, GetModuleIsTheLoadedLibrarysModule) {
  FakeDriver fake;
  fake.table.cuLibraryGetModule = [](CUmodule* m, CUlibrary lib) {
    g_module_of = lib;
    *m = reinterpret_cast<CUmodule>(reinterpret_cast<std::uintptr_t>(lib) ^ 0x5a50);
    return CUDA_SUCCESS;
  };
  CUlibrary lib = nullptr;
  {
    ObjectCode code = ObjectCode::from_cubin(fake_cubin(), "k.cubin");
    EXPECT_FALSE(code.is_loaded());
    CUmodule m = code.get_module();  // loads first
    EXPECT_TRUE(code.is_loaded());
    lib = static_cast<CUlibrary>(code.library_handle());
    EXPECT_EQ(g_module_of, lib);
    EXPECT_EQ(m, reinterpret_cast<CUmodule>(reinterpret_cast<std::uintptr_t>(lib) ^ 0x5a50));
    EXPECT_EQ(code.get_module(), m);
    EXPECT_EQ(FakeDriver::libraries_loaded.load(), 1);
  }
  // A module handed out keeps its library loaded, as an exported library handle does.
  EXPECT_EQ(FakeDriver::libraries_unloaded.load(), 0);
  ASSERT_EQ(fake.table.cuLibraryUnload(lib), CUDA_SUCCESS);  // (the ledger ends clean)
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(ObjectCodeModule, GetModuleErrors) {
  FakeDriver fake;
  EXPECT_THROW(ObjectCode().get_module(), std::invalid_argument);
  ObjectCode lto = ObjectCode::from_ltoir(fake_cubin(), "k.ltoir");
  EXPECT_THROW(lto.get_module(), std::invalid_argument);  // not loadable: link it first, as its handle says
  EXPECT_EQ(FakeDriver::libraries_loaded.load(), 0);

  ObjectCode code = ObjectCode::from_cubin(fake_cubin(), "k.cubin");
  fake.table.cuLibraryGetModule = [](CUmodule*, CUlibrary) { return CUDA_ERROR_INVALID_CONTEXT; };  // no context
  try {
    (void)code.get_module();
    ADD_FAILURE() << "no CudaError";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(e.call(), "cuLibraryGetModule");
  }
  fake.table.cuLibraryGetModule = nullptr;
  EXPECT_THROW((void)code.get_module(), FeatureUnavailableError);
  ASSERT_EQ(fake.table.cuLibraryUnload(static_cast<CUlibrary>(code.library_handle())), CUDA_SUCCESS);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}
