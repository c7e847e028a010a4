#include "loader/library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace fs = std::filesystem;

namespace cucore::detail {
namespace {

std::mutex g_site_mutex;
std::vector<std::string> g_site_packages;

std::string loaded_path(void* handle) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return {};
}

// One search step: try to dlopen `path`; record the outcome.
bool try_open(LoadedLibrary& out, const std::string& path, const char* step, int extra_flags = 0) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL | extra_flags);
  if (!h) {
    const char* err = dlerror();
    if (extra_flags & RTLD_NOLOAD)
      out.info.searched.push_back(std::string(step) + ": " + path + " - not loaded");
    else
      out.info.searched.push_back(std::string(step) + ": " + path + " - " + (err ? err : "not found"));
    return false;
  }
  out.handle = h;
  out.info.found = true;
  out.info.found_by = step;
  std::string real = loaded_path(h);
  out.info.path = real.empty() ? path : real;
  out.info.searched.push_back(std::string(step) + ": " + path + " - found " + out.info.path);
  return true;
}

bool try_dir(LoadedLibrary& out, const LibrarySpec& spec, const fs::path& dir, const char* step) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    out.info.searched.push_back(std::string(step) + ": " + dir.string() + " - no such directory");
    return false;
  }
  for (const auto& so : spec.sonames) {
    fs::path candidate = dir / so;
    if (fs::exists(candidate, ec)) {
      if (try_open(out, candidate.string(), step)) return true;
    } else {
      out.info.searched.push_back(std::string(step) + ": " + candidate.string() + " - no such file");
    }
  }
  return false;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

void* symbol(void* handle, const char* name) noexcept { return handle ? dlsym(handle, name) : nullptr; }

std::vector<std::string> python_site_packages() {
  std::lock_guard lock(g_site_mutex);
  return g_site_packages;
}

namespace {

LoadedLibrary search(const LibrarySpec& spec) {
  LoadedLibrary out;
  out.info.name = spec.component;
  out.info.hint = spec.hint;

  // 1. Already loaded in this process (by PyTorch, CuPy, the application...).
  for (const auto& so : spec.sonames)
    if (try_open(out, so, "already loaded", RTLD_NOLOAD)) return out;

  if (spec.toolkit) {
    // 2. An explicit override: a file, or a directory holding the library.
    if (const char* o = env(spec.override_env)) {
      std::error_code ec;
      std::string step = std::string("$") + spec.override_env;
      if (fs::is_directory(o, ec)) {
        if (try_dir(out, spec, o, step.c_str())) return out;
      } else if (try_open(out, o, step.c_str())) {
        return out;
      }
      // An explicit choice that does not load is never passed over in silence:
      // whatever the search finds instead says so (in doctor's "found by", and
      // in the error when it finds nothing).
      out.info.hint = "$" + std::string(spec.override_env) + " is set to '" + o + "', which is not a loadable " +
                      spec.component + " library (see above): fix it or unset it";
    } else {
      out.info.searched.push_back(std::string("$") + spec.override_env + ": not set");
    }
    // 3. NVIDIA's pip wheels, when Python embeds us: site-packages/nvidia/*/lib.
    auto sites = python_site_packages();
    if (sites.empty()) out.info.searched.push_back("site-packages: not running under Python");
    for (const auto& site : sites) {
      fs::path nv = fs::path(site) / "nvidia";
      std::error_code ec;
      if (!fs::is_directory(nv, ec)) {
        out.info.searched.push_back("site-packages: " + nv.string() + " - no such directory");
        continue;
      }
      for (const auto& entry : fs::directory_iterator(nv, ec)) {
        if (try_dir(out, spec, entry.path() / "lib", "site-packages")) return out;
        for (const auto& sub : spec.subdirs)
          if (sub != "lib" && fs::is_directory(entry.path() / sub, ec) &&
              try_dir(out, spec, entry.path() / sub, "site-packages"))
            return out;
      }
    }
    // 4. A conda environment.
    if (const char* conda = env("CONDA_PREFIX")) {
      if (try_dir(out, spec, fs::path(conda) / "lib", "$CONDA_PREFIX")) return out;
    } else {
      out.info.searched.push_back("$CONDA_PREFIX: not set");
    }
  }
  // 5. The OS loader (LD_LIBRARY_PATH, ldconfig's cache, rpath).
  for (const auto& so : spec.sonames)
    if (try_open(out, so, "OS loader")) return out;

  if (spec.toolkit) {
    // 6. The toolkit named by the environment, then 7. the default toolkit.
    for (const char* var : {"CUDA_PATH", "CUDA_HOME"}) {
      std::string step = std::string("$") + var;
      if (const char* root = env(var)) {
        for (const auto& sub : spec.subdirs)
          if (try_dir(out, spec, fs::path(root) / sub, step.c_str())) return out;
      } else {
        out.info.searched.push_back(step + ": not set");
      }
    }
    for (const auto& sub : spec.subdirs)
      if (try_dir(out, spec, fs::path("/usr/local/cuda") / sub, "/usr/local/cuda")) return out;
  }
  return out;
}

}  // namespace

LoadedLibrary load_library(const LibrarySpec& spec) {
  LoadedLibrary out = search(spec);
  if (out.handle && out.info.hint != spec.hint)  // the override failed; the search found another
    out.info.found_by += "; passed over $" + std::string(spec.override_env) + "='" + env(spec.override_env) +
                         "', which is not a loadable " + spec.component + " library";
  return out;
}

}  // namespace cucore::detail

namespace cucore::pathfinder {
void set_python_site_packages(std::vector<std::string> dirs) {
  std::lock_guard lock(detail::g_site_mutex);
  detail::g_site_packages = std::move(dirs);
}
}  // namespace cucore::pathfinder
