// Ownership against the fake driver, whose ledger records every release and
// every call a real driver would fault on (tests/common/fake_driver.hpp):
// each dependent set of objects is destroyed in every order, and each order
// must release every driver object exactly once, after everything that
// depends on it, with nothing used after its release. Then: every operation
// on a closed or moved-from object throws ClosedError naming the object and
// the operation, close() is idempotent, and nothing is released twice.
#include <cucore/adaptors.hpp>
#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <numeric>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/fake_driver.hpp"
#include "compute/engine.hpp"
#include "handles/buffer_handles.hpp"
#include "handles/graph_handles.hpp"
#include "handles/vmm_handles.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

namespace {

std::vector<std::byte> fake_cubin() {
  std::vector<std::byte> b(64, std::byte{0});
  std::memcpy(b.data(), "\x7f" "ELF", 4);
  return b;
}

// Runs `body(order)` once per permutation of 0..n-1.
void for_each_order(int n, const std::function<void(const std::vector<int>&)>& body) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  int runs = 0;
  do {
    body(order);
    ++runs;
  } while (std::next_permutation(order.begin(), order.end()));
  int expected = 1;
  for (int i = 2; i <= n; ++i) expected *= i;
  ASSERT_EQ(runs, expected);
}

std::string describe(const std::vector<int>& order, const std::vector<const char*>& names) {
  std::string s;
  for (int i : order) s += std::string(s.empty() ? "" : ", ") + names[static_cast<std::size_t>(i)];
  return "destroyed in the order " + s;
}

// A type-erased owner whose release is counted (what the Python module's owner hook does, less the GIL).
struct CountingOwner {
  static inline std::atomic<int> released{0};
  static std::shared_ptr<const void> make() {
    return std::shared_ptr<const void>(new int(7), [](const void* p) {
      ++released;
      delete static_cast<const int*>(p);
    });
  }
};

}  // namespace

// ---- every destruction order -------------------------------------------------------------

TEST(Ownership, StreamPoolBufferEventInEveryOrder) {
  for_each_order(5, [](const std::vector<int>& order) {
    FakeDriver fake;
    std::optional<Stream> stream(Device(0).create_stream());
    std::optional<Stream> copy(*stream);  // a second share of the same stream
    std::optional<DeviceMemoryResource> pool(std::in_place, 0, DeviceMemoryResourceOptions{});
    std::optional<Buffer> buffer(pool->allocate(4096, *stream));
    std::optional<Event> event(stream->record());
    buffer->fill(std::uint8_t{0x5a}, *stream);
    stream.value().wait(*event);
    ASSERT_EQ(FakeDriver::streams_created.load(), 1);
    ASSERT_EQ(FakeDriver::pools_created.load(), 1);
    ASSERT_EQ(FakeDriver::events_created.load(), 1);
    for (int i : order) {
      switch (i) {
        case 0: stream.reset(); break;
        case 1: copy.reset(); break;
        case 2: pool.reset(); break;
        case 3: buffer.reset(); break;
        case 4: event.reset(); break;
      }
    }
    const std::string what = describe(order, {"stream", "its copy", "pool", "buffer", "event"});
    EXPECT_EQ(FakeDriver::ledger_problems(), "") << what;
    EXPECT_EQ(FakeDriver::streams_destroyed.load(), 1) << what;
    EXPECT_EQ(FakeDriver::pools_destroyed.load(), 1) << what;
    EXPECT_EQ(FakeDriver::pool_frees.load(), 1) << what;
    EXPECT_EQ(FakeDriver::events_destroyed.load(), 1) << what;
    // The buffer is freed on its stream before the stream and the pool go.
    const auto& r = FakeDriver::releases;
    auto at = [&](const char* prefix) {
      return std::find_if(r.begin(), r.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; }) -
             r.begin();
    };
    EXPECT_LT(at("free "), at("stream ")) << what;
    EXPECT_LT(at("free "), at("pool ")) << what;
  });
}

TEST(Ownership, AdaptorsOverAPoolInEveryOrder) {
  for_each_order(4, [](const std::vector<int>& order) {
    FakeDriver fake;
    std::optional<Stream> stream(Device(0).create_stream());
    std::optional<MemoryResource> pool(DeviceMemoryResource(0, DeviceMemoryResourceOptions{}));
    std::optional<LimitingResourceAdaptor> limited(std::in_place, StatisticsResourceAdaptor(*pool), 1 << 20);
    std::optional<Buffer> buffer(limited->allocate(1000, *stream));
    for (int i : order) {
      switch (i) {
        case 0: stream.reset(); break;
        case 1: pool.reset(); break;
        case 2: limited.reset(); break;
        case 3: buffer.reset(); break;
      }
    }
    EXPECT_EQ(FakeDriver::ledger_problems(), "") << describe(order, {"stream", "pool", "adaptors", "buffer"});
    EXPECT_EQ(FakeDriver::pool_frees.load(), 1);
  });
}

TEST(Ownership, ObjectCodeKernelsAndLaunchesInEveryOrder) {
  for_each_order(4, [](const std::vector<int>& order) {
    FakeDriver fake;
    std::optional<ObjectCode> code(ObjectCode::from_cubin(fake_cubin(), "k.cubin"));
    std::optional<Kernel> k1(code->get_kernel("k"));
    std::optional<Kernel> k2(code->get_kernel("k"));
    std::optional<Stream> stream(Device(0).create_stream());
    EXPECT_EQ(k1->info(), k2->info()) << "one box per symbol";
    int* p = nullptr;
    for (int i : order) {
      // Whatever is still here still launches, on whatever stream is still here.
      StreamRef s = stream ? StreamRef(*stream) : Stream::legacy_default();
      if (k1) launch(s, {.grid = 1, .block = 32}, *k1, 3, p);
      if (k2) launch(s, {.grid = 1, .block = 32}, *k2, 4, p);
      switch (i) {
        case 0: code.reset(); break;
        case 1: k1.reset(); break;
        case 2: k2.reset(); break;
        case 3: stream.reset(); break;
      }
    }
    const std::string what = describe(order, {"object code", "kernel", "kernel copy", "stream"});
    EXPECT_EQ(FakeDriver::libraries_loaded.load(), 1) << what;
    EXPECT_EQ(FakeDriver::libraries_unloaded.load(), 1) << what;
    EXPECT_EQ(FakeDriver::ledger_problems(), "") << what;
  });
}

// A library whose handle went to code outside cucore is that code's to unload
// (numba-cuda unloads what ObjectCode.handle gives it): cucore never unloads it
// again, whatever order the objects go in.
TEST(Ownership, AnExportedLibraryIsUnloadedOnlyByItsHolder) {
  for_each_order(3, [](const std::vector<int>& order) {
    FakeDriver fake;
    std::optional<ObjectCode> code(ObjectCode::from_cubin(fake_cubin(), "k.cubin"));
    std::optional<Kernel> kernel(code->get_kernel("k"));
    auto* handle = static_cast<CUlibrary>(code->exported_library_handle());
    EXPECT_EQ(handle, code->library_handle());
    EXPECT_EQ(code->exported_library_handle(), handle) << "the same library, exported once";
    bool foreign_unloaded = false;
    for (int i : order) {
      switch (i) {
        case 0: code.reset(); break;
        case 1: kernel.reset(); break;
        case 2:
          ASSERT_EQ(fake.table.cuLibraryUnload(handle), CUDA_SUCCESS);  // the holder's own unload
          foreign_unloaded = true;
          break;
      }
    }
    const std::string what = describe(order, {"object code", "kernel", "foreign unload"});
    EXPECT_TRUE(foreign_unloaded);
    EXPECT_EQ(FakeDriver::libraries_loaded.load(), 1) << what;
    EXPECT_EQ(FakeDriver::libraries_unloaded.load(), 1) << what << ": only the holder unloads";
    EXPECT_EQ(FakeDriver::ledger_problems(), "") << what;
  });
}

TEST(Ownership, StreamsAndEventsInAnAdoptedContextInEveryOrder) {
  for_each_order(4, [](const std::vector<int>& order) {
    FakeDriver fake;
    std::optional<Context> ctx(Context::from_handle(reinterpret_cast<CUcontext>(0x4000)));
    EXPECT_FALSE(ctx->is_primary());
    std::optional<Stream> stream(std::in_place, *ctx, StreamOptions{});
    std::optional<Event> event(std::in_place, *ctx, EventOptions{.timing_enabled = true});
    std::optional<Stream> primary_stream(Device(0).create_stream());
    stream->record(*event);
    primary_stream->wait(*stream);
    for (int i : order) {
      switch (i) {
        case 0: ctx.reset(); break;
        case 1: stream.reset(); break;
        case 2: event.reset(); break;
        case 3: primary_stream.reset(); break;
      }
    }
    EXPECT_EQ(FakeDriver::ledger_problems(), "") << describe(order, {"context", "stream", "event", "primary stream"});
    EXPECT_EQ(FakeDriver::primary_releases.load(), 0) << "primary contexts are kept for the process";
  });
}

TEST(Ownership, ForeignOwnersAreReleasedOnceAfterTheLastShare) {
  for_each_order(3, [](const std::vector<int>& order) {
    FakeDriver fake;
    CountingOwner::released = 0;
    CUstream foreign = nullptr;
    ASSERT_EQ(fake.table.cuStreamCreate(&foreign, 0), CUDA_SUCCESS);  // another library's stream
    std::optional<Stream> adopted(Stream::from_handle(foreign, CountingOwner::make()));
    std::optional<Buffer> buffer(DeviceMemoryResource(0).allocate(64, *adopted));
    std::vector<std::byte> host(32);
    std::optional<Buffer> view(Buffer::from_handle(host.data(), host.size(), {}, CountingOwner::make()));
    EXPECT_NE(adopted->owner(), nullptr);
    EXPECT_NE(view->owner(), nullptr);
    for (int i : order) {
      switch (i) {
        case 0: adopted.reset(); break;
        case 1: buffer.reset(); break;
        case 2: view.reset(); break;
      }
    }
    const std::string what = describe(order, {"adopted stream", "buffer freed on it", "view with an owner"});
    EXPECT_EQ(CountingOwner::released.load(), 2) << what;
    EXPECT_EQ(FakeDriver::streams_destroyed.load(), 0) << what << ": cucore never destroys an adopted stream";
    ASSERT_EQ(fake.table.cuStreamDestroy(foreign), CUDA_SUCCESS);
    EXPECT_EQ(FakeDriver::ledger_problems(), "") << what;
  });
}

TEST(Ownership, ABufferOutlivesTheStreamItWasAllocatedOnAndFreesOnIt) {
  FakeDriver fake;
  std::vector<std::uint32_t> host(1024);
  std::mt19937 rng(17);
  for (auto& x : host) x = rng() | 1u;
  std::optional<Buffer> b;
  CUstream raw = nullptr;
  {
    Stream s = Device(0).create_stream();
    raw = s.handle();
    b = DeviceMemoryResource(0).allocate(host.size() * 4, s);
    b->copy_from(std::span<const std::uint32_t>(host), s);
    EXPECT_EQ(b->stream(), StreamRef(raw));
  }
  EXPECT_EQ(FakeDriver::streams_destroyed.load(), 0) << "the buffer holds a share of its stream";
  std::vector<std::uint32_t> out(host.size());
  b->copy_to(std::span<std::uint32_t>(out), b->stream());
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(out[i], host[i]) << i;
  b.reset();
  EXPECT_EQ(FakeDriver::streams_destroyed.load(), 1);
  ASSERT_EQ(FakeDriver::releases.size(), 2u);
  char expect[64];
  std::snprintf(expect, sizeof expect, "stream %p", static_cast<void*>(raw));
  EXPECT_NE(FakeDriver::releases[0].find("on " + std::string(expect + 7)), std::string::npos)
      << FakeDriver::releases[0];
  EXPECT_EQ(FakeDriver::releases[1], expect);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

// ---- how a box releases is fixed by its maker ---------------------------------------------------

TEST(Ownership, EachBoxReleasesAsItsMakerChose) {
  // Chosen when the box is made, never set later.
  static_assert(std::is_const_v<decltype(detail::StreamBox::release)>);
  static_assert(std::is_const_v<decltype(detail::PoolBox::release)>);
  static_assert(std::is_const_v<decltype(detail::GraphBox::release)>);
  static_assert(!std::is_default_constructible_v<detail::StreamBox>);
  static_assert(!std::is_default_constructible_v<detail::PoolBox>);
  static_assert(!std::is_default_constructible_v<detail::GraphBox>);
  FakeDriver fake;
  static std::vector<CUgraph> destroyed;
  destroyed.clear();
  fake.table.cuGraphDestroy = [](CUgraph g) {
    destroyed.push_back(g);
    return CUDA_SUCCESS;
  };
  {
    Stream made = Device(0).create_stream();
    Stream adopted = Stream::from_handle(made.handle());
    EXPECT_EQ(made.box()->release, detail::Release::destroy);
    EXPECT_EQ(adopted.box()->release, detail::Release::none);
    EXPECT_FALSE(DeviceMemoryResource(0).owns_pool()) << "the device's default pool is adopted";
    EXPECT_TRUE(DeviceMemoryResource(0, DeviceMemoryResourceOptions{}).owns_pool());
    const auto g1 = reinterpret_cast<CUgraph>(0x7001), g2 = reinterpret_cast<CUgraph>(0x7002);
    detail::GraphHandle root = detail::own_graph(g1);
    detail::GraphHandle view = detail::view_graph(g2, root);
    detail::GraphHandle capture = detail::capture_root();  // owns the CUgraph its capture will end with
    EXPECT_EQ(root->release, detail::Release::destroy);
    EXPECT_EQ(view->release, detail::Release::none);
    EXPECT_EQ(capture->release, detail::Release::destroy);
    root.reset();
    view.reset();
    capture.reset();  // its capture never ended: no CUgraph to destroy
    ASSERT_EQ(destroyed.size(), 1u);
    EXPECT_EQ(destroyed[0], g1);
  }
  EXPECT_EQ(FakeDriver::streams_destroyed.load(), 1) << "the adopted share destroyed nothing";
  EXPECT_EQ(FakeDriver::pools_destroyed.load(), 1);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

// ---- a Buffer's box, held beyond the Buffer ---------------------------------------------------

namespace {
// The frees of `p` recorded since release `from` (the fake reuses addresses).
std::size_t frees_of(CUdeviceptr p, std::size_t from) {
  char name[32];
  std::snprintf(name, sizeof name, "free %p ", reinterpret_cast<void*>(p));
  std::size_t n = 0;
  for (std::size_t i = from; i < FakeDriver::releases.size(); ++i) n += FakeDriver::releases[i].rfind(name, 0) == 0;
  return n;
}
}  // namespace

TEST(Ownership, ABuffersBoxHeldElsewhereFreesTheMemoryWithTheLastShareOnTheBuffersStream) {
  FakeDriver fake;
  {
    Stream s = Device(0).create_stream(), other = Device(0).create_stream();
    DeviceMemoryResource mr(0);
    std::mt19937 rng(31);
    for (int use_stream_close : {0, 1}) {
      const std::size_t from = FakeDriver::releases.size();
      Buffer b = mr.allocate(64 + rng() % 4096, s);
      const CUdeviceptr p = b.handle();
      const std::size_t n = b.size();
      std::shared_ptr<const detail::BufferBox> held = b.box();
      ASSERT_NE(held, nullptr);
      if (use_stream_close)
        b.close(other);
      else
        b.close();
      EXPECT_TRUE(b.is_closed());
      EXPECT_EQ(b.handle(), 0u);
      EXPECT_EQ(b.size(), 0u);
      EXPECT_EQ(b.box(), nullptr);
      EXPECT_EQ(frees_of(p, from), 0u) << "freed while another share of its box lives";
      EXPECT_EQ(FakeDriver::live.count(p), 1u);
      held.reset();
      ASSERT_EQ(frees_of(p, from), 1u) << "the last share frees it, once";
      char on[64];
      std::snprintf(on, sizeof on, "on %p", static_cast<void*>(s.handle()));
      EXPECT_NE(FakeDriver::releases.back().find(on), std::string::npos)
          << FakeDriver::releases.back() << ": freed on another stream than the Buffer's";
      EXPECT_EQ(FakeDriver::live.count(p), 0u) << n << " bytes";
    }
    // The only share: close() frees at once.
    const std::size_t from = FakeDriver::releases.size();
    Buffer b = mr.allocate(128, s);
    const CUdeviceptr p = b.handle();
    b.close();
    EXPECT_EQ(frees_of(p, from), 1u);
    b.close();
    EXPECT_EQ(frees_of(p, from), 1u) << "close() is idempotent";
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(Ownership, ADeallocationStreamSetLaterIsTheOneFreedOnAndIsKeptAlive) {
  FakeDriver fake;
  {
    DeviceMemoryResource mr(0);
    std::mt19937 rng(47);
    // Whether the free of `p` recorded since release `from` was made on `s`.
    auto freed_on = [](CUdeviceptr p, std::size_t from, CUstream s) {
      char name[32], on[64];
      std::snprintf(name, sizeof name, "free %p ", reinterpret_cast<void*>(p));
      std::snprintf(on, sizeof on, "on %p", static_cast<void*>(s));
      for (std::size_t i = from; i < FakeDriver::releases.size(); ++i)
        if (FakeDriver::releases[i].rfind(name, 0) == 0) return FakeDriver::releases[i].find(on) != std::string::npos;
      return false;
    };
    for (int how : {0, 1, 2}) {  // close(), the destructor, the last share held elsewhere
      Stream first = Device(0).create_stream();
      std::optional<Stream> later(Device(0).create_stream());
      const CUstream later_raw = later->handle();
      std::optional<Buffer> b(mr.allocate(64 + rng() % 4096, first));
      const CUdeviceptr p = b->handle();
      b->set_deallocation_stream(*later);
      EXPECT_EQ(b->stream(), StreamRef(later_raw));
      EXPECT_FALSE(b->is_closed()) << "the buffer stays open";
      const int destroyed = FakeDriver::streams_destroyed.load();
      later.reset();  // the buffer keeps the stream it frees on
      EXPECT_EQ(FakeDriver::streams_destroyed.load(), destroyed);
      const std::size_t from = FakeDriver::releases.size();
      std::shared_ptr<const detail::BufferBox> held = how == 2 ? b->box() : nullptr;
      if (how == 0) b->close();
      else b.reset();
      if (how == 2) {
        EXPECT_EQ(frees_of(p, from), 0u);
        held.reset();
      }
      ASSERT_EQ(frees_of(p, from), 1u) << "way " << how;
      EXPECT_TRUE(freed_on(p, from, later_raw)) << "way " << how << ": not freed on the stream set later";
      b.reset();
      EXPECT_EQ(FakeDriver::streams_destroyed.load(), destroyed + 1) << "the later stream goes with the buffer";
    }
    // A raw stream: used, not kept; closed objects are refused and nothing changes.
    Stream s = Device(0).create_stream(), t = Device(0).create_stream();
    Buffer b = mr.allocate(256, s);
    b.set_deallocation_stream(StreamRef(t.handle()));
    EXPECT_EQ(b.stream(), StreamRef(t.handle()));
    Stream gone = Device(0).create_stream();
    gone.close();
    EXPECT_THROW(b.set_deallocation_stream(gone), ClosedError);
    EXPECT_EQ(b.stream(), StreamRef(t.handle())) << "a refused change leaves the stream as it was";
    const std::size_t from = FakeDriver::releases.size();
    const CUdeviceptr p = b.handle();
    b.close();
    ASSERT_EQ(frees_of(p, from), 1u);
    EXPECT_TRUE(freed_on(p, from, t.handle()));
    EXPECT_THROW(b.set_deallocation_stream(s), ClosedError);
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(Ownership, AFailedFreeLeavesTheBufferOpenAndOwningAndTheNextCloseFreesIt) {
  FakeDriver fake;
  static std::atomic<int> refuse{0};
  static decltype(detail::DriverTable::cuMemFreeAsync) base = nullptr;
  base = fake.table.cuMemFreeAsync;
  fake.table.cuMemFreeAsync = [](CUdeviceptr p, CUstream st) {
    if (refuse > 0) {
      --refuse;
      return CUDA_ERROR_LAUNCH_FAILED;
    }
    return base(p, st);
  };
  {
    Stream s = Device(0).create_stream();
    DeviceMemoryResource mr(0);
    for (int with_stream : {0, 1}) {
      const std::size_t from = FakeDriver::releases.size();
      Buffer b = mr.allocate(256, s);
      const CUdeviceptr p = b.handle();
      refuse = 1;
      try {
        if (with_stream)
          b.close(s);
        else
          b.close();
        ADD_FAILURE() << "a refused free did not throw";
      } catch (const CudaError& e) {
        EXPECT_EQ(e.code(), CUDA_ERROR_LAUNCH_FAILED);
      }
      EXPECT_FALSE(b.is_closed());
      EXPECT_EQ(b.handle(), p);
      EXPECT_EQ(b.size(), 256u);
      EXPECT_EQ(FakeDriver::live.count(p), 1u);
      b.close();
      EXPECT_TRUE(b.is_closed());
      EXPECT_EQ(frees_of(p, from), 1u);
    }
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

// ---- physical VMM allocations -----------------------------------------------------------------

TEST(Ownership, APhysicalAllocationIsReleasedOnceAndAFailedCreateReleasesNothing) {
  FakeDriver fake;
  static std::atomic<int> created{0}, released{0};
  static std::vector<CUmemGenericAllocationHandle> released_handles;
  created = released = 0;
  released_handles.clear();
  fake.table.cuMemCreate = [](CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp*,
                              unsigned long long) {
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    *h = static_cast<CUmemGenericAllocationHandle>(0x9000 + ++created);
    return CUDA_SUCCESS;
  };
  fake.table.cuMemRelease = [](CUmemGenericAllocationHandle h) {
    ++released;
    released_handles.push_back(h);
    return CUDA_SUCCESS;
  };
  CUmemAllocationProp prop{};
  CUmemGenericAllocationHandle h = 0;
  {
    detail::PhysicalAllocation a(1 << 21, prop);
    h = a.handle();
    EXPECT_EQ(h, 0x9001u);
    EXPECT_EQ(released.load(), 0);
  }
  ASSERT_EQ(released_handles.size(), 1u);
  EXPECT_EQ(released_handles[0], h);
  try {
    detail::PhysicalAllocation bad(0, prop);
    ADD_FAILURE() << "a refused cuMemCreate did not throw";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_NE(std::string(e.what()).find("cuMemCreate"), std::string::npos) << e.what();
  }
  EXPECT_EQ(released.load(), 1) << "nothing was created, so nothing is released";
}

// ---- a free on a thread with no current context -------------------------------------------

namespace {
// A driver that refuses a free made with no current context
// (CUDA_ERROR_INVALID_CONTEXT, as the real one may), recording each refusal,
// the context each accepted free ran in, and the context queries cucore makes.
struct RefusingFree {
  static inline decltype(detail::DriverTable::cuMemFreeAsync) base_free = nullptr;
  static inline decltype(detail::DriverTable::cuCtxGetCurrent) base_current = nullptr;
  static inline decltype(detail::DriverTable::cuStreamGetCtx) base_stream_ctx = nullptr;
  static inline std::atomic<int> refused{0}, stream_ctx_calls{0}, current_calls{0};
  static inline std::mutex mutex;
  static inline std::vector<CUcontext> freed_in;  // the current context of each accepted free

  static void install(FakeDriver& fake) {
    refused = stream_ctx_calls = current_calls = 0;
    freed_in.clear();
    base_free = fake.table.cuMemFreeAsync;
    base_current = fake.table.cuCtxGetCurrent;
    base_stream_ctx = fake.table.cuStreamGetCtx;
    fake.table.cuMemFreeAsync = [](CUdeviceptr p, CUstream s) {
      CUcontext current = nullptr;
      base_current(&current);
      if (!current) {
        ++refused;
        return CUDA_ERROR_INVALID_CONTEXT;
      }
      {
        std::lock_guard lock(mutex);
        freed_in.push_back(current);
      }
      return base_free(p, s);
    };
    fake.table.cuStreamGetCtx = [](CUstream s, CUcontext* c) {
      ++stream_ctx_calls;
      return base_stream_ctx(s, c);
    };
    fake.table.cuCtxGetCurrent = [](CUcontext* c) {
      ++current_calls;
      return base_current(c);
    };
  }
};
}  // namespace

TEST(Ownership, AFreeRefusedForWantOfAContextIsMadeAgainInItsStreamsContext) {
  FakeDriver fake;
  RefusingFree::install(fake);
  Device d(0);
  d.set_current();
  {
    Stream s = d.create_stream();
    const CUcontext stream_ctx = s.context().handle();
    ASSERT_NE(stream_ctx, nullptr);
    DeviceMemoryResource mr(d);
    std::mt19937 rng(23);
    std::vector<Buffer> buffers;
    for (int i = 0; i < 8; ++i) buffers.push_back(mr.allocate(64 + rng() % 4096, s));

    // The usual path: a context is current, the free is made once and nothing more is asked.
    Buffer usual = mr.allocate(128, s);
    const int asked = RefusingFree::stream_ctx_calls + RefusingFree::current_calls;
    usual = Buffer();
    EXPECT_EQ(RefusingFree::refused.load(), 0);
    EXPECT_EQ(RefusingFree::stream_ctx_calls + RefusingFree::current_calls, asked)
        << "a free that was not refused asked the driver for a context";
    ASSERT_EQ(RefusingFree::freed_in.size(), 1u);
    RefusingFree::stream_ctx_calls = 0;

    CUcontext before = reinterpret_cast<CUcontext>(1), after = reinterpret_cast<CUcontext>(1);
    std::thread dropper([&] {  // a new thread: no context is current on it
      RefusingFree::base_current(&before);
      buffers.clear();
      RefusingFree::base_current(&after);
    });
    dropper.join();
    EXPECT_EQ(before, nullptr);
    EXPECT_EQ(after, nullptr) << "the dropping thread was left with a context current";
    EXPECT_EQ(RefusingFree::refused.load(), 8) << "each free is tried as it is first";
    EXPECT_EQ(RefusingFree::stream_ctx_calls.load(), 8);
    ASSERT_EQ(RefusingFree::freed_in.size(), 9u) << "every refused free was made again";
    for (std::size_t i = 1; i < RefusingFree::freed_in.size(); ++i)
      EXPECT_EQ(RefusingFree::freed_in[i], stream_ctx) << "free " << i << " ran outside its stream's context";
    EXPECT_EQ(FakeDriver::pool_frees.load(), 9);
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

// ---- closed means closed -----------------------------------------------------------------

namespace {
template <typename F>
void expect_closed(F&& use, const char* object, const std::string& operation) {
  try {
    use();
    ADD_FAILURE() << object << ": " << operation << " did not throw";
  } catch (const ClosedError& e) {
    EXPECT_EQ(e.object(), object);
    EXPECT_NE(e.operation().find(operation), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(std::string(object) + " has been closed (", 0), 0u) << e.what();
  }
}

// Every operation on a closed Stream (`s`) throws, and nothing reaches the driver.
void expect_stream_closed(const Stream& s) {
  EXPECT_TRUE(s.is_closed());
  EXPECT_NE(s.handle(), nullptr) << "closed is not the NULL (legacy) stream";
  EXPECT_NE(s.handle(), CU_STREAM_LEGACY);
  const StreamRef r = s;  // a view taken from it is closed too
  Event e = Device(0).create_event();
  Stream live = Device(0).create_stream();
  Kernel k = ObjectCode::from_cubin(fake_cubin()).get_kernel("k");
  DeviceMemoryResource mr(0);
  Buffer b = mr.allocate(64, live);
  std::vector<std::byte> host(64);
  for (StreamRef x : {StreamRef(s), r}) {
    expect_closed([&] { x.sync(); }, "Stream", "sync");
    expect_closed([&] { (void)x.is_done(); }, "Stream", "is_done");
    expect_closed([&] { x.wait(e); }, "Stream", "wait");
    expect_closed([&] { x.wait(live); }, "Stream", "wait");
    expect_closed([&] { live.wait(x); }, "Stream", "wait");
    expect_closed([&] { (void)x.record(); }, "Stream", "record");
    expect_closed([&] { x.record(e); }, "Stream", "record");
    expect_closed([&] { (void)x.context(); }, "Stream", "context");
    expect_closed([&] { (void)x.device(); }, "Stream", "context");
    expect_closed([&] { (void)x.priority(); }, "Stream", "priority");
    expect_closed([&] { (void)x.is_nonblocking(); }, "Stream", "is_nonblocking");
    expect_closed([&] { (void)x.id(); }, "Stream", "id");
    expect_closed([&] { launch(x, {.grid = 1, .block = 1}, k, 1, static_cast<int*>(nullptr)); }, "Stream", "launch");
    expect_closed([&] { (void)mr.allocate(64, x); }, "Stream", "allocate");
    expect_closed([&] { b.fill(std::uint8_t{1}, x); }, "Stream", "fill");
    expect_closed([&] { b.copy_to(std::span<std::byte>(host), x); }, "Stream", "copy_to");
    expect_closed([&] { b.copy_from(std::span<const std::byte>(host), x); }, "Stream", "copy_from");
    expect_closed([&] { b.close(x); }, "Stream", "deallocate");
    EXPECT_FALSE(b.is_closed()) << "a refused close keeps the buffer";
  }
  expect_closed([&] { (void)s.context(); }, "Stream", "context");
  expect_closed([&] { (void)mr.allocate(64, s); }, "Stream", "allocate");
  expect_closed([&] { (void)Stream::from_handle(s.handle()); }, "Stream", "from_handle");
}
}  // namespace

TEST(Ownership, EveryOperationOnAClosedStreamThrows) {
  FakeDriver fake;
  Stream closed = Device(0).create_stream();
  closed.close();
  closed.close();  // idempotent
  expect_stream_closed(closed);
  Stream moved_from = Device(0).create_stream();
  Stream taker = std::move(moved_from);
  expect_stream_closed(moved_from);  // NOLINT(bugprone-use-after-move): the point of the test
  Stream assigned_from = Device(0).create_stream();
  taker = std::move(assigned_from);
  expect_stream_closed(assigned_from);  // NOLINT(bugprone-use-after-move)
  taker.close();
  EXPECT_EQ(FakeDriver::streams_created.load(), FakeDriver::streams_destroyed.load());
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

template <typename T>
concept adoptable_as_stream = requires(T h) { Stream::from_handle(h); };

TEST(Ownership, DefaultStreamsAreNamedAndNeverClosed) {
  FakeDriver fake;
  EXPECT_EQ(Stream::legacy_default().handle(), CU_STREAM_LEGACY);
  EXPECT_EQ(Stream::per_thread_default().handle(), CU_STREAM_PER_THREAD);
  Stream legacy = Stream::from_handle(CU_STREAM_LEGACY);
  legacy.close();
  EXPECT_FALSE(legacy.is_closed());
  EXPECT_NO_THROW(legacy.sync());
  // A null CUstream value (not a literal) is refused at run time...
  EXPECT_THROW((void)Stream::from_handle(CUstream{}), std::invalid_argument);
  Stream null_of_a_library = Stream::from_handle(nullptr, CountingOwner::make());  // a foreign "stream 0"
  EXPECT_EQ(null_of_a_library.handle(), nullptr);
  EXPECT_NO_THROW(null_of_a_library.sync());
  // StreamRef(0) and StreamRef(nullptr) do not compile:
  static_assert(!std::is_constructible_v<StreamRef, int>);
  static_assert(!std::is_constructible_v<StreamRef, std::nullptr_t>);
  static_assert(!std::is_convertible_v<int, StreamRef>);
  static_assert(std::is_constructible_v<StreamRef, CUstream>);
  // ...and Stream::from_handle(nullptr) or (0) does not compile.
  static_assert(!adoptable_as_stream<std::nullptr_t>);
  static_assert(!adoptable_as_stream<int>);
  static_assert(adoptable_as_stream<CUstream>);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(Ownership, EveryOperationOnAClosedEventThrows) {
  FakeDriver fake;
  {
    Stream s = Device(0).create_stream();
    Event closed = s.record({.timing_enabled = true});
    Event copy = closed;  // shares the event
    closed.close();
    closed.close();
    EXPECT_EQ(FakeDriver::events_destroyed.load(), 0) << "the copy still holds it";
    Event moved_from = Device(0).create_event();
    Event taker = std::move(moved_from);
    for (const Event* e : {&closed, &moved_from}) {  // NOLINT(bugprone-use-after-move)
      EXPECT_TRUE(e->is_closed());
      EXPECT_EQ(e->handle(), nullptr);
      expect_closed([&] { e->sync(); }, "Event", "sync");
      expect_closed([&] { (void)e->is_done(); }, "Event", "is_done");
      expect_closed([&] { (void)e->is_timing_enabled(); }, "Event", "is_timing_enabled");
      expect_closed([&] { (void)e->is_sync_busy_waited(); }, "Event", "is_sync_busy_waited");
      expect_closed([&] { (void)e->is_ipc_enabled(); }, "Event", "is_ipc_enabled");
      expect_closed([&] { (void)e->context(); }, "Event", "context");
      expect_closed([&] { (void)e->device(); }, "Event", "context");
      expect_closed([&] { s.wait(*e); }, "Event", "wait");
      expect_closed([&] { s.record(*e); }, "Event", "record");
      expect_closed([&] { (void)(copy - *e); }, "Event", "elapsed_time_ms: the start event");
      expect_closed([&] { (void)(*e - copy); }, "Event", "elapsed_time_ms: the end event");
  }
  EXPECT_NO_THROW(copy.sync());
  copy.close();
  taker.close();
  EXPECT_EQ(FakeDriver::events_destroyed.load(), 2);
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

TEST(Ownership, EveryOperationOnAClosedBufferThrows) {
  FakeDriver fake;
  {
    Stream s = Device(0).create_stream();
    DeviceMemoryResource mr(0);
    Kernel k = ObjectCode::from_cubin(fake_cubin()).get_kernel("k");
    Buffer closed = mr.allocate(64, s);
    closed.close();
    closed.close();
    Buffer moved_from = mr.allocate(64, s);
    Buffer taker = std::move(moved_from);
    Buffer never_open;
    Buffer open = mr.allocate(64, s);
    std::vector<std::byte> host(64);
    for (Buffer* b : {&closed, &moved_from, &never_open}) {  // NOLINT(bugprone-use-after-move)
      EXPECT_TRUE(b->is_closed());
      EXPECT_EQ(b->handle(), 0u);
      EXPECT_EQ(b->size(), 0u);
      expect_closed([&] { (void)b->device_id(); }, "Buffer", "device_id");
      expect_closed([&] { (void)b->is_device_accessible(); }, "Buffer", "is_device_accessible");
      expect_closed([&] { (void)b->is_host_accessible(); }, "Buffer", "is_host_accessible");
      expect_closed([&] { (void)b->is_managed(); }, "Buffer", "is_managed");
      expect_closed([&] { b->fill(std::uint8_t{1}, s); }, "Buffer", "fill");
      expect_closed([&] { b->fill(std::uint16_t{1}, s); }, "Buffer", "fill");
      expect_closed([&] { b->fill(std::uint32_t{1}, s); }, "Buffer", "fill");
      expect_closed([&] { b->copy_to(std::span<std::byte>(host), s); }, "Buffer", "copy_to");
      expect_closed([&] { b->copy_from(std::span<const std::byte>(host), s); }, "Buffer", "copy_from");
      expect_closed([&] { (void)b->copy_to(s); }, "Buffer", "copy_to");
      expect_closed([&] { (void)b->copy_to(StreamRef(s)); }, "Buffer", "copy_to");
      expect_closed([&] { b->copy_to(open, s); }, "Buffer", "copy_to");
      expect_closed([&] { open.copy_to(*b, s); }, "Buffer", "copy_to (the destination)");
      expect_closed([&] { open.copy_from(*b, s); }, "Buffer", "copy_from (the source)");
      expect_closed([&] { launch(s, {.grid = 1, .block = 1}, k, 1, *b); }, "Buffer", "k: argument 1");
      expect_closed([&] { KernelArgs().push(1).push(*b); }, "Buffer", "argument 1");
      EXPECT_NO_THROW(b->close());
  }
  open.close();
  taker.close();
  EXPECT_EQ(FakeDriver::pool_frees.load(), 3) << "each allocation freed once";
  }
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

// A compute call on a closed stream is refused before the driver is asked
// anything about it (its handle is a sentinel no stream has).
TEST(Ownership, AComputeCallOnAClosedStreamAsksTheDriverNothing) {
  FakeDriver fake;
  static std::atomic<int> asked{0};
  asked = 0;
  fake.table.cuStreamGetDevice = [](CUstream, CUdevice* d) {
    ++asked;
    *d = 0;
    return CUDA_SUCCESS;
  };
  Stream s = Device(0).create_stream();
  s.close();
  EXPECT_THROW((void)compute::detail::call_device(s), ClosedError);
  EXPECT_EQ(asked.load(), 0);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

// ObjectCode::get_module: the loaded library's module (cuLibraryGetModule),
// the same one each time; the library stays loaded from then on, as an
// exported handle's (its holder may unload it); an empty ObjectCode is refused.
TEST(Ownership, GetModuleGivesTheLoadedLibrarysModule) {
  FakeDriver fake;
  ObjectCode code = ObjectCode::from_cubin(fake_cubin(), "k.cubin");
  EXPECT_FALSE(code.is_loaded());
  CUmodule m = code.get_module();
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(code.is_loaded());
  EXPECT_EQ(code.get_module(), m);
  EXPECT_EQ(FakeDriver::libraries_loaded.load(), 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m),
            reinterpret_cast<std::uintptr_t>(code.exported_library_handle()) + 2);  // the fake's module of that library
  EXPECT_THROW((void)ObjectCode().get_module(), std::invalid_argument);
  // Kept loaded for whoever holds the module; that holder unloads it.
  EXPECT_EQ(FakeDriver::libraries_unloaded.load(), 0);
  ASSERT_EQ(cucore::detail::driver().cuLibraryUnload(static_cast<CUlibrary>(code.exported_library_handle())),
            CUDA_SUCCESS);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}
