// Program-cache benchmarks, medians after warm-up, one run:
//   InMemoryProgramCache::get hit            goal <= 0.2 us  (peer: a locked unordered_map, the floor)
//   compile(target, ..., cache) hit, 2 KB     goal <= 3 us    (key computation included)
//   FileStreamProgramCache::get hit           goal <= 10 us   (peer: open+read+close of the same file)
//   a fresh process, source -> kernel through a warm disk cache, goal <= 0.5 ms, against the cold
//   compile in the same run (ratio). Loading the kernel needs a GPU; without one both stop at the
//   ObjectCode, and the line says so. With a GPU, also the floor: a fresh process that reads the
//   same cached cubin and loads it with the raw driver (cuLibraryLoadData + cuLibraryGetKernel, as
//   cucore does; and cuModuleLoadData + cuModuleGetFunction, the context-bound way), and
//   diagnostics that tell whether a load slower than the raw driver's is cucore's code or
//   the process's state.
// The children for the last one are this program run again with CUCORE_BENCH_CACHE_CHILD set
// (to "1"; "library"/"module" for the raw driver; "cucore-raw"/"from-bytes" for the diagnostics).
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/kernel.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common.hpp"
#include "loader/driver.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;

// A 2 KB program: SAXPY plus a few more kernels, as a real module would carry.
std::string source_2kb() {
  std::string s = R"(
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";
  for (int k = 0; s.size() < 2048; ++k) {
    s += "extern \"C\" __global__ void scale" + std::to_string(k) +
         "(float* p, float f, size_t n) {\n"
         "  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n"
         "  if (i < n) p[i] = p[i] * f + " +
         std::to_string(k) + ".0f;\n}\n";
  }
  return s;
}

std::string g_arch = "sm_90";
bool g_gpu = false;

void init_device() {
  try {
    if (cucore::Device::count() > 0) {
      cucore::Device dev(0);
      dev.set_current();
      g_arch = "sm_" + dev.arch();
      g_gpu = true;
    }
  } catch (const std::exception&) {
  }
}

// ---------------------------------------------------------------- fresh-process child

// Minor page faults and context switches so far: a child reports those of its
// kernel load, so that a slow load can be told apart (faults on the image or the
// driver's pages, a wait on another thread) on the GPU machine.
struct Usage {
  long faults = 0, switches = 0;
};
Usage usage_now() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return {r.ru_minflt, r.ru_nvcsw + r.ru_nivcsw};
}

double us_between(bench::clock::time_point a, bench::clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// The raw driver's load, as cucore's get_kernel does it: cuLibraryLoadData, cuLibraryGetKernel.
void raw_library_load(const void* image) {
  const auto& d = cucore::detail::driver();
  CUlibrary lib = nullptr;
  CUkernel kernel = nullptr;
  cucore::detail::check(d.cuLibraryLoadData(&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0),
                        "cuLibraryLoadData");
  cucore::detail::check(d.cuLibraryGetKernel(&kernel, lib, "saxpy"), "cuLibraryGetKernel");
}

// Source to kernel (or to ObjectCode without a GPU) through a FileStreamProgramCache
// at $CUCORE_BENCH_CACHE_DIR; prints the microseconds it took, its parts, and the
// page faults and context switches of the load. CUDA's own start-up (driver load,
// cuInit, context) is done first and not counted: it is the same with or without
// a cache. The source is the input, made before timing (a program has it as a
// literal or reads it). With `raw_load` (a diagnostic) the kernel is loaded from
// the ObjectCode's bytes by the raw driver instead of by get_kernel.
int child_main(bool raw_load) {
  init_device();
  if (raw_load && !g_gpu) return 1;
  const std::string dir = std::getenv("CUCORE_BENCH_CACHE_DIR");
  std::string source = source_2kb();
  const auto t0 = bench::clock::now();
  cucore::FileStreamProgramCache cache(dir);
  cucore::Program program(std::move(source), "c++", {.arch = g_arch});
  const auto t1 = bench::clock::now();
  // The first key in a process pays one-time costs (the compiler identity's
  // memo, the first SHA-256); timed apart, then compile() computes it again (~1 us).
  (void)cucore::make_program_cache_key(program.code(), "c++", program.options(), cucore::CodeType::cubin);
  const auto t2 = bench::clock::now();
  cucore::ObjectCode code = program.compile(cucore::CodeType::cubin, {}, &cache);
  const Usage u0 = usage_now();
  const auto t3 = bench::clock::now();
  if (raw_load)
    raw_library_load(code.code().data());
  else if (g_gpu)
    (void)code.get_kernel("saxpy");
  const auto t4 = bench::clock::now();
  const Usage u1 = usage_now();
  std::printf("%.3f %llu %.3f %.3f %.3f %.3f %ld %ld\n", us_between(t0, t4),
              static_cast<unsigned long long>(cache.stats().hits), us_between(t0, t1), us_between(t1, t2),
              us_between(t2, t3), us_between(t3, t4), u1.faults - u0.faults, u1.switches - u0.switches);
  return 0;
}

// The raw driver's floor: the cubin the warm cache holds for the same source
// ($CUCORE_BENCH_CACHE_FILE), read with plain calls and loaded with the driver
// alone ("library", "module"), or by cucore's get_kernel ("from-bytes", a
// diagnostic: cucore's load in a process that did nothing else of cucore's).
// With $CUCORE_BENCH_CACHE_WAIT_US (a diagnostic) it waits that long before
// the load, spinning, so the load comes as long after the context's creation
// as a cucore child's does. Prints the microseconds of the read and the load
// together and of the load alone, and the load's page faults and context switches.
int raw_child_main(const std::string& how) {
  init_device();
  if (!g_gpu) return 1;
  const char* file = std::getenv("CUCORE_BENCH_CACHE_FILE");
  const char* wait = std::getenv("CUCORE_BENCH_CACHE_WAIT_US");
  const double wait_us = wait ? std::atof(wait) : 0;
  const auto t0 = bench::clock::now();
  const int fd = open(file, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return 1;
  std::vector<std::byte> bytes(static_cast<std::size_t>(st.st_size));
  const bool read_all = read(fd, bytes.data(), bytes.size()) == st.st_size;
  close(fd);
  if (!read_all) return 1;
  const auto t1 = bench::clock::now();
  while (us_between(t1, bench::clock::now()) < wait_us) {
  }
  std::optional<cucore::ObjectCode> code;
  if (how == "from-bytes") code = cucore::ObjectCode::from_bytes(std::move(bytes), cucore::CodeType::cubin);
  const Usage u0 = usage_now();
  const auto t2 = bench::clock::now();
  if (how == "library") {
    raw_library_load(bytes.data());
  } else if (how == "module") {
    const auto& d = cucore::detail::driver();
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    cucore::detail::check(d.cuModuleLoadData(&module, bytes.data()), "cuModuleLoadData");
    cucore::detail::check(d.cuModuleGetFunction(&function, module, "saxpy"), "cuModuleGetFunction");
  } else if (how == "from-bytes") {
    (void)code->get_kernel("saxpy");
  } else {
    return 1;
  }
  const auto t3 = bench::clock::now();
  const Usage u1 = usage_now();
  std::printf("%.3f %.3f %ld %ld\n", us_between(t0, t1) + us_between(t2, t3), us_between(t2, t3),
              u1.faults - u0.faults, u1.switches - u0.switches);
  return 0;
}

struct ChildResult {
  double us = -1;  // source to kernel (or ObjectCode)
  bool hit = false;
  // of which: constructing the Program, the first key, compile() through the
  // cache (key again + disk read), loading the kernel
  double program_us = 0, key_us = 0, compile_us = 0, load_us = 0;
  long load_faults = 0, load_switches = 0;  // during the load
};

// Runs this program again with `env` added; its standard output, or nullopt
// when it failed.
std::optional<std::string> run_self(const std::vector<std::string>& extra_env) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while (rc == 0 && (n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  if (rc != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return std::nullopt;
  return out;
}

// Runs a cucore child ("1"; "cucore-raw" loads with the raw driver); its times
// in microseconds (negative on failure) and whether it hit.
ChildResult run_child(const std::string& dir, const char* mode = "1") {
  auto got = run_self({std::string("CUCORE_BENCH_CACHE_CHILD=") + mode, "CUCORE_BENCH_CACHE_DIR=" + dir});
  if (!got) return {};
  const std::string& out = *got;
  ChildResult r;
  unsigned long long hits = 0;
  if (std::sscanf(out.c_str(), "%lf %llu %lf %lf %lf %lf %ld %ld", &r.us, &hits, &r.program_us, &r.key_us,
                  &r.compile_us, &r.load_us, &r.load_faults, &r.load_switches) != 8)
    return {};
  r.hit = hits > 0;
  return r;
}

// A raw child's figures: read + load, the load alone, its faults and switches.
struct RawResult {
  double all_us = -1, load_us = 0;
  long load_faults = 0, load_switches = 0;
};

RawResult run_raw_child(const std::vector<std::string>& env) {
  auto got = run_self(env);
  RawResult r;
  if (!got || std::sscanf(got->c_str(), "%lf %lf %ld %ld", &r.all_us, &r.load_us, &r.load_faults,
                          &r.load_switches) != 4)
    return {};
  return r;
}

}  // namespace

int main() {
  if (const char* child = std::getenv("CUCORE_BENCH_CACHE_CHILD")) {
    const std::string how = child;
    return how == "1" || how == "cucore-raw" ? child_main(how == "cucore-raw") : raw_child_main(how);
  }
  init_device();
  std::printf("program cache benchmarks (%s%s)\n", g_arch.c_str(), g_gpu ? "" : ", no GPU: kernels are not loaded");

  const std::string src = source_2kb();
  cucore::Program program(src, "c++", {.arch = g_arch});
  const cucore::ObjectCode cubin = program.compile(cucore::CodeType::cubin);
  const std::string key = cucore::make_program_cache_key(program.code(), "c++", program.options(), cucore::CodeType::cubin);

  // 1. In-memory hit, against the floor: a mutex-guarded unordered_map of shared objects.
  {
    cucore::InMemoryProgramCache cache;
    cache.put(key, cubin);
    std::mutex m;
    std::unordered_map<std::string, cucore::ObjectCode> plain{{key, cubin}};
    volatile std::size_t sink = 0;
    auto c = bench::compare(
        "InMemoryProgramCache::get hit", "locked unordered_map", [&] { sink = sink + cache.get(key)->code().size(); },
        [&] {
          std::lock_guard lock(m);
          sink = sink + plain.find(key)->second.code().size();
        },
        41, 20000);
    bench::report(c);
    bench::report_value("InMemoryProgramCache::get hit (goal 0.2 us)", c.cucore / 1000, "us", 0.2);
  }

  // 2. compile() through an in-memory cache, hit, 2 KB source, key included.
  {
    cucore::InMemoryProgramCache cache;
    (void)program.compile(cucore::CodeType::cubin, {}, &cache);
    volatile std::size_t sink = 0;
    auto c = bench::compare(
        "compile(cubin, cache) hit, 2 KB source", "make_program_cache_key alone",
        [&] { sink = sink + program.compile(cucore::CodeType::cubin, {}, &cache).code().size(); },
        [&] { sink = sink + cucore::make_program_cache_key(program.code(), "c++", program.options(), cucore::CodeType::cubin).size(); },
        41, 2000);
    bench::report(c);
    bench::report_value("compile(cubin, cache) hit incl. key (goal 3 us)", c.cucore / 1000, "us", 3.0);
  }

  // 3. Disk hit, against reading the same file with open/read/close.
  char tmpl[] = "/tmp/cucore-bench-cache-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path root = tmpl;
  {
    cucore::FileStreamProgramCache cache(root / "hot");
    cache.put(key, cubin);
    const std::string file = cache.entry_path(key).string();
    std::vector<char> buf(cubin.code().size());
    volatile std::size_t sink = 0;
    auto c = bench::compare(
        "FileStreamProgramCache::get hit", "open+read+close", [&] { sink = sink + cache.get(key)->code().size(); },
        [&] {
          int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
          struct stat st;
          fstat(fd, &st);
          std::vector<char> data(static_cast<std::size_t>(st.st_size));
          sink = sink + static_cast<std::size_t>(read(fd, data.data(), data.size()));
          close(fd);
        },
        41, 500);
    bench::report(c);
    bench::report_value("FileStreamProgramCache::get hit (goal 10 us)", c.cucore / 1000, "us", 10.0);
    bench::report_value("  cubin size", static_cast<double>(cubin.code().size()), "bytes");
    // SAXPY alone: the mission's kernel, a ~4 KB cubin.
    cucore::Program saxpy(src.substr(0, src.find("extern", 10)), "c++", {.arch = g_arch});
    const cucore::ObjectCode small = saxpy.compile(cucore::CodeType::cubin);
    cache.put("saxpy", small);
    const double small_ns = bench::median([&] {
      std::vector<double> v;
      for (int i = 0; i < 41; ++i)
        v.push_back(bench::time_ns([&] { sink = sink + cache.get("saxpy")->code().size(); }, 500));
      return v;
    }());
    bench::report_value("FileStreamProgramCache::get hit, SAXPY cubin", small_ns / 1000, "us", 10.0);
    bench::report_value("  cubin size", static_cast<double>(small.code().size()), "bytes");
  }

  // 4. A fresh process: source -> kernel through a warm disk cache, against a cold compile.
  {
    const fs::path warm = root / "warm";
    if (run_child(warm.string()).us < 0) {  // fills it
      std::fprintf(stderr, "bench_program_cache: the child process failed\n");
      return 1;
    }
    std::vector<ChildResult> warm_children;
    std::vector<double> cold_us;
    bool all_hit = true;
    for (int i = 0; i < 11; ++i) {
      fs::path cold = root / ("cold-" + std::to_string(i));
      ChildResult c = run_child(cold.string());
      ChildResult w = run_child(warm.string());
      if (c.us < 0 || w.us < 0) {
        std::fprintf(stderr, "bench_program_cache: a child process failed\n");
        return 1;
      }
      all_hit = all_hit && w.hit && !c.hit;
      cold_us.push_back(c.us);
      warm_children.push_back(w);
    }
    // The median of one field over children's results.
    auto median_of = [](const auto& results, auto field) {
      std::vector<double> v;
      for (const auto& r : results) v.push_back(static_cast<double>(r.*field));
      return bench::median(v);
    };
    const char* what = g_gpu ? "fresh process: source -> loaded kernel, warm disk"
                             : "fresh process: source -> ObjectCode, warm disk (no GPU: no load)";
    bench::Comparison c{what, "us", median_of(warm_children, &ChildResult::us), bench::median(cold_us),
                        "cold compile, same run"};
    bench::report(c);
    bench::report_value(std::string(what) + " (goal 500 us)", c.cucore, "us", 500);
    // Where a warm start goes (medians of each part).
    bench::report_value("  of which the cache and Program construction",
                        median_of(warm_children, &ChildResult::program_us), "us");
    bench::report_value("  of which the first key (toolchain identity memo, first SHA-256)",
                        median_of(warm_children, &ChildResult::key_us), "us");
    bench::report_value("  of which compile(cubin, cache): key + disk hit",
                        median_of(warm_children, &ChildResult::compile_us), "us");
    const double load_us = median_of(warm_children, &ChildResult::load_us);
    if (g_gpu) bench::report_value("  of which get_kernel (module load)", load_us, "us");
    if (!all_hit) std::printf("  warning: a warm run missed the cache or a cold run hit it\n");
    if (g_gpu) {
      // The floor: the same cubin read and loaded by the raw driver in a fresh process.
      const std::string file =
          "CUCORE_BENCH_CACHE_FILE=" + cucore::FileStreamProgramCache(warm).entry_path(key).string();
      std::vector<RawResult> lib, mod;
      for (int i = 0; i < 11; ++i) {
        lib.push_back(run_raw_child({"CUCORE_BENCH_CACHE_CHILD=library", file}));
        mod.push_back(run_raw_child({"CUCORE_BENCH_CACHE_CHILD=module", file}));
        if (lib.back().all_us < 0 || mod.back().all_us < 0) {
          std::fprintf(stderr, "bench_program_cache: a raw-driver child failed\n");
          return 1;
        }
      }
      const double raw_load = median_of(lib, &RawResult::load_us);
      bench::report({"fresh process: warm disk -> loaded kernel vs raw read+load", "us", c.cucore,
                     median_of(lib, &RawResult::all_us), "raw driver: read + cuLibraryLoadData + GetKernel"});
      bench::report({"fresh process: kernel load alone vs raw load", "us", load_us, raw_load,
                     "raw cuLibraryLoadData + cuLibraryGetKernel"});
      bench::report_value("  raw cuModuleLoadData + cuModuleGetFunction, same cubin",
                          median_of(mod, &RawResult::load_us), "us");
      bench::report_value("  raw read + cuModuleLoadData + cuModuleGetFunction", median_of(mod, &RawResult::all_us),
                          "us");

      // Where a slower load than the raw driver's comes from. Each child swaps
      // one thing: cucore's warm start then the raw load (same code as the
      // floor, cucore's process state); cucore's get_kernel in a process that did
      // nothing else of cucore's (cucore's code, the raw process's state); the
      // raw load after waiting as long after the context's creation as a cucore
      // child does (time alone). The first near get_kernel's figure and the
      // second near the raw load's: the process's state; the reverse: cucore's
      // code; the third near get_kernel's: something the driver does meanwhile.
      std::vector<double> before_load;
      for (const auto& w : warm_children) before_load.push_back(w.us - w.load_us);
      const double raw_read = median_of(lib, &RawResult::all_us) - raw_load;
      const std::string wait =
          "CUCORE_BENCH_CACHE_WAIT_US=" + std::to_string(std::max(0.0, bench::median(before_load) - raw_read));
      std::vector<ChildResult> after_start;
      std::vector<RawResult> in_raw, waited;
      for (int i = 0; i < 11; ++i) {
        after_start.push_back(run_child(warm.string(), "cucore-raw"));
        in_raw.push_back(run_raw_child({"CUCORE_BENCH_CACHE_CHILD=from-bytes", file}));
        waited.push_back(run_raw_child({"CUCORE_BENCH_CACHE_CHILD=library", file, wait}));
        if (after_start.back().us < 0 || !after_start.back().hit || in_raw.back().all_us < 0 ||
            waited.back().all_us < 0) {
          std::fprintf(stderr, "bench_program_cache: a diagnostic child failed (or missed the warm cache)\n");
          return 1;
        }
      }
      struct Line {
        const char* name;
        double value;
        const char* unit;
      };
      for (const auto& [name, value, unit] : {
               Line{"raw load after cucore's warm start", median_of(after_start, &ChildResult::load_us), "us"},
               Line{"cucore's get_kernel in a raw process", median_of(in_raw, &RawResult::load_us), "us"},
               Line{"raw load after waiting as long as cucore's start", median_of(waited, &RawResult::load_us), "us"},
               Line{"page faults in get_kernel", median_of(warm_children, &ChildResult::load_faults), "faults"},
               Line{"page faults in the raw load", median_of(lib, &RawResult::load_faults), "faults"},
               Line{"page faults in the raw load after cucore's start",
                    median_of(after_start, &ChildResult::load_faults), "faults"},
               Line{"page faults in cucore's get_kernel in a raw process", median_of(in_raw, &RawResult::load_faults),
                    "faults"},
               Line{"context switches in get_kernel", median_of(warm_children, &ChildResult::load_switches),
                    "switches"},
               Line{"context switches in the raw load", median_of(lib, &RawResult::load_switches), "switches"}})
        bench::report_value(std::string("  diagnostic: ") + name, value, unit);
    }
  }
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
