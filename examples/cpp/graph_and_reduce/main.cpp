// Three launches captured into a graph, replayed, then a device-wide reduction
// with a user operator (CUDA C++ source, compiled once): the maximum of
// |x| over the graph's output, checked against the host's. The inputs are
// dropped right after the capture: the graph keeps what its launches packed.
// Without a GPU it compiles the kernels for sm_90 and stops (exit 0).
#include <cucore/cucore.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

namespace {
constexpr const char* kSource = R"(
extern "C" __global__ void axpb(float* data, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = __fadd_rn(__fmul_rn(a, data[i]), b);  // no FMA: rounded as the host rounds
}
extern "C" __global__ void add(const float* x, float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = __fadd_rn(data[i], x[i]);
}
)";
}  // namespace

int main() try {
  using namespace cucore;
  bool gpu = false;
  try {
    gpu = Device::count() > 0;
  } catch (const Error&) {
  }
  if (!gpu) {
    Program(kSource, "c++", {.arch = "sm_90"}).compile(CodeType::cubin);
    std::puts("graph_and_reduce: no GPU here; the kernels compile for sm_90");
    return 0;
  }
  Device dev(0);
  dev.set_current();
  ObjectCode code = Program(kSource, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
  Stream stream = dev.create_stream();
  const int n = 1 << 20;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-10.f, 10.f);
  std::vector<float> hx(n), hd(n);
  for (auto& v : hx) v = dist(rng);
  for (auto& v : hd) v = dist(rng);
  MemoryResource mr = dev.memory_resource();
  Buffer data = mr.allocate<float>(n, stream);
  const LaunchConfig cfg{.grid = (n + 255) / 256, .block = 256};

  Buffer x = mr.allocate<float>(n, stream);
  x.copy_from(hx, stream);
  stream.sync();  // the copy is done before the capture of this stream begins
  graph::GraphBuilder gb = stream.create_graph_builder().begin_building();
  launch(gb.stream(), cfg, code.get_kernel("axpb"), data, 1.5f, -0.25f, n);
  launch(gb.stream(), cfg, code.get_kernel("add"), x, data, n);
  launch(gb.stream(), cfg, code.get_kernel("axpb"), data, 0.5f, 2.0f, n);
  graph::Graph g = gb.end_building().complete();
  x = Buffer();  // dropped: the graph holds its memory (and the kernels' code) until it goes

  data.copy_from(hd, stream);
  g.launch(stream);
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = 0.5f * ((1.5f * hd[i] - 0.25f) + hx[i]) + 2.0f;

  // max |v| with a user operator; the reduction's result is one float on the device.
  Buffer result = mr.allocate<float>(1, stream);
  compute::reduce(stream, static_cast<const float*>(data.data()), static_cast<float*>(result.data()),
                  static_cast<std::uint64_t>(n),
                  compute::Op::source("[](float a, float b) { return fmaxf(fabsf(a), fabsf(b)); }"), 0.0f);
  std::vector<float> got(n), top(1);
  data.copy_to(got, stream);
  result.copy_to(top, stream);
  stream.sync();
  float host_max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      std::printf("graph_and_reduce: element %d is %g, want %g\n", i, got[i], want[i]);
      return 1;
    }
    host_max = std::fmax(host_max, std::fabs(want[i]));
  }
  std::printf("graph_and_reduce: all %d elements right; max |v| %g (host %g)\n", n, top[0], host_max);
  return top[0] == host_max ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "graph_and_reduce: %s\n", e.what());
  return 1;
}
