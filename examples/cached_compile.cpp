// The mission's example 1: compile a SAXPY kernel for this device's
// architecture once, store the cubin in an InMemoryProgramCache under a key,
// serve the next request from the cache, and get the kernel `saxpy`.
// Without a GPU it compiles for sm_90 and stops short of loading the kernel.
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/kernel.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

namespace {

const char* kSaxpy = R"(
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

double micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  try {
    // sm_{major}{minor} of device 0, when there is one.
    std::string arch = "sm_90";
    bool gpu = false;
    try {
      if (cucore::Device::count() > 0) {
        cucore::Device dev(0);
        dev.set_current();
        arch = "sm_" + dev.arch();
        gpu = true;
      }
    } catch (const std::exception& e) {
      std::printf("no GPU here (%s)\n  compiling for %s; loading the kernel needs a GPU\n", e.what(), arch.c_str());
    }

    cucore::Program program(kSaxpy, "c++", {.arch = arch});
    cucore::InMemoryProgramCache cache;
    const std::string key =
        cucore::make_program_cache_key(program.code(), program.code_type(), program.options(), cucore::CodeType::cubin);
    std::printf("cache key  %s\n", cucore::program_cache_key_hex(key).c_str());

    // First request: a miss, so compile with NVRTC and store the cubin.
    auto t0 = std::chrono::steady_clock::now();
    std::optional<cucore::ObjectCode> code = cache.get(key);
    if (!code) {
      code = program.compile(cucore::CodeType::cubin);
      cache.put(key, *code);
    }
    const double cold_us = micros_since(t0);

    // Next request: from the cache, no compiler.
    t0 = std::chrono::steady_clock::now();
    std::optional<cucore::ObjectCode> again = cache.get(key);
    const double hit_us = micros_since(t0);
    if (!again) {
      std::fprintf(stderr, "cached_compile: the cache lost the entry\n");
      return 1;
    }
    // A steadier figure for the hit: the mean of many.
    constexpr int kHits = 100000;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kHits; ++i) again = cache.get(key);
    const double mean_hit_us = micros_since(t0) / kHits;

    std::printf("compiled   %s, %zu bytes of %s\n", arch.c_str(), again->code().size(), std::string(to_string(again->code_type())).c_str());
    std::printf("cold compile       %10.1f us\n", cold_us);
    std::printf("cache hit          %10.3f us (mean of %d: %.3f us), %.0fx faster than compiling\n", hit_us, kHits,
                mean_hit_us, cold_us / mean_hit_us);
    auto s = cache.stats();
    std::printf("cache stats        %llu hits, %llu misses\n", static_cast<unsigned long long>(s.hits),
                static_cast<unsigned long long>(s.misses));

    if (gpu) {
      cucore::Kernel saxpy = again->get_kernel("saxpy");
      std::printf("kernel saxpy       loaded (%d registers per thread)\n", saxpy.attributes().num_regs());
      // Another request shares the cached object, so its module is not loaded again.
      auto third = cache.get(key);
      (void)third->get_kernel("saxpy");
      std::printf("again from cache   same module: %s\n",
                  third->library_handle() == again->library_handle() ? "yes (loaded once)" : "NO");
    } else {
      std::printf("kernel saxpy       skipped: get_kernel loads the cubin into the driver, which needs a GPU\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cached_compile: %s\n", e.what());
    return 1;
  }
}
