// Parallel algorithms at 2^28 elements against CUB compiled by nvcc in the same
// binary: reduce, inclusive scan, radix sort pairs, histogram (256 bins: int32
// samples all in range, int32 samples 3/4 out of range, bytes), SAXPY
// transform (goal: cucore >= 0.97x CUB's speed, i.e. time ratio <= 1.031);
// reduce and transform also as a share of the device-to-device copy bandwidth.
// Then build times: cold (NVRTC), warm in memory, and warm on disk in a fresh
// process (goal <= 5 ms from the call to a runnable object), split into the
// build and the first call's steps, each step into the driver's entry points
// (timed through cucore's driver table) and cucore's own time, with the
// libraries each step loaded; the same with CUDA_MODULE_LOADING=EAGER; beside
// the raw driver's floor in a fresh process: loading the same cubin, getting
// its kernels' functions (onto the device), a first launch of an empty kernel.
//   bench_compute                   all of it
//   bench_compute --child-disk DIR  (internal) the fresh process of the disk case
//   bench_compute --child-raw CUBIN EMPTY_CUBIN  (internal) the raw driver's floor
#include <cucore/buffer.hpp>
#include <cucore/compute.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>
#include <cucore/stream.hpp>

#include <unistd.h>

#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common.hpp"
#include "driver_timing.hpp"
#include "loader/driver.hpp"

#ifdef CUCORE_BENCH_CUB_PEER
namespace cub_peer {
std::size_t reduce_sum(void* temp, std::size_t bytes, const int* in, int* out, int n, void* stream);
std::size_t inclusive_sum(void* temp, std::size_t bytes, const int* in, int* out, int n, void* stream);
std::size_t sort_pairs(void* temp, std::size_t bytes, const unsigned* keys_in, unsigned* keys_out,
                       const unsigned* values_in, unsigned* values_out, int n, void* stream);
std::size_t histogram_even(void* temp, std::size_t bytes, const int* samples, int* histogram, int num_levels,
                           int lower, int upper, int n, void* stream);
std::size_t histogram_even_u8(void* temp, std::size_t bytes, const unsigned char* samples, int* histogram,
                              int num_levels, int lower, int upper, int n, void* stream);
void saxpy(const float* x, const float* y, float* out, int n, void* stream);
}  // namespace cub_peer
#endif

using namespace cucore;
using namespace cucore::compute;

namespace {

constexpr int kN = 1 << 28;
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Milliseconds per call of `fn` on `stream`, timed with events over `reps` calls.
double gpu_ms(StreamRef stream, const std::function<void()>& fn, int reps) {
  Event start = stream.record({.timing_enabled = true}), stop = stream.record({.timing_enabled = true});
  stream.record(start);
  for (int i = 0; i < reps; ++i) fn();
  stream.record(stop);
  stop.sync();
  return elapsed_time_ms(start, stop) / reps;
}

// Alternating medians of cucore and CUB (after a warm-up call of each).
bench::Comparison compare_gpu(const std::string& name, StreamRef s, const std::function<void()>& ours,
                              const std::function<void()>& peer, int reps, int samples = 9) {
  ours();
  peer();
  std::vector<double> a, b;
  for (int i = 0; i < samples; ++i) {
    if (i % 2) {
      a.push_back(gpu_ms(s, ours, reps));
      b.push_back(gpu_ms(s, peer, reps));
    } else {
      b.push_back(gpu_ms(s, peer, reps));
      a.push_back(gpu_ms(s, ours, reps));
    }
  }
  return {name, "ms", bench::median(a), bench::median(b), "CUB (nvcc)"};
}

constexpr double kGoal = 1.0 / 0.97;

// The fresh-process disk case, phase by phase, each split into the driver's
// calls (by entry point) and cucore's own time, with the libraries each phase
// loaded. The first call is the one-shot form's steps made explicit: the
// temporary-storage size, its allocation from the device's pool, the launch
// (which loads the kernels), the stream-ordered free, and the sync.
// Prints "hits N" (the disk cache's), then per phase "phase NAME MS", "driver
// NAME ENTRY CALLS MS" and "libs NAME FILE...".
int child_disk(const char* dir) {
  namespace dt = bench::driver_timing;
  // A fresh process: the device is initialised first (not part of the figure).
  Device(0).set_current();
  Stream s;
  DeviceMemoryResource mr(Device(0));
  Buffer in = mr.allocate(64, s), out = mr.allocate(4, s);
  s.sync();
  FileStreamProgramCache cache(dir);
  dt::install();
  std::string report;
  auto libs = dt::loaded_libraries();
  auto phase = [&](const char* name, const std::function<void()>& fn) {
    const dt::Totals before = dt::g_totals;
    const auto t0 = Clock::now();
    fn();
    const double ms = ms_since(t0);
    char line[512];
    std::snprintf(line, sizeof line, "phase %s %.4f\n", name, ms);
    report += line;
    for (const auto& c : dt::since(before)) {
      std::snprintf(line, sizeof line, "driver %s %s %lu %.4f\n", name, c.name.c_str(), c.calls, c.ms);
      report += line;
    }
    auto now = dt::loaded_libraries();
    const auto added = dt::newly_loaded(libs, now);
    if (!added.empty()) {
      report += std::string("libs ") + name;
      for (const auto& l : added) report += " " + l;
      report += "\n";
    }
    libs = std::move(now);
  };
  std::optional<Reduce> sum;
  const Iterator I = Iterator::pointer(Type::int32(), in), O = Iterator::pointer(Type::int32(), out);
  std::size_t bytes = 0;
  Buffer temp;
  phase("build", [&] { sum.emplace(I, O, OpKind::plus, Type::int32(), ReduceOptions{.build = {.cache = &cache}}); });
  phase("size", [&] { bytes = (*sum)(nullptr, 0, I, O, 16, Value(0), s); });
  phase("alloc", [&] { temp = mr.allocate(bytes, s); });
  phase("launch", [&] { (*sum)(temp.data(), bytes, I, O, 16, Value(0), s); });
  phase("free", [&] { temp.close(s); });
  phase("sync", [&] { s.sync(); });
  std::printf("hits %llu\n%s", static_cast<unsigned long long>(cache.stats().hits), report.c_str());
  return 0;
}

std::vector<char> file_bytes(const char* path) {
  std::vector<char> b;
  if (FILE* f = std::fopen(path, "rb")) {
    char buf[65536];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) b.insert(b.end(), buf, buf + n);
    std::fclose(f);
  }
  return b;
}

// The raw driver's floor in a fresh process, initialised as child_disk is:
// reading and loading the cubin the disk cache holds for the reduce, then its
// kernels' functions in the current context (with lazy loading, what loads
// them onto the device), then a first launch (and sync) of an empty kernel.
int child_raw(const char* cubin, const char* empty_cubin) {
  Device(0).set_current();
  Stream s;
  DeviceMemoryResource mr(Device(0));
  Buffer in = mr.allocate(64, s), out = mr.allocate(4, s);
  s.sync();
  const auto& d = cucore::detail::driver();
  using cucore::detail::check;
  const auto t0 = Clock::now();
  std::vector<char> a = file_bytes(cubin);
  CUlibrary lib = nullptr;
  unsigned count = 0;
  check(d.cuLibraryLoadData(&lib, a.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
  check(d.cuLibraryGetKernelCount(&count, lib), "cuLibraryGetKernelCount");
  std::vector<CUkernel> kernels(count);
  if (count) check(d.cuLibraryEnumerateKernels(kernels.data(), count, lib), "cuLibraryEnumerateKernels");
  const double load_ms = ms_since(t0);
  const auto tf = Clock::now();
  for (CUkernel kernel : kernels) {
    CUfunction f = nullptr;
    check(d.cuKernelGetFunction(&f, kernel), "cuKernelGetFunction");
  }
  const double function_ms = ms_since(tf);
  const auto t1 = Clock::now();
  std::vector<char> b = file_bytes(empty_cubin);
  CUlibrary empty = nullptr;
  CUkernel k = nullptr;
  check(d.cuLibraryLoadData(&empty, b.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
  check(d.cuLibraryGetKernel(&k, empty, "cucore_bench_empty"), "cuLibraryGetKernel");
  CUlaunchConfig c{};
  c.gridDimX = c.gridDimY = c.gridDimZ = 1;
  c.blockDimX = 32;
  c.blockDimY = c.blockDimZ = 1;
  c.hStream = s.handle();
  check(d.cuLaunchKernelEx(&c, reinterpret_cast<CUfunction>(k), nullptr, nullptr), "cuLaunchKernelEx");
  check(d.cuStreamSynchronize(s.handle()), "cuStreamSynchronize");
  std::printf("%.4f %.4f %u %.4f\n", load_ms, ms_since(t1), count, function_ms);
  return 0;
}

// One fresh-process disk run (child_disk's output); its total is its phases'.
struct DiskRun {
  double total = 0;
  std::vector<std::pair<std::string, double>> phases;                    // in order
  std::map<std::pair<std::string, std::string>, std::pair<unsigned long, double>> driver;  // (phase, entry)
  std::vector<std::pair<std::string, std::string>> libs;                 // (phase, files)
  double phase(const std::string& name) const {
    for (const auto& [n, ms] : phases)
      if (n == name) return ms;
    return 0;
  }
};

std::optional<DiskRun> run_disk_child(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  DiskRun r;
  unsigned long long hits = 0;
  bool ok = false;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    char a[256], b[256];
    double ms = 0;
    unsigned long calls = 0;
    int used = 0;
    if (std::sscanf(line, "hits %llu", &hits) == 1) {
      ok = hits > 0;  // a disk hit, as the case means
    } else if (std::sscanf(line, "phase %255s %lf", a, &ms) == 2) {
      r.phases.emplace_back(a, ms);
      r.total += ms;
    } else if (std::sscanf(line, "driver %255s %255s %lu %lf", a, b, &calls, &ms) == 4) {
      r.driver[{a, b}] = {calls, ms};
    } else if (std::sscanf(line, "libs %255s %n", a, &used) == 1 && used > 0) {
      std::string files(line + used);
      while (!files.empty() && files.back() == '\n') files.pop_back();
      r.libs.emplace_back(a, files);
    }
  }
  pclose(p);
  if (!ok) return std::nullopt;
  return r;
}

// Medians over the runs: the whole, the build, the first call and its steps,
// and (with `detail`) each step's driver entry points and cucore's own time,
// and the libraries each step loaded (from the first run).
void report_disk_runs(const std::string& title, const std::vector<DiskRun>& runs, bool detail) {
  static const std::pair<const char*, const char*> kSteps[] = {
      {"size", "temporary storage size"},      {"alloc", "temporary storage allocation (device pool)"},
      {"launch", "kernel launch (loads the kernels)"}, {"free", "stream-ordered free"},
      {"sync", "sync"}};
  auto median_of = [&](const std::function<double(const DiskRun&)>& f) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(f(r));
    return bench::median(v);
  };
  // One step's driver entry points (those of 2 us or more) and cucore's own time.
  auto split = [&](const std::string& phase) {
    std::set<std::string> entries;
    for (const auto& r : runs)
      for (const auto& [key, value] : r.driver)
        if (key.first == phase) entries.insert(key.second);
    for (const auto& entry : entries) {
      auto pick = [&](const DiskRun& r, bool calls) {
        auto it = r.driver.find({phase, entry});
        if (it == r.driver.end()) return 0.0;
        return calls ? static_cast<double>(it->second.first) : it->second.second;
      };
      const double ms = median_of([&](const DiskRun& r) { return pick(r, false); });
      const long calls = static_cast<long>(median_of([&](const DiskRun& r) { return pick(r, true); }));
      if (ms >= 0.002)
        bench::report_value("      " + phase + ": " + entry + " (" + std::to_string(calls) +
                                (calls == 1 ? " call)" : " calls)"),
                            ms, "ms");
    }
    bench::report_value("      " + phase + ": cucore's own (outside the driver)", median_of([&](const DiskRun& r) {
                          double in_driver = 0;
                          for (const auto& [key, value] : r.driver)
                            if (key.first == phase) in_driver += value.second;
                          return r.phase(phase) - in_driver;
                        }),
                        "ms");
  };
  bench::report_value(title, median_of([](const DiskRun& r) { return r.total; }), "ms", detail ? 5.0 : 0.0);
  bench::report_value("  of which the build (from the disk cache)",
                      median_of([](const DiskRun& r) { return r.phase("build"); }), "ms", detail ? 5.0 : 0.0);
  if (detail) split("build");
  bench::report_value("  of which the first call (load, launch, sync)", median_of([](const DiskRun& r) {
                        double ms = 0;
                        for (const auto& [step, what] : kSteps) ms += r.phase(step);
                        return ms;
                      }),
                      "ms");
  if (!detail) return;
  for (const auto& [step, what] : kSteps) {
    bench::report_value(std::string("    ") + step + ": " + what,
                        median_of([&](const DiskRun& r) { return r.phase(step); }), "ms");
    split(step);
  }
  for (const auto& [phase, files] : runs.front().libs)
    std::printf("      libraries the %s loaded: %s\n", phase.c_str(), files.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--child-disk") return child_disk(argv[2]);
  if (argc == 4 && std::string(argv[1]) == "--child-raw") return child_raw(argv[2], argv[3]);
  if (!bench::have_gpu("bench_compute")) return 0;
  Device dev(0);
  dev.set_current();
  Stream s;
  DeviceMemoryResource mr(dev);
  const std::uint64_t n = kN;

  // Random data made on the GPU: a hash of the index.
  auto hashed = [&](Buffer& b, const Type& t, const char* expr) {
    unary_transform(s, Iterator::counting(Value(0u)), Iterator::pointer(t, b), n,
                    Op::source(std::string("[](unsigned i) { unsigned h = i * 2654435761u; h ^= h >> 15; h *= 2246822519u; "
                                           "h ^= h >> 13; return ") + expr + "; }"));
  };
  Buffer a = mr.allocate(n * 4, s), b = mr.allocate(n * 4, s), c = mr.allocate(n * 4, s), d = mr.allocate(n * 4, s);
  Buffer one = mr.allocate(256 * 4, s);
  std::printf("bench_compute: %d elements (32-bit), CCCL %s\n", kN, cccl_version().c_str());

#ifdef CUCORE_BENCH_CUB_PEER
  auto temp_for = [&](std::size_t bytes) { return mr.allocate(std::max<std::size_t>(bytes, 1), s); };
  auto I = [](const Buffer& x) { return Iterator::pointer(Type::int32(), x); };
  auto F = [](const Buffer& x) { return Iterator::pointer(Type::float32(), x); };
  void* cs = s.handle();

  // Device-to-device copy bandwidth (the ceiling), 1 GiB read + 1 GiB written.
  const double copy_ms = gpu_ms(
      s, [&] { cucore::detail::check(cucore::detail::driver().cuMemcpyDtoDAsync(b.handle(), a.handle(), n * 4, s.handle()), "cuMemcpyDtoDAsync"); },
      10);
  const double copy_gbs = 2.0 * n * 4 / copy_ms / 1e6;
  bench::report_value("compute: device copy 1 GiB", copy_gbs, "GB/s");

  {  // reduce
    hashed(a, Type::int32(), "int(h & 1023)");
    Reduce r(I(a), I(one), OpKind::plus, Type::int32());
    Buffer t1 = temp_for(r(nullptr, 0, I(a), I(one), n, Value(0), s));
    Buffer t2 = temp_for(cub_peer::reduce_sum(nullptr, 0, nullptr, nullptr, kN, cs));
    auto cmp = compare_gpu(
        "compute: reduce sum int32 2^28", s, [&] { r(t1.data(), t1.size(), I(a), I(one), n, Value(0), s); },
        [&] { cub_peer::reduce_sum(t2.data(), t2.size(), static_cast<const int*>(a.data()), static_cast<int*>(one.data()), kN, cs); },
        20);
    bench::report(cmp, kGoal);
    bench::report_value("compute: reduce as % of copy bandwidth", 100.0 * (n * 4 / cmp.cucore / 1e6) / copy_gbs, "%");
  }
  {  // inclusive scan
    InclusiveScan sc(I(a), I(b), OpKind::plus);
    Buffer t1 = temp_for(sc(nullptr, 0, I(a), I(b), n, std::nullopt, s));
    Buffer t2 = temp_for(cub_peer::inclusive_sum(nullptr, 0, nullptr, nullptr, kN, cs));
    bench::report(compare_gpu(
                      "compute: inclusive scan int32 2^28", s,
                      [&] { sc(t1.data(), t1.size(), I(a), I(b), n, std::nullopt, s); },
                      [&] { cub_peer::inclusive_sum(t2.data(), t2.size(), static_cast<const int*>(a.data()), static_cast<int*>(b.data()), kN, cs); },
                      10),
                  kGoal);
  }
  {  // radix sort pairs
    hashed(a, Type::uint32(), "h");
    hashed(c, Type::uint32(), "h ^ 0x5bd1e995u");
    RadixSort rs(Type::uint32(), Type::uint32(), SortOrder::ascending);
    Buffer t1 = temp_for(rs(nullptr, 0, a.handle(), b.handle(), c.handle(), d.handle(), n, 0, 32, s));
    Buffer t2 = temp_for(cub_peer::sort_pairs(nullptr, 0, nullptr, nullptr, nullptr, nullptr, kN, cs));
    bench::report(compare_gpu(
                      "compute: radix sort pairs u32 2^28", s,
                      [&] { rs(t1.data(), t1.size(), a.handle(), b.handle(), c.handle(), d.handle(), n, 0, 32, s); },
                      [&] {
                        cub_peer::sort_pairs(t2.data(), t2.size(), static_cast<const unsigned*>(a.data()), static_cast<unsigned*>(b.data()),
                                             static_cast<const unsigned*>(c.data()), static_cast<unsigned*>(d.data()), kN, cs);
                      },
                      3, 7),
                  kGoal);
  }
  {  // histogram, 256 even bins, both libraries on the same samples with the same levels
    // Samples: the hash of the index masked to [0, 2^20) (the levels' range:
    // every sample is counted), then to [0, 2^22) (3 in 4 fall outside and cost
    // no bin arithmetic nor atomics), then bytes. Each case's two histograms
    // must agree before its times count.
    Buffer one_peer = mr.allocate(256 * 4, s);
    auto histogram_case = [&](const std::string& name, const Type& sample_type, int lower, int upper,
                              const std::function<std::size_t(void*, std::size_t, int*)>& peer) {
      const Iterator in = Iterator::pointer(sample_type, a);
      HistogramEven h(in, Type::int32(), Type::int32(), 257);
      Buffer t1 = temp_for(h(nullptr, 0, in, one.handle(), 257, Value(lower), Value(upper), n, s));
      Buffer t2 = temp_for(peer(nullptr, 0, nullptr));
      auto ours = [&] { h(t1.data(), t1.size(), in, one.handle(), 257, Value(lower), Value(upper), n, s); };
      auto theirs = [&] { peer(t2.data(), t2.size(), static_cast<int*>(one_peer.data())); };
      ours();
      theirs();
      std::vector<int> x(256), y(256);
      one.copy_to(std::span<int>(x), s);
      one_peer.copy_to(std::span<int>(y), s);
      s.sync();
      long long counted = 0;
      for (int v : x) counted += v;
      if (x != y) {
        std::printf("%s: cucore's histogram differs from CUB's; not timed\n", name.c_str());
        return;
      }
      std::printf("%s: %lld of %d samples counted, histograms equal\n", name.c_str(), counted, kN);
      bench::report(compare_gpu(name, s, ours, theirs, 20), kGoal);
    };
    hashed(a, Type::int32(), "int(h & 0xfffff)");
    histogram_case("compute: histogram even 256 bins int32 2^28 (uniform in range)", Type::int32(), 0, 1 << 20,
                   [&](void* t, std::size_t bytes, int* out) {
                     return cub_peer::histogram_even(t, bytes, static_cast<const int*>(a.data()), out, 257, 0, 1 << 20, kN, cs);
                   });
    hashed(a, Type::int32(), "int(h & 0x3fffff)");
    histogram_case("compute: histogram even 256 bins int32 2^28 (3/4 out of range)", Type::int32(), 0, 1 << 20,
                   [&](void* t, std::size_t bytes, int* out) {
                     return cub_peer::histogram_even(t, bytes, static_cast<const int*>(a.data()), out, 257, 0, 1 << 20, kN, cs);
                   });
    unary_transform(s, Iterator::counting(Value(0u)), Iterator::pointer(Type::uint8(), a), n,
                    Op::source("[](unsigned i) { unsigned h = i * 2654435761u; h ^= h >> 15; h *= 2246822519u; "
                               "h ^= h >> 13; return (unsigned char)(h >> 24); }"));
    histogram_case("compute: histogram even 256 bins uint8 2^28 (uniform)", Type::uint8(), 0, 256,
                   [&](void* t, std::size_t bytes, int* out) {
                     return cub_peer::histogram_even_u8(t, bytes, static_cast<const unsigned char*>(a.data()), out, 257, 0,
                                                        256, kN, cs);
                   });
  }
  {  // SAXPY
    hashed(a, Type::float32(), "float(h & 0xffff) * 0.001f");
    hashed(b, Type::float32(), "float(h >> 16) * 0.001f");
    BinaryTransform t(F(a), F(b), F(c), Op::source("[](float x, float y) { return 2.0f * x + y; }"));
    auto cmp = compare_gpu(
        "compute: SAXPY transform float 2^28", s, [&] { t(F(a), F(b), F(c), n, s); },
        [&] { cub_peer::saxpy(static_cast<const float*>(a.data()), static_cast<const float*>(b.data()), static_cast<float*>(c.data()), kN, cs); },
        10);
    bench::report(cmp, kGoal);
    bench::report_value("compute: SAXPY as % of copy bandwidth", 100.0 * (3.0 * n * 4 / cmp.cucore / 1e6) / copy_gbs, "%");
  }
#else
  std::printf("bench_compute: built without nvcc, so without its CUB peer; only build times follow\n");
#endif

  // Build times. Cold: NVRTC (a fresh cache); warm in memory: a new object over the same cache.
  const auto dir = std::filesystem::temp_directory_path() / ("cucore-bench-compute-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  Buffer in = mr.allocate(64, s), out = mr.allocate(4, s);
  auto runnable = [&](ProgramCache& cache) {
    const auto t0 = Clock::now();
    Reduce r(Iterator::pointer(Type::int32(), in), Iterator::pointer(Type::int32(), out), OpKind::plus, Type::int32(),
             {.build = {.cache = &cache}});
    r(Iterator::pointer(Type::int32(), in), Iterator::pointer(Type::int32(), out), 16, Value(0), s);
    s.sync();
    return ms_since(t0);
  };
  {
    TwoLevelProgramCache cache(std::nullopt, dir);  // memory in front of a fresh directory
    bench::report_value("compute: build reduce, cold (NVRTC)", runnable(cache), "ms");
    std::vector<double> warm;
    for (int i = 0; i < 21; ++i) warm.push_back(runnable(cache));
    bench::report_value("compute: build reduce, warm in memory", bench::median(warm), "ms", 5.0);
  }
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = 0;
    // The floor's inputs: the reduce's cubin as the cache holds it, and an empty kernel.
    std::string cubin;
    for (const auto& e : FileStreamProgramCache(dir).entries())
      if (e.code_type == CodeType::cubin) cubin = e.file.string();
    const auto empty = dir.string() + "-empty.cubin";
    {
      const ObjectCode o = Program("extern \"C\" __global__ void cucore_bench_empty() {}", "c++",
                                   {.arch = "sm_" + dev.arch()})
                               .compile(CodeType::cubin);
      if (FILE* f = std::fopen(empty.c_str(), "wb")) {
        std::fwrite(o.code().data(), 1, o.code().size(), f);
        std::fclose(f);
      }
    }
    std::vector<DiskRun> lazy, eager;
    std::vector<double> raw_load, raw_launch, raw_function;
    unsigned raw_kernels = 0;
    for (int i = 0; i < 7; ++i) {
      const std::string child = std::string("'") + exe + "' --child-disk '" + dir.string() + "'";
      if (auto r = run_disk_child(child)) lazy.push_back(std::move(*r));
      // The same with every kernel loaded onto the device at load time (is the
      // first launch's cost lazy loading?).
      if (auto r = run_disk_child("CUDA_MODULE_LOADING=EAGER " + child)) eager.push_back(std::move(*r));
      if (cubin.empty()) continue;
      const std::string raw = std::string("'") + exe + "' --child-raw '" + cubin + "' '" + empty + "'";
      if (FILE* p = popen(raw.c_str(), "r")) {
        double load_ms = 0, launch_ms = 0, function_ms = 0;
        if (std::fscanf(p, "%lf %lf %u %lf", &load_ms, &launch_ms, &raw_kernels, &function_ms) == 4) {
          raw_load.push_back(load_ms);
          raw_launch.push_back(launch_ms);
          raw_function.push_back(function_ms);
        }
        pclose(p);
      }
    }
    if (!lazy.empty()) {
      report_disk_runs("compute: build reduce, warm on disk (fresh process)", lazy, true);
      if (!eager.empty()) report_disk_runs("compute: warm on disk, CUDA_MODULE_LOADING=EAGER", eager, false);
    } else {
      std::printf("compute: the fresh-process disk case did not run\n");
    }
    if (!raw_load.empty()) {
      bench::report_value("  floor: raw read + cuLibraryLoadData of that cubin", bench::median(raw_load), "ms");
      bench::report_value("  floor: raw cuKernelGetFunction of its " + std::to_string(raw_kernels) +
                              " kernels (onto the device)",
                          bench::median(raw_function), "ms");
      bench::report_value("  floor: raw first launch + sync, empty kernel", bench::median(raw_launch), "ms");
    }
    std::remove(empty.c_str());
  }
  std::filesystem::remove_all(dir);
  return 0;
}
