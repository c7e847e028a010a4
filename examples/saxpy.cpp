// The mission's example 4, "Full SAXPY", in C++: device and stream, a memory
// pool, a kernel compiled through the program cache, three buffers of 10M
// floats, host-to-device copies, a launch of (N+255)/256 blocks of 256
// threads, the copy back, and every element checked against 3*x + y.
//
// On a machine without a GPU it compiles the kernel for sm_90 and says what it
// would run (exit 0).
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>
#include <cucore/stream.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void saxpy(float alpha, const float* __restrict__ x,
                                 const float* __restrict__ y, float* out, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < n) out[idx] = alpha * x[idx] + y[idx];
}
)";

constexpr int kN = 10'000'000;
constexpr float kAlpha = 3.0f;

// Through the process-wide cache (memory in front of disk) when it is usable,
// else a plain compile: the example should run either way.
cucore::ObjectCode compile(const std::string& arch, double& ms, bool& cached) {
  const cucore::Program program(kSource, "c++", {.arch = arch});
  const auto t0 = std::chrono::steady_clock::now();
  cucore::ObjectCode code;
  cached = false;
  try {
    code = program.compile(cucore::CodeType::cubin, {}, &cucore::default_program_cache());
    cached = true;
  } catch (const cucore::CompileError&) {
    throw;
  } catch (const std::exception& e) {
    std::printf("program cache unavailable (%s); compiling without it\n", e.what());
    code = program.compile(cucore::CodeType::cubin);
  }
  ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return code;
}

int without_gpu(const std::string& why) {
  std::printf("no GPU here: %s\n", why.c_str());
  double ms = 0;
  bool cached = false;
  cucore::ObjectCode code = compile("sm_90", ms, cached);
  std::printf("compiled saxpy for sm_90: %zu-byte cubin in %.2f ms%s\n", code.code().size(), ms,
              cached ? " (through the program cache)" : "");
  std::printf("would run: saxpy on %d floats, grid %d x block 256, three buffers of %.0f MB from a memory pool,\n"
              "           then check every element of out == %.1f * x + y\n",
              kN, (kN + 255) / 256, kN * 4.0 / 1e6, kAlpha);
  return 0;
}

}  // namespace

int main() {
  using namespace cucore;
  std::string why;
  try {
    if (Device::count() == 0) why = "the driver reports no CUDA device";
  } catch (const std::exception& e) {
    why = e.what();
  }
  try {
    if (!why.empty()) return without_gpu(why);

    // 1. Device and stream.
    Device dev(0);
    dev.set_current();
    Stream stream = dev.create_stream();
    std::printf("GPU: %s, %d SMs\n", dev.name().c_str(), dev.properties().multiprocessor_count());

    // 2. A memory pool of its own.
    DeviceMemoryResource mr(dev, DeviceMemoryResourceOptions{});

    // 3-4. The kernel, compiled through the cache.
    double compile_ms = 0;
    bool cached = false;
    const std::string arch = "sm_" + dev.arch();
    ObjectCode code = compile(arch, compile_ms, cached);
    Kernel saxpy = code.get_kernel("saxpy");
    std::printf("kernel: saxpy for %s, %.2f ms to compile%s\n", arch.c_str(), compile_ms,
                cached ? " (through the program cache)" : "");

    // 5. GPU memory.
    const std::size_t bytes = std::size_t(kN) * sizeof(float);
    Buffer x = mr.allocate(bytes, stream);
    Buffer y = mr.allocate(bytes, stream);
    Buffer out = mr.allocate(bytes, stream);

    // 6. Host to device.
    std::vector<float> hx(kN), hy(kN), hout(kN);
    std::mt19937 rng(2024);
    std::uniform_real_distribution<float> dist(-1000.f, 1000.f);
    for (int i = 0; i < kN; ++i) {
      hx[i] = dist(rng);
      hy[i] = dist(rng);
    }
    x.copy_from(std::span<const float>(hx), stream);
    y.copy_from(std::span<const float>(hy), stream);

    // 7. Launch, timed with events.
    const EventOptions timed{.timing_enabled = true};
    Event start = stream.record(timed);
    launch(stream, {.grid = (kN + 255) / 256, .block = 256}, saxpy, kAlpha, x, y, out, kN);
    Event end = stream.record(timed);

    // 8. Device to host, and the check of every element.
    out.copy_to(std::span<float>(hout), stream);
    stream.sync();
    const float kernel_ms = elapsed_time_ms(start, end);
    std::size_t bad = 0;
    double max_rel = 0;
    for (int i = 0; i < kN; ++i) {
      const double want = double(kAlpha) * hx[i] + hy[i];
      // Relative to the terms' size: without FMA contraction the product is
      // rounded before the add, which matters where the terms cancel.
      const double scale = std::fabs(double(kAlpha) * hx[i]) + std::fabs(hy[i]) + 1.0;
      const double rel = std::fabs(hout[i] - want) / scale;
      max_rel = std::max(max_rel, rel);
      if (rel > 1e-6) {
        if (++bad <= 5) std::fprintf(stderr, "out[%d] = %.9g, want %.9g\n", i, hout[i], want);
      }
    }

    // 9. Free.
    x.close();
    y.close();
    out.close();
    stream.sync();  // the frees are stream-ordered: done before the pool goes
    stream.close();

    if (bad) {
      std::printf("SAXPY FAILED: %zu of %d elements wrong\n", bad, kN);
      return 1;
    }
    std::printf("SAXPY OK: %d elements, out == %.1f * x + y everywhere (max relative error %.2g)\n", kN, kAlpha,
                max_rel);
    std::printf("kernel: %.3f ms, %.0f GB/s (3 x %.0f MB)\n", kernel_ms, 3.0 * bytes / (kernel_ms * 1e-3) / 1e9,
                bytes / 1e6);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "saxpy: %s\n", e.what());
    return 1;
  }
}
