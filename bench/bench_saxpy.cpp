// The documents' benchmark: SAXPY over 100M floats, one element per thread
// (block 256), cucore::launch against a raw cuLaunchKernelEx of the same
// cubin, and a 400 MB device-to-device copy as the bandwidth ceiling, all
// timed with events in one run, interleaved, after warm-up; medians of 11 runs.
// Bandwidth counts 3 x 400 MB per SAXPY and read + write (2 x 400 MB) per copy.
// Goal: the same time as the raw launch (ratio <= 1.01).
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common.hpp"
#include "loader/driver.hpp"

namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, const float* __restrict__ y,
                                 float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

constexpr int kN = 100'000'000;
constexpr int kRuns = 11;
constexpr int kWarmup = 3;

// Milliseconds of the work `fn` queues on `stream`, between two timing events.
float time_ms(cucore::StreamRef stream, const std::function<void()>& fn) {
  const cucore::EventOptions timed{.timing_enabled = true};
  cucore::Event start = stream.record(timed);
  fn();
  cucore::Event end = stream.record(timed);
  end.sync();
  return cucore::elapsed_time_ms(start, end);
}

}  // namespace

int main() {
  using namespace cucore;
  if (!bench::have_gpu("bench_saxpy")) return 0;
  try {
    Device dev(0);
    dev.set_current();
    Stream stream = dev.create_stream();
    ObjectCode code = Program(kSource, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
    Kernel saxpy = code.get_kernel("saxpy");

    const std::size_t bytes = std::size_t(kN) * sizeof(float);
    DeviceMemoryResource mr(dev, DeviceMemoryResourceOptions{});
    Buffer x = mr.allocate(bytes, stream), y = mr.allocate(bytes, stream), out = mr.allocate(bytes, stream);
    Buffer copy_dst = mr.allocate(bytes, stream);
    {
      std::vector<float> hx(kN), hy(kN);
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      for (int i = 0; i < kN; ++i) {
        hx[i] = dist(rng);
        hy[i] = dist(rng);
      }
      x.copy_from(std::span<const float>(hx), stream);
      y.copy_from(std::span<const float>(hy), stream);
      stream.sync();
    }
    const float a = 3.0f;
    const int n = kN;
    const LaunchConfig config{.grid = (kN + 255) / 256, .block = 256};

    const auto& d = detail::driver();
    CUlaunchConfig raw{};
    raw.gridDimX = (kN + 255) / 256;
    raw.gridDimY = raw.gridDimZ = 1;
    raw.blockDimX = 256;
    raw.blockDimY = raw.blockDimZ = 1;
    raw.hStream = stream.handle();
    float ra = a;
    int rn = n;
    CUdeviceptr px = x.handle(), py = y.handle(), pout = out.handle();
    void* params[] = {&ra, &px, &py, &pout, &rn};
    const CUfunction fn = reinterpret_cast<CUfunction>(saxpy.handle());

    auto ours = [&] { launch(stream, config, saxpy, a, x, y, out, n); };
    auto theirs = [&] {
      CUresult r = d.cuLaunchKernelEx(&raw, fn, params, nullptr);
      if (r != CUDA_SUCCESS) throw CudaError(r, "cuLaunchKernelEx (raw)");
    };
    auto copy = [&] {
      CUresult r = d.cuMemcpyDtoDAsync(copy_dst.handle(), x.handle(), bytes, stream.handle());
      if (r != CUDA_SUCCESS) throw CudaError(r, "cuMemcpyDtoDAsync");
    };

    // Correctness first: every element of cucore's result.
    ours();
    {
      std::vector<float> hx(kN), hy(kN), hout(kN);
      x.copy_to(std::span<float>(hx), stream);
      y.copy_to(std::span<float>(hy), stream);
      out.copy_to(std::span<float>(hout), stream);
      stream.sync();
      std::size_t bad = 0;
      for (int i = 0; i < kN; ++i) {
        const double want = double(a) * hx[i] + hy[i];
        if (std::fabs(hout[i] - want) > 1e-6 * (std::fabs(double(a) * hx[i]) + std::fabs(hy[i]) + 1.0)) ++bad;
      }
      if (bad) {
        std::fprintf(stderr, "bench_saxpy: %zu of %d elements wrong\n", bad, kN);
        return 1;
      }
    }

    for (int i = 0; i < kWarmup; ++i) {
      time_ms(stream, ours);
      time_ms(stream, theirs);
      time_ms(stream, copy);
    }
    std::vector<double> t_ours, t_raw, t_copy;
    for (int i = 0; i < kRuns; ++i) {
      // Rotate the order so no side always follows the same one.
      for (int k = 0; k < 3; ++k) {
        switch ((i + k) % 3) {
          case 0: t_ours.push_back(time_ms(stream, ours)); break;
          case 1: t_raw.push_back(time_ms(stream, theirs)); break;
          default: t_copy.push_back(time_ms(stream, copy)); break;
        }
      }
    }
    const double ms_ours = bench::median(t_ours), ms_raw = bench::median(t_raw), ms_copy = bench::median(t_copy);
    const double gbs_ours = 3.0 * bytes / (ms_ours * 1e-3) / 1e9;
    const double gbs_raw = 3.0 * bytes / (ms_raw * 1e-3) / 1e9;
    const double gbs_copy = 2.0 * bytes / (ms_copy * 1e-3) / 1e9;

    std::printf("SAXPY, %d floats, block 256, one element per thread (median of %d runs after %d warm-up)\n", kN,
                kRuns, kWarmup);
    bench::Comparison c{"saxpy 100M: kernel time", "ms", ms_ours, ms_raw, "raw cuLaunchKernelEx"};
    bench::report(c, 1.01);
    bench::Comparison bw{"saxpy 100M: bandwidth", "GB/s", gbs_ours, gbs_raw, "raw cuLaunchKernelEx"};
    bench::report(bw);
    bench::report_value("device-to-device copy 400 MB (read+write)", gbs_copy, "GB/s");
    bench::report_value("saxpy 100M: % of the copy bandwidth", 100.0 * gbs_ours / gbs_copy, "%");
    std::printf("raw launch: %.1f%% of the copy bandwidth\n", 100.0 * gbs_raw / gbs_copy);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_saxpy: %s\n", e.what());
    return 1;
  }
}
