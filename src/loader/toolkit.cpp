#include "loader/toolkit.hpp"

#include <pthread.h>

#include <cucore/errors.hpp>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <string>

#include "files/regular_file.hpp"
#include "loader/library.hpp"

namespace cucore::detail {
namespace {

const LibrarySpec kNvrtcSpec{
    "nvrtc", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, "CUCORE_NVRTC_PATH", true,
    "install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc`, or set CUCORE_NVRTC_PATH"};
const LibrarySpec kNvJitLinkSpec{
    "nvjitlink", {"libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so"}, "CUCORE_NVJITLINK_PATH", true,
    "install the CUDA toolkit, or `pip install nvidia-nvjitlink`, or set CUCORE_NVJITLINK_PATH"};
// libNVVM lies in nvvm/lib64 in the CUDA 12 toolkit and in lib (or lib64) in
// later layouts; NVIDIA's wheels put it in nvvm/lib64 or lib.
const LibrarySpec kNvvmSpec{"nvvm",
                            {"libnvvm.so.4", "libnvvm.so.3", "libnvvm.so"},
                            "CUCORE_NVVM_PATH",
                            true,
                            "install the CUDA toolkit (its nvcc component), or `pip install nvidia-nvvm`, or set "
                            "CUCORE_NVVM_PATH",
                            {"nvvm/lib64", "lib64", "lib"}};

// One lazily loaded library and its table; the outcome (table or failure) is
// kept for the process.
template <typename Table>
struct Lazy {
  std::once_flag once;
  LoadedLibrary lib;
  Table table;
  std::exception_ptr failure;
  bool ok = false;

  template <typename Fill>
  const Table& get(const LibrarySpec& spec, Fill fill) {
    std::call_once(once, [&] {
      try {
        lib = load_library(spec);
        if (!lib.handle) throw LibraryNotFoundError(spec.component, lib.info.searched, lib.info.hint);
        fill(lib, table);
        ok = true;
      } catch (...) {
        failure = std::current_exception();
      }
    });
    if (!ok) std::rethrow_exception(failure);
    return table;
  }
};

Lazy<NvrtcTable>& nvrtc_lazy() {
  static Lazy<NvrtcTable> l;
  return l;
}
Lazy<NvJitLinkTable>& nvjitlink_lazy() {
  static Lazy<NvJitLinkTable> l;
  return l;
}
Lazy<NvvmTable>& nvvm_lazy() {
  static Lazy<NvvmTable> l;
  return l;
}

template <typename Fn>
void bind(Fn& slot, const LoadedLibrary& lib, const char* name) {
  slot = reinterpret_cast<Fn>(symbol(lib.handle, name));
  if (!slot)
    throw FeatureUnavailableError(std::string(name) + " in " + lib.info.path, "a newer release of " + lib.info.name);
}

template <typename Table, typename Fill>
pathfinder::ComponentInfo info_of(Lazy<Table>& lazy, const LibrarySpec& spec, Fill fill, std::string (*version)(const Table&)) {
  try {
    const Table& t = lazy.get(spec, fill);
    pathfinder::ComponentInfo info = lazy.lib.info;
    info.version = version(t);
    return info;
  } catch (const std::exception& e) {
    pathfinder::ComponentInfo info = lazy.lib.info;
    info.name = spec.component;
    if (info.hint.empty()) info.hint = spec.hint;
    if (info.found) {  // loaded but unusable (too old, missing entry points)
      info.found = false;
      info.searched.push_back(std::string("unusable: ") + e.what());
    }
    return info;
  }
}

void fill_nvrtc(const LoadedLibrary& lib, NvrtcTable& t) {
#define X(name) bind(t.name, lib, #name);
  CUCORE_NVRTC_FUNCTIONS(X)
#undef X
  t.nvrtcVersion(&t.major, &t.minor);
}

void fill_nvjitlink(const LoadedLibrary& lib, NvJitLinkTable& t) {
#define X(name) bind(t.name, lib, #name);
  CUCORE_NVJITLINK_FUNCTIONS(X)
#undef X
  t.nvJitLinkVersion(&t.major, &t.minor);
}

void fill_nvvm(const LoadedLibrary& lib, NvvmTable& t) {
#define X(name, ret, params) bind(t.name, lib, #name);
  CUCORE_NVVM_FUNCTIONS(X)
#undef X
  t.nvvmVersion(&t.major, &t.minor);
  t.nvvmIRVersion(&t.ir_major, &t.ir_minor, &t.dbg_major, &t.dbg_minor);
}

}  // namespace

namespace {
std::atomic<const NvrtcTable*> g_nvrtc_for_testing{nullptr};
std::atomic<const NvvmTable*> g_nvvm_for_testing{nullptr};
std::atomic<const NvJitLinkTable*> g_nvjitlink_for_testing{nullptr};
}  // namespace

const NvrtcTable& nvrtc() {
  if (const NvrtcTable* t = g_nvrtc_for_testing.load(std::memory_order_acquire)) [[unlikely]]
    return *t;
  return nvrtc_lazy().get(kNvrtcSpec, fill_nvrtc);
}
const NvvmTable& libnvvm() {
  if (const NvvmTable* t = g_nvvm_for_testing.load(std::memory_order_acquire)) [[unlikely]]
    return *t;
  return nvvm_lazy().get(kNvvmSpec, fill_nvvm);
}
const NvJitLinkTable& nvjitlink() {
  if (const NvJitLinkTable* t = g_nvjitlink_for_testing.load(std::memory_order_acquire)) [[unlikely]]
    return *t;
  return nvjitlink_lazy().get(kNvJitLinkSpec, fill_nvjitlink);
}

void set_nvrtc_table_for_testing(const NvrtcTable* table) noexcept {
  g_nvrtc_for_testing.store(table, std::memory_order_release);
}
void set_nvvm_table_for_testing(const NvvmTable* table) noexcept {
  g_nvvm_for_testing.store(table, std::memory_order_release);
}
void set_nvjitlink_table_for_testing(const NvJitLinkTable* table) noexcept {
  g_nvjitlink_for_testing.store(table, std::memory_order_release);
}

bool nvjitlink_available() noexcept {
  try {
    nvjitlink();
    return true;
  } catch (...) {
    return false;
  }
}

pathfinder::ComponentInfo nvrtc_component_info() {
  return info_of<NvrtcTable>(nvrtc_lazy(), kNvrtcSpec, fill_nvrtc, [](const NvrtcTable& t) {
    return std::to_string(t.major) + "." + std::to_string(t.minor);
  });
}
pathfinder::ComponentInfo nvvm_component_info() {
  return info_of<NvvmTable>(nvvm_lazy(), kNvvmSpec, fill_nvvm, [](const NvvmTable& t) {
    return std::to_string(t.major) + "." + std::to_string(t.minor);
  });
}
pathfinder::ComponentInfo nvjitlink_component_info() {
  return info_of<NvJitLinkTable>(nvjitlink_lazy(), kNvJitLinkSpec, fill_nvjitlink, [](const NvJitLinkTable& t) {
    return std::to_string(t.major) + "." + std::to_string(t.minor);
  });
}

// ---- NVML --------------------------------------------------------------------

std::atomic<const NvmlTable*> g_nvml{nullptr};
std::atomic<nvml::PFN_nvmlErrorString> g_nvml_error_string{nullptr};

namespace {

constexpr const char* kNvmlHint = "NVML comes with the NVIDIA driver; a machine without a GPU has none";

struct NvmlState {
  std::mutex mutex;
  std::vector<std::string> sonames{"libnvidia-ml.so.1"};
  bool searched = false;
  LoadedLibrary lib;  // the search's outcome, kept for the pathfinder
  bool bound = false;
  NvmlTable table;
  bool initialized = false;  // nvmlInit_v2 succeeded in this process
  std::exception_ptr failure;
  const NvmlTable* testing = nullptr;
};

// Leaked on purpose: NVML stays usable from other static destructors at exit.
NvmlState& nvml_state() {
  static NvmlState* s = new NvmlState;
  return *s;
}

// A forked child initializes NVML again on its next use, as cuda.core does.
// The child has one thread, so resetting the mutex (which a thread of the
// parent may have held at fork) is safe.
void nvml_after_fork_in_child() {
  NvmlState& s = nvml_state();
  new (&s.mutex) std::mutex;
  s.initialized = false;
  s.failure = nullptr;
  g_nvml.store(nullptr, std::memory_order_release);
}

void bind_nvml(NvmlState& s) {
  const LoadedLibrary& lib = s.lib;
  NvmlTable& t = s.table;
#define X(name, required, params)                                                      \
  t.name = reinterpret_cast<nvml::PFN_##name>(symbol(lib.handle, #name));               \
  if ((required) && !t.name)                                                           \
    throw FeatureUnavailableError(std::string(#name) + " in " + lib.info.path, "a newer NVIDIA driver");
  CUCORE_NVML_FUNCTIONS(X)
  CUCORE_NVML_LEGACY_FUNCTIONS(X)
#undef X
  t.nvmlErrorString = reinterpret_cast<nvml::PFN_nvmlErrorString>(symbol(lib.handle, "nvmlErrorString"));
  g_nvml_error_string.store(t.nvmlErrorString, std::memory_order_release);
  s.bound = true;
}

}  // namespace

const NvmlTable& load_nvml() {
  NvmlState& s = nvml_state();
  std::lock_guard lock(s.mutex);
  if (s.testing) {
    g_nvml.store(s.testing, std::memory_order_release);
    return *s.testing;
  }
  if (s.failure) std::rethrow_exception(s.failure);
  try {
    if (!s.searched) {
      s.lib = load_library(LibrarySpec{"nvml", s.sonames, nullptr, false, kNvmlHint, {}});
      s.searched = true;
    }
    if (!s.lib.handle) throw LibraryNotFoundError("nvml", s.lib.info.searched, kNvmlHint);
    if (!s.bound) bind_nvml(s);
    if (!s.initialized) {
      if (nvml::Return r = s.table.nvmlInit_v2(); r != nvml::SUCCESS) {
        const char* text = s.table.nvmlErrorString ? s.table.nvmlErrorString(r) : nullptr;
        throw NvmlInitFailure(r, "nvmlInit_v2 failed (" + std::to_string(r) + ")" + (text ? std::string(": ") + text : ""));
      }
      s.initialized = true;
      static std::once_flag fork_handler;
      std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, nvml_after_fork_in_child); });
    }
  } catch (...) {
    s.failure = std::current_exception();
    throw;
  }
  g_nvml.store(&s.table, std::memory_order_release);
  return s.table;
}

void set_nvml_table_for_testing(const NvmlTable* table) {
  NvmlState& s = nvml_state();
  std::lock_guard lock(s.mutex);
  s.testing = table;
  s.failure = nullptr;
  g_nvml_error_string.store(table ? table->nvmlErrorString : s.table.nvmlErrorString, std::memory_order_release);
  g_nvml.store(nullptr, std::memory_order_release);
}

void set_nvml_library_for_testing(std::vector<std::string> sonames) {
  NvmlState& s = nvml_state();
  std::lock_guard lock(s.mutex);
  s.sonames = sonames.empty() ? std::vector<std::string>{"libnvidia-ml.so.1"} : std::move(sonames);
  s.searched = false;
  s.failure = nullptr;
  // A library already bound stays loaded (dlclose would strand handles); the
  // next search decides whether it is used again.
  s.lib = LoadedLibrary{};
  s.bound = false;
  g_nvml.store(nullptr, std::memory_order_release);
}

pathfinder::ComponentInfo nvml_component_info() {
  NvmlState& s = nvml_state();
  std::string version, problem;
  try {
    const NvmlTable& t = nvml_table();
    char buf[nvml::kSystemNvmlVersionBufferSize] = {};
    if (t.nvmlSystemGetNVMLVersion(buf, sizeof buf) == nvml::SUCCESS) version = buf;
  } catch (const std::exception& e) {
    problem = e.what();
  }
  std::lock_guard lock(s.mutex);
  pathfinder::ComponentInfo info = s.lib.info;
  info.name = "nvml";
  info.hint = kNvmlHint;
  info.version = version;
  if (s.testing) {
    info.found = true;
    info.found_by = "a table substituted for testing";
  } else if (!problem.empty() && info.found) {  // loaded but unusable (nvmlInit failed, too old)
    info.found = false;
    info.searched.push_back("unusable: " + problem);
  }
  return info;
}

const char* nvml_error_string(int code) noexcept {
  if (auto f = g_nvml_error_string.load(std::memory_order_acquire)) return f(code);
  return nullptr;
}

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return;
  const char* text = nvrtc().nvrtcGetErrorString ? nvrtc().nvrtcGetErrorString(r) : "NVRTC error";
  throw RuntimeError(std::string(call) + " failed: " + text + " (" + std::to_string(static_cast<int>(r)) + ")");
}

const std::string& libdevice_bitcode() {
  static const std::string bitcode = [] {
    namespace fs = std::filesystem;
    std::vector<fs::path> dirs;
    try {
      (void)libnvvm();
      const fs::path lib = fs::path(nvvm_lazy().lib.info.path).parent_path();
      dirs.push_back(lib.parent_path() / "libdevice");          // nvvm/lib64 -> nvvm/libdevice
      dirs.push_back(lib.parent_path() / "nvvm" / "libdevice");  // lib -> nvvm/libdevice
    } catch (...) {
    }
    for (const char* var : {"CUDA_PATH", "CUDA_HOME"})
      if (const char* root = std::getenv(var); root && *root) dirs.push_back(fs::path(root) / "nvvm" / "libdevice");
    dirs.emplace_back("/usr/local/cuda/nvvm/libdevice");
    std::vector<std::string> searched;
    for (const auto& d : dirs) {
      const fs::path file = d / "libdevice.10.bc";
      std::error_code ec;
      if (!fs::exists(file, ec)) {
        searched.push_back(file.string() + " - not found");
        continue;
      }
      try {
        std::string data = read_text_file(file);  // never blocks on a FIFO in its place
        if (!data.empty()) return data;
        searched.push_back(file.string() + " - empty");
      } catch (const FileError& e) {
        searched.push_back(file.string() + " - " + e.what());
      }
    }
    throw LibraryNotFoundError("libdevice", searched, "install the CUDA toolkit's nvvm component (or nvidia-nvvm)");
  }();
  return bitcode;
}

void check_nvvm(nvvm::Result r, const char* call) {
  if (r == nvvm::SUCCESS) return;
  const char* text = libnvvm().nvvmGetErrorString ? libnvvm().nvvmGetErrorString(r) : "libNVVM error";
  throw RuntimeError(std::string(call) + " failed: " + text + " (" + std::to_string(static_cast<int>(r)) + ")");
}

}  // namespace cucore::detail
