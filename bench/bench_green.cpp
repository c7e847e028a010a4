// Isolation with green contexts: a latency-sensitive small kernel (8 blocks x
// 512 threads), launched again and again and timed with events on its stream,
// while a memory-bound big kernel keeps the GPU busy (40 launches, each
// copying 2 GiB into 2 GiB: 4 GiB of traffic per launch).
//
// Settings: the small kernel alone; sharing the whole GPU with the big one;
// sharing, the small one on a high-priority stream; partitioned with green
// contexts, the small kernel on a group of 8, 16, 32 or 64 SMs and the big one
// on the rest. Each partitioned setting is measured through cucore and through
// the raw driver (cuGreenCtxCreate & co.) in the same run, alternating, after
// warm-up: their ratio is what the library adds (goal <= 1.1). Reported: the
// small kernel's p50 / p99 / p99.9 latency and the big kernel's time and
// bandwidth, as JSON lines (bench/common.hpp) that tools/plot_green.py turns
// into docs/img/green_isolation.png and the table in docs/green-contexts.md.
#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/resources.hpp>
#include <cucore/stream.hpp>

#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common.hpp"
#include "loader/driver.hpp"

namespace {

using cucore::detail::check;
using cucore::detail::driver;

constexpr const char* kSource = R"(
extern "C" __global__ void small_kernel(float* out, int iters) {
  float v = threadIdx.x;
  for (int i = 0; i < iters; ++i) v = v * 0.999f + 0.5f;
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
extern "C" __global__ void big_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v = in[i];
    v.x += 1.f;
    out[i] = v;
  }
}
)";

constexpr unsigned kSmallBlocks = 8, kSmallThreads = 512;
constexpr int kSmallIters = 256;
constexpr std::size_t kBigHalf = std::size_t(2) << 30;  // 2 GiB in, 2 GiB out
constexpr std::size_t kBigVectors = kBigHalf / 16;      // float4 elements
constexpr unsigned kBigThreads = 256;
constexpr unsigned kBigLaunches = 40;
constexpr int kRunsPerSetting = 10;  // big batches per measurement (their samples add up)
constexpr int kAloneSamples = 6000;

struct Stats {
  double p50 = 0, p99 = 0, p999 = 0;  // microseconds
  double big_ms = 0;                  // median big batch time
  std::size_t samples = 0;
  double big_gbps() const { return big_ms > 0 ? kBigLaunches * 2.0 * kBigHalf / (big_ms * 1e6) : 0; }
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

// How one setting launches and times things: through cucore, or the raw driver.
struct Lane {
  std::function<void()> small;       // one small kernel, timed: start event, launch, end event
  std::function<float()> small_ms;   // waits for it, returns its time
  std::function<void()> big_batch;   // start event, kBigLaunches big kernels, end event (not waited for)
  std::function<bool()> big_done;
  std::function<float()> big_ms;     // waits, returns the batch's time
};

Stats measure(Lane& lane, bool with_big) {
  std::vector<double> lat;
  std::vector<double> big;
  if (!with_big) {
    for (int i = 0; i < kAloneSamples; ++i) {
      lane.small();
      lat.push_back(1000.0 * lane.small_ms());
    }
  } else {
    for (int r = 0; r < kRunsPerSetting; ++r) {
      lane.big_batch();
      while (!lane.big_done()) {
        lane.small();
        lat.push_back(1000.0 * lane.small_ms());
      }
      big.push_back(lane.big_ms());
    }
  }
  Stats s;
  s.samples = lat.size();
  s.p50 = percentile(lat, 0.50);
  s.p99 = percentile(lat, 0.99);
  s.p999 = percentile(lat, 0.999);
  s.big_ms = bench::median(big);
  return s;
}

// ---- cucore -------------------------------------------------------------------------------------

constexpr cucore::EventOptions kTimed{.timing_enabled = true};

struct CucoreLane {
  cucore::Stream small_stream, big_stream;
  cucore::Event s0, s1, b0, b1;  // made in their stream's context
  Lane lane;
  CucoreLane(cucore::Stream small, cucore::Stream big, const cucore::Kernel& small_k, const cucore::Kernel& big_k,
             const cucore::Buffer& small_out, const cucore::Buffer& in, const cucore::Buffer& out)
      : small_stream(std::move(small)),
        big_stream(std::move(big)),
        s0(small_stream.context().create_event(kTimed)),
        s1(small_stream.context().create_event(kTimed)),
        b0(big_stream.context().create_event(kTimed)),
        b1(big_stream.context().create_event(kTimed)) {
    void* small_ptr = reinterpret_cast<void*>(small_out.handle());
    const void* in_ptr = reinterpret_cast<const void*>(in.handle());
    void* out_ptr = reinterpret_cast<void*>(out.handle());
    lane.small = [=, this] {
      small_stream.record(s0);
      cucore::launch(small_stream, {.grid = kSmallBlocks, .block = kSmallThreads}, small_k, small_ptr, kSmallIters);
      small_stream.record(s1);
    };
    lane.small_ms = [this] {
      s1.sync();
      return cucore::elapsed_time_ms(s0, s1);
    };
    lane.big_batch = [=, this] {
      big_stream.record(b0);
      const unsigned grid = static_cast<unsigned>((kBigVectors + kBigThreads - 1) / kBigThreads);
      for (unsigned i = 0; i < kBigLaunches; ++i)
        cucore::launch(big_stream, {.grid = grid, .block = kBigThreads}, big_k, in_ptr, out_ptr, kBigVectors);
      big_stream.record(b1);
    };
    lane.big_done = [this] { return b1.is_done(); };
    lane.big_ms = [this] {
      b1.sync();
      return cucore::elapsed_time_ms(b0, b1);
    };
  }
};

// ---- the raw driver -----------------------------------------------------------------------------

struct RawGreen {
  CUgreenCtx small_green = nullptr, big_green = nullptr;
  CUcontext small_ctx = nullptr, big_ctx = nullptr;
  CUstream small_stream = nullptr, big_stream = nullptr;
  CUevent s0 = nullptr, s1 = nullptr, b0 = nullptr, b1 = nullptr;
  CUlibrary library = nullptr;
  CUkernel small_k = nullptr, big_k = nullptr;
  void* small_ptr;
  const void* in_ptr;
  void* out_ptr;
  Lane lane;

  RawGreen(CUdevice dev, unsigned sms, std::span<const std::byte> cubin, void* small_out, const void* in, void* out)
      : small_ptr(small_out), in_ptr(in), out_ptr(out) {
    const auto& d = driver();
    CUdevResource all{}, group{}, rest{};
    check(d.cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
    unsigned n = 1;
    check(d.cuDevSmResourceSplitByCount(&group, &n, &all, &rest, 0, sms), "cuDevSmResourceSplitByCount");
    if (n != 1 || group.sm.smCount != sms) throw cucore::Error("raw split: not one group of " + std::to_string(sms));
    small_green = make_green(dev, group, small_ctx);
    big_green = make_green(dev, rest, big_ctx);
    check(d.cuGreenCtxStreamCreate(&small_stream, small_green, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate");
    check(d.cuGreenCtxStreamCreate(&big_stream, big_green, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate");
    CUcontext previous = nullptr;
    check(d.cuCtxGetCurrent(&previous), "cuCtxGetCurrent");
    check(d.cuCtxSetCurrent(small_ctx), "cuCtxSetCurrent");
    check(d.cuEventCreate(&s0, CU_EVENT_DEFAULT), "cuEventCreate");
    check(d.cuEventCreate(&s1, CU_EVENT_DEFAULT), "cuEventCreate");
    check(d.cuCtxSetCurrent(big_ctx), "cuCtxSetCurrent");
    check(d.cuEventCreate(&b0, CU_EVENT_DEFAULT), "cuEventCreate");
    check(d.cuEventCreate(&b1, CU_EVENT_DEFAULT), "cuEventCreate");
    check(d.cuCtxSetCurrent(previous), "cuCtxSetCurrent");
    check(d.cuLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
    check(d.cuLibraryGetKernel(&small_k, library, "small_kernel"), "cuLibraryGetKernel");
    check(d.cuLibraryGetKernel(&big_k, library, "big_kernel"), "cuLibraryGetKernel");

    lane.small = [this] {
      const auto& t = driver();
      int iters = kSmallIters;
      void* args[] = {&small_ptr, &iters};
      CUlaunchConfig c{};
      c.gridDimX = kSmallBlocks, c.gridDimY = c.gridDimZ = 1;
      c.blockDimX = kSmallThreads, c.blockDimY = c.blockDimZ = 1;
      c.hStream = small_stream;
      check(t.cuEventRecord(s0, small_stream), "cuEventRecord");
      check(t.cuLaunchKernelEx(&c, reinterpret_cast<CUfunction>(small_k), args, nullptr), "cuLaunchKernelEx");
      check(t.cuEventRecord(s1, small_stream), "cuEventRecord");
    };
    lane.small_ms = [this] { return elapsed(s0, s1); };
    lane.big_batch = [this] {
      const auto& t = driver();
      std::size_t count = kBigVectors;
      void* args[] = {&in_ptr, &out_ptr, &count};
      CUlaunchConfig c{};
      c.gridDimX = static_cast<unsigned>((kBigVectors + kBigThreads - 1) / kBigThreads), c.gridDimY = c.gridDimZ = 1;
      c.blockDimX = kBigThreads, c.blockDimY = c.blockDimZ = 1;
      c.hStream = big_stream;
      check(t.cuEventRecord(b0, big_stream), "cuEventRecord");
      for (unsigned i = 0; i < kBigLaunches; ++i)
        check(t.cuLaunchKernelEx(&c, reinterpret_cast<CUfunction>(big_k), args, nullptr), "cuLaunchKernelEx");
      check(t.cuEventRecord(b1, big_stream), "cuEventRecord");
    };
    lane.big_done = [this] {
      CUresult r = driver().cuEventQuery(b1);
      if (r == CUDA_ERROR_NOT_READY) return false;
      check(r, "cuEventQuery");
      return true;
    };
    lane.big_ms = [this] { return elapsed(b0, b1); };
  }

  static CUgreenCtx make_green(CUdevice dev, CUdevResource& r, CUcontext& ctx) {
    const auto& d = driver();
    CUdevResourceDesc desc = nullptr;
    check(d.cuDevResourceGenerateDesc(&desc, &r, 1), "cuDevResourceGenerateDesc");
    CUgreenCtx g = nullptr;
    check(d.cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
    check(d.cuCtxFromGreenCtx(&ctx, g), "cuCtxFromGreenCtx");
    return g;
  }

  static float elapsed(CUevent a, CUevent b) {
    const auto& d = driver();
    check(d.cuEventSynchronize(b), "cuEventSynchronize");
    float ms = 0;
    check(d.cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    return ms;
  }

  ~RawGreen() {
    const auto& d = driver();
    for (CUevent e : {s0, s1, b0, b1})
      if (e) d.cuEventDestroy(e);
    for (CUstream s : {small_stream, big_stream})
      if (s) d.cuStreamDestroy(s);
    if (library) d.cuLibraryUnload(library);
    for (CUgreenCtx g : {small_green, big_green})
      if (g) d.cuGreenCtxDestroy(g);
  }
};

// ---- reporting ------------------------------------------------------------------------------------

void print(const std::string& setting, const Stats& s) {
  std::printf("  %-28s small p50 %8.1f us  p99 %9.1f us  p99.9 %10.1f us  (%zu samples)", setting.c_str(), s.p50,
              s.p99, s.p999, s.samples);
  if (s.big_ms > 0) std::printf("   big %7.2f ms  %6.0f GB/s", s.big_ms, s.big_gbps());
  std::printf("\n");
}

// The names tools/plot_green.py reads: "green[<setting>] <metric>".
void report_alone(const std::string& setting, const Stats& s) {
  const std::string p = "green[" + setting + "] ";
  bench::report_value(p + "small p50", s.p50, "us");
  bench::report_value(p + "small p99", s.p99, "us");
  bench::report_value(p + "small p99.9", s.p999, "us");
  if (s.big_ms > 0) {
    bench::report_value(p + "big kernel", s.big_ms, "ms");
    bench::report_value(p + "big bandwidth", s.big_gbps(), "GB/s");
  }
}

void report_against_raw(const std::string& setting, const Stats& ours, const Stats& raw) {
  const std::string p = "green[" + setting + "] ";
  bench::report({p + "small p50", "us", ours.p50, raw.p50, "raw driver"}, 1.1);
  bench::report({p + "small p99", "us", ours.p99, raw.p99, "raw driver"}, 1.1);
  bench::report({p + "small p99.9", "us", ours.p999, raw.p999, "raw driver"}, 1.1);
  bench::report({p + "big kernel", "ms", ours.big_ms, raw.big_ms, "raw driver"}, 1.1);
  bench::report_value(p + "big bandwidth", ours.big_gbps(), "GB/s");
}

Stats merge(const std::vector<Stats>& runs) {
  // The setting's figure is the median over its alternated rounds.
  Stats s;
  std::vector<double> p50, p99, p999, big;
  for (const auto& r : runs) {
    p50.push_back(r.p50);
    p99.push_back(r.p99);
    p999.push_back(r.p999);
    big.push_back(r.big_ms);
    s.samples += r.samples;
  }
  s.p50 = bench::median(p50);
  s.p99 = bench::median(p99);
  s.p999 = bench::median(p999);
  s.big_ms = bench::median(big);
  return s;
}

}  // namespace

int main() {
  using namespace cucore;
  if (!bench::have_gpu("bench_green")) return 0;
  try {
    Device dev(0);
    dev.set_current();
    SMResource all = dev.resources().sm();
    std::printf("bench_green: %s, %u SMs; small kernel %ux%u, big kernel %u x copy of %zu GiB\n", dev.name().c_str(),
                all.sm_count(), kSmallBlocks, kSmallThreads, kBigLaunches, kBigHalf >> 30);
    ObjectCode code = Program(kSource, "c++", {.arch = "sm_" + dev.arch()}).compile(cucore::CodeType::cubin);
    Kernel small_k = code.get_kernel("small_kernel"), big_k = code.get_kernel("big_kernel");

    Stream setup = dev.create_stream();
    Buffer small_out = dev.memory_resource().allocate(kSmallBlocks * kSmallThreads * sizeof(float), setup);
    Buffer in = dev.memory_resource().allocate(kBigHalf, setup), out = dev.memory_resource().allocate(kBigHalf, setup);
    in.fill(std::uint32_t(0x3f800000u), setup);  // 1.0f
    setup.sync();

    auto shared_lane = [&](std::optional<int> priority) {
      return std::make_unique<CucoreLane>(dev.create_stream({.priority = priority}), dev.create_stream(), small_k,
                                          big_k, small_out, in, out);
    };
    {  // warm-up: both kernels, once
      auto w = shared_lane(std::nullopt);
      w->lane.big_batch();
      w->lane.small();
      w->lane.small_ms();
      w->lane.big_ms();
    }

    auto base = shared_lane(std::nullopt);
    Stats alone = measure(base->lane, false);
    print("alone", alone);
    report_alone("alone", alone);
    {
      Stats big_alone;
      std::vector<double> t;
      for (int r = 0; r < kRunsPerSetting; ++r) {
        base->lane.big_batch();
        t.push_back(base->lane.big_ms());
      }
      big_alone.big_ms = bench::median(t);
      std::printf("  %-28s big %7.2f ms  %6.0f GB/s\n", "big kernel alone", big_alone.big_ms, big_alone.big_gbps());
      bench::report_value("green[big alone] big kernel", big_alone.big_ms, "ms");
      bench::report_value("green[big alone] big bandwidth", big_alone.big_gbps(), "GB/s");
    }
    Stats shared = measure(base->lane, true);
    print("shared", shared);
    report_alone("shared", shared);
    int least = 0, greatest = 0;
    check(driver().cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange");
    auto high = shared_lane(greatest);
    Stats prio = measure(high->lane, true);
    print("shared, high priority", prio);
    report_alone("shared-high-priority", prio);

    for (unsigned sms : {8u, 16u, 32u, 64u}) {
      if (sms * 2 > all.sm_count()) break;
      auto [groups, rest] = all.split({.count = static_cast<int>(sms)});
      Context small_ctx = dev.create_context({.resources = {groups[0]}});
      Context big_ctx = dev.create_context({.resources = {rest}});
      CucoreLane ours(small_ctx.create_stream(), big_ctx.create_stream(), small_k, big_k, small_out, in, out);
      RawGreen raw(dev.handle(), groups[0].sm_count(), code.code(), reinterpret_cast<void*>(small_out.handle()),
                   reinterpret_cast<const void*>(in.handle()), reinterpret_cast<void*>(out.handle()));
      // Alternate, cucore first then the raw driver first.
      std::vector<Stats> a, b;
      a.push_back(measure(ours.lane, true));
      b.push_back(measure(raw.lane, true));
      b.push_back(measure(raw.lane, true));
      a.push_back(measure(ours.lane, true));
      const std::string setting = "partitioned-" + std::to_string(sms);
      Stats mine = merge(a), theirs = merge(b);
      print(setting + " (cucore)", mine);
      print(setting + " (raw driver)", theirs);
      report_against_raw(setting, mine, theirs);
      // Isolation: partitioned p99.9 against sharing the GPU (goal: 100x better).
      bench::report({"green[" + setting + "] small p99.9 vs shared", "us", mine.p999, shared.p999, "shared GPU"}, 0.01);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_green: %s\n", e.what());
    return 1;
  }
  return 0;
}
