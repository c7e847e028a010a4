// Program-cache benchmarks, medians after warm-up, one run:
//   InMemoryProgramCache::get hit            goal <= 0.2 us  (peer: a locked unordered_map, the floor)
//   compile(target, ..., cache) hit, 2 KB     goal <= 3 us    (key computation included)
//   FileStreamProgramCache::get hit           goal <= 10 us   (peer: open+read+close of the same file)
//   a fresh process, source -> kernel through a warm disk cache, goal <= 0.5 ms, against the cold
//   compile in the same run (ratio). Loading the kernel needs a GPU; without one both stop at the
//   ObjectCode, and the line says so. With a GPU, also the floor: a fresh process that reads the
//   same cached cubin and loads it with the raw driver (cuLibraryLoadData + cuLibraryGetKernel, as
//   cucore does; and cuModuleLoadData + cuModuleGetFunction, the context-bound way).
// The children for the last one are this program run again with CUCORE_BENCH_CACHE_CHILD set
// (to "1", or to "library"/"module" for the raw driver).
#include <fcntl.h>
#include <spawn.h>
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

// Source to kernel (or to ObjectCode without a GPU) through a FileStreamProgramCache
// at $CUCORE_BENCH_CACHE_DIR; prints the microseconds it took. CUDA's own start-up
// (driver load, cuInit, context) is done first and not counted: it is the same
// with or without a cache.
int child_main() {
  init_device();
  const std::string dir = std::getenv("CUCORE_BENCH_CACHE_DIR");
  const auto t0 = bench::clock::now();
  cucore::FileStreamProgramCache cache(dir);
  cucore::Program program(source_2kb(), "c++", {.arch = g_arch});
  const auto t1 = bench::clock::now();
  // The first key in a process pays one-time costs (the compiler identity's
  // memo, the first SHA-256); timed apart, then compile() computes it again (~1 us).
  (void)cucore::make_program_cache_key(program.code(), "c++", program.options(), cucore::CodeType::cubin);
  const auto t2 = bench::clock::now();
  cucore::ObjectCode code = program.compile(cucore::CodeType::cubin, {}, &cache);
  const auto t3 = bench::clock::now();
  if (g_gpu) (void)code.get_kernel("saxpy");
  const auto t4 = bench::clock::now();
  auto us = [](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
  std::printf("%.3f %llu %.3f %.3f %.3f %.3f\n", us(t0, t4), static_cast<unsigned long long>(cache.stats().hits),
              us(t0, t1), us(t1, t2), us(t2, t3), us(t3, t4));
  return 0;
}

// The raw driver's floor: the cubin the warm cache holds for the same source
// ($CUCORE_BENCH_CACHE_FILE), read with plain calls and loaded with the driver
// alone; prints the microseconds of the whole and of the load.
int raw_child_main(const std::string& how) {
  init_device();
  if (!g_gpu) return 1;
  const char* file = std::getenv("CUCORE_BENCH_CACHE_FILE");
  const auto t0 = bench::clock::now();
  const int fd = open(file, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return 1;
  std::vector<char> bytes(static_cast<std::size_t>(st.st_size));
  const bool read_all = read(fd, bytes.data(), bytes.size()) == st.st_size;
  close(fd);
  if (!read_all) return 1;
  const auto t1 = bench::clock::now();
  const auto& d = cucore::detail::driver();
  if (how == "library") {
    CUlibrary lib = nullptr;
    CUkernel kernel = nullptr;
    cucore::detail::check(d.cuLibraryLoadData(&lib, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                          "cuLibraryLoadData");
    cucore::detail::check(d.cuLibraryGetKernel(&kernel, lib, "saxpy"), "cuLibraryGetKernel");
  } else {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    cucore::detail::check(d.cuModuleLoadData(&module, bytes.data()), "cuModuleLoadData");
    cucore::detail::check(d.cuModuleGetFunction(&function, module, "saxpy"), "cuModuleGetFunction");
  }
  const auto t2 = bench::clock::now();
  auto us = [](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
  std::printf("%.3f %.3f\n", us(t0, t2), us(t1, t2));
  return 0;
}

struct ChildResult {
  double us = -1;  // source to kernel (or ObjectCode)
  bool hit = false;
  // of which: constructing the Program, the first key, compile() through the
  // cache (key again + disk read), loading the kernel
  double program_us = 0, key_us = 0, compile_us = 0, load_us = 0;
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

// Runs a cucore child; its times in microseconds (negative on failure) and whether it hit.
ChildResult run_child(const std::string& dir) {
  auto got = run_self({"CUCORE_BENCH_CACHE_CHILD=1", "CUCORE_BENCH_CACHE_DIR=" + dir});
  if (!got) return {};
  const std::string& out = *got;
  ChildResult r;
  unsigned long long hits = 0;
  if (std::sscanf(out.c_str(), "%lf %llu %lf %lf %lf %lf", &r.us, &hits, &r.program_us, &r.key_us, &r.compile_us,
                  &r.load_us) != 6)
    return {};
  r.hit = hits > 0;
  return r;
}

}  // namespace

int main() {
  if (const char* child = std::getenv("CUCORE_BENCH_CACHE_CHILD"))
    return std::string(child) == "1" ? child_main() : raw_child_main(child);
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
    std::vector<double> warm_us, cold_us, program_us, key_us, compile_us, load_us;
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
      warm_us.push_back(w.us);
      program_us.push_back(w.program_us);
      key_us.push_back(w.key_us);
      compile_us.push_back(w.compile_us);
      load_us.push_back(w.load_us);
    }
    const char* what = g_gpu ? "fresh process: source -> loaded kernel, warm disk"
                             : "fresh process: source -> ObjectCode, warm disk (no GPU: no load)";
    bench::Comparison c{what, "us", bench::median(warm_us), bench::median(cold_us), "cold compile, same run"};
    bench::report(c);
    bench::report_value(std::string(what) + " (goal 500 us)", c.cucore, "us", 500);
    // Where a warm start goes (medians of each part).
    bench::report_value("  of which the cache and Program construction", bench::median(program_us), "us");
    bench::report_value("  of which the first key (toolchain identity memo, first SHA-256)", bench::median(key_us),
                        "us");
    bench::report_value("  of which compile(cubin, cache): key + disk hit", bench::median(compile_us), "us");
    if (g_gpu) bench::report_value("  of which get_kernel (module load)", bench::median(load_us), "us");
    if (!all_hit) std::printf("  warning: a warm run missed the cache or a cold run hit it\n");
    if (g_gpu) {
      // The floor: the same cubin read and loaded by the raw driver in a fresh process.
      const std::string file =
          "CUCORE_BENCH_CACHE_FILE=" + cucore::FileStreamProgramCache(warm).entry_path(key).string();
      std::vector<double> lib_us, lib_load_us, mod_us, mod_load_us;
      for (int i = 0; i < 11; ++i) {
        double lib_all = 0, lib_load = 0, mod_all = 0, mod_load = 0;
        auto l = run_self({"CUCORE_BENCH_CACHE_CHILD=library", file});
        auto m = run_self({"CUCORE_BENCH_CACHE_CHILD=module", file});
        if (!l || !m || std::sscanf(l->c_str(), "%lf %lf", &lib_all, &lib_load) != 2 ||
            std::sscanf(m->c_str(), "%lf %lf", &mod_all, &mod_load) != 2) {
          std::fprintf(stderr, "bench_program_cache: a raw-driver child failed\n");
          return 1;
        }
        lib_us.push_back(lib_all);
        lib_load_us.push_back(lib_load);
        mod_us.push_back(mod_all);
        mod_load_us.push_back(mod_load);
      }
      bench::report({"fresh process: warm disk -> loaded kernel vs raw read+load", "us", c.cucore,
                     bench::median(lib_us), "raw driver: read + cuLibraryLoadData + GetKernel"});
      bench::report({"fresh process: kernel load alone vs raw load", "us", bench::median(load_us),
                     bench::median(lib_load_us), "raw cuLibraryLoadData + cuLibraryGetKernel"});
      bench::report_value("  raw cuModuleLoadData + cuModuleGetFunction, same cubin", bench::median(mod_load_us),
                          "us");
      bench::report_value("  raw read + cuModuleLoadData + cuModuleGetFunction", bench::median(mod_us), "us");
    }
  }
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
