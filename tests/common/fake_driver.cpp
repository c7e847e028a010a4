#include "common/fake_driver.hpp"

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

CUresult fake_alloc(CUdeviceptr* p, size_t n) {
  if (FakeDriver::fail_next_pool_allocs.load() > 0) {
    --FakeDriver::fail_next_pool_allocs;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* m = std::malloc(n ? n : 1);
  *p = reinterpret_cast<CUdeviceptr>(m);
  std::lock_guard lock(FakeDriver::live_mutex);
  FakeDriver::live[reinterpret_cast<std::uintptr_t>(m)] = n;
  ++FakeDriver::pool_allocs;
  return CUDA_SUCCESS;
}

}  // namespace

void FakeDriver::reset_counters() {
  device_count = 1;
  pool_allocs = 0;
  pool_frees = 0;
  fail_next_pool_allocs = 0;
  streams_created = 0;
  streams_destroyed = 0;
  std::lock_guard lock(live_mutex);
  for (auto& [p, n] : live) std::free(reinterpret_cast<void*>(p));
  live.clear();
}

FakeDriver::FakeDriver() {
  reset_counters();
  auto& t = table;
  t.version = 13000;
  t.cuInit = [](unsigned) { return CUDA_SUCCESS; };
  t.cuDriverGetVersion = [](int* v) { *v = 13000; return CUDA_SUCCESS; };
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
  t.cuDevicePrimaryCtxRelease = [](CUdevice) { return CUDA_SUCCESS; };
  t.cuDevicePrimaryCtxGetState = [](CUdevice, unsigned* f, int* a) { *f = 0; *a = 1; return CUDA_SUCCESS; };
  t.cuCtxGetCurrent = [](CUcontext* c) { *c = t_current; return CUDA_SUCCESS; };
  t.cuCtxSetCurrent = [](CUcontext c) { t_current = c; return CUDA_SUCCESS; };
  t.cuCtxPushCurrent = [](CUcontext c) { t_current = c; return CUDA_SUCCESS; };
  t.cuCtxPopCurrent = [](CUcontext* c) { if (c) *c = t_current; t_current = nullptr; return CUDA_SUCCESS; };
  t.cuCtxGetDevice = [](CUdevice* d) { *d = 0; return CUDA_SUCCESS; };
  t.cuCtxSynchronize = []() { return CUDA_SUCCESS; };
  t.cuCtxGetStreamPriorityRange = [](int* lo, int* hi) { *lo = 0; *hi = -5; return CUDA_SUCCESS; };
  t.cuDeviceGetDefaultMemPool = [](CUmemoryPool* p, CUdevice) { *p = fake_pool(); return CUDA_SUCCESS; };
  t.cuDeviceGetMemPool = [](CUmemoryPool* p, CUdevice) { *p = fake_pool(); return CUDA_SUCCESS; };
  t.cuMemPoolSetAttribute = [](CUmemoryPool, CUmemPool_attribute, void*) { return CUDA_SUCCESS; };
  t.cuMemPoolGetAttribute = [](CUmemoryPool, CUmemPool_attribute, void* v) {
    *static_cast<cuuint64_t*>(v) = 0;
    return CUDA_SUCCESS;
  };
  t.cuMemPoolCreate = [](CUmemoryPool* p, const CUmemPoolProps*) { *p = reinterpret_cast<CUmemoryPool>(0x3000); return CUDA_SUCCESS; };
  t.cuMemPoolDestroy = [](CUmemoryPool) { return CUDA_SUCCESS; };
  t.cuMemAllocFromPoolAsync = [](CUdeviceptr* p, size_t n, CUmemoryPool, CUstream) { return fake_alloc(p, n); };
  t.cuMemAllocAsync = [](CUdeviceptr* p, size_t n, CUstream) { return fake_alloc(p, n); };
  t.cuMemFreeAsync = [](CUdeviceptr p, CUstream) {
    std::lock_guard lock(live_mutex);
    auto it = live.find(p);
    if (it == live.end()) return CUDA_ERROR_INVALID_VALUE;
    std::free(reinterpret_cast<void*>(p));
    live.erase(it);
    ++pool_frees;
    return CUDA_SUCCESS;
  };
  t.cuMemcpyAsync = [](CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
    std::memcpy(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n);
    return CUDA_SUCCESS;
  };
  t.cuMemsetD8Async = [](CUdeviceptr d, unsigned char v, size_t n, CUstream) {
    std::memset(reinterpret_cast<void*>(d), v, n);
    return CUDA_SUCCESS;
  };
  t.cuStreamCreate = [](CUstream* s, unsigned) { *s = reinterpret_cast<CUstream>(std::malloc(8)); ++streams_created; return CUDA_SUCCESS; };
  t.cuStreamCreateWithPriority = [](CUstream* s, unsigned, int) {
    *s = reinterpret_cast<CUstream>(std::malloc(8));
    ++streams_created;
    return CUDA_SUCCESS;
  };
  t.cuStreamDestroy = [](CUstream s) { std::free(s); ++streams_destroyed; return CUDA_SUCCESS; };
  t.cuStreamSynchronize = [](CUstream) { return CUDA_SUCCESS; };
  t.cuStreamQuery = [](CUstream) { return CUDA_SUCCESS; };
  t.cuStreamGetCtx = [](CUstream, CUcontext* c) { *c = fake_context(); return CUDA_SUCCESS; };
  t.cuStreamGetPriority = [](CUstream, int* p) { *p = 0; return CUDA_SUCCESS; };
  t.cuStreamGetFlags = [](CUstream, unsigned* f) { *f = CU_STREAM_NON_BLOCKING; return CUDA_SUCCESS; };
  t.cuEventCreate = [](CUevent* e, unsigned) { *e = reinterpret_cast<CUevent>(std::malloc(8)); return CUDA_SUCCESS; };
  t.cuEventDestroy = [](CUevent e) { std::free(e); return CUDA_SUCCESS; };
  t.cuEventRecord = [](CUevent, CUstream) { return CUDA_SUCCESS; };
  t.cuEventSynchronize = [](CUevent) { return CUDA_SUCCESS; };
  t.cuEventQuery = [](CUevent) { return CUDA_SUCCESS; };
  t.cuStreamWaitEvent = [](CUstream, CUevent, unsigned) { return CUDA_SUCCESS; };
  t.cuPointerGetAttribute = [](void* v, CUpointer_attribute a, CUdeviceptr) {
    if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) *static_cast<int*>(v) = 0;
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
