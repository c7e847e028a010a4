#pragma once
// Attribution for the fresh-process benchmarks: wraps every entry point of
// cucore's driver table so that each call adds its wall time to a total per
// function, and lists the shared libraries a process has loaded. A phase's time
// then splits into the driver's (by function) and cucore's own, and the
// libraries it pulled in (NVRTC, nvJitLink, ...) are named. Installed once, in
// a benchmark's child process, after the driver is loaded; single-threaded use.
#include <link.h>

#include <chrono>
#include <cstddef>
#include <set>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "loader/driver.hpp"

namespace bench::driver_timing {

enum Entry : std::size_t {
#define X(name, ver, required) k_##name,
#include "loader/driver_functions.inc"
#undef X
  kEntries
};

inline constexpr const char* kNames[] = {
#define X(name, ver, required) #name,
#include "loader/driver_functions.inc"
#undef X
};

struct Totals {
  double ms[kEntries] = {};
  unsigned long calls[kEntries] = {};
};

inline cucore::detail::DriverTable g_real, g_timed;
inline Totals g_totals;

template <auto Member, std::size_t I,
          typename F = std::remove_cvref_t<decltype(std::declval<cucore::detail::DriverTable&>().*Member)>>
struct Timed;
template <auto Member, std::size_t I, typename R, typename... A>
struct Timed<Member, I, R(CUDAAPI*)(A...)> {
  static R CUDAAPI call(A... a) {
    const auto t0 = std::chrono::steady_clock::now();
    R r = (g_real.*Member)(a...);
    g_totals.ms[I] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++g_totals.calls[I];
    return r;
  }
};

// Loads the driver (if not yet) and routes cucore's calls through the timers.
inline void install() {
  g_real = cucore::detail::driver();
  g_timed = g_real;
#define X(name, ver, required) \
  if (g_real.name) g_timed.name = &Timed<&cucore::detail::DriverTable::name, k_##name>::call;
#include "loader/driver_functions.inc"
#undef X
  cucore::detail::set_driver_table_for_testing(&g_timed);
}

// What the driver took between two snapshots: (entry, calls, ms) for each entry called.
struct Call {
  std::string name;
  unsigned long calls;
  double ms;
};
inline std::vector<Call> since(const Totals& before) {
  std::vector<Call> out;
  for (std::size_t i = 0; i < kEntries; ++i)
    if (g_totals.calls[i] != before.calls[i])
      out.push_back({kNames[i], g_totals.calls[i] - before.calls[i], g_totals.ms[i] - before.ms[i]});
  return out;
}

// The shared objects mapped into this process (by path).
inline std::set<std::string> loaded_libraries() {
  std::set<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        return 0;
      },
      &names);
  return names;
}

// The libraries in `after` that were not in `before`, by file name.
inline std::vector<std::string> newly_loaded(const std::set<std::string>& before, const std::set<std::string>& after) {
  std::vector<std::string> out;
  for (const auto& p : after)
    if (!before.count(p)) out.push_back(p.substr(p.find_last_of('/') + 1));
  return out;
}

}  // namespace bench::driver_timing
