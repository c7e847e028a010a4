#include "common/fake_driver.hpp"

#include <cucore/stream.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/device_state.hpp"

namespace cucore::test {
namespace {

CUcontext fake_context() { return reinterpret_cast<CUcontext>(0x1000); }
CUmemoryPool fake_pool() { return reinterpret_cast<CUmemoryPool>(0x2000); }
thread_local CUcontext t_current = nullptr;

int fake_attribute(CUdevice_attribute a) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    default: return 0;
  }
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Under live_mutex: record what a real driver would fault on.
void violation(std::string what) { FakeDriver::violations.push_back(std::move(what)); }

bool special(CUstream s) { return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

// A stream argument must be a default stream or one alive at the driver.
void check_stream(CUstream s, const char* call) {
  if (!special(s) && !FakeDriver::live_streams.count(s))
    violation(std::string(call) + " on stream " + hex(s) +
              (s == cucore::detail::closed_stream() ? " (a closed Stream's handle)" : ", which is not alive"));
}

void check_event(CUevent e, const char* call) {
  if (!FakeDriver::live_events.count(e)) violation(std::string(call) + " on event " + hex(e) + ", which is not alive");
}

// Calls that only use a stream, an event, or both: checked, then done.
CUresult uses_stream(const char* call, CUstream s) {
  std::lock_guard lock(FakeDriver::live_mutex);
  check_stream(s, call);
  return CUDA_SUCCESS;
}
CUresult uses_event(const char* call, CUevent e, CUstream s = nullptr) {
  std::lock_guard lock(FakeDriver::live_mutex);
  check_event(e, call);
  check_stream(s, call);  // nullptr (the default) is always a valid stream
  return CUDA_SUCCESS;
}

CUresult fake_alloc(CUdeviceptr* p, size_t n, CUmemoryPool pool, CUstream s) {
  if (FakeDriver::fail_next_pool_allocs.load() > 0) {
    --FakeDriver::fail_next_pool_allocs;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::lock_guard lock(FakeDriver::live_mutex);
  check_stream(s, "cuMemAllocFromPoolAsync");
  if (pool != fake_pool() && !FakeDriver::live_pools.count(pool))
    violation("cuMemAllocFromPoolAsync from pool " + hex(pool) + ", which is not alive");
  void* m = std::malloc(n ? n : 1);
  *p = reinterpret_cast<CUdeviceptr>(m);
  FakeDriver::live[reinterpret_cast<std::uintptr_t>(m)] = {n, pool};
  ++FakeDriver::pool_allocs;
  return CUDA_SUCCESS;
}

// A new driver object of kind H (a unique address), alive from now on.
template <typename H>
CUresult make_live(H* out, std::set<H>& live, std::atomic<int>& made) {
  std::lock_guard lock(FakeDriver::live_mutex);
  *out = reinterpret_cast<H>(std::malloc(8));
  live.insert(*out);
  ++made;
  return CUDA_SUCCESS;
}

// Its release, in the ledger; a release of what is not alive is a violation.
template <typename H>
CUresult release_live(H h, std::set<H>& live, std::atomic<int>& released, const char* call, const char* kind) {
  std::lock_guard lock(FakeDriver::live_mutex);
  if (!live.erase(h)) {
    violation(std::string(call) + " of " + kind + " " + hex(h) + ", which is not alive");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  FakeDriver::releases.push_back(std::string(kind) + " " + hex(h));
  std::free(h);
  ++released;
  return CUDA_SUCCESS;
}

}  // namespace

void FakeDriver::reset_counters() {
  device_count = 1;
  pool_allocs = pool_frees = fail_next_pool_allocs = 0;
  streams_created = streams_destroyed = events_created = events_destroyed = 0;
  pools_created = pools_destroyed = libraries_loaded = libraries_unloaded = primary_releases = 0;
  std::lock_guard lock(live_mutex);
  for (auto& [p, a] : live) std::free(reinterpret_cast<void*>(p));
  live.clear();
  for (CUstream s : live_streams) std::free(s);
  for (CUevent e : live_events) std::free(e);
  for (CUmemoryPool p : live_pools) std::free(p);
  for (CUlibrary l : live_libraries) std::free(l);
  live_streams.clear();
  live_events.clear();
  live_pools.clear();
  live_libraries.clear();
  kernel_library.clear();
  violations.clear();
  releases.clear();
}

std::string FakeDriver::ledger_problems() {
  std::lock_guard lock(live_mutex);
  std::string out;
  for (const auto& v : violations) out += "violation: " + v + "\n";
  for (const auto& [p, a] : live) out += "allocation " + hex(reinterpret_cast<void*>(p)) + " never freed\n";
  for (CUstream s : live_streams) out += "stream " + hex(s) + " never destroyed\n";
  for (CUevent e : live_events) out += "event " + hex(e) + " never destroyed\n";
  for (CUmemoryPool p : live_pools) out += "pool " + hex(p) + " never destroyed\n";
  for (CUlibrary l : live_libraries) out += "library " + hex(l) + " never unloaded\n";
  if (primary_releases.load()) out += "a primary context was released\n";
  return out;
}

FakeDriver::FakeDriver() {
  reset_counters();
  auto& t = table;
  t.version = 13000;
  t.cuInit = [](unsigned) { return CUDA_SUCCESS; };
  t.cuGetErrorName = [](CUresult, const char** s) { *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; };
  t.cuGetErrorString = [](CUresult, const char** s) { *s = "fake"; return CUDA_SUCCESS; };
  t.cuDeviceGetCount = [](int* n) { *n = device_count.load(); return CUDA_SUCCESS; };
  t.cuDeviceGet = [](CUdevice* d, int i) {
    if (i < 0 || i >= device_count.load()) return CUDA_ERROR_INVALID_DEVICE;
    *d = i;
    return CUDA_SUCCESS;
  };
  t.cuDeviceGetName = [](char* buf, int n, CUdevice) { std::strncpy(buf, "Fake H200", n); return CUDA_SUCCESS; };
  t.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) { *v = fake_attribute(a); return CUDA_SUCCESS; };
  t.cuDeviceTotalMem = [](size_t* b, CUdevice) { *b = size_t(141) << 30; return CUDA_SUCCESS; };
  t.cuDeviceGetUuid = [](CUuuid* u, CUdevice) { std::memset(u->bytes, 0xab, 16); return CUDA_SUCCESS; };
  t.cuDeviceGetPCIBusId = [](char* buf, int n, CUdevice) { std::strncpy(buf, "0000:3B:00.0", n); return CUDA_SUCCESS; };
  t.cuDeviceCanAccessPeer = [](int* v, CUdevice, CUdevice) { *v = 0; return CUDA_SUCCESS; };
  t.cuDevicePrimaryCtxRetain = [](CUcontext* c, CUdevice) { *c = fake_context(); return CUDA_SUCCESS; };
  t.cuDevicePrimaryCtxRelease = [](CUdevice) { ++primary_releases; return CUDA_SUCCESS; };
  t.cuCtxGetCurrent = [](CUcontext* c) { *c = t_current; return CUDA_SUCCESS; };
  t.cuCtxSetCurrent = [](CUcontext c) { t_current = c; return CUDA_SUCCESS; };
  t.cuCtxGetDevice = [](CUdevice* d) { *d = 0; return CUDA_SUCCESS; };
  t.cuCtxSynchronize = []() { return CUDA_SUCCESS; };
  t.cuCtxGetStreamPriorityRange = [](int* lo, int* hi) { *lo = 0; *hi = -5; return CUDA_SUCCESS; };
  t.cuDeviceGetMemPool = [](CUmemoryPool* p, CUdevice) { *p = fake_pool(); return CUDA_SUCCESS; };
  t.cuMemPoolSetAttribute = [](CUmemoryPool, CUmemPool_attribute, void*) { return CUDA_SUCCESS; };
  t.cuMemPoolGetAttribute = [](CUmemoryPool, CUmemPool_attribute a, void* v) {
    // The reuse policies are ints; the sizes and thresholds 64-bit.
    if (a == CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES || a == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ||
        a == CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
      *static_cast<int*>(v) = 1;
    else
      *static_cast<cuuint64_t*>(v) = 0;
    return CUDA_SUCCESS;
  };
  t.cuMemPoolCreate = [](CUmemoryPool* p, const CUmemPoolProps*) { return make_live(p, live_pools, pools_created); };
  t.cuMemPoolDestroy = [](CUmemoryPool p) {
    {
      std::lock_guard lock(live_mutex);
      for (const auto& [ptr, a] : live)
        if (a.pool == p)
          violation("pool " + hex(p) + " destroyed before its allocation " + hex(reinterpret_cast<void*>(ptr)));
    }
    return release_live(p, live_pools, pools_destroyed, "cuMemPoolDestroy", "pool");
  };
  t.cuMemAllocFromPoolAsync = [](CUdeviceptr* p, size_t n, CUmemoryPool pool, CUstream s) {
    return fake_alloc(p, n, pool, s);
  };
  t.cuMemAllocAsync = [](CUdeviceptr* p, size_t n, CUstream s) { return fake_alloc(p, n, fake_pool(), s); };
  t.cuMemFreeAsync = [](CUdeviceptr p, CUstream s) {
    std::lock_guard lock(live_mutex);
    check_stream(s, "cuMemFreeAsync");
    auto it = live.find(p);
    if (it == live.end()) {
      violation("cuMemFreeAsync of " + hex(reinterpret_cast<void*>(p)) + ", which is not allocated");
      return CUDA_ERROR_INVALID_VALUE;
    }
    releases.push_back("free " + hex(reinterpret_cast<void*>(p)) + " on " + hex(s));
    live.erase(it);
    std::free(reinterpret_cast<void*>(p));
    ++pool_frees;
    return CUDA_SUCCESS;
  };
  t.cuMemcpyAsync = [](CUdeviceptr d, CUdeviceptr s, size_t n, CUstream stream) {
    std::memcpy(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n);
    return uses_stream("cuMemcpyAsync", stream);
  };
  t.cuMemsetD8Async = [](CUdeviceptr d, unsigned char v, size_t n, CUstream stream) {
    std::memset(reinterpret_cast<void*>(d), v, n);
    return uses_stream("cuMemsetD8Async", stream);
  };
  t.cuStreamCreate = [](CUstream* s, unsigned) { return make_live(s, live_streams, streams_created); };
  t.cuStreamCreateWithPriority = [](CUstream* s, unsigned, int) { return make_live(s, live_streams, streams_created); };
  t.cuStreamDestroy = [](CUstream s) {
    return release_live(s, live_streams, streams_destroyed, "cuStreamDestroy", "stream");
  };
  t.cuStreamSynchronize = [](CUstream s) { return uses_stream("cuStreamSynchronize", s); };
  t.cuStreamQuery = [](CUstream s) { return uses_stream("cuStreamQuery", s); };
  t.cuStreamGetCtx = [](CUstream s, CUcontext* c) {
    *c = fake_context();
    return uses_stream("cuStreamGetCtx", s);
  };
  t.cuStreamGetPriority = [](CUstream s, int* p) {
    *p = 0;
    return uses_stream("cuStreamGetPriority", s);
  };
  t.cuStreamGetFlags = [](CUstream s, unsigned* f) {
    *f = CU_STREAM_NON_BLOCKING;
    return uses_stream("cuStreamGetFlags", s);
  };
  t.cuEventCreate = [](CUevent* e, unsigned) { return make_live(e, live_events, events_created); };
  t.cuEventDestroy = [](CUevent e) {
    return release_live(e, live_events, events_destroyed, "cuEventDestroy", "event");
  };
  t.cuEventRecord = [](CUevent e, CUstream s) { return uses_event("cuEventRecord", e, s); };
  t.cuEventSynchronize = [](CUevent e) { return uses_event("cuEventSynchronize", e); };
  t.cuEventQuery = [](CUevent e) { return uses_event("cuEventQuery", e); };
  t.cuStreamWaitEvent = [](CUstream s, CUevent e, unsigned) { return uses_event("cuStreamWaitEvent", e, s); };
  // Every pointer is device 0's device memory.
  t.cuPointerGetAttributes = [](unsigned n, CUpointer_attribute* attrs, void** values, CUdeviceptr) {
    for (unsigned i = 0; i < n; ++i) {
      if (attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) *static_cast<int*>(values[i]) = 0;
      if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *static_cast<unsigned*>(values[i]) = CU_MEMORYTYPE_DEVICE;
      if (attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED) *static_cast<int*>(values[i]) = 0;
    }
    return CUDA_SUCCESS;
  };
  // Loaded code: every load is a new library; a kernel's handle remembers its library.
  t.cuLibraryLoadData = [](CUlibrary* lib, const void*, CUjit_option*, void**, unsigned, CUlibraryOption*, void**,
                           unsigned) { return make_live(lib, live_libraries, libraries_loaded); };
  t.cuLibraryUnload = [](CUlibrary lib) {
    return release_live(lib, live_libraries, libraries_unloaded, "cuLibraryUnload", "library");
  };
  t.cuLibraryGetKernel = [](CUkernel* k, CUlibrary lib, const char*) {
    std::lock_guard lock(live_mutex);
    if (!live_libraries.count(lib)) violation("cuLibraryGetKernel in library " + hex(lib) + ", which is not loaded");
    *k = reinterpret_cast<CUkernel>(reinterpret_cast<std::uintptr_t>(lib) + 1);  // one kernel per library
    kernel_library[*k] = lib;
    return CUDA_SUCCESS;
  };
  t.cuLibraryGetModule = [](CUmodule* m, CUlibrary lib) {
    std::lock_guard lock(live_mutex);
    if (!live_libraries.count(lib)) violation("cuLibraryGetModule of library " + hex(lib) + ", which is not loaded");
    *m = reinterpret_cast<CUmodule>(reinterpret_cast<std::uintptr_t>(lib) + 2);  // one module per library
    return CUDA_SUCCESS;
  };
  t.cuKernelGetParamInfo = [](CUkernel, size_t i, size_t* offset, size_t* size) {
    if (i >= 2) return CUDA_ERROR_INVALID_VALUE;  // (int, float*)-like: 4 and 8 bytes
    *offset = i * 8;
    if (size) *size = i == 0 ? 4 : 8;
    return CUDA_SUCCESS;
  };
  t.cuLaunchKernelEx = [](const CUlaunchConfig* c, CUfunction f, void**, void**) {
    std::lock_guard lock(live_mutex);
    check_stream(c->hStream, "cuLaunchKernelEx");
    auto it = kernel_library.find(reinterpret_cast<CUkernel>(f));
    if (it == kernel_library.end() || !live_libraries.count(it->second))
      violation("cuLaunchKernelEx of kernel " + hex(f) + ", whose library is not loaded");
    return CUDA_SUCCESS;
  };
  // No stream of the fake is ever being captured, unless a test says otherwise.
  t.cuStreamGetCaptureInfo = [](CUstream, CUstreamCaptureStatus* status, cuuint64_t*, CUgraph* graph,
                                const CUgraphNode**, const CUgraphEdgeData**, size_t*) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (graph) *graph = nullptr;
    return CUDA_SUCCESS;
  };
  detail::set_driver_table_for_testing(&table);
  detail::reset_device_registry_for_testing();
}

FakeDriver::~FakeDriver() {
  detail::set_driver_table_for_testing(nullptr);
  detail::reset_device_registry_for_testing();
  reset_counters();
}

}  // namespace cucore::test
