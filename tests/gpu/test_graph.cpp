// CUDA graphs on a real GPU: a captured chain equals the same work on a stream
// (random data, every element), split/join over 4 branches, a 1000-node chain,
// every explicit node type, if / if-else / while / switch, update with new
// kernel arguments and its mismatch error, a capture broken by a synchronous
// call, lifetimes (every handle dropped, 100 launches), graph memory, node
// identity through nodes()/edges()/pred()/succ(), definition-node updates,
// executable-node updates and enabling (graph[node]).
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/graph.hpp>
#include <cucore/launch.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/driver_counts.hpp"
#include "common/gpu.hpp"
#include "common/random.hpp"
#include "graph_kernels.hpp"
#include "handles/graph_handles.hpp"
#include "loader/driver.hpp"

using namespace cucore;
using namespace cucore::graph;

namespace {

ObjectCode compile_graph_kernels() {
  return Program(test::kGraphKernels, "c++", {.arch = "sm_" + Device(0).arch()}).compile(cucore::CodeType::cubin);
}
const ObjectCode& kernels() {
  static const ObjectCode* code = new ObjectCode(compile_graph_kernels());
  return *code;
}
Kernel k(const char* name) { return kernels().get_kernel(name); }

// Takes the Stream, not a StreamRef: the Buffer then holds the stream it frees
// on (the lifetime test drops the stream before the graph releases the Buffer).
template <typename T>
Buffer upload(const std::vector<T>& host, const Stream& s) {
  Buffer b = Device(0).memory_resource().allocate(host.size() * sizeof(T), s);
  b.copy_from(std::span<const T>(host), s);
  return b;
}
template <typename T>
std::vector<T> download(const Buffer& b, StreamRef s) {
  std::vector<T> h(b.size() / sizeof(T));
  b.copy_to(std::span<T>(h), s);
  s.sync();
  return h;
}
std::vector<int> random_ints(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(1, 1000000);
  std::vector<int> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
template <typename T>
void expect_equal(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && ++bad <= 5) ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i];
  EXPECT_EQ(bad, 0u) << what;
}
LaunchConfig cfg_for(int n) { return {.grid = (n + 255) / 256, .block = 256}; }

class Graphs : public ::testing::Test {
 protected:
  void SetUp() override {
    CUCORE_REQUIRE_GPU();
    Device(0).set_current();
    // Graph allocations come from the device's graph memory, not its pools:
    // give back what earlier tests left cached in the default pool (its
    // release threshold keeps freed memory) so that they can be satisfied.
    Device(0).sync();
    Device(0).memory_resource().trim_to(0);
  }
};

}  // namespace

TEST_F(Graphs, CapturedSaxpyChainEqualsTheStreamResult) {
  const int n = 1 << 20;
  Stream s;
  auto hx = test::random_floats(n, 1), hy = test::random_floats(n, 2);
  Buffer x = upload(hx, s), y = upload(hy, s);
  Buffer out_stream = Device(0).memory_resource().allocate(n * 4, s);
  Buffer out_graph = Device(0).memory_resource().allocate(n * 4, s);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> coef(-2.f, 2.f);
  std::vector<std::pair<float, float>> steps(12);
  for (auto& p : steps) p = {coef(rng), coef(rng)};

  auto chain = [&](auto& where, Buffer& out) {
    launch(where, cfg_for(n), k("saxpy"), 2.5f, x, y, out, n);
    for (auto [a, b] : steps) launch(where, cfg_for(n), k("axpb"), out, a, b, n);
  };
  chain(s, out_stream);
  GraphBuilder gb = s.create_graph_builder().begin_building();
  chain(gb, out_graph);
  Graph g = gb.end_building().complete();
  EXPECT_EQ(gb.graph_definition().nodes().size(), steps.size() + 1);
  g.launch(s);
  expect_equal(download<float>(out_graph, s), download<float>(out_stream, s), "graph vs stream");
}

TEST_F(Graphs, SplitAndJoinFourBranches) {
  const int n = 100000;
  Stream s;
  std::vector<std::vector<float>> host;
  std::vector<Buffer> bufs;
  for (unsigned i = 0; i < 4; ++i) {
    host.push_back(test::random_floats(n, 10 + i));
    bufs.push_back(upload(host.back(), s));
  }
  Buffer out = Device(0).memory_resource().allocate(n * 4, s);
  s.sync();
  GraphBuilder gb = s.create_graph_builder().begin_building();
  std::vector<GraphBuilder> branches = gb.split(4);
  ASSERT_EQ(branches.size(), 4u);
  EXPECT_EQ(branches[0].state(), gb.state());
  for (int i = 0; i < 4; ++i) launch(branches[i], cfg_for(n), k("axpb"), bufs[i], float(i + 2), float(-i), n);
  EXPECT_THROW(gb.end_building(), std::runtime_error);  // branches not joined yet
  GraphBuilder joined = GraphBuilder::join(branches);
  launch(joined, cfg_for(n), k("sum4"), out, bufs[0], bufs[1], bufs[2], bufs[3], n);
  Graph g = gb.end_building().complete();
  GraphDefinition def = gb.graph_definition();
  EXPECT_EQ(def.nodes().size(), 5u);
  // The four branch kernels each lead into the sum, and nothing else connects them.
  int into_sum = 0;
  for (auto& [from, to] : def.edges()) into_sum += to.succ().empty() ? 1 : 0;
  EXPECT_EQ(into_sum, 4);
  g.launch(s);
  std::vector<float> want(n);
  for (int j = 0; j < n; ++j) {
    float acc = 0;
    for (int i = 0; i < 4; ++i) acc += float(i + 2) * host[i][j] + float(-i);
    want[j] = acc;
  }
  auto got = download<float>(out, s);
  std::size_t bad = 0;
  for (int j = 0; j < n; ++j)
    if (std::fabs(got[j] - want[j]) > 1e-3f * std::max(1.f, std::fabs(want[j])) && ++bad <= 5)
      ADD_FAILURE() << "out[" << j << "] = " << got[j] << ", want " << want[j];
  EXPECT_EQ(bad, 0u);
}

TEST_F(Graphs, AThousandNodeChain) {
  const int n = 4096;
  Stream s;
  auto h = random_ints(n, 4);
  Buffer d = upload(h, s);
  GraphBuilder gb = s.create_graph_builder().begin_building();
  long long total = 0;
  for (int i = 0; i < 1000; ++i) {
    launch(gb, cfg_for(n), k("add_int"), d, i % 7 + 1, n);
    total += i % 7 + 1;
  }
  Graph g = gb.end_building().complete();
  GraphDefinition def = gb.graph_definition();
  EXPECT_EQ(def.nodes().size(), 1000u);
  EXPECT_EQ(def.edges().size(), 999u);
  for (int r = 0; r < 3; ++r) g.launch(s);
  std::vector<int> want(h);
  for (auto& v : want) v += static_cast<int>(3 * total);
  expect_equal(download<int>(d, s), want, "chain");
}

TEST_F(Graphs, EveryExplicitNodeType) {
  const int n = 50000;
  Stream s;
  auto hsrc = test::random_floats(n, 5);
  auto hc = random_ints(n, 6);
  Buffer src = upload(hsrc, s), dst = Device(0).memory_resource().allocate(n * 4, s);
  Buffer filled = Device(0).memory_resource().allocate(n * 4, s);
  Buffer child_data = upload(hc, s);
  s.sync();
  std::atomic<int> calls{0};
  Event recorded = Device(0).create_event(), waited = s.record();

  GraphDefinition child;
  child.launch(cfg_for(n), k("add_int"), child_data, 17, n);

  GraphDefinition def;
  GraphNode alloc = def.allocate(n * 4);
  const CUdeviceptr tmp = alloc.alloc_params().dptr;
  EXPECT_NE(tmp, 0u);
  GraphNode copy_in = alloc.memcpy(tmp, src.handle(), n * 4);
  GraphNode scale = copy_in.launch(cfg_for(n), k("axpb"), reinterpret_cast<float*>(tmp), 3.f, 1.f, n);
  GraphNode copy_out = scale.memcpy(dst.handle(), tmp, n * 4);
  GraphNode freed = copy_out.deallocate(tmp);
  float pattern_value = 2.5f;
  std::uint32_t pattern;
  std::memcpy(&pattern, &pattern_value, 4);
  GraphNode fill = def.memset(filled, pattern, n);
  GraphNode fill_scale = fill.launch(cfg_for(n), k("axpb"), filled, -2.f, 0.5f, n);
  GraphNode wait = def.wait(waited);
  GraphNode embedded = wait.embed(child);
  GraphNode host = embedded.callback([&calls] { ++calls; });
  GraphNode all = def.join({freed, fill_scale, host});
  GraphNode rec = all.record(recorded);
  GraphNode nothing = rec.empty();

  std::set<CUgraphNodeType> types;
  for (const GraphNode& node : def.nodes()) types.insert(node.type());
  for (CUgraphNodeType t : {CU_GRAPH_NODE_TYPE_MEM_ALLOC, CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_KERNEL,
                            CU_GRAPH_NODE_TYPE_MEM_FREE, CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_WAIT_EVENT,
                            CU_GRAPH_NODE_TYPE_GRAPH, CU_GRAPH_NODE_TYPE_HOST, CU_GRAPH_NODE_TYPE_EMPTY,
                            CU_GRAPH_NODE_TYPE_EVENT_RECORD})
    EXPECT_TRUE(types.count(t)) << "missing node type " << int(t);
  EXPECT_EQ(all.pred().size(), 3u);
  EXPECT_EQ(nothing.pred().size(), 1u);
  EXPECT_EQ(freed.free_dptr(), tmp);
  EXPECT_EQ(fill.memset_params().element_size, 4u);
  EXPECT_EQ(copy_out.memcpy_params().size, std::size_t(n) * 4);
  EXPECT_EQ(scale.kernel_params().kernel.name(), "axpb");

  Graph g = def.instantiate();
  g.launch(s);
  g.launch(s);
  recorded.sync();
  std::vector<float> want_dst(n), want_fill(n, -2.f * 2.5f + 0.5f);
  for (int i = 0; i < n; ++i) want_dst[i] = 3.f * hsrc[i] + 1.f;
  expect_equal(download<float>(dst, s), want_dst, "memcpy+kernel+memcpy");
  expect_equal(download<float>(filled, s), want_fill, "memset+kernel");
  std::vector<int> want_c(hc);
  for (auto& v : want_c) v += 2 * 17;
  expect_equal(download<int>(child_data, s), want_c, "child graph");
  EXPECT_EQ(calls.load(), 2);
  EXPECT_TRUE(recorded.is_done());

  // CUDA keeps every node of a graph with memory nodes: a typed error that
  // says so, and the node stays as it was.
  try {
    nothing.destroy();
    ADD_FAILURE() << "destroying a node of a graph with memory nodes did not throw";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_NE(std::string(e.what()).find("memory allocation or free nodes"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(nothing.is_valid());
  EXPECT_EQ(rec.succ().size(), 1u);

  // Elsewhere, destroying a node takes its edges with it.
  GraphDefinition plain;
  GraphNode first = plain.empty();
  GraphNode middle = first.empty();
  GraphNode last = middle.empty();
  middle.destroy();
  EXPECT_FALSE(middle.is_valid());
  EXPECT_TRUE(first.succ().empty());
  EXPECT_TRUE(last.pred().empty());
  EXPECT_EQ(plain.nodes().size(), 2u);
}

TEST_F(Graphs, OneNodeStateThroughEveryWayToANode) {
  GraphDefinition def;
  GraphNode a = def.empty();
  GraphNode b = a.empty();
  GraphNode j = def.join({a, b});
  std::set<const void*> listed;
  for (const GraphNode& n : def.nodes()) listed.insert(n.box().get());
  EXPECT_EQ(listed, (std::set<const void*>{a.box().get(), b.box().get(), j.box().get()}));
  std::set<std::pair<const void*, const void*>> edges;
  for (const auto& [x, y] : def.edges()) edges.emplace(x.box().get(), y.box().get());
  EXPECT_EQ(edges, (std::set<std::pair<const void*, const void*>>{
                       {a.box().get(), b.box().get()}, {a.box().get(), j.box().get()}, {b.box().get(), j.box().get()}}));
  ASSERT_EQ(b.succ().size(), 1u);
  EXPECT_EQ(b.succ()[0].box(), j.box());
  GraphNode alias = a.succ()[0].box() == b.box() ? a.succ()[0] : a.succ()[1];
  alias.destroy();
  EXPECT_FALSE(b.is_valid());
  EXPECT_THROW(b.empty(), ClosedError);
  ASSERT_EQ(j.pred().size(), 1u);
  EXPECT_EQ(j.pred()[0].box(), a.box());
}

TEST_F(Graphs, DefinitionNodeUpdatesChangeLaterInstantiationsOnly) {
  const int n = 4096;
  Stream s;
  std::vector<int> zeros(n, 0);
  Buffer x = upload(zeros, s), y = upload(zeros, s), fill = upload(zeros, s);
  GraphDefinition def;
  GraphNode add = def.launch(cfg_for(n), k("add_int"), x, 1, n);
  GraphNode set = add.memset(fill, std::uint32_t(7), n);
  Graph before = def.instantiate();
  add.update_kernel(cfg_for(n), k("add_int"), y, 5, n);
  set.update_memset({.dptr = fill.handle(), .value = 9, .element_size = 4, .width = std::size_t(n) / 2});
  EXPECT_EQ(set.memset_params().value, 9u);
  Graph after = def.instantiate();
  before.launch(s);
  expect_equal(download<int>(x, s), std::vector<int>(n, 1), "the old graph: x");
  expect_equal(download<int>(y, s), zeros, "the old graph: y");
  expect_equal(download<int>(fill, s), std::vector<int>(n, 7), "the old graph: the fill");
  after.launch(s);
  expect_equal(download<int>(x, s), std::vector<int>(n, 1), "the new graph: x");
  expect_equal(download<int>(y, s), std::vector<int>(n, 5), "the new graph: y");
  std::vector<int> half(n, 7);
  std::fill(half.begin(), half.begin() + n / 2, 9);
  expect_equal(download<int>(fill, s), half, "the new graph: the fill");
  // Dimensions alone: the kernel and its arguments stay.
  add.update_kernel(LaunchConfig{.grid = 1, .block = 256});
  def.instantiate().launch(s);
  std::vector<int> want(n, 5);
  std::fill(want.begin(), want.begin() + 256, 10);
  expect_equal(download<int>(y, s), want, "dimensions only");
}

TEST_F(Graphs, ExecutableNodeUpdatesChangeThatGraphsLaunchesOnly) {
  const int n = 4096;
  Stream s;
  std::vector<int> zeros(n, 0);
  Buffer x = upload(zeros, s), y = upload(zeros, s), fill = upload(zeros, s);
  GraphDefinition def;
  GraphNode add = def.launch(cfg_for(n), k("add_int"), x, 1, n);
  GraphNode set = add.memset(fill, std::uint32_t(7), n);
  Graph changed = def.instantiate();
  Graph other = def.instantiate();
  changed[add].update_kernel(cfg_for(n), k("add_int"), y, 5, n);
  changed[set].update_memset({.dptr = fill.handle(), .value = 9, .element_size = 4, .width = std::size_t(n)});
  EXPECT_EQ(set.memset_params().value, 7u);  // the definition keeps its own
  changed.launch(s);
  expect_equal(download<int>(x, s), zeros, "the updated graph: x");
  expect_equal(download<int>(y, s), std::vector<int>(n, 5), "the updated graph: y");
  expect_equal(download<int>(fill, s), std::vector<int>(n, 9), "the updated graph: the fill");
  other.launch(s);
  expect_equal(download<int>(x, s), std::vector<int>(n, 1), "the other graph: x");
  expect_equal(download<int>(fill, s), std::vector<int>(n, 7), "the other graph: the fill");
  // Disabled, the kernel does nothing in that graph.
  ExecutableGraphNode view = changed[add];
  view.disable();
  EXPECT_FALSE(view.is_enabled());
  changed.launch(s);
  expect_equal(download<int>(y, s), std::vector<int>(n, 5), "disabled");
  view.enable();
  changed.launch(s);
  expect_equal(download<int>(y, s), std::vector<int>(n, 10), "enabled again");
  // A node of another definition: the driver refuses it.
  GraphDefinition unrelated;
  GraphNode stranger = unrelated.launch(cfg_for(n), k("add_int"), x, 1, n);
  EXPECT_THROW(changed[stranger].update_kernel(cfg_for(n), k("add_int"), y, 1, n), CudaError);
}

TEST_F(Graphs, ConditionalsIfIfElseWhileSwitch) {
  const int n = 1000;
  Stream s;
  auto h = random_ints(n, 7);
  Buffer data = upload(h, s);
  Buffer flag = upload(std::vector<int>{0}, s);

  // if / if-else / switch, explicitly; the condition comes from device memory.
  GraphDefinition def;
  GraphCondition c_if = def.create_condition(), c_ie = def.create_condition(), c_sw = def.create_condition();
  GraphNode set_if = def.launch({.grid = 1, .block = 1}, k("set_condition"), c_if, flag);
  GraphNode set_ie = set_if.launch({.grid = 1, .block = 1}, k("set_condition"), c_ie, flag);
  GraphNode set_sw = set_ie.launch({.grid = 1, .block = 1}, k("set_condition"), c_sw, flag);
  GraphNode n_if = set_sw.if_then(c_if);
  n_if.branches()[0].launch(cfg_for(n), k("add_int"), data, 1, n);
  GraphNode n_ie = n_if.if_else(c_ie);
  n_ie.branches()[0].launch(cfg_for(n), k("add_int"), data, 10, n);
  n_ie.branches()[1].launch(cfg_for(n), k("add_int"), data, 100, n);
  GraphNode n_sw = n_ie.switch_(c_sw, 3);
  ASSERT_EQ(n_sw.branches().size(), 3u);
  for (int i = 0; i < 3; ++i) n_sw.branches()[i].launch(cfg_for(n), k("add_int"), data, 1000 * (i + 1), n);
  Graph g = def.instantiate();

  std::vector<int> want(h);
  auto run = [&](int value, int expected_add) {
    flag.copy_from(std::span<const int>(&value, 1), s);
    g.launch(s);
    for (auto& v : want) v += expected_add;
    expect_equal(download<int>(data, s), want, ("flag " + std::to_string(value)).c_str());
  };
  run(0, 100 + 1000);  // if: no; if-else: else; switch: case 0
  run(1, 1 + 10 + 2000);
  run(2, 1 + 10 + 3000);
  run(7, 1 + 10);  // switch: no case

  // while, by capture: the body counts on the device until the limit.
  Buffer counter = upload(std::vector<int>{0}, s);
  const int limit = 37;
  GraphBuilder gb = s.create_graph_builder().begin_building();
  GraphCondition c_while = gb.create_condition(1);
  GraphBuilder body = gb.while_loop(c_while);
  body.begin_building();
  launch(body, {.grid = 1, .block = 1}, k("count_until"), counter, limit, c_while);
  body.end_building();
  Graph loop = gb.end_building().complete();
  loop.launch(s);
  EXPECT_EQ(download<int>(counter, s)[0], limit);

  // if-else by capture.
  GraphBuilder gb2 = s.create_graph_builder().begin_building();
  GraphCondition c2 = gb2.create_condition();
  launch(gb2, {.grid = 1, .block = 1}, k("set_condition"), c2, flag);
  auto [then_b, else_b] = gb2.if_else(c2);
  then_b.begin_building();
  launch(then_b, cfg_for(n), k("add_int"), data, 5, n);
  then_b.end_building();
  else_b.begin_building();
  launch(else_b, cfg_for(n), k("add_int"), data, 50, n);
  else_b.end_building();
  Graph g2 = gb2.end_building().complete();
  for (int value : {1, 0}) {
    flag.copy_from(std::span<const int>(&value, 1), s);
    g2.launch(s);
    for (auto& v : want) v += value ? 5 : 50;
    expect_equal(download<int>(data, s), want, "captured if-else");
  }
}

TEST_F(Graphs, UpdateWithNewArgumentsAndItsMismatchError) {
  const int n = 65536;
  Stream s;
  auto hx = test::random_floats(n, 8), hy = test::random_floats(n, 9);
  auto hx2 = test::random_floats(n, 10), hy2 = test::random_floats(n, 11);
  Buffer x = upload(hx, s), y = upload(hy, s), x2 = upload(hx2, s), y2 = upload(hy2, s);
  Buffer out = Device(0).memory_resource().allocate(n * 4, s), out2 = Device(0).memory_resource().allocate(n * 4, s);
  auto capture = [&](float a, Buffer& xa, Buffer& ya, Buffer& o) {
    GraphBuilder gb = s.create_graph_builder().begin_building();
    launch(gb, cfg_for(n), k("saxpy"), a, xa, ya, o, n);
    gb.end_building();
    return gb;
  };
  Graph g = capture(2.f, x, y, out).complete();
  g.update(capture(-3.f, x2, y2, out2));
  g.launch(s);
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = -3.f * hx2[i] + hy2[i];
  expect_equal(download<float>(out2, s), want, "updated graph");

  GraphDefinition other;
  other.memset(out, std::uint32_t(0x3f800000), n);
  try {
    g.update(other);
    FAIL() << "a graph of another node type was accepted";
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    EXPECT_NE(m.find("node 0 of 1"), std::string::npos) << m;
    EXPECT_NE(m.find("memset node"), std::string::npos) << m;
  }
  g.launch(s);  // still the updated graph
  expect_equal(download<float>(out2, s), want, "after the refused update");
}

TEST_F(Graphs, ASynchronousCallBreaksAGlobalCaptureAndIsNamed) {
  Stream s;
  Buffer d = upload(random_ints(256, 12), s);
  s.sync();
  GraphBuilder gb = s.create_graph_builder().begin_building("global");
  launch(gb, cfg_for(256), k("add_int"), d, 1, 256);
  try {
    gb.stream().sync();
    FAIL() << "a synchronize during capture was allowed";
  } catch (const CudaError& e) {
    EXPECT_EQ(std::string(e.call()), "cuStreamSynchronize") << e.what();
  }
  try {
    gb.end_building();
    FAIL() << "the broken capture ended quietly";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuStreamSynchronize"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(gb.is_building());
  s.sync();  // the stream works again
}

TEST_F(Graphs, LifetimesEveryHandleDroppedThenAHundredLaunches) {
  const int n = 200000;
  auto hx = test::random_floats(n, 13), hy = test::random_floats(n, 14);
  Stream keep;
  Buffer out = Device(0).memory_resource().allocate(n * 4, keep);
  Graph g;
  {
    // Everything here goes out of scope: the code, its kernel, the builder, the
    // stream captured on, the input Buffers (moved into the graph).
    Stream s;
    ObjectCode code = compile_graph_kernels();
    Kernel saxpy = code.get_kernel("saxpy");
    Buffer x = upload(hx, s), y = upload(hy, s);
    s.sync();
    GraphBuilder gb = s.create_graph_builder().begin_building();
    launch(gb, cfg_for(n), saxpy, 1.5f, x, y, out, n);
    gb.retain(std::move(x));
    gb.retain(std::move(y));
    g = gb.end_building().complete();
  }
  Stream other;
  for (int i = 0; i < 100; ++i) g.launch(other);
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = 1.5f * hx[i] + hy[i];
  expect_equal(download<float>(out, other), want, "after 100 launches");
  g.close();
  other.sync();
  cucore::detail::drain_releases_for_testing();
}

// A launch captured on a stream keeps what it packed: the Buffers and the
// kernel (its library) are dropped right after the launch, with no retain(),
// the memory they freed is handed out again and overwritten, and the graph
// still reads the inputs it captured. Both ways to capture: cucore's
// GraphBuilder, and a capture begun on the stream by another library
// (cuStreamBeginCapture on its handle, as a framework does).
TEST_F(Graphs, ACapturedLaunchKeepsItsBuffersAndKernelWithoutRetain) {
  const int n = 300000;
  auto hx = test::random_floats(n, 21), hy = test::random_floats(n, 22);
  const auto& d = cucore::detail::driver();
  for (bool foreign : {false, true}) {
    SCOPED_TRACE(foreign ? "a capture begun through the stream's handle" : "a GraphBuilder");
    Stream keep;
    Buffer out = Device(0).memory_resource().allocate(n * 4, keep);
    Graph g;
    CUgraphExec exec = nullptr;  // the foreign capture's, made and launched through the driver
    {
      Stream s;
      ObjectCode code = compile_graph_kernels();
      Buffer x = upload(hx, s), y = upload(hy, s);
      s.sync();
      if (foreign) {
        ASSERT_EQ(d.cuStreamBeginCapture(s.handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
        launch(s, cfg_for(n), code.get_kernel("saxpy"), 1.5f, x, y, out, n);
        CUgraph captured = nullptr;
        ASSERT_EQ(d.cuStreamEndCapture(s.handle(), &captured), CUDA_SUCCESS);
        CUDA_GRAPH_INSTANTIATE_PARAMS params{};
        ASSERT_EQ(d.cuGraphInstantiateWithParams(&exec, captured, &params), CUDA_SUCCESS);
        ASSERT_EQ(d.cuGraphDestroy(captured), CUDA_SUCCESS);  // the executable graph holds what it needs
      } else {
        GraphBuilder gb = s.create_graph_builder().begin_building();
        launch(gb.stream(), cfg_for(n), code.get_kernel("saxpy"), 1.5f, x, y, out, n);
        g = gb.end_building().complete();
      }
    }
    // The pool hands the inputs' memory out again (its release threshold keeps
    // it cached): had they been freed, the graph would read this.
    Stream other;
    std::vector<Buffer> reuse;
    for (int i = 0; i < 4; ++i) {
      reuse.push_back(Device(0).memory_resource().allocate(n * 4, other));
      reuse.back().fill(std::uint32_t{0x7fc00000u}, other);  // NaN
    }
    for (int i = 0; i < 3; ++i) {
      if (foreign) {
        ASSERT_EQ(d.cuGraphLaunch(exec, other.handle()), CUDA_SUCCESS);
      } else {
        g.launch(other);
      }
    }
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = 1.5f * hx[i] + hy[i];
    expect_equal(download<float>(out, other), want, "the captured saxpy");
    other.sync();
    if (exec) {
      ASSERT_EQ(d.cuGraphExecDestroy(exec), CUDA_SUCCESS);
    }
    g.close();
    cucore::detail::drain_releases_for_testing();
  }
}

// Another library copies a definition through its handle (cuGraphClone, as a
// framework's graph capture does), then everything cucore made is dropped:
// the code (so its kernels), the events, the Buffers, the callback, the child
// graph and the definition. The clone's executable graph still runs every node
// right, because the CUgraph itself held what its nodes use (CUDA user
// objects); and all of it is released once the clone and its executable graph
// are destroyed: every library unloaded, event destroyed, allocation freed.
TEST_F(Graphs, ADriverCloneKeepsWhatEveryNodeUsesUntilItGoes) {
  const int n = 1 << 16;
  const auto h = random_ints(n, 41);
  Stream keep;
  Buffer out = Device(0).memory_resource().allocate(n * 4, keep);
  keep.sync();
  const auto& d = cucore::detail::driver();
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> watch = token;
  std::atomic<int> calls{0};
  CUgraph clone = nullptr;
  test::DriverCounts counts;
  const long libs0 = test::DriverCounts::libraries, events0 = test::DriverCounts::events,
             allocs0 = test::DriverCounts::allocations;
  {
    Stream s;
    ObjectCode code = compile_graph_kernels();  // its own library, unloaded when the last share goes
    Kernel add = code.get_kernel("add_int");
    Buffer src = upload(h, s), mid = Device(0).memory_resource().allocate(n * 4, s);
    s.sync();
    Event e = Device(0).create_event();

    GraphDefinition child;
    child.launch(cfg_for(n), add, mid, 7, n);
    GraphDefinition def;
    GraphNode copy_in = def.memcpy(mid, src, n * 4);
    GraphNode k5 = copy_in.launch(cfg_for(n), add, mid, 5, n);
    GraphNode rec = k5.record(e);
    GraphNode wait = rec.wait(e);
    GraphNode host = wait.callback([&calls, token] { calls += *token; });
    GraphNode embedded = host.embed(child);
    // (No conditional node: CUDA refuses to clone a graph that has one.)
    embedded.launch(cfg_for(n), add, mid, 11, n).memcpy(out, mid, n * 4);
    def.retain(std::move(src));  // C++ Buffers are moved into the graph
    def.retain(std::move(mid));
    token.reset();
    ASSERT_EQ(d.cuGraphClone(&clone, def.handle()), CUDA_SUCCESS);
  }
  cucore::detail::drain_releases_for_testing();
  EXPECT_FALSE(watch.expired()) << "the callback's objects went with the definition";
  EXPECT_EQ(test::DriverCounts::libraries, libs0 + 1) << "the kernels' library went with the definition";
  EXPECT_EQ(test::DriverCounts::events, events0 + 1) << "the event went with the definition";
  EXPECT_EQ(test::DriverCounts::allocations, allocs0 + 2) << "the Buffers went with the definition";

  CUgraphExec exec = nullptr;
  CUDA_GRAPH_INSTANTIATE_PARAMS p;
  std::memset(&p, 0, sizeof p);
  ASSERT_EQ(d.cuGraphInstantiateWithParams(&exec, clone, &p), CUDA_SUCCESS);
  ASSERT_EQ(d.cuGraphDestroy(clone), CUDA_SUCCESS);  // the executable graph holds the references now
  for (int i = 0; i < 2; ++i) ASSERT_EQ(d.cuGraphLaunch(exec, keep.handle()), CUDA_SUCCESS);
  std::vector<int> want(h);
  for (auto& v : want) v += 5 + 7 + 11;  // each launch starts again from the copy of src
  expect_equal(download<int>(out, keep), want, "the clone's result");
  EXPECT_EQ(calls.load(), 14);
  ASSERT_EQ(d.cuGraphExecDestroy(exec), CUDA_SUCCESS);
  keep.sync();

  // The driver lets go of the user objects on a thread of its own: wait for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!watch.expired() || test::DriverCounts::libraries != libs0 || test::DriverCounts::events != events0 ||
          test::DriverCounts::allocations != allocs0) &&
         std::chrono::steady_clock::now() < deadline) {
    cucore::detail::drain_releases_for_testing();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(watch.expired()) << "the callback's objects outlived the clone";
  EXPECT_EQ(test::DriverCounts::libraries, libs0) << test::DriverCounts::summary();
  EXPECT_EQ(test::DriverCounts::events, events0) << test::DriverCounts::summary();
  EXPECT_EQ(test::DriverCounts::allocations, allocs0) << test::DriverCounts::summary();
  EXPECT_EQ(test::DriverCounts::failures, 0) << test::DriverCounts::summary();
}

TEST_F(Graphs, GraphMemoryAllocationsFreedOnLaunchAndAttributes) {
  const int n = 1 << 18;
  Stream s;
  GraphMemoryResource gmr(0);
  EXPECT_THROW(gmr.allocate(1024, s), std::runtime_error);  // not capturing
  auto h = random_ints(n, 15);
  Buffer src = upload(h, s), out = Device(0).memory_resource().allocate(n * 4, s);
  s.sync();
  GraphBuilder gb = s.create_graph_builder().begin_building();
  // Not freed inside the graph: auto_free_on_launch frees it before each relaunch.
  const CUdeviceptr tmp = gmr.impl()->allocate(n * 4, gb.stream());
  Buffer view = Buffer::from_handle(tmp, n * 4);
  src.copy_to(view, gb.stream());
  launch(gb, cfg_for(n), k("add_int"), reinterpret_cast<int*>(tmp), 3, n);
  view.copy_to(out, gb.stream());
  Graph g = gb.end_building().complete({.auto_free_on_launch = true});
  bool saw_alloc = false;
  for (const GraphNode& node : gb.graph_definition().nodes())
    if (node.type() == CU_GRAPH_NODE_TYPE_MEM_ALLOC) saw_alloc = node.alloc_params().bytesize == std::size_t(n) * 4;
  EXPECT_TRUE(saw_alloc);
  for (int i = 0; i < 3; ++i) g.launch(s);  // without the free before relaunch the second would fail
  std::vector<int> want(h);
  for (auto& v : want) v += 3;
  expect_equal(download<int>(out, s), want, "graph allocation");
  GraphMemoryResourceAttributes a = gmr.attributes();
  EXPECT_GE(a.used_mem_current, std::uint64_t(n) * 4);
  EXPECT_GE(a.reserved_mem_current, a.used_mem_current);
  EXPECT_GE(a.used_mem_high, a.used_mem_current);
  EXPECT_NO_THROW(gmr.reset_used_mem_high());
  // A graph allocation that no node frees outlives the graph (CUDA's rule:
  // auto_free_on_launch frees it only before a relaunch): the owner frees it
  // (the memcheck run's leak check fails without this free).
  gmr.impl()->deallocate(tmp, n * 4, s);
  g.close();
  s.sync();
  Device(0).sync();
  gmr.trim();
  EXPECT_LE(gmr.attributes().reserved_mem_current, a.reserved_mem_current);
}
