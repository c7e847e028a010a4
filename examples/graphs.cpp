// CUDA graphs in C++: a chain of kernels captured once and replayed; the same
// graph updated with new kernel arguments; a while loop that runs on the
// device until a device-side counter reaches a value.
//
// On a machine without a GPU it compiles the kernels for sm_90 and stops (exit 0).
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/graph.hpp>
#include <cucore/launch.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <cstdint>
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

namespace {

constexpr const char* kSource = R"(
extern "C" __device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                                unsigned int value);
extern "C" __global__ void axpb(float* data, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = __fadd_rn(__fmul_rn(a, data[i]), b);  // no FMA: rounded as the host rounds
}
extern "C" __global__ void count_until(int* counter, int limit, cudaGraphConditionalHandle cond) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    int v = ++*counter;
    cudaGraphSetConditional(cond, v < limit ? 1u : 0u);
  }
}
)";

int check(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-3f * std::max(1.f, std::fabs(want[i]))) {
      std::printf("%s: element %zu is %g, want %g\n", what, i, got[i], want[i]);
      return 1;
    }
  std::printf("%s: all %zu elements right\n", what, got.size());
  return 0;
}

}  // namespace

int main() try {
  using namespace cucore;
  using namespace cucore::graph;
  bool gpu = false;
  try {
    gpu = Device::count() > 0;
  } catch (const Error&) {  // no driver
  }
  if (!gpu) {
    Program(kSource, "c++", {.arch = "sm_90"}).compile(cucore::CodeType::cubin);
    std::puts("graphs: no GPU here; the kernels compile for sm_90");
    return 0;
  }
  Device dev(0);
  dev.set_current();
  ObjectCode code = Program(kSource, "c++", {.arch = "sm_" + dev.arch()}).compile(cucore::CodeType::cubin);
  Kernel axpb = code.get_kernel("axpb"), count_until = code.get_kernel("count_until");
  Stream stream = dev.create_stream();

  const int n = 1 << 20;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> host(n);
  for (auto& v : host) v = dist(rng);
  Buffer data = dev.memory_resource().allocate(n * sizeof(float), stream);
  const LaunchConfig cfg{.grid = (n + 255) / 256, .block = 256};

  // 1. Twenty kernels captured once, replayed five times with one launch each.
  GraphBuilder gb = stream.create_graph_builder().begin_building();
  for (int i = 0; i < 20; ++i) launch(gb, cfg, axpb, data, 1.01f, 0.001f * i, n);
  Graph chain = gb.end_building().complete();
  data.copy_from(std::span<const float>(host), stream);
  for (int r = 0; r < 5; ++r) chain.launch(stream);
  std::vector<float> want(host), got(n);
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 20; ++i)
      for (auto& v : want) v = 1.01f * v + 0.001f * i;
  data.copy_to(std::span<float>(got), stream);
  stream.sync();
  int bad = check(got, want, "replayed chain");

  // 2. The same shape captured with new arguments, applied to the executable graph.
  GraphBuilder gb2 = stream.create_graph_builder().begin_building();
  for (int i = 0; i < 20; ++i) launch(gb2, cfg, axpb, data, 0.5f, 1.0f, n);
  chain.update(gb2.end_building());
  data.copy_from(std::span<const float>(host), stream);
  chain.launch(stream);
  want = host;
  for (int i = 0; i < 20; ++i)
    for (auto& v : want) v = 0.5f * v + 1.0f;
  data.copy_to(std::span<float>(got), stream);
  stream.sync();
  bad |= check(got, want, "updated graph");

  // 3. A loop on the device: the body runs until the counter reaches the limit.
  const int limit = 100;
  Buffer counter = dev.memory_resource().allocate(sizeof(int), stream);
  counter.fill(std::uint32_t{0}, stream);
  GraphBuilder loop = stream.create_graph_builder().begin_building();
  GraphCondition more = loop.create_condition(1);  // enter the body on the first check
  GraphBuilder body = loop.while_loop(more);
  body.begin_building();
  launch(body, {.grid = 1, .block = 1}, count_until, counter, limit, more);
  body.end_building();
  Graph g = loop.end_building().complete();
  g.launch(stream);
  int count = 0;
  counter.copy_to(std::span<int>(&count, 1), stream);
  stream.sync();
  std::printf("device loop: the counter reached %d (limit %d)\n", count, limit);
  bad |= count != limit;
  return bad;
} catch (const std::exception& e) {
  std::fprintf(stderr, "graphs: %s\n", e.what());
  return 1;
}
