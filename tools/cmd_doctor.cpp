// `cucore doctor`: what this machine offers cucore, on any machine. Every
// component with where it came from (or every place searched and a hint), the
// driver, each device, and a one-line verdict last. --json for scripts.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/pathfinder.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"

namespace cucore::cli {
namespace {

struct DeviceReport {
  int ordinal = 0;
  std::string name, arch, uuid, pci_bus_id;
  int sm_count = 0, max_threads_per_block = 0, warp_size = 0, smem_per_block = 0, smem_optin = 0, l2_bytes = 0,
      mem_clock_khz = 0, bus_width = 0;
  std::size_t total_memory = 0;
  bool cooperative = false, clusters = false, pools = false;
};

nlohmann::json to_json(const pathfinder::ComponentInfo& c) {
  return {{"name", c.name},     {"found", c.found},       {"path", c.path}, {"version", c.version},
          {"found_by", c.found_by}, {"searched", c.searched}, {"hint", c.hint}};
}

int run_doctor(bool json) {
  auto components = pathfinder::report();
  std::vector<DeviceReport> devices;
  std::string device_error, no_gpu_reason;
  int count = 0;
  try {
    count = Device::count();
    for (const Device& d : Device::all()) {
      auto p = d.properties();
      DeviceReport r;
      r.ordinal = d.ordinal();
      r.name = d.name();
      r.arch = "sm_" + d.arch();
      r.uuid = d.uuid_string();
      r.pci_bus_id = d.pci_bus_id();
      r.sm_count = p.multiprocessor_count();
      r.max_threads_per_block = p.max_threads_per_block();
      r.warp_size = p.warp_size();
      r.smem_per_block = p.max_shared_memory_per_block();
      r.smem_optin = p.max_shared_memory_per_block_optin();
      r.l2_bytes = p.l2_cache_size();
      r.mem_clock_khz = p.memory_clock_rate();
      r.bus_width = p.global_memory_bus_width();
      r.total_memory = p.total_memory();
      r.cooperative = p.cooperative_launch();
      r.clusters = p.cluster_launch();
      r.pools = p.memory_pools_supported();
      devices.push_back(r);
    }
  } catch (const LibraryNotFoundError& e) {
    device_error = e.what();
    no_gpu_reason = "no CUDA driver: libcuda.so.1 is not on this machine";
  } catch (const std::exception& e) {
    device_error = e.what();
    no_gpu_reason = device_error.substr(0, device_error.find('\n'));
  }
  if (no_gpu_reason.empty()) no_gpu_reason = "the driver reports no CUDA device";

  auto find = [&](const char* n) -> const pathfinder::ComponentInfo& {
    for (const auto& c : components)
      if (c.name == n) return c;
    return components.front();
  };
  const bool can_compile = find("nvrtc").found;
  const bool can_link = find("nvjitlink").found;
  std::string verdict;
  int status = 0;
  if (!devices.empty()) {
    verdict = "ready: " + std::to_string(devices.size()) + " GPU" + (devices.size() == 1 ? "" : "s") +
              (can_compile ? ", run-time compilation available" : ", but NVRTC is missing: no run-time compilation");
    if (!can_compile) status = 1;
  } else if (can_compile) {
    verdict = "compile-only: no GPU usable here (" + no_gpu_reason +
              "); compiling and linking for an explicit arch works";
  } else {
    verdict = "not usable: no GPU and no NVRTC";
    status = 1;
  }

  if (json) {
    nlohmann::json j;
    j["components"] = nlohmann::json::array();
    for (const auto& c : components) j["components"].push_back(to_json(c));
    j["device_count"] = count;
    j["device_error"] = device_error;
    j["devices"] = nlohmann::json::array();
    for (const auto& d : devices)
      j["devices"].push_back({{"ordinal", d.ordinal}, {"name", d.name}, {"arch", d.arch}, {"uuid", d.uuid},
                              {"pci_bus_id", d.pci_bus_id}, {"multiprocessor_count", d.sm_count},
                              {"max_threads_per_block", d.max_threads_per_block}, {"warp_size", d.warp_size},
                              {"max_shared_memory_per_block", d.smem_per_block},
                              {"max_shared_memory_per_block_optin", d.smem_optin}, {"l2_cache_size", d.l2_bytes},
                              {"memory_clock_rate_khz", d.mem_clock_khz}, {"global_memory_bus_width", d.bus_width},
                              {"total_memory", d.total_memory}, {"cooperative_launch", d.cooperative},
                              {"cluster_launch", d.clusters}, {"memory_pools_supported", d.pools}});
    j["can_compile"] = can_compile;
    j["can_link"] = can_link;
    j["verdict"] = verdict;
    std::printf("%s\n", j.dump(2).c_str());
    return status;
  }

  std::printf("cucore %s\n\nComponents\n", CUCORE_VERSION_STRING);
  for (const auto& c : components) {
    if (c.found) {
      std::printf("  %-13s %-12s %s  (%s)\n", c.name.c_str(), c.version.empty() ? "-" : c.version.c_str(),
                  c.path.c_str(), c.found_by.c_str());
    } else {
      std::printf("  %-13s NOT FOUND; searched:\n", c.name.c_str());
      for (const auto& s : c.searched) std::printf("                  %s\n", s.c_str());
      if (!c.hint.empty()) std::printf("                hint: %s\n", c.hint.c_str());
    }
  }
  std::printf("\nDevices\n");
  if (devices.empty()) {
    std::printf("  none: %s\n", no_gpu_reason.c_str());
  }
  for (const auto& d : devices) {
    std::printf("  [%d] %s  %s  %s  %s\n", d.ordinal, d.name.c_str(), d.arch.c_str(), d.pci_bus_id.c_str(),
                d.uuid.c_str());
    std::printf("      %d SMs, %.1f GiB, %d-bit bus at %d MHz, L2 %d KiB, smem/block %d KiB (opt-in %d KiB)\n",
                d.sm_count, static_cast<double>(d.total_memory) / (1 << 30), d.bus_width, d.mem_clock_khz / 1000,
                d.l2_bytes / 1024, d.smem_per_block / 1024, d.smem_optin / 1024);
    std::printf("      max threads/block %d, warp %d, cooperative %s, clusters %s, memory pools %s\n",
                d.max_threads_per_block, d.warp_size, d.cooperative ? "yes" : "no", d.clusters ? "yes" : "no",
                d.pools ? "yes" : "no");
  }
  std::printf("\nverdict: %s\n", verdict.c_str());
  return status;
}

const RegisterCommand doctor{[](CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("doctor", "Report the CUDA components, driver and devices cucore finds");
  static bool json = false;  // one doctor subcommand per process
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->callback([&exit_code] { exit_code = run_doctor(json); });
}};

}  // namespace
}  // namespace cucore::cli
