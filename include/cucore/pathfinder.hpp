#pragma once
// Where the CUDA components this process uses come from (like cuda-pathfinder):
// the driver, NVRTC, nvJitLink, libNVVM, NVML, and the toolkit's headers. Finding never
// throws; loading a component that was not found throws LibraryNotFoundError
// carrying the same search trail.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cucore::pathfinder {

struct ComponentInfo {
  std::string name{};                   // "driver", "nvrtc", "nvjitlink", "nvvm", "nvml", "cuda_headers", "cccl_headers"
  bool found = false;
  std::string path{};                   // the file (or directory, for headers) in use
  std::string version{};                // "13.0", driver "13.0 (13000)"; empty when unknown
  std::string found_by{};               // the search step that found it, e.g. "already loaded", "OS loader"
  std::vector<std::string> searched{};  // every step tried, in order, with its outcome
  std::string hint{};                   // what to do when it was not found
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

// ---- the doctor: what this machine offers cucore -----------------------------
// One report, printed as is by `cucore doctor` and `python -m cucore doctor`.

struct DoctorDevice {  // a CUDA device, as the driver reports it
  int ordinal = 0;
  std::string name{}, arch{}, uuid{}, pci_bus_id{};  // arch "sm_90", uuid "GPU-..."
  int multiprocessor_count = 0, max_threads_per_block = 0, warp_size = 0, max_shared_memory_per_block = 0,
      max_shared_memory_per_block_optin = 0, l2_cache_size = 0, memory_clock_rate_khz = 0,
      global_memory_bus_width = 0;
  std::size_t total_memory = 0;
  bool cooperative_launch = false, cluster_launch = false, memory_pools_supported = false;
};

struct DoctorNvml {  // system monitoring (cucore::system)
  bool available = false;
  std::string version{}, driver_version{};  // "13.580.159.04", "580.159.04"
  int device_count = 0;
  std::string error{};  // why NVML is unusable, when it is
};

struct DoctorReport {
  std::vector<ComponentInfo> components{};  // report()
  int device_count = 0;
  std::string device_error{};  // why there are no devices (no driver, ...), when there are none
  std::vector<DoctorDevice> devices{};
  DoctorNvml nvml{};
  bool can_compile = false, can_link = false;
  std::string verdict{};  // one line: "ready: ...", "compile-only: ...", "not usable: ..."
  int exit_status = 0;  // 0 when cucore can do its work here (compile at least)

  std::string text() const;  // the report for people, the verdict its last line
  std::string json() const;  // the same facts as one JSON document
};

// Never throws for what it finds missing; that is what it reports.
DoctorReport doctor();

}  // namespace cucore::pathfinder
