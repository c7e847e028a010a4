#pragma once
// The driver's function table: every entry point cucore calls, fetched from
// libcuda.so.1 through cuGetProcAddress at the exact ABI version cuda.h
// declares. Tests substitute the table (set_driver_table_for_testing) to inject
// faults on machines without a GPU.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cucore/pathfinder.hpp>

#include <atomic>

// The OpenGL interop entry points, as cudaGL.h declares them and
// cudaGLTypedefs.h types them, with GL's GLuint and GLenum spelled as what
// they are (unsigned int): those headers need OpenGL's, which cucore does not
// (it takes GL names and targets as integers). tools/gen_driver_functions.py
// reads their ABI versions from cudaGLTypedefs.h.
extern "C" {
CUresult CUDAAPI cuGraphicsGLRegisterBuffer(CUgraphicsResource* pCudaResource, unsigned int buffer, unsigned int Flags);
CUresult CUDAAPI cuGraphicsGLRegisterImage(CUgraphicsResource* pCudaResource, unsigned int image, unsigned int target,
                                           unsigned int Flags);
}
typedef CUresult(CUDAAPI* PFN_cuGraphicsGLRegisterBuffer_v3000)(CUgraphicsResource* pCudaResource, unsigned int buffer,
                                                                unsigned int Flags);
typedef CUresult(CUDAAPI* PFN_cuGraphicsGLRegisterImage_v3000)(CUgraphicsResource* pCudaResource, unsigned int image,
                                                               unsigned int target, unsigned int Flags);

namespace cucore::detail {

struct DriverTable {
#define X(name, ver, required) PFN_##name##_v##ver name = nullptr;
#include "loader/driver_functions.inc"
#undef X
  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

extern std::atomic<const DriverTable*> g_driver;

// Slow path: loads libcuda.so.1, resolves the table, runs cuInit. Throws
// LibraryNotFoundError (no driver), FeatureUnavailableError (driver too old for
// a required entry point) or CudaError (cuInit failed); a failure is remembered
// and rethrown on each later call.
const DriverTable& load_driver();

inline const DriverTable& driver() {
  const DriverTable* t = g_driver.load(std::memory_order_acquire);
  if (t) [[likely]]
    return *t;
  return load_driver();
}

// Test seam: route every driver call through `table` (nullptr: back to the real
// driver, loaded again on next use). The table must outlive its use.
void set_driver_table_for_testing(const DriverTable* table);

// Throws FeatureUnavailableError when `fn` is null (the driver lacks it) or the
// driver is older than `min_version`.
void require_driver_feature(const void* fn, int min_version, const char* feature);
inline void require(const void* fn, int min_version, const char* feature) {
  if (!fn || driver().version < min_version) [[unlikely]]
    require_driver_feature(fn, min_version, feature);
}

// "13.0" from 13000.
const char* format_cuda_version(int version, char (&buf)[16]) noexcept;

// Where libcuda came from (or every place searched), for the pathfinder;
// loads the library but runs no driver call beyond cuDriverGetVersion.
pathfinder::ComponentInfo driver_component_info();

}  // namespace cucore::detail
