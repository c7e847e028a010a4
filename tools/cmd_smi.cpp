// `cucore smi`: each GPU's name, temperature, power, memory, utilization,
// clocks, MIG mode and compute processes, as nvidia-smi's top half shows them,
// from one system::sample(). --json prints one JSON document (with --watch, one
// JSON line per refresh); --watch SECONDS refreshes until interrupted.
#include <cucore/errors.hpp>
#include <cucore/system.hpp>

#include <cstdint>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <string>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "command.hpp"

namespace cucore::cli {
namespace {

using nlohmann::json;

std::atomic<bool> g_interrupted{false};

constexpr double kMaxWatchSeconds = 86400;

std::string now_string() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// Valid JSON whatever the strings hold: a process name or a message with bytes
// that are not UTF-8 gets U+FFFD for them instead of throwing.
std::string dump(const json& j, int indent) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json memory_json(const std::optional<system::MemoryInfo>& m) {
  if (!m) return nullptr;
  return {{"total", m->total}, {"used", m->used}, {"free", m->free}, {"reserved", m->reserved}};
}

json sample_json(const system::Sample& s) {
  json j{{"timestamp", now_string()},
         {"driver_version", s.driver_version},
         {"cuda_version", std::to_string(s.cuda_version.first) + "." + std::to_string(s.cuda_version.second)},
         {"nvml_version", s.nvml_version},
         {"devices", json::array()}};
  for (const auto& d : s.devices) {
    json procs = json::array();
    for (const auto& p : d.processes)
      procs.push_back({{"pid", p.info.pid}, {"name", p.name}, {"used_gpu_memory", or_null(p.info.used_gpu_memory)}});
    json util = d.utilization ? json{{"gpu", d.utilization->gpu}, {"memory", d.utilization->memory}} : json(nullptr);
    j["devices"].push_back({
        {"index", d.index},
        {"name", d.name},
        {"uuid", d.uuid},
        {"pci_bus_id", d.pci_bus_id},
        {"temperature_c", or_null(d.temperature_c)},
        {"fan_percent", or_null(d.fan_percent)},
        {"performance_state", or_null(d.performance_state)},
        {"power_usage_mw", or_null(d.power_usage_mw)},
        {"power_limit_mw", or_null(d.power_limit_mw)},
        {"memory", memory_json(d.memory)},
        {"utilization", util},
        {"clocks",
         {{"sm_mhz", or_null(d.sm_clock_mhz)},
          {"memory_mhz", or_null(d.memory_clock_mhz)},
          {"max_sm_mhz", or_null(d.max_sm_clock_mhz)},
          {"max_memory_mhz", or_null(d.max_memory_clock_mhz)}}},
        {"mig", {{"current", or_null(d.mig_mode)}, {"pending", or_null(d.mig_pending_mode)}}},
        {"clock_event_reasons",
         d.clock_event_reasons ? json(system::clock_event_reason_names(*d.clock_event_reasons)) : json(nullptr)},
        {"processes", procs},
        {"errors", d.errors},
    });
  }
  return j;
}

template <typename T>
std::string num(const std::optional<T>& v, const char* unit) {
  return v ? std::to_string(*v) + unit : "N/A";
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + "MiB"; }

std::string sample_text(const system::Sample& s) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "cucore smi   %s   driver %s   CUDA %d.%d   NVML %s\n\n", now_string().c_str(),
                s.driver_version.c_str(), s.cuda_version.first, s.cuda_version.second, s.nvml_version.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%3s  %-26s %5s %4s %4s %15s %21s %4s %4s %9s %9s %7s\n", "GPU", "Name", "Temp",
                "Fan", "Perf", "Power use/cap", "Memory used/total", "GPU", "Mem", "SM clock", "Mem clock", "MIG");
  out += line;
  for (const auto& d : s.devices) {
    std::string power = (d.power_usage_mw ? std::to_string(*d.power_usage_mw / 1000) + "W" : "N/A") + " / " +
                        (d.power_limit_mw ? std::to_string(*d.power_limit_mw / 1000) + "W" : "N/A");
    std::string memory = d.memory ? mib(d.memory->used) + " / " + mib(d.memory->total) : "N/A";
    std::string perf = d.performance_state ? "P" + std::to_string(*d.performance_state) : "N/A";
    std::string mig = d.mig_mode ? (*d.mig_mode ? "on" : "off") : "N/A";
    if (d.mig_mode && d.mig_pending_mode && *d.mig_pending_mode != *d.mig_mode)
      mig += *d.mig_pending_mode ? "->on" : "->off";
    std::snprintf(line, sizeof line, "%3u  %-26.26s %5s %4s %4s %15s %21s %4s %4s %9s %9s %7s\n", d.index,
                  d.name.c_str(), num(d.temperature_c, "C").c_str(), num(d.fan_percent, "%").c_str(), perf.c_str(),
                  power.c_str(), memory.c_str(), d.utilization ? (std::to_string(d.utilization->gpu) + "%").c_str() : "N/A",
                  d.utilization ? (std::to_string(d.utilization->memory) + "%").c_str() : "N/A",
                  num(d.sm_clock_mhz, "MHz").c_str(), num(d.memory_clock_mhz, "MHz").c_str(), mig.c_str());
    out += line;
    for (const auto& e : d.errors) out += "     ! " + e + "\n";
  }
  out += "\nProcesses\n";
  bool any = false;
  for (const auto& d : s.devices) {
    for (const auto& p : d.processes) {
      any = true;
      std::snprintf(line, sizeof line, "%3u  %8u  %-40.40s %12s\n", d.index, p.info.pid,
                    p.name.empty() ? "?" : p.name.c_str(),
                    p.info.used_gpu_memory ? mib(*p.info.used_gpu_memory).c_str() : "N/A");
      out += line;
    }
  }
  if (!any) out += "  no running compute processes\n";
  return out;
}

// The failure as the output's form asks: a message on stderr, or a JSON
// document on stdout naming what was searched.
int report_failure(const std::exception& e, bool as_json) {
  if (as_json) {
    json j{{"error", e.what()}};
    if (const auto* lib = dynamic_cast<const LibraryNotFoundError*>(&e)) {
      j["component"] = lib->component();
      j["searched"] = lib->searched();
    }
    if (const auto* nv = dynamic_cast<const NvmlError*>(&e)) {
      j["nvml_return"] = nv->code();
      j["nvml_error"] = nv->name();
    }
    std::printf("%s\n", dump(j, 2).c_str());
  } else {
    std::fprintf(stderr, "cucore smi: NVML is not usable here: %s\n", e.what());
  }
  return 1;
}

int run_smi(bool as_json, double watch_seconds) {
  const bool watch = watch_seconds > 0;
  const bool tty = isatty(STDOUT_FILENO) == 1;
  if (watch) {
    g_interrupted = false;
    std::signal(SIGINT, [](int) { g_interrupted = true; });
    std::signal(SIGTERM, [](int) { g_interrupted = true; });
  }
  do {
    system::Sample s;
    try {
      s = system::sample();
    } catch (const std::exception& e) {
      return report_failure(e, as_json);
    }
    if (as_json) {
      // One document; under --watch one compact line per refresh (JSON lines).
      std::printf("%s\n", dump(sample_json(s), watch ? -1 : 2).c_str());
    } else {
      if (watch && tty) std::fputs("\033[H\033[2J", stdout);  // redraw in place
      std::fputs(sample_text(s).c_str(), stdout);
      if (watch && !tty) std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(watch_seconds);
    while (watch && !g_interrupted && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (watch && !g_interrupted);
  return 0;
}

const RegisterCommand smi{[](CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("smi", "Show each GPU's temperature, power, memory, utilization, clocks and processes");
  static bool as_json = false;  // one smi subcommand per process
  static double watch = 0;
  cmd->add_flag("--json", as_json, "One JSON document (one JSON line per refresh with --watch)");
  cmd->add_option("--watch", watch, "Refresh every SECONDS (more than 0, at most 86400) until interrupted")
      ->option_text("SECONDS")
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            // CLI11's PositiveNumber says "not in range" with DBL_MAX written
            // out in 309 digits; and a non-finite or vast interval would
            // overflow the clock's arithmetic.
            char* end = nullptr;
            errno = 0;
            const double v = std::strtod(text.c_str(), &end);
            if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !(v > 0) || v > kMaxWatchSeconds)
              return "SECONDS must be a number more than 0 and at most 86400 (a day), got '" + text + "'";
            return {};
          },
          "SECONDS"));
  cmd->callback([&exit_code] { exit_code = run_smi(as_json, watch); });
}};

}  // namespace
}  // namespace cucore::cli
