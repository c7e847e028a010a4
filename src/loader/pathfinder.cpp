#include <cucore/errors.hpp>
#include <cucore/pathfinder.hpp>

#include <cuda.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "files/regular_file.hpp"
#include "loader/driver.hpp"
#include "loader/library.hpp"
#include "loader/toolkit.hpp"

namespace fs = std::filesystem;

namespace cucore::pathfinder {
namespace {

// Header directories, found without loading NVRTC (so a Program and its cache
// key stay cheap) and in a fixed order (so a key does not depend on what was
// loaded first): the environment's toolkit, conda, NVIDIA's pip wheels when
// Python embeds us, /usr/local/cuda, then the toolkit cucore was built with.
std::vector<fs::path> include_candidates(std::vector<std::string>& searched) {
  std::vector<fs::path> dirs;
  auto add = [&](const fs::path& p, const std::string& why) {
    dirs.push_back(p);
    searched.push_back(why + ": " + p.string());
  };
  for (const char* var : {"CUDA_PATH", "CUDA_HOME"})
    if (const char* v = std::getenv(var); v && *v) add(fs::path(v) / "include", std::string("$") + var);
  if (const char* conda = std::getenv("CONDA_PREFIX"); conda && *conda) add(fs::path(conda) / "include", "$CONDA_PREFIX");
  std::error_code ec;
  for (const auto& site : detail::python_site_packages()) {
    fs::path nv = fs::path(site) / "nvidia";
    if (!fs::is_directory(nv, ec)) continue;
    for (const auto& entry : fs::directory_iterator(nv, ec))
      if (fs::is_directory(entry.path() / "include", ec)) add(entry.path() / "include", "site-packages");
  }
  add("/usr/local/cuda/include", "/usr/local/cuda");
#ifdef CUCORE_BUILD_CUDA_INCLUDE_DIR
  add(CUCORE_BUILD_CUDA_INCLUDE_DIR, "toolkit cucore was built with");
#endif
  return dirs;
}

// A small text file whole, with POSIX calls (files/regular_file.hpp): a
// process's first std::ifstream costs ~0.1 ms of locale set-up, a fifth of a
// warm start's budget (every Program asks for these directories). "" when it
// cannot be read as a regular file of at most 1 MiB.
std::string read_small_text(const fs::path& file) {
  detail::ReadOptions o;
  o.limit = 1 << 20;
  try {
    return detail::read_text_file(file, o);
  } catch (const detail::FileError&) {
    return {};
  }
}

ComponentInfo find_headers(const std::string& name) {
  ComponentInfo info;
  info.name = name;
  std::vector<std::string> considered;
  auto dirs = include_candidates(considered);
  std::error_code ec;
  for (const auto& d : dirs) {
    if (name == "cuda_headers") {
      if (fs::exists(d / "cuda.h", ec)) {
        info.found = true;
        info.path = d.string();
        info.found_by = "cuda.h in " + d.string();
        info.version = std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10) + " (build)";
        info.searched.push_back(d.string() + " - found cuda.h");
        return info;
      }
      info.searched.push_back(d.string() + " - no cuda.h");
    } else {  // CCCL: cuda/std/ under include/cccl (CUDA 13) or include (CUDA 12)
      for (const fs::path& c : {d / "cccl", d}) {
        if (fs::exists(c / "cuda" / "std" / "version", ec)) {
          info.found = true;
          info.path = c.string();
          // CCCL_VERSION is MMMmmmppp.
          const std::string text = read_small_text(c / "cuda" / "std" / "__cccl" / "version.h");
          // A plain scan, not std::regex: the regex engine's locale facets
          // crashed when another libstdc++ was already in the process (Python).
          if (auto at = text.find("#define CCCL_VERSION "); at != std::string::npos) {
            long v = std::strtol(text.c_str() + at + 21, nullptr, 10);
            if (v > 0)
              info.version = std::to_string(v / 1000000) + "." + std::to_string(v / 1000 % 1000) + "." +
                             std::to_string(v % 1000);
          }
          info.found_by = "cuda/std in " + c.string();
          info.searched.push_back(c.string() + " - found cuda/std");
          return info;
        }
        info.searched.push_back(c.string() + " - no cuda/std");
      }
    }
  }
  info.hint = "install the CUDA toolkit headers (cuda-cudart-dev / cuda-cccl), or set CUDA_HOME";
  return info;
}

}  // namespace

std::vector<std::string> component_names() {
  return {"driver", "nvrtc", "nvjitlink", "nvvm", "nvml", "cuda_headers", "cccl_headers"};
}

ComponentInfo find(std::string_view component) {
  if (component == "driver") return detail::driver_component_info();
  if (component == "nvrtc") return detail::nvrtc_component_info();
  if (component == "nvjitlink") return detail::nvjitlink_component_info();
  if (component == "nvvm") return detail::nvvm_component_info();
  if (component == "nvml") return detail::nvml_component_info();
  if (component == "cuda_headers" || component == "cccl_headers") return find_headers(std::string(component));
  std::string known;
  for (const auto& n : component_names()) known += (known.empty() ? "" : ", ") + n;
  throw InvalidArgumentError("pathfinder::find: unknown component '" + std::string(component) + "' (known: " + known + ")");
}

std::vector<ComponentInfo> report() {
  std::vector<ComponentInfo> out;
  for (const auto& n : component_names()) out.push_back(find(n));
  return out;
}

std::optional<std::string> cuda_include_dir() {
  static const ComponentInfo info = find_headers("cuda_headers");
  if (!info.found) return std::nullopt;
  return info.path;
}

std::optional<std::string> cccl_include_dir() {
  static const ComponentInfo info = find_headers("cccl_headers");
  if (!info.found) return std::nullopt;
  return info.path;
}

}  // namespace cucore::pathfinder
