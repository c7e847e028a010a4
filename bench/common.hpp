#pragma once
// Shared by the benchmarks: alternate cucore and its peer, after warm-up,
// collect per-iteration times, report medians and the ratio, and append a JSON
// line to $CUCORE_BENCH_JSON (when set) for docs/ and scripts/gpu-check.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <cucore/device.hpp>

#include <nlohmann/json.hpp>

namespace bench {

using clock = std::chrono::steady_clock;

// True when a GPU is usable; otherwise prints why `bench` measured nothing
// (the first line of the error: the rest is the loader's search trail).
inline bool have_gpu(const char* bench) {
  std::string why;
  try {
    if (cucore::Device::count() > 0) return true;
    why = "the driver reports none";
  } catch (const std::exception& e) {
    why = e.what();
    why = why.substr(0, std::min(why.find('\n'), why.find("; searched")));
  }
  std::printf("%s: needs a GPU (%s); nothing measured\n", bench, why.c_str());
  return false;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Times `fn` `inner` times per sample and returns nanoseconds per call.
inline double time_ns(const std::function<void()>& fn, int inner) {
  auto t0 = clock::now();
  for (int i = 0; i < inner; ++i) fn();
  auto t1 = clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / inner;
}

struct Comparison {
  std::string name;
  std::string unit = "ns";
  double cucore = 0, peer = 0;  // medians
  std::string peer_name;
  double ratio() const { return peer > 0 ? cucore / peer : 0; }
};

// Alternates samples of `ours` and `theirs` (each sample runs `inner` calls),
// after `warmup` samples of each.
inline Comparison compare(const std::string& name, const std::string& peer_name, const std::function<void()>& ours,
                          const std::function<void()>& theirs, int samples = 41, int inner = 1000, int warmup = 5) {
  std::vector<double> a, b;
  for (int i = 0; i < warmup; ++i) {
    time_ns(ours, inner);
    time_ns(theirs, inner);
  }
  for (int i = 0; i < samples; ++i) {
    // Alternate which goes first so drift hits both equally.
    if (i % 2) {
      a.push_back(time_ns(ours, inner));
      b.push_back(time_ns(theirs, inner));
    } else {
      b.push_back(time_ns(theirs, inner));
      a.push_back(time_ns(ours, inner));
    }
  }
  return {name, "ns", median(a), median(b), peer_name};
}

inline void report(const Comparison& c, double goal_ratio = 0) {
  std::printf("%-48s cucore %12.2f %s   %-22s %12.2f %s   ratio %.3f%s\n", c.name.c_str(), c.cucore, c.unit.c_str(),
              c.peer_name.c_str(), c.peer, c.unit.c_str(), c.ratio(),
              goal_ratio > 0 ? (c.ratio() <= goal_ratio ? "  (goal met)" : "  (goal missed)") : "");
  if (const char* path = std::getenv("CUCORE_BENCH_JSON")) {
    nlohmann::json j{{"name", c.name},   {"unit", c.unit}, {"cucore", c.cucore}, {"peer", c.peer_name},
                     {"peer_value", c.peer}, {"ratio", c.ratio()}, {"goal_ratio", goal_ratio}};
    if (FILE* f = std::fopen(path, "a")) {
      std::fprintf(f, "%s\n", j.dump().c_str());
      std::fclose(f);
    }
  }
}

// A single figure with no peer (e.g. Device(0) construction against a goal).
inline void report_value(const std::string& name, double value, const std::string& unit, double goal = 0) {
  std::printf("%-48s cucore %12.2f %s%s\n", name.c_str(), value, unit.c_str(),
              goal > 0 ? (value <= goal ? "  (goal met)" : "  (goal missed)") : "");
  if (const char* path = std::getenv("CUCORE_BENCH_JSON")) {
    nlohmann::json j{{"name", name}, {"unit", unit}, {"cucore", value}, {"goal", goal}};
    if (FILE* f = std::fopen(path, "a")) {
      std::fprintf(f, "%s\n", j.dump().c_str());
      std::fclose(f);
    }
  }
}

}  // namespace bench
