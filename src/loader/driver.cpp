#include "loader/driver.hpp"

#include <cucore/errors.hpp>

#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <type_traits>

#include "errors/result_lookup.hpp"
#include "loader/library.hpp"

namespace cucore::detail {

// Each entry is fetched at the ABI cuda.h declares; a toolkit whose cuda.h moved
// to a newer ABI fails here until tools/gen_driver_functions.py is rerun.
#define X(name, ver, required)                                                  \
  static_assert(std::is_same_v<PFN_##name##_v##ver, decltype(&::name)>,        \
                #name ": the ABI in driver_functions.inc differs from cuda.h");
#include "loader/driver_functions.inc"
#undef X

std::atomic<const DriverTable*> g_driver{nullptr};

namespace {

struct DriverState {
  std::once_flag once;
  LoadedLibrary lib;
  DriverTable table;
  std::exception_ptr failure;
  bool loaded = false;
  std::mutex open_mutex;
};

DriverState& state() {
  static DriverState s;  // never destroyed before other statics use it: function-local
  return s;
}

const LibrarySpec kDriverSpec{
    "driver", {"libcuda.so.1"}, nullptr, false,
    "install the NVIDIA driver (libcuda.so.1 comes with it); a machine without a GPU has none"};

void open_driver(DriverState& s) {
  std::lock_guard lock(s.open_mutex);
  if (!s.lib.handle) s.lib = load_library(kDriverSpec);
}

void resolve(DriverState& s) {
  open_driver(s);
  if (!s.lib.handle) throw LibraryNotFoundError("libcuda (the CUDA driver, libcuda.so.1)", s.lib.info.searched, s.lib.info.hint);
  auto get_proc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(symbol(s.lib.handle, "cuGetProcAddress_v2"));
  if (!get_proc)
    throw FeatureUnavailableError("the CUDA driver at " + s.lib.info.path + " (it has no cuGetProcAddress_v2)",
                                  "CUDA driver 12.0 or newer");
  DriverTable& t = s.table;
  auto version_fn = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(symbol(s.lib.handle, "cuDriverGetVersion"));
  if (version_fn) version_fn(&t.version);
  char vbuf[16];
#define X(name, ver, required)                                                                      \
  {                                                                                                 \
    void* fn = nullptr;                                                                             \
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                   \
    if (get_proc(#name, &fn, ver, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) == CUDA_SUCCESS &&    \
        status == CU_GET_PROC_ADDRESS_SUCCESS)                                                      \
      t.name = reinterpret_cast<PFN_##name##_v##ver>(fn);                                           \
    else if (required)                                                                              \
      throw FeatureUnavailableError(std::string(#name) + " (driver " + format_cuda_version(t.version, vbuf) + \
                                        " at " + s.lib.info.path + ")",                            \
                                    std::string("CUDA driver ") + format_cuda_version(ver, vbuf)); \
  }
#include "loader/driver_functions.inc"
#undef X
  check(t.cuInit(0), "cuInit");
}

}  // namespace

namespace {
// The error names of codes newer than cucore's table, from the table in force.
CUresult driver_error_name(CUresult code, const char** text) noexcept {
  const DriverTable* t = g_driver.load(std::memory_order_acquire);
  return t && t->cuGetErrorName ? t->cuGetErrorName(code, text) : CUDA_ERROR_NOT_INITIALIZED;
}
CUresult driver_error_string(CUresult code, const char** text) noexcept {
  const DriverTable* t = g_driver.load(std::memory_order_acquire);
  return t && t->cuGetErrorString ? t->cuGetErrorString(code, text) : CUDA_ERROR_NOT_INITIALIZED;
}
}  // namespace

const DriverTable& load_driver() {
  DriverState& s = state();
  std::call_once(s.once, [&] {
    try {
      resolve(s);
      s.loaded = true;
    } catch (...) {
      s.failure = std::current_exception();
    }
  });
  if (!s.loaded) std::rethrow_exception(s.failure);
  g_driver.store(&s.table, std::memory_order_release);
  set_result_lookup(driver_error_name, driver_error_string);
  return s.table;
}

void set_driver_table_for_testing(const DriverTable* table) {
  g_driver.store(table, std::memory_order_release);
  set_result_lookup(driver_error_name, driver_error_string);
}

void require_driver_feature(const void* fn, int min_version, const char* feature) {
  const DriverTable& t = driver();
  if (fn && t.version >= min_version) return;
  char need[16], have[16];
  throw FeatureUnavailableError(std::string(feature) + " (the driver is CUDA " + format_cuda_version(t.version, have) + ")",
                                std::string("CUDA driver ") + format_cuda_version(min_version, need));
}

const char* format_cuda_version(int version, char (&buf)[16]) noexcept {
  std::snprintf(buf, sizeof buf, "%d.%d", version / 1000, (version % 1000) / 10);
  return buf;
}

pathfinder::ComponentInfo driver_component_info() {
  DriverState& s = state();
  open_driver(s);
  std::lock_guard lock(s.open_mutex);
  pathfinder::ComponentInfo info = s.lib.info;
  if (s.lib.handle) {
    int v = 0;
    if (auto fn = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(symbol(s.lib.handle, "cuDriverGetVersion")); fn && fn(&v) == CUDA_SUCCESS) {
      char buf[16];
      info.version = std::string(format_cuda_version(v, buf)) + " (" + std::to_string(v) + ")";
    }
  }
  return info;
}

}  // namespace cucore::detail
