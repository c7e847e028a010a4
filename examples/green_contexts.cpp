// The mission's example 2: split device 0's SMs into two equal groups, make a
// green context per group, and from two threads at once run SAXPY on 5M
// floats in each (3*2+1 = 7 and 5*4+2 = 22), each on its own SMs.
// On a 132-SM H200 the halves [66, 66] are rounded down to [64, 64] (a warning
// says so): never fewer groups than asked. Without a GPU it says so and stops.
#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>
#include <cucore/resources.hpp>
#include <cucore/stream.hpp>

#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

const char* kSaxpy = R"(
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, const float* __restrict__ y, float* out,
                                 int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

constexpr int kN = 5'000'000;

// One task: a stream of `ctx` (so its kernels run on the context's SMs),
// buffers from a pool of the device, SAXPY, the first element back.
float run_task(const cucore::Context& ctx, const cucore::ObjectCode& code, float a, float x, float y) {
  cucore::Device(0).set_current();  // the primary context in this thread
  cucore::Stream stream = ctx.create_stream();
  cucore::DeviceMemoryResource mr(0, cucore::DeviceMemoryResourceOptions{});
  cucore::Kernel saxpy = code.get_kernel("saxpy");
  const std::size_t bytes = std::size_t(kN) * sizeof(float);
  cucore::Buffer bx = mr.allocate(bytes, stream), by = mr.allocate(bytes, stream), out = mr.allocate(bytes, stream);
  std::vector<float> hx(kN, x), hy(kN, y), ho(kN);
  bx.copy_from(std::span<const float>(hx), stream);
  by.copy_from(std::span<const float>(hy), stream);
  cucore::launch(stream, {.grid = (kN + 255) / 256, .block = 256}, saxpy, a, bx, by, out, kN);
  out.copy_to(std::span<float>(ho), stream);
  stream.sync();
  for (float v : ho)
    if (v != ho[0]) return -1.f;  // every element the same, or report a wrong one
  return ho[0];
}

}  // namespace

int main() {
  try {
    if (cucore::Device::count() == 0) {
      std::printf("no GPU here: green contexts need one\n");
      return 0;
    }
  } catch (const std::exception& e) {
    std::printf("no GPU here (%s)\n", e.what());
    return 0;
  }
  try {
    cucore::Device dev(0);
    dev.set_current();
    const unsigned total = dev.resources().sm().sm_count();
    std::printf("GPU: %s, Total SMs: %u\n", dev.name().c_str(), total);

    // Split the SMs into two equal groups.
    const int half = static_cast<int>(total / 2);
    auto [groups, rest] = dev.resources().sm().split({.count = {half, half}});
    cucore::Context ctx_a = dev.create_context({.resources = {groups[0]}});
    cucore::Context ctx_b = dev.create_context({.resources = {groups[1]}});
    std::printf("Context A: %u SMs, is_green=%d\n", ctx_a.resources().sm().sm_count(), ctx_a.is_green());
    std::printf("Context B: %u SMs, is_green=%d\n", ctx_b.resources().sm().sm_count(), ctx_b.is_green());

    // Compile once, through the cache.
    const std::string arch = "sm_" + dev.arch();
    cucore::InMemoryProgramCache cache;
    const std::string key = "saxpy_" + arch;
    std::optional<cucore::ObjectCode> code = cache.get(key);
    if (!code) {
      code = cucore::Program(kSaxpy, "c++", {.arch = arch}).compile(cucore::CodeType::cubin);
      cache.put(key, *code);
    }

    // Two kernels at once, each on its own SM partition.
    float result_a = 0, result_b = 0;
    auto task = [&](const char* name, const cucore::Context& ctx, float a, float x, float y, float& result) {
      try {
        result = run_task(ctx, *code, a, x, y);
      } catch (const std::exception& e) {
        std::printf("  %s failed: %s\n", name, e.what());
        result = -1.f;
      }
    };
    std::thread ta(task, "Task-A", std::cref(ctx_a), 3.0f, 2.0f, 1.0f, std::ref(result_a));
    std::thread tb(task, "Task-B", std::cref(ctx_b), 5.0f, 4.0f, 2.0f, std::ref(result_b));
    ta.join();
    tb.join();
    std::printf("  Task-A (%u SM): result=%.1f\n", groups[0].sm_count(), result_a);
    std::printf("  Task-B (%u SM): result=%.1f\n", groups[1].sm_count(), result_b);
    ctx_a.close();
    ctx_b.close();
    if (result_a != 7.0f || result_b != 22.0f) {
      std::printf("wrong results: want 7.0 and 22.0\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
