#include "loader/toolkit.hpp"

#include <cucore/errors.hpp>

#include <exception>
#include <mutex>
#include <string>

#include "loader/library.hpp"

namespace cucore::detail {
namespace {

const LibrarySpec kNvrtcSpec{
    "nvrtc", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, "CUCORE_NVRTC_PATH", true,
    "install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc`, or set CUCORE_NVRTC_PATH"};
const LibrarySpec kNvJitLinkSpec{
    "nvjitlink", {"libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so"}, "CUCORE_NVJITLINK_PATH", true,
    "install the CUDA toolkit, or `pip install nvidia-nvjitlink`, or set CUCORE_NVJITLINK_PATH"};
const LibrarySpec kNvmlSpec{"nvml", {"libnvidia-ml.so.1"}, nullptr, false,
                            "NVML comes with the NVIDIA driver; a machine without a GPU has none"};

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
Lazy<NvmlTable>& nvml_lazy() {
  static Lazy<NvmlTable> l;
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

void fill_nvml(const LoadedLibrary& lib, NvmlTable& t) {
#define X(name, sym) bind(t.name, lib, sym);
  CUCORE_NVML_FUNCTIONS(X)
#undef X
  if (nvml::Return r = t.init(); r != nvml::SUCCESS)
    throw Error(std::string("nvmlInit_v2 failed: ") + (t.error_string ? t.error_string(r) : "") + " (" +
                std::to_string(r) + ")");
}

}  // namespace

const NvrtcTable& nvrtc() { return nvrtc_lazy().get(kNvrtcSpec, fill_nvrtc); }
const NvJitLinkTable& nvjitlink() { return nvjitlink_lazy().get(kNvJitLinkSpec, fill_nvjitlink); }
const NvmlTable& nvml_lib() { return nvml_lazy().get(kNvmlSpec, fill_nvml); }

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
pathfinder::ComponentInfo nvjitlink_component_info() {
  return info_of<NvJitLinkTable>(nvjitlink_lazy(), kNvJitLinkSpec, fill_nvjitlink, [](const NvJitLinkTable& t) {
    return std::to_string(t.major) + "." + std::to_string(t.minor);
  });
}
pathfinder::ComponentInfo nvml_component_info() {
  return info_of<NvmlTable>(nvml_lazy(), kNvmlSpec, fill_nvml, [](const NvmlTable& t) {
    char buf[96] = {};
    if (t.system_get_nvml_version(buf, sizeof buf) != nvml::SUCCESS) return std::string();
    return std::string(buf);
  });
}

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return;
  const char* text = nvrtc().nvrtcGetErrorString ? nvrtc().nvrtcGetErrorString(r) : "NVRTC error";
  throw Error(std::string(call) + " failed: " + text + " (" + std::to_string(static_cast<int>(r)) + ")");
}

}  // namespace cucore::detail
