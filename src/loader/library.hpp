#pragma once
// Finding and dlopen-ing the shared libraries cucore uses, with the search
// order the pathfinder reports. Internal to libcucore.
#include <cucore/pathfinder.hpp>

#include <mutex>
#include <string>
#include <vector>

namespace cucore::detail {

struct LibrarySpec {
  const char* component;             // pathfinder name: "nvrtc"
  std::vector<std::string> sonames;  // tried in order: "libnvrtc.so.13", ...
  const char* override_env;          // "CUCORE_NVRTC_PATH": a file or a directory
  bool toolkit;                      // toolkit libraries search wheels, conda, CUDA_HOME, /usr/local/cuda
  const char* hint;
  // Where the library lies under a toolkit root ($CUDA_PATH, /usr/local/cuda),
  // in order; under a wheel's package directory, those of them that exist
  // (libNVVM: nvvm/lib64 in the toolkit, lib in newer layouts and wheels).
  std::vector<std::string> subdirs = {"lib64", "lib"};
};

struct LoadedLibrary {
  void* handle = nullptr;
  pathfinder::ComponentInfo info;  // path, found_by, searched (version filled by the caller)
};

// Runs the search; never throws. handle == nullptr when nothing loaded.
LoadedLibrary load_library(const LibrarySpec& spec);

// dlsym that returns nullptr when absent.
void* symbol(void* handle, const char* name) noexcept;

// Python site-packages given by the module (empty when not embedded).
std::vector<std::string> python_site_packages();

}  // namespace cucore::detail
