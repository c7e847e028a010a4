#pragma once
// Where the CUDA components this process uses come from (like cuda-pathfinder):
// the driver, NVRTC, nvJitLink, NVML, and the toolkit's headers. Finding never
// throws; loading a component that was not found throws LibraryNotFoundError
// carrying the same search trail.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cucore::pathfinder {

struct ComponentInfo {
  std::string name;                   // "driver", "nvrtc", "nvjitlink", "nvml", "cuda_headers", "cccl_headers"
  bool found = false;
  std::string path;                   // the file (or directory, for headers) in use
  std::string version;                // "13.0", driver "13.0 (13000)"; empty when unknown
  std::string found_by;               // the search step that found it, e.g. "already loaded", "OS loader"
  std::vector<std::string> searched;  // every step tried, in order, with its outcome
  std::string hint;                   // what to do when it was not found
};

// The components cucore knows, in report order.
std::vector<std::string> component_names();

// Looks the component up (loading a library if needed) and reports.
ComponentInfo find(std::string_view component);

// All components.
std::vector<ComponentInfo> report();

// Site-packages directories to search for NVIDIA's pip wheels (nvidia/*/lib);
// the Python module sets these from sys.path when it is imported.
void set_python_site_packages(std::vector<std::string> dirs);

// The directory holding cuda.h (the toolkit's include directory), and the one
// holding the CCCL headers (cuda/std, cub, thrust), if found.
std::optional<std::string> cuda_include_dir();
std::optional<std::string> cccl_include_dir();

}  // namespace cucore::pathfinder
