// Device methods act in their device's context and leave the calling thread's
// current context as they found it (cuda.core 1.3's rule), and Stream::wait
// orders a stream after another device's: against a fake driver of two
// devices, each with its own primary context, that records in which context
// every object was made and refuses what the real driver refuses (an event
// recorded on a stream of another context; a call that needs a context made
// with none current).
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/log.hpp>
#include <cucore/stream.hpp>
#include <cucore/texture.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/fake_driver.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

namespace {

CUcontext primary_of(CUdevice d) { return reinterpret_cast<CUcontext>(0x10000 + 0x1000 * static_cast<std::uintptr_t>(d)); }
CUcontext ctx0() { return primary_of(0); }
CUcontext ctx1() { return primary_of(1); }

thread_local CUcontext t_current = nullptr;
CUcontext g_refuse_switch_to = nullptr;  // cuCtxSetCurrent(this) fails: a restore that cannot be made
CUcontext g_synced = nullptr;            // the context the last cuCtxSynchronize ran in
int g_live_arrays = 0;                   // arrays made and not destroyed

// In which context each object was made (what the driver knows and cuda.core's rule is about).
std::mutex g_mutex;
std::map<std::uintptr_t, CUcontext> g_made_in;  // handles as numbers: the fake's are addresses of blank memory
template <typename H>
std::uintptr_t key(H h) {
  if constexpr (std::is_pointer_v<H>)
    return reinterpret_cast<std::uintptr_t>(h);
  else
    return static_cast<std::uintptr_t>(h);
}
template <typename H>
void made(H h, CUcontext c) {
  std::lock_guard lock(g_mutex);
  g_made_in[key(h)] = c;
}
template <typename H>
CUcontext made_in(H h) {
  std::lock_guard lock(g_mutex);
  auto it = g_made_in.find(key(h));
  return it == g_made_in.end() ? nullptr : it->second;
}

// The fake's own stream and event entries (its ledger), wrapped by ours.
decltype(detail::DriverTable::cuStreamCreateWithPriority) g_stream_create_prio = nullptr;
decltype(detail::DriverTable::cuStreamCreate) g_stream_create = nullptr;
decltype(detail::DriverTable::cuEventCreate) g_event_create = nullptr;
decltype(detail::DriverTable::cuEventRecord) g_event_record = nullptr;

CUcontext stream_context(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return t_current;
  return made_in(s);
}

void* new_handle() { return std::malloc(8); }

class DeviceContext : public ::testing::Test {
 protected:
  FakeDriver fake;

  void SetUp() override {
    FakeDriver::device_count = 2;
    t_current = nullptr;
    g_refuse_switch_to = nullptr;
    g_synced = nullptr;
    g_live_arrays = 0;
    g_made_in.clear();
    auto& t = fake.table;
    g_stream_create_prio = t.cuStreamCreateWithPriority;
    g_stream_create = t.cuStreamCreate;
    g_event_create = t.cuEventCreate;
    g_event_record = t.cuEventRecord;
    t.cuDevicePrimaryCtxRetain = [](CUcontext* c, CUdevice d) { *c = primary_of(d); return CUDA_SUCCESS; };
    t.cuCtxGetCurrent = [](CUcontext* c) { *c = t_current; return CUDA_SUCCESS; };
    t.cuCtxSetCurrent = [](CUcontext c) {
      if (c && c == g_refuse_switch_to) return CUDA_ERROR_INVALID_CONTEXT;
      t_current = c;
      return CUDA_SUCCESS;
    };
    t.cuCtxGetDevice = [](CUdevice* d) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      *d = t_current == ctx1() ? 1 : 0;
      return CUDA_SUCCESS;
    };
    t.cuCtxSynchronize = []() {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      g_synced = t_current;
      return CUDA_SUCCESS;
    };
    t.cuCtxGetStreamPriorityRange = [](int* lo, int* hi) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      *lo = 0;
      *hi = -5;
      return CUDA_SUCCESS;
    };
    t.cuStreamCreateWithPriority = [](CUstream* s, unsigned f, int p) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      CUresult r = g_stream_create_prio(s, f, p);
      if (r == CUDA_SUCCESS) made(*s, t_current);
      return r;
    };
    t.cuStreamCreate = [](CUstream* s, unsigned f) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      CUresult r = g_stream_create(s, f);
      if (r == CUDA_SUCCESS) made(*s, t_current);
      return r;
    };
    t.cuStreamGetCtx = [](CUstream s, CUcontext* c) {
      *c = stream_context(s);
      return *c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    };
    t.cuEventCreate = [](CUevent* e, unsigned f) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      CUresult r = g_event_create(e, f);
      if (r == CUDA_SUCCESS) made(*e, t_current);
      return r;
    };
    // The real driver refuses an event recorded on a stream of another context.
    t.cuEventRecord = [](CUevent e, CUstream s) {
      if (made_in(e) != stream_context(s)) return CUDA_ERROR_INVALID_HANDLE;
      return g_event_record(e, s);
    };
    t.cuArray3DCreate = [](CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR*) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      *a = static_cast<CUarray>(new_handle());
      made(*a, t_current);
      ++g_live_arrays;
      return CUDA_SUCCESS;
    };
    t.cuArrayDestroy = [](CUarray a) {
      --g_live_arrays;
      std::free(a);
      return CUDA_SUCCESS;
    };
    t.cuMipmappedArrayCreate = [](CUmipmappedArray* a, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      *a = static_cast<CUmipmappedArray>(new_handle());
      made(*a, t_current);
      return CUDA_SUCCESS;
    };
    t.cuMipmappedArrayDestroy = [](CUmipmappedArray a) { std::free(a); return CUDA_SUCCESS; };
    t.cuTexObjectCreate = [](CUtexObject* o, const CUDA_RESOURCE_DESC*, const CUDA_TEXTURE_DESC*,
                             const CUDA_RESOURCE_VIEW_DESC*) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      *o = reinterpret_cast<CUtexObject>(new_handle());
      made(*o, t_current);
      return CUDA_SUCCESS;
    };
    // The real driver destroys a texture or surface object only in its own context.
    t.cuTexObjectDestroy = [](CUtexObject o) {
      if (t_current != made_in(o)) return CUDA_ERROR_INVALID_CONTEXT;
      std::free(reinterpret_cast<void*>(o));
      return CUDA_SUCCESS;
    };
    t.cuSurfObjectCreate = [](CUsurfObject* o, const CUDA_RESOURCE_DESC*) {
      if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
      *o = reinterpret_cast<CUsurfObject>(new_handle());
      made(*o, t_current);
      return CUDA_SUCCESS;
    };
    t.cuSurfObjectDestroy = [](CUsurfObject o) {
      if (t_current != made_in(o)) return CUDA_ERROR_INVALID_CONTEXT;
      std::free(reinterpret_cast<void*>(o));
      return CUDA_SUCCESS;
    };
  }

  void TearDown() override { t_current = nullptr; }
};

// Each creation and the sync run in device 1's context, whatever the thread
// had current (nothing, or device 0's context), and leave that current.
TEST_F(DeviceContext, EveryCreationAndSyncRunsInTheDevicesContextAndLeavesTheCurrentOneAlone) {
  for (CUcontext before : {static_cast<CUcontext>(nullptr), ctx0()}) {
    SCOPED_TRACE(before ? "device 0's context current" : "no context current");
    t_current = before;
    const Device dev1(1);

    Stream s = dev1.create_stream();
    EXPECT_EQ(made_in(s.handle()), ctx1());
    EXPECT_EQ(t_current, before);
    EXPECT_EQ(s.device().ordinal(), 1);
    EXPECT_EQ(t_current, before);

    Stream prio = dev1.create_stream({.priority = -2});  // reads the priority range in device 1's context
    EXPECT_EQ(made_in(prio.handle()), ctx1());
    EXPECT_EQ(t_current, before);

    Event e = dev1.create_event();
    EXPECT_EQ(made_in(e.handle()), ctx1());
    EXPECT_EQ(e.device().ordinal(), 1);
    EXPECT_EQ(t_current, before);

    g_synced = nullptr;
    dev1.sync();
    EXPECT_EQ(g_synced, ctx1());
    EXPECT_EQ(t_current, before);

    auto array = dev1.create_opaque_array({.shape = {8, 8}, .num_channels = 1, .is_surface_load_store = true});
    EXPECT_EQ(made_in(array.handle()), ctx1());
    EXPECT_EQ(array.device_id(), 1);
    EXPECT_EQ(t_current, before);

    auto mip = dev1.create_mipmapped_array({.shape = {8, 8}, .num_levels = 2});
    EXPECT_EQ(made_in(mip.handle()), ctx1());
    EXPECT_EQ(t_current, before);

    auto tex = dev1.create_texture_object(texture::ResourceDescriptor::from_opaque_array(array));
    EXPECT_EQ(made_in(tex.handle()), ctx1());
    EXPECT_EQ(tex.device_id(), 1);
    EXPECT_EQ(t_current, before);

    auto surf = dev1.create_surface_object(texture::ResourceDescriptor::from_opaque_array(array));
    EXPECT_EQ(made_in(surf.handle()), ctx1());
    EXPECT_EQ(t_current, before);
  }
  t_current = nullptr;
}

// A texture or surface object goes in its own context, whatever context (or
// none) the thread that drops it has, and leaves that one current (cuda.core
// 1.3); the driver refuses the destroy elsewhere, a failure reported only
// through the log hook.
TEST_F(DeviceContext, TexturesAndSurfacesAreDestroyedInTheirOwnContext) {
  std::vector<std::string> failures;
  LogHandler previous = set_log_handler([&](LogLevel level, std::string_view m) {
    if (level == LogLevel::release_failure) failures.emplace_back(m);
  });
  for (CUcontext before : {static_cast<CUcontext>(nullptr), ctx0()}) {
    SCOPED_TRACE(before ? "device 0's context current" : "no context current");
    const Device dev1(1);
    t_current = before;
    auto array = dev1.create_opaque_array({.shape = {8, 8}, .num_channels = 1, .is_surface_load_store = true});
    auto tex = dev1.create_texture_object(texture::ResourceDescriptor::from_opaque_array(array));
    auto surf = dev1.create_surface_object(texture::ResourceDescriptor::from_opaque_array(array));
    tex.close();
    surf.close();
    EXPECT_EQ(t_current, before);
  }
  set_log_handler(previous);
  EXPECT_TRUE(failures.empty()) << failures.front();
  t_current = nullptr;
}

// A texture or surface of device 0 over device 1's array would fault on use:
// refused before the driver is asked.
TEST_F(DeviceContext, ATextureOverAnotherDevicesArrayIsRefused) {
  auto array = Device(1).create_opaque_array({.shape = {8}, .is_surface_load_store = true});
  const auto resource = texture::ResourceDescriptor::from_opaque_array(array);
  for (auto make : {+[](const texture::ResourceDescriptor& r) { (void)Device(0).create_texture_object(r); },
                    +[](const texture::ResourceDescriptor& r) { (void)Device(0).create_surface_object(r); }}) {
    try {
      make(resource);
      ADD_FAILURE() << "a resource of device 1 was taken by device 0";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("belongs to device 1, not device 0"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(t_current, nullptr);
}

// Stream::wait on a stream of another device: the marking event is made in
// that stream's context (cuEventRecord refuses one of the current context's),
// and the caller's context stays current.
TEST_F(DeviceContext, WaitingOnAnotherDevicesStreamMarksItInThatStreamsContext) {
  t_current = ctx0();
  Stream s0 = Device(0).create_stream();
  Stream s1 = Device(1).create_stream();
  const int events_before = FakeDriver::events_created;
  s0.wait(s1);
  EXPECT_EQ(FakeDriver::events_created, events_before + 1);  // the marker
  EXPECT_EQ(t_current, ctx0());
  // The same through a bare StreamRef (its context read from the driver), and the other way round.
  s0.wait(StreamRef(s1.handle()));
  s1.wait(s0);
  EXPECT_EQ(t_current, ctx0());
  t_current = nullptr;
  s1.wait(s0);  // with nothing current
  EXPECT_EQ(t_current, nullptr);
  // An event of the other device is waited on directly.
  t_current = ctx0();
  Event e1 = s1.record();
  EXPECT_EQ(made_in(e1.handle()), ctx1());
  s0.wait(e1);
  EXPECT_EQ(t_current, ctx0());
  t_current = nullptr;
}

// When the caller's context cannot be put back, the creation is undone: the
// call throws and nothing it made is left alive.
TEST_F(DeviceContext, ACreationWhoseContextCannotBeRestoredIsUndone) {
  const Device dev1(1);
  auto expect_undone = [&](const char* what, auto&& make) {
    SCOPED_TRACE(what);
    t_current = ctx0();
    g_refuse_switch_to = ctx0();
    try {
      make();
      ADD_FAILURE() << "no error although the caller's context was not restored";
    } catch (const CudaError& e) {
      EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_CONTEXT);
      EXPECT_NE(std::string(e.what()).find("restoring the caller's context"), std::string::npos) << e.what();
    }
    g_refuse_switch_to = nullptr;
    t_current = nullptr;
  };
  expect_undone("stream", [&] { (void)dev1.create_stream(); });
  expect_undone("event", [&] { (void)dev1.create_event(); });
  expect_undone("sync", [&] { dev1.sync(); });
  expect_undone("array", [&] { (void)dev1.create_opaque_array({.shape = {4}}); });
  EXPECT_EQ(FakeDriver::streams_created, FakeDriver::streams_destroyed);
  EXPECT_EQ(FakeDriver::events_created, FakeDriver::events_destroyed);
  EXPECT_EQ(g_live_arrays, 0);
  EXPECT_EQ(FakeDriver::ledger_problems(), "");
}

}  // namespace
