// Graphs, in one process, alternating, after warm-up:
//  (a) a step of 1000 tiny kernels: 1000 plain launches against one launch of
//      the same step captured as a graph (host cost per step and per kernel,
//      and the whole step with its device time);
//  (b) Graph::launch against cuGraphLaunch of the same executable graph, host
//      cost per launch (goal <= 1.03x);
//  (c) instantiating a 1000-node GraphDefinition against
//      cuGraphInstantiateWithParams of the same CUgraph, each followed by the
//      executable graph's destruction (goal <= 1.05x).
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/graph.hpp>
#include <cucore/launch.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "common.hpp"
#include "loader/driver.hpp"

namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void tiny(float* data, float b) { data[threadIdx.x] += b; }
)";

constexpr int kSteps = 1000;  // kernels per step
using clock_type = std::chrono::steady_clock;

// Median ns of `fn` over alternating samples, the stream drained before each
// sample (outside the timed region) so the queue never fills.
template <typename Ours, typename Theirs>
bench::Comparison alternate(const char* name, const char* peer, cucore::StreamRef s, int samples, int burst, bool include_sync,
                            Ours&& ours, Theirs&& theirs) {
  auto sample = [&](auto& f) {
    s.sync();
    const auto t0 = clock_type::now();
    for (int i = 0; i < burst; ++i) f();
    if (include_sync) s.sync();
    const auto t1 = clock_type::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / burst;
  };
  for (int i = 0; i < 5; ++i) {
    sample(ours);
    sample(theirs);
  }
  std::vector<double> a, b;
  for (int i = 0; i < samples; ++i) {
    if (i % 2) {
      a.push_back(sample(ours));
      b.push_back(sample(theirs));
    } else {
      b.push_back(sample(theirs));
      a.push_back(sample(ours));
    }
  }
  s.sync();
  return {name, "ns", bench::median(a), bench::median(b), peer};
}

}  // namespace

int main() {
  using namespace cucore;
  using namespace cucore::graph;
  if (!bench::have_gpu("bench_graph")) return 0;
  try {
    Device dev(0);
    dev.set_current();
    Stream stream = dev.create_stream();
    ObjectCode code = Program(kSource, "c++", {.arch = "sm_" + dev.arch()}).compile(cucore::CodeType::cubin);
    Kernel tiny = code.get_kernel("tiny");
    Buffer data = dev.memory_resource().allocate(32 * sizeof(float), stream);
    data.fill(std::uint32_t(0), stream);
    const LaunchConfig cfg{.grid = 1, .block = 32};
    const auto& d = cucore::detail::driver();

    // (a) 1000 tiny kernels per step.
    auto plain_step = [&] {
      for (int i = 0; i < kSteps; ++i) launch(stream, cfg, tiny, data, 1.0f);
    };
    GraphBuilder gb = stream.create_graph_builder().begin_building();
    for (int i = 0; i < kSteps; ++i) launch(gb, cfg, tiny, data, 1.0f);
    Graph step = gb.end_building().complete();
    step.upload(stream);
    auto graph_step = [&] { step.launch(stream); };
    std::printf("a step of %d tiny kernels: one graph launch against %d plain launches\n", kSteps, kSteps);
    auto host = alternate("graph step: host cost per step", "1000 plain launches", stream, 41, 1, false, graph_step,
                          plain_step);
    bench::report(host);
    bench::report_value("graph step: host cost per kernel", host.cucore / kSteps, "ns");
    bench::report_value("plain launches: host cost per kernel", host.peer / kSteps, "ns");
    bench::report(alternate("graph step: whole step with its device time", "1000 plain launches", stream, 41, 1, true,
                            graph_step, plain_step));

    // (b) Graph::launch against cuGraphLaunch, one small graph, host cost per launch.
    GraphBuilder small = stream.create_graph_builder().begin_building();
    launch(small, cfg, tiny, data, 1.0f);
    Graph one = small.end_building().complete();
    one.upload(stream);
    const CUgraphExec raw_exec = one.handle();
    const CUstream s = stream.handle();
    auto raw_check = [](CUresult r) {
      if (r != CUDA_SUCCESS) throw CudaError(r, "cuGraphLaunch (raw)");
    };
    bench::report(alternate("Graph.launch: host cost per launch", "raw cuGraphLaunch", stream, 301, 200, false,
                            [&] { one.launch(stream); }, [&] { raw_check(d.cuGraphLaunch(raw_exec, s)); }),
                  1.03);

    // (c) instantiate a 1000-node definition.
    GraphDefinition def;
    GraphNode last = def.launch(cfg, tiny, data, 1.0f);
    for (int i = 1; i < kSteps; ++i) last = last.launch(cfg, tiny, data, 1.0f);
    const CUgraph raw_graph = def.handle();
    auto ours = [&] { def.instantiate().close(); };
    auto theirs = [&] {
      CUDA_GRAPH_INSTANTIATE_PARAMS p;
      std::memset(&p, 0, sizeof p);
      CUgraphExec e = nullptr;
      CUresult r = d.cuGraphInstantiateWithParams(&e, raw_graph, &p);
      if (r != CUDA_SUCCESS) throw CudaError(r, "cuGraphInstantiateWithParams (raw)");
      d.cuGraphExecDestroy(e);
    };
    bench::report(alternate("instantiate a 1000-node definition", "raw cuGraphInstantiate", stream, 31, 1, false, ours,
                            theirs),
                  1.05);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_graph: %s\n", e.what());
    return 1;
  }
  return 0;
}
