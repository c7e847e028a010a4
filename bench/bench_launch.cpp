// Host cost of cucore::launch against a raw cuLaunchKernelEx with the same
// arguments, in one process, alternating, after warm-up: (a) an empty kernel,
// (b) SAXPY's five arguments (float, three Buffers, int). Goal: <= 1.03x.
//
// Each sample times a burst of launches; the stream is synchronized between
// bursts, outside the timed region and the same for both sides, so the
// device's queue never fills and what is measured is the host's enqueue cost.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <cstdint>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common.hpp"
#include "loader/driver.hpp"

namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void empty_kernel() {}
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, const float* __restrict__ y,
                                 float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

constexpr int kBurst = 200;     // launches per timed sample
constexpr int kSamples = 301;   // per side
constexpr int kWarmup = 20;     // samples per side before timing

template <typename F>
double burst_ns(F&& f, cucore::StreamRef stream) {
  stream.sync();  // empty queue at the start of every sample, for both sides
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kBurst; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / kBurst;
}

template <typename Ours, typename Theirs>
bench::Comparison compare(const std::string& name, cucore::StreamRef stream, Ours&& ours, Theirs&& theirs) {
  for (int i = 0; i < kWarmup; ++i) {
    burst_ns(ours, stream);
    burst_ns(theirs, stream);
  }
  std::vector<double> a, b;
  for (int i = 0; i < kSamples; ++i) {
    if (i % 2) {  // alternate which goes first, so drift hits both alike
      a.push_back(burst_ns(ours, stream));
      b.push_back(burst_ns(theirs, stream));
    } else {
      b.push_back(burst_ns(theirs, stream));
      a.push_back(burst_ns(ours, stream));
    }
  }
  stream.sync();
  return {name, "ns", bench::median(a), bench::median(b), "raw cuLaunchKernelEx"};
}

}  // namespace

int main() {
  using namespace cucore;
  if (!bench::have_gpu("bench_launch")) return 0;
  try {
    Device dev(0);
    dev.set_current();
    Stream stream = dev.create_stream();
    ObjectCode code = Program(kSource, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
    Kernel empty = code.get_kernel("empty_kernel");
    Kernel saxpy = code.get_kernel("saxpy");
    const int n = 256;  // one block: the device work is negligible next to the enqueue
    Buffer x = dev.memory_resource().allocate(n * sizeof(float), stream);
    Buffer y = dev.memory_resource().allocate(n * sizeof(float), stream);
    Buffer out = dev.memory_resource().allocate(n * sizeof(float), stream);
    x.fill(std::uint32_t(0), stream);
    y.fill(std::uint32_t(0), stream);
    stream.sync();

    const auto& d = detail::driver();
    const CUstream s = stream.handle();
    const LaunchConfig config{.grid = 1, .block = n};
    // The raw side, as a careful C++ user writes it: config and argument array
    // built once, outside the loop.
    CUlaunchConfig raw{};
    raw.gridDimX = raw.gridDimY = raw.gridDimZ = 1;
    raw.blockDimX = n;
    raw.blockDimY = raw.blockDimZ = 1;
    raw.hStream = s;
    float a = 2.0f;
    int nn = n;
    CUdeviceptr px = x.handle(), py = y.handle(), pout = out.handle();
    void* saxpy_params[] = {&a, &px, &py, &pout, &nn};
    const CUfunction empty_fn = reinterpret_cast<CUfunction>(empty.handle());
    const CUfunction saxpy_fn = reinterpret_cast<CUfunction>(saxpy.handle());
    auto raw_check = [](CUresult r) {
      if (r != CUDA_SUCCESS) throw CudaError(r, "cuLaunchKernelEx (raw)");
    };

    std::printf("host cost per launch (median of %d bursts of %d, alternating, after warm-up)\n", kSamples, kBurst);
    auto c1 = compare(
        "launch: empty kernel", stream, [&] { launch(stream, config, empty); },
        [&] { raw_check(d.cuLaunchKernelEx(&raw, empty_fn, nullptr, nullptr)); });
    bench::report(c1, 1.03);
    auto c2 = compare(
        "launch: saxpy, 5 args (float, 3 Buffers, int)", stream,
        [&] { launch(stream, config, saxpy, a, x, y, out, nn); },
        [&] { raw_check(d.cuLaunchKernelEx(&raw, saxpy_fn, saxpy_params, nullptr)); });
    bench::report(c2, 1.03);

    // The other ways in, for the record (no goal).
    TypedKernel<void(float, const float*, const float*, float*, int)> typed(saxpy);
    auto c3 = compare(
        "launch: saxpy via TypedKernel", stream, [&] { launch(stream, config, typed, a, x, y, out, nn); },
        [&] { raw_check(d.cuLaunchKernelEx(&raw, saxpy_fn, saxpy_params, nullptr)); });
    bench::report(c3);
    auto c4 = compare(
        "launch: saxpy via KernelArgs (built per launch)", stream,
        [&] {
          KernelArgs args;
          args.push(a).push(x).push(y).push(out).push(nn);
          launch(stream, config, saxpy, args);
        },
        [&] { raw_check(d.cuLaunchKernelEx(&raw, saxpy_fn, saxpy_params, nullptr)); });
    bench::report(c4);
    stream.sync();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_launch: %s\n", e.what());
    return 1;
  }
}
