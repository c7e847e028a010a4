// Two green contexts driven from two threads: device 0's SMs split in two
// groups, a context per group, and from each of two threads a SAXPY on random
// data on a stream of its context (so on its own SMs), every element checked.
// Without a GPU it says so and stops (exit 0).
#include <cucore/cucore.hpp>

#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {
constexpr const char* kSource = R"(
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);  // no FMA: rounded as the host rounds
}
)";
constexpr int kN = 1 << 22;

// One thread's work: its own stream of `ctx`, its own buffers, its own check.
std::string run(const cucore::Context& ctx, const cucore::ObjectCode& code, float a, unsigned seed) {
  using namespace cucore;
  Stream stream = ctx.create_stream();
  MemoryResource mr = Device(0).memory_resource();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> hx(kN), hy(kN), got(kN);
  for (auto& v : hx) v = dist(rng);
  for (auto& v : hy) v = dist(rng);
  Buffer x = mr.allocate<float>(kN, stream), y = mr.allocate<float>(kN, stream), out = mr.allocate<float>(kN, stream);
  x.copy_from(hx, stream);
  y.copy_from(hy, stream);
  TypedKernel<void(float, const float*, const float*, float*, int)> saxpy(code.get_kernel("saxpy"));
  launch(stream, {.grid = (kN + 255) / 256, .block = 256}, saxpy, a, std::as_const(x).as<float>(),
         std::as_const(y).as<float>(), out.as<float>(), kN);
  out.copy_to(got, stream);
  stream.sync();
  for (int i = 0; i < kN; ++i)
    if (got[i] != a * hx[i] + hy[i]) return "element " + std::to_string(i) + " is wrong";
  return {};
}
}  // namespace

int main() try {
  using namespace cucore;
  bool gpu = false;
  try {
    gpu = Device::count() > 0;
  } catch (const Error&) {
  }
  if (!gpu) {
    std::puts("green_threads: no GPU here: green contexts need one");
    return 0;
  }
  Device dev(0);
  dev.set_current();
  const unsigned total = dev.resources().sm().sm_count();
  const int half = static_cast<int>(total / 2);
  auto [groups, rest] = dev.resources().sm().split({.count = {half, half}});
  Context a = dev.create_context({.resources = {groups[0]}});
  Context b = dev.create_context({.resources = {groups[1]}});
  const ObjectCode code = Program(kSource, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
  std::string error_a, error_b;
  std::thread ta([&] {
    try {
      error_a = run(a, code, 3.0f, 1);
    } catch (const std::exception& e) {
      error_a = e.what();
    }
  });
  std::thread tb([&] {
    try {
      error_b = run(b, code, -2.0f, 2);
    } catch (const std::exception& e) {
      error_b = e.what();
    }
  });
  ta.join();
  tb.join();
  std::printf("green_threads: %u SMs split %u + %u; context A %s, context B %s\n", total, a.resources().sm().sm_count(),
              b.resources().sm().sm_count(), error_a.empty() ? "right" : error_a.c_str(),
              error_b.empty() ? "right" : error_b.c_str());
  return error_a.empty() && error_b.empty() ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "green_threads: %s\n", e.what());
  return 1;
}
