// The doctor report: components (pathfinder), the driver's devices, NVML and a
// verdict, with its one wording for people and its one JSON form. The CLI and
// the Python module print these strings and nothing else.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/system.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

namespace cucore::pathfinder {
namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

const ComponentInfo* component(const DoctorReport& r, const char* name) {
  for (const auto& c : r.components)
    if (c.name == name) return &c;
  return nullptr;
}

// printf into a std::string.
template <typename... Args>
void appendf(std::string& out, const char* fmt, Args... args) {
  char buf[1024];
  int n = std::snprintf(buf, sizeof buf, fmt, args...);
  if (n > 0) out.append(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

void read_devices(DoctorReport& r) {
  try {
    r.device_count = Device::count();
    for (const Device& d : Device::all()) {
      auto p = d.properties();
      DoctorDevice x;
      x.ordinal = d.ordinal();
      x.name = d.name();
      x.arch = "sm_" + d.arch();
      x.uuid = d.uuid_string();
      x.pci_bus_id = d.pci_bus_id();
      x.multiprocessor_count = p.multiprocessor_count();
      x.max_threads_per_block = p.max_threads_per_block();
      x.warp_size = p.warp_size();
      x.max_shared_memory_per_block = p.max_shared_memory_per_block();
      x.max_shared_memory_per_block_optin = p.max_shared_memory_per_block_optin();
      x.l2_cache_size = p.l2_cache_size();
      x.memory_clock_rate_khz = p.memory_clock_rate();
      x.global_memory_bus_width = p.global_memory_bus_width();
      x.total_memory = p.total_memory();
      x.cooperative_launch = p.cooperative_launch();
      x.cluster_launch = p.cluster_launch();
      x.memory_pools_supported = p.memory_pools_supported();
      r.devices.push_back(std::move(x));
    }
  } catch (const LibraryNotFoundError& e) {
    r.device_error = e.what();
  } catch (const std::exception& e) {
    r.device_error = e.what();
  }
}

void read_nvml(DoctorReport& r) {
  try {
    r.nvml.version = system::nvml_version();
    r.nvml.driver_version = system::driver_version();
    r.nvml.device_count = system::get_num_devices();
    r.nvml.available = true;
  } catch (const std::exception& e) {
    r.nvml.error = e.what();
  }
}

// Why no device is usable, in one line.
std::string no_gpu_reason(const DoctorReport& r) {
  if (r.device_error.empty()) return "the driver reports no CUDA device";
  if (const auto* d = component(r, "driver"); d && !d->found) return "no CUDA driver: libcuda.so.1 is not on this machine";
  return first_line(r.device_error);
}

nlohmann::json to_json(const ComponentInfo& c) {
  return {{"name", c.name},         {"found", c.found},       {"path", c.path}, {"version", c.version},
          {"found_by", c.found_by}, {"searched", c.searched}, {"hint", c.hint}};
}

}  // namespace

DoctorReport doctor() {
  DoctorReport r;
  r.components = report();
  read_devices(r);
  read_nvml(r);
  const ComponentInfo* nvrtc = component(r, "nvrtc");
  const ComponentInfo* nvjitlink = component(r, "nvjitlink");
  r.can_compile = nvrtc && nvrtc->found;
  r.can_link = nvjitlink && nvjitlink->found;
  if (!r.devices.empty()) {
    std::size_t n = r.devices.size();
    r.verdict = "ready: " + std::to_string(n) + " GPU" + (n == 1 ? "" : "s") +
                (r.can_compile ? ", run-time compilation available" : ", but NVRTC is missing: no run-time compilation");
    r.exit_status = r.can_compile ? 0 : 1;
  } else if (r.can_compile) {
    r.verdict = "compile-only: no GPU usable here (" + no_gpu_reason(r) +
                "); compiling and linking for an explicit arch works";
  } else {
    r.verdict = "not usable: no GPU and no NVRTC";
    r.exit_status = 1;
  }
  return r;
}

std::string DoctorReport::text() const {
  std::string out = "cucore " CUCORE_VERSION_STRING "\n\nComponents\n";
  for (const auto& c : components) {
    if (c.found) {
      appendf(out, "  %-13s %-12s %s  (%s)\n", c.name.c_str(), c.version.empty() ? "-" : c.version.c_str(),
              c.path.c_str(), c.found_by.c_str());
    } else {
      appendf(out, "  %-13s NOT FOUND; searched:\n", c.name.c_str());
      for (const auto& s : c.searched) out += "                  " + s + "\n";
      if (!c.hint.empty()) out += "                hint: " + c.hint + "\n";
    }
  }
  out += "\nDevices\n";
  if (devices.empty()) out += "  none: " + no_gpu_reason(*this) + "\n";
  for (const auto& d : devices) {
    appendf(out, "  [%d] %s  %s  %s  %s\n", d.ordinal, d.name.c_str(), d.arch.c_str(), d.pci_bus_id.c_str(),
            d.uuid.c_str());
    appendf(out, "      %d SMs, %.1f GiB, %d-bit bus at %d MHz, L2 %d KiB, smem/block %d KiB (opt-in %d KiB)\n",
            d.multiprocessor_count, static_cast<double>(d.total_memory) / (1 << 30), d.global_memory_bus_width,
            d.memory_clock_rate_khz / 1000, d.l2_cache_size / 1024, d.max_shared_memory_per_block / 1024,
            d.max_shared_memory_per_block_optin / 1024);
    appendf(out, "      max threads/block %d, warp %d, cooperative %s, clusters %s, memory pools %s\n",
            d.max_threads_per_block, d.warp_size, d.cooperative_launch ? "yes" : "no",
            d.cluster_launch ? "yes" : "no", d.memory_pools_supported ? "yes" : "no");
  }
  out += "\nNVML (system monitoring)\n";
  if (nvml.available)
    appendf(out, "  NVML %s, driver %s, %d device%s\n", nvml.version.c_str(), nvml.driver_version.c_str(),
            nvml.device_count, nvml.device_count == 1 ? "" : "s");
  else if (const auto* c = component(*this, "nvml"); c && !c->found && c->path.empty())
    out += "  unavailable: libnvidia-ml.so.1 was not found (see the nvml component above)\n";
  else
    out += "  unavailable: " + first_line(nvml.error) + "\n";
  out += "\nverdict: " + verdict + "\n";
  return out;
}

std::string DoctorReport::json() const {
  nlohmann::json j;
  j["components"] = nlohmann::json::array();
  for (const auto& c : components) j["components"].push_back(to_json(c));
  j["device_count"] = device_count;
  j["device_error"] = device_error;
  j["devices"] = nlohmann::json::array();
  for (const auto& d : devices)
    j["devices"].push_back({{"ordinal", d.ordinal},
                            {"name", d.name},
                            {"arch", d.arch},
                            {"uuid", d.uuid},
                            {"pci_bus_id", d.pci_bus_id},
                            {"multiprocessor_count", d.multiprocessor_count},
                            {"max_threads_per_block", d.max_threads_per_block},
                            {"warp_size", d.warp_size},
                            {"max_shared_memory_per_block", d.max_shared_memory_per_block},
                            {"max_shared_memory_per_block_optin", d.max_shared_memory_per_block_optin},
                            {"l2_cache_size", d.l2_cache_size},
                            {"memory_clock_rate_khz", d.memory_clock_rate_khz},
                            {"global_memory_bus_width", d.global_memory_bus_width},
                            {"total_memory", d.total_memory},
                            {"cooperative_launch", d.cooperative_launch},
                            {"cluster_launch", d.cluster_launch},
                            {"memory_pools_supported", d.memory_pools_supported}});
  j["nvml"] = {{"available", nvml.available},           {"version", nvml.version},
               {"driver_version", nvml.driver_version}, {"device_count", nvml.device_count},
               {"error", nvml.error}};
  j["can_compile"] = can_compile;
  j["can_link"] = can_link;
  j["verdict"] = verdict;
  // Paths come from the environment and the file system, which need not be
  // UTF-8: such bytes become U+FFFD, so the report is valid JSON always.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace cucore::pathfinder
