// Graphs against the fake driver: option validation, what reaches the driver
// for conditionals and instantiation, the conditional API's refusals (old
// drivers, foreign conditions), builder state errors, the update error naming
// the first differing node, a broken capture reported with the call that broke
// it, the release of what a graph retains once the driver lets go, and node
// identity (one shared state per CUgraphNode, however the node is reached) and
// definition-node updates (what reaches the driver, refusals leave the node be),
// and executable-graph node views (graph[node]: updates reach that executable
// graph only, what they use lives with it and no longer, refusals keep nothing).
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/graph.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "common/fake_driver.hpp"
#include "handles/graph_handles.hpp"

using namespace cucore;
using namespace cucore::graph;
using cucore::test::FakeDriver;

namespace {

// ---- a fake graph layer ------------------------------------------------------------
struct FakeGraphs {
  static inline std::uintptr_t next = 0x9000;
  static inline std::map<CUgraph, std::vector<CUgraphNode>> graph_nodes;
  static inline std::map<CUgraphNode, CUgraphNodeType> node_type;
  static inline std::vector<CUgraphNodeParams> added;  // every cuGraphAddNode's params
  static inline CUgraph bodies[8];
  static inline std::vector<std::pair<unsigned, unsigned>> conditions;  // (default value, flags)
  static inline CUDA_GRAPH_INSTANTIATE_PARAMS last_instantiate{};
  static inline int instantiations = 0;
  static inline CUgraphExecUpdateResultInfo update_result{};
  static inline std::map<CUstream, CUgraph> capturing;
  static inline std::vector<std::pair<void*, CUhostFn>> user_objects;  // (ptr, destroy)
  static inline int retained_on_graph = 0;
  static inline std::vector<std::pair<CUgraphNode, CUgraphNode>> edges;  // (from, to)
  static inline std::vector<CUgraphNodeParams> set;                       // every cuGraphNodeSetParams's params
  static inline CUresult set_result = CUDA_SUCCESS;

  static void reset() {
    edges.clear();
    set.clear();
    set_result = CUDA_SUCCESS;
    graph_nodes.clear();
    node_type.clear();
    added.clear();
    conditions.clear();
    instantiations = 0;
    update_result = {};
    capturing.clear();
    user_objects.clear();
    retained_on_graph = 0;
  }
  static CUresult adjacent(CUgraphNode node, bool forward, CUgraphNode* out, size_t* n);
  template <typename T>
  static T make() {
    return reinterpret_cast<T>(next += 0x10);
  }

  static void install(cucore::detail::DriverTable& t) {
    reset();
    t.cuGraphCreate = [](CUgraph* g, unsigned) {
      *g = make<CUgraph>();
      graph_nodes[*g];
      return CUDA_SUCCESS;
    };
    t.cuGraphDestroy = [](CUgraph) { return CUDA_SUCCESS; };
    t.cuGraphAddNode = [](CUgraphNode* n, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData*, size_t count,
                          CUgraphNodeParams* p) {
      *n = make<CUgraphNode>();
      graph_nodes[g].push_back(*n);
      for (size_t i = 0; i < count; ++i) edges.emplace_back(deps[i], *n);
      node_type[*n] = p->type;
      if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
        for (unsigned i = 0; i < p->conditional.size && i < 8; ++i) bodies[i] = make<CUgraph>();
        p->conditional.phGraph_out = bodies;
      }
      added.push_back(*p);
      return CUDA_SUCCESS;
    };
    t.cuGraphNodeGetType = [](CUgraphNode n, CUgraphNodeType* type) {
      *type = node_type.at(n);
      return CUDA_SUCCESS;
    };
    t.cuGraphGetNodes = [](CUgraph g, CUgraphNode* out, size_t* n) {
      const auto& v = graph_nodes[g];
      if (out)
        for (size_t i = 0; i < v.size() && i < *n; ++i) out[i] = v[i];
      *n = v.size();
      return CUDA_SUCCESS;
    };
    t.cuGraphGetEdges = [](CUgraph g, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData*, size_t* n) {
      std::vector<std::pair<CUgraphNode, CUgraphNode>> mine;
      for (const auto& e : edges)
        if (std::count(graph_nodes[g].begin(), graph_nodes[g].end(), e.second)) mine.push_back(e);
      if (from)
        for (size_t i = 0; i < mine.size() && i < *n; ++i) from[i] = mine[i].first, to[i] = mine[i].second;
      *n = mine.size();
      return CUDA_SUCCESS;
    };
    t.cuGraphNodeGetDependencies = [](CUgraphNode node, CUgraphNode* out, CUgraphEdgeData*, size_t* n) {
      return adjacent(node, false, out, n);
    };
    t.cuGraphNodeGetDependentNodes = [](CUgraphNode node, CUgraphNode* out, CUgraphEdgeData*, size_t* n) {
      return adjacent(node, true, out, n);
    };
    t.cuGraphAddDependencies = [](CUgraph, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData*,
                                  size_t n) {
      for (size_t i = 0; i < n; ++i) edges.emplace_back(from[i], to[i]);
      return CUDA_SUCCESS;
    };
    t.cuGraphRemoveDependencies = [](CUgraph, const CUgraphNode* from, const CUgraphNode* to,
                                     const CUgraphEdgeData*, size_t n) {
      for (size_t i = 0; i < n; ++i) std::erase(edges, std::make_pair(from[i], to[i]));
      return CUDA_SUCCESS;
    };
    t.cuGraphNodeSetParams = [](CUgraphNode, CUgraphNodeParams* p) {
      set.push_back(*p);
      return set_result;
    };
    t.cuGraphDestroyNode = [](CUgraphNode node) {
      for (auto& [g, nodes] : graph_nodes) std::erase(nodes, node);
      std::erase_if(edges, [node](const auto& e) { return e.first == node || e.second == node; });
      node_type.erase(node);
      return CUDA_SUCCESS;
    };
    t.cuGraphConditionalHandleCreate = [](CUgraphConditionalHandle* h, CUgraph, CUcontext, unsigned value,
                                          unsigned flags) {
      conditions.emplace_back(value, flags);
      *h = 100 + conditions.size();
      return CUDA_SUCCESS;
    };
    t.cuGraphInstantiateWithParams = [](CUgraphExec* e, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
      last_instantiate = *p;
      ++instantiations;
      *e = make<CUgraphExec>();
      return CUDA_SUCCESS;
    };
    t.cuGraphExecDestroy = [](CUgraphExec) { return CUDA_SUCCESS; };
    t.cuGraphExecUpdate = [](CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo* info) {
      *info = update_result;
      return update_result.result == CU_GRAPH_EXEC_UPDATE_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    };
    t.cuUserObjectCreate = [](CUuserObject* o, void* ptr, CUhostFn destroy, unsigned, unsigned) {
      user_objects.emplace_back(ptr, destroy);
      *o = make<CUuserObject>();
      return CUDA_SUCCESS;
    };
    t.cuGraphRetainUserObject = [](CUgraph, CUuserObject, unsigned, unsigned flags) {
      if (flags == CU_GRAPH_USER_OBJECT_MOVE) ++retained_on_graph;
      return CUDA_SUCCESS;
    };
    t.cuStreamBeginCapture = [](CUstream s, CUstreamCaptureMode) {
      if (capturing.count(s)) return CUDA_ERROR_ILLEGAL_STATE;
      CUgraph g = make<CUgraph>();
      graph_nodes[g];
      capturing[s] = g;
      return CUDA_SUCCESS;
    };
    t.cuStreamEndCapture = [](CUstream s, CUgraph* g) {
      auto it = capturing.find(s);
      if (it == capturing.end()) return CUDA_ERROR_ILLEGAL_STATE;
      *g = it->second;
      capturing.erase(it);
      return CUDA_SUCCESS;
    };
    t.cuStreamGetCaptureInfo = [](CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                                  const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
      auto it = capturing.find(s);
      *st = it == capturing.end() ? CU_STREAM_CAPTURE_STATUS_NONE : CU_STREAM_CAPTURE_STATUS_ACTIVE;
      *id = 1;
      if (g) *g = it == capturing.end() ? nullptr : it->second;
      if (deps) *deps = nullptr;
      if (edges) *edges = nullptr;
      if (n) *n = 0;
      return CUDA_SUCCESS;
    };
    t.cuStreamUpdateCaptureDependencies = [](CUstream, CUgraphNode*, const CUgraphEdgeData*, size_t, unsigned) {
      return CUDA_SUCCESS;
    };
  }
};

CUresult FakeGraphs::adjacent(CUgraphNode node, bool forward, CUgraphNode* out, size_t* n) {
  std::vector<CUgraphNode> found;
  for (const auto& [from, to] : edges)
    if ((forward ? from : to) == node) found.push_back(forward ? to : from);
  if (out)
    for (size_t i = 0; i < found.size() && i < *n; ++i) out[i] = found[i];
  *n = found.size();
  return CUDA_SUCCESS;
}

class GraphFake : public ::testing::Test {
 protected:
  void SetUp() override { FakeGraphs::install(fake.table); }
  FakeDriver fake;
};

}  // namespace

TEST(GraphOptions, CaptureModesByCudaCoreNames) {
  EXPECT_EQ(capture_mode("relaxed"), CU_STREAM_CAPTURE_MODE_RELAXED);
  EXPECT_EQ(capture_mode("thread_local"), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  EXPECT_EQ(capture_mode("global"), CU_STREAM_CAPTURE_MODE_GLOBAL);
  try {
    capture_mode("Global");
    FAIL() << "an unknown mode was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'Global'"), std::string::npos) << e.what();
  }
}

TEST(GraphOptions, EachDebugPrintOptionIsItsOwnDriverFlag) {
  using O = GraphDebugPrintOptions;
  const std::pair<bool O::*, unsigned> fields[] = {
      {&O::verbose, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE},
      {&O::runtime_types, CU_GRAPH_DEBUG_DOT_FLAGS_RUNTIME_TYPES},
      {&O::kernel_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_PARAMS},
      {&O::memcpy_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_MEMCPY_NODE_PARAMS},
      {&O::memset_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_MEMSET_NODE_PARAMS},
      {&O::host_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_HOST_NODE_PARAMS},
      {&O::event_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_EVENT_NODE_PARAMS},
      {&O::ext_semas_signal_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_EXT_SEMAS_SIGNAL_NODE_PARAMS},
      {&O::ext_semas_wait_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_EXT_SEMAS_WAIT_NODE_PARAMS},
      {&O::kernel_node_attributes, CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_ATTRIBUTES},
      {&O::handles, CU_GRAPH_DEBUG_DOT_FLAGS_HANDLES},
      {&O::mem_alloc_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_MEM_ALLOC_NODE_PARAMS},
      {&O::mem_free_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_MEM_FREE_NODE_PARAMS},
      {&O::batch_mem_op_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_BATCH_MEM_OP_NODE_PARAMS},
      {&O::extra_topo_info, CU_GRAPH_DEBUG_DOT_FLAGS_EXTRA_TOPO_INFO},
      {&O::conditional_node_params, CU_GRAPH_DEBUG_DOT_FLAGS_CONDITIONAL_NODE_PARAMS},
  };
  EXPECT_EQ(O{}.to_flags(), 0u);
  unsigned all = 0;
  O every;
  for (auto [field, flag] : fields) {
    O one;
    one.*field = true;
    EXPECT_EQ(one.to_flags(), flag);
    every.*field = true;
    all |= flag;
  }
  EXPECT_EQ(every.to_flags(), all);
}

TEST_F(GraphFake, CompleteOptionsReachTheDriverAndBadCombinationsDoNot) {
  GraphDefinition def;
  def.empty();
  EXPECT_THROW(def.instantiate({.auto_free_on_launch = true, .device_launch = true}), std::invalid_argument);
  EXPECT_EQ(FakeGraphs::instantiations, 0);

  Stream upload;
  Graph g = def.instantiate({.auto_free_on_launch = true, .upload_stream = upload, .use_node_priority = true});
  EXPECT_FALSE(g.is_closed());
  EXPECT_EQ(FakeGraphs::last_instantiate.flags, cuuint64_t(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                                            CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                                            CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
  EXPECT_EQ(FakeGraphs::last_instantiate.hUploadStream, upload.handle());
  def.instantiate({.device_launch = true});
  EXPECT_EQ(FakeGraphs::last_instantiate.flags, cuuint64_t(CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH));
  EXPECT_EQ(FakeGraphs::last_instantiate.hUploadStream, nullptr);

  g.close();
  EXPECT_TRUE(g.is_closed());
  EXPECT_THROW(g.launch(upload), ClosedError);
}

TEST_F(GraphFake, ConditionalNodesReachTheDriverAsAsked) {
  GraphDefinition def;
  GraphCondition c = def.create_condition(7);
  GraphCondition plain = def.create_condition();
  ASSERT_EQ(FakeGraphs::conditions.size(), 2u);
  EXPECT_EQ(FakeGraphs::conditions[0], std::make_pair(7u, unsigned(CU_GRAPH_COND_ASSIGN_DEFAULT)));
  EXPECT_EQ(FakeGraphs::conditions[1], std::make_pair(0u, 0u));

  GraphNode sw = def.switch_(c, 3);
  GraphNode ie = def.if_else(plain);
  GraphNode loop = def.while_loop(c);
  ASSERT_EQ(FakeGraphs::added.size(), 3u);
  const auto& p0 = FakeGraphs::added[0].conditional;
  EXPECT_EQ(FakeGraphs::added[0].type, CU_GRAPH_NODE_TYPE_CONDITIONAL);
  EXPECT_EQ(p0.type, CU_GRAPH_COND_TYPE_SWITCH);
  EXPECT_EQ(p0.size, 3u);
  EXPECT_EQ(p0.handle, c.handle);
  EXPECT_EQ(FakeGraphs::added[1].conditional.type, CU_GRAPH_COND_TYPE_IF);
  EXPECT_EQ(FakeGraphs::added[1].conditional.size, 2u);  // if-else: two bodies
  EXPECT_EQ(FakeGraphs::added[1].conditional.handle, plain.handle);
  EXPECT_EQ(FakeGraphs::added[2].conditional.type, CU_GRAPH_COND_TYPE_WHILE);
  EXPECT_EQ(FakeGraphs::added[2].conditional.size, 1u);

  EXPECT_EQ(sw.conditional_type(), GraphConditionalType::SWITCH);
  EXPECT_EQ(sw.condition(), c);
  ASSERT_EQ(sw.branches().size(), 3u);
  ASSERT_EQ(ie.branches().size(), 2u);
  EXPECT_EQ(loop.branches().size(), 1u);
  EXPECT_EQ(loop.branches()[0].handle(), FakeGraphs::bodies[0]);
}

TEST_F(GraphFake, ConditionalRefusalsNameTheProblem) {
  GraphDefinition def, other;
  GraphCondition mine = def.create_condition();
  GraphCondition theirs = other.create_condition();
  try {
    def.if_then(theirs);
    FAIL() << "a condition of another graph was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("if_then"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("create_condition"), std::string::npos) << e.what();
  }
  EXPECT_THROW(def.switch_(mine, 0), std::invalid_argument);
  EXPECT_TRUE(FakeGraphs::added.empty());

  // if-else and switch need a 12.8 driver; if and while 12.4.
  fake.table.version = 12060;
  try {
    def.if_else(mine);
    FAIL() << "if_else on a 12.6 driver";
  } catch (const FeatureUnavailableError& e) {
    EXPECT_NE(e.requirement().find("12.8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(def.switch_(mine, 2), FeatureUnavailableError);
  EXPECT_NO_THROW(def.if_then(mine));
  fake.table.version = 12030;
  EXPECT_THROW(def.while_loop(mine), FeatureUnavailableError);
  EXPECT_THROW(def.create_condition(), FeatureUnavailableError);
  EXPECT_EQ(FakeGraphs::added.size(), 1u);
}

TEST_F(GraphFake, BuilderStateErrors) {
  Stream s;
  GraphBuilder gb = s.create_graph_builder();
  EXPECT_FALSE(gb.is_building());
  EXPECT_THROW(gb.end_building(), std::runtime_error);
  EXPECT_THROW(gb.launch_stream(Kernel()), std::runtime_error);
  EXPECT_THROW(gb.complete(), std::runtime_error);
  EXPECT_THROW(gb.begin_building("sideways"), std::invalid_argument);
  EXPECT_FALSE(gb.is_building());

  gb.begin_building("global");
  EXPECT_TRUE(gb.is_building());
  EXPECT_THROW(gb.begin_building(), std::runtime_error);
  EXPECT_THROW(gb.graph_definition(), std::runtime_error);
  EXPECT_THROW(gb.split(0), std::invalid_argument);

  auto parts = gb.split(3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_FALSE(parts[0].is_join_required());
  EXPECT_TRUE(parts[1].is_join_required());
  EXPECT_THROW(parts[1].end_building(), std::runtime_error);
  EXPECT_THROW(parts[1].graph_definition(), std::runtime_error);
  try {
    gb.end_building();
    FAIL() << "ended with forks unjoined";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("2 builder"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(gb.is_building());
  GraphBuilder joined = GraphBuilder::join(parts);
  EXPECT_EQ(joined.state(), gb.state());
  EXPECT_TRUE(parts[1].is_closed());
  gb.end_building();
  EXPECT_FALSE(gb.is_building());
  EXPECT_EQ(gb.graph_definition().nodes().size(), 0u);
  Graph g = gb.complete();
  EXPECT_FALSE(g.is_closed());
  EXPECT_THROW(gb.begin_building(), std::runtime_error);
  gb.close();
  EXPECT_THROW(gb.stream(), ClosedError);
}

TEST_F(GraphFake, CaptureConditionalsMakeBodyBuilders) {
  Stream s;
  GraphBuilder gb = s.create_graph_builder().begin_building();
  GraphCondition c = gb.create_condition(1);
  auto [then_b, else_b] = gb.if_else(c);
  EXPECT_FALSE(then_b.is_building());
  // A body's graph exists before its capture: it can be reached right away.
  EXPECT_EQ(then_b.graph_definition().handle(), FakeGraphs::bodies[0]);
  EXPECT_EQ(else_b.graph_definition().handle(), FakeGraphs::bodies[1]);
  GraphDefinition other;
  EXPECT_THROW(gb.while_loop(other.create_condition()), std::invalid_argument);
  gb.end_building();
  EXPECT_THROW(gb.create_condition(), std::runtime_error);
}

TEST_F(GraphFake, UpdateErrorNamesTheFirstDifferingNode) {
  GraphDefinition a, b;
  a.empty();
  a.empty();
  GraphNode first = b.empty();
  GraphNode second = first.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
  Graph g = a.instantiate();
  FakeGraphs::update_result.result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
  FakeGraphs::update_result.errorNode = second.handle();
  try {
    g.update(b);
    FAIL() << "the update's failure was not reported";
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    EXPECT_NE(m.find("node 1 of 2"), std::string::npos) << m;
    EXPECT_NE(m.find("memset node"), std::string::npos) << m;
    EXPECT_NE(m.find("type differs"), std::string::npos) << m;
  }
  FakeGraphs::update_result = {};
  EXPECT_NO_THROW(g.update(b));
}

TEST_F(GraphFake, BrokenCaptureIsReportedWithTheCallThatBrokeIt) {
  Stream s;
  GraphBuilder gb = s.create_graph_builder().begin_building("global");
  fake.table.cuStreamSynchronize = [](CUstream) { return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; };
  fake.table.cuStreamEndCapture = [](CUstream st, CUgraph* g) {
    FakeGraphs::capturing.erase(st);
    *g = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  };
  Stream other;
  EXPECT_THROW(other.sync(), CudaError);
  try {
    gb.end_building();
    FAIL() << "an invalidated capture ended quietly";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    EXPECT_NE(std::string(e.what()).find("cuStreamSynchronize"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(gb.is_building());
}

TEST_F(GraphFake, RetainedObjectsLiveUntilTheDriverLetsGo) {
  auto token = std::make_shared<int>(42);
  std::weak_ptr<int> watch = token;
  {
    GraphDefinition def;
    def.empty();
    def.retain(std::move(token));
    Graph g = def.instantiate();
    EXPECT_EQ(FakeGraphs::retained_on_graph, 1);
  }
  // The definition and the executable graph are gone, but the driver holds the
  // user object (a launch may still be in flight): the object lives.
  EXPECT_FALSE(watch.expired());
  ASSERT_EQ(FakeGraphs::user_objects.size(), 1u);
  auto [ptr, destroy] = FakeGraphs::user_objects[0];
  destroy(ptr);  // the driver lets go (on its own thread, in reality)
  cucore::detail::drain_releases_for_testing();
  EXPECT_TRUE(watch.expired());
}

// What a definition's nodes use goes onto its CUgraph as soon as it is
// retained, not at instantiation: a copy made by anyone through the handle
// (cuGraphClone) holds it, so dropping the definition without instantiating
// it leaves the object to the driver.
TEST_F(GraphFake, ADefinitionHandsWhatItsNodesUseToItsCUgraphAtOnce) {
  auto token = std::make_shared<int>(42);
  std::weak_ptr<int> watch = token;
  {
    GraphDefinition def;
    def.callback([token] { (void)*token; });
    EXPECT_EQ(FakeGraphs::retained_on_graph, 1);
    def.retain(token);
    def.retain(token);  // a repeat is held already
    EXPECT_EQ(FakeGraphs::retained_on_graph, 2);
  }
  token.reset();
  EXPECT_FALSE(watch.expired());
  ASSERT_EQ(FakeGraphs::user_objects.size(), 2u);
  for (auto [ptr, destroy] : FakeGraphs::user_objects) destroy(ptr);
  cucore::detail::drain_releases_for_testing();
  EXPECT_TRUE(watch.expired());
}

// A capture's objects wait for its CUgraph, then go onto it when the capture ends.
TEST_F(GraphFake, ACapturesObjectsGoOntoItsGraphWhenItEnds) {
  auto token = std::make_shared<int>(1);
  std::weak_ptr<int> watch = token;
  {
    Stream s;
    GraphBuilder gb = s.create_graph_builder().begin_building();
    gb.retain(std::move(token));
    EXPECT_EQ(FakeGraphs::retained_on_graph, 0);
    gb.end_building();
    EXPECT_EQ(FakeGraphs::retained_on_graph, 1);
  }
  EXPECT_FALSE(watch.expired());
  ASSERT_EQ(FakeGraphs::user_objects.size(), 1u);
  FakeGraphs::user_objects[0].second(FakeGraphs::user_objects[0].first);
  cucore::detail::drain_releases_for_testing();
  EXPECT_TRUE(watch.expired());
}

// ---- node identity ------------------------------------------------------------------------

namespace {
const void* state_of(const GraphNode& n) { return n.box().get(); }
}  // namespace

TEST_F(GraphFake, EveryWayToANodeGivesItsOneSharedState) {
  GraphDefinition def;
  GraphNode a = def.empty();
  GraphNode b = a.empty();
  GraphNode c = def.join({a, b});
  ASSERT_NE(state_of(a), state_of(b));

  std::map<CUgraphNode, const void*> listed;
  for (const GraphNode& n : def.nodes()) listed[n.handle()] = state_of(n);
  EXPECT_EQ(listed, (std::map<CUgraphNode, const void*>{
                        {a.handle(), state_of(a)}, {b.handle(), state_of(b)}, {c.handle(), state_of(c)}}));

  std::set<std::pair<const void*, const void*>> edges;
  for (const auto& [from, to] : def.edges()) edges.emplace(state_of(from), state_of(to));
  EXPECT_EQ(edges, (std::set<std::pair<const void*, const void*>>{
                       {state_of(a), state_of(b)}, {state_of(a), state_of(c)}, {state_of(b), state_of(c)}}));

  std::vector<GraphNode> preds = c.pred();
  std::set<const void*> pred_states;
  for (const GraphNode& p : preds) pred_states.insert(state_of(p));
  EXPECT_EQ(pred_states, (std::set<const void*>{state_of(a), state_of(b)}));
  std::vector<GraphNode> succ = b.succ();
  ASSERT_EQ(succ.size(), 1u);
  EXPECT_EQ(state_of(succ[0]), state_of(c));
  EXPECT_TRUE(succ[0] == c);
  EXPECT_FALSE(succ[0] == b);

  // An edge made through one GraphNode shows through every other of that node.
  GraphNode d = def.empty();
  d.add_pred(std::vector<GraphNode>{c});
  ASSERT_EQ(succ[0].succ().size(), 1u);
  EXPECT_EQ(state_of(succ[0].succ()[0]), state_of(d));
  d.remove_pred(std::vector<GraphNode>{c});
  EXPECT_TRUE(c.succ().empty());
}

TEST_F(GraphFake, DestroyingANodeThroughOneGraphNodeInvalidatesEveryOne) {
  GraphDefinition def;
  GraphNode a = def.empty();
  GraphNode b = a.empty();
  GraphNode listed_a;
  for (const GraphNode& n : def.nodes())
    if (n.handle() == a.handle()) listed_a = n;
  ASSERT_TRUE(listed_a.is_valid());
  const CUgraphNode old = a.handle();

  listed_a.destroy();
  EXPECT_FALSE(a.is_valid());
  EXPECT_EQ(a.handle(), nullptr);
  EXPECT_TRUE(a == listed_a);  // still itself, and nothing else
  EXPECT_FALSE(a == b);
  EXPECT_TRUE(b.pred().empty());
  const auto added = FakeGraphs::added.size();
  // A destroyed node makes no node (never an entry node in its place).
  EXPECT_THROW(a.empty(), ClosedError);
  EXPECT_THROW(a.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16), ClosedError);
  EXPECT_THROW(a.pred(), ClosedError);
  EXPECT_EQ(FakeGraphs::added.size(), added);
  EXPECT_NO_THROW(a.destroy());  // idempotent

  // The driver may give the address to a new node: that is a node of its own.
  const std::uintptr_t saved = FakeGraphs::next;
  FakeGraphs::next = reinterpret_cast<std::uintptr_t>(old) - 0x10;
  GraphNode fresh = def.empty();
  FakeGraphs::next = saved;
  ASSERT_EQ(fresh.handle(), old);
  EXPECT_NE(state_of(fresh), state_of(a));
  EXPECT_FALSE(fresh == a);
  EXPECT_FALSE(a.is_valid());
  for (const GraphNode& n : def.nodes())
    if (n.handle() == old) {
      EXPECT_EQ(state_of(n), state_of(fresh));
    }
}

TEST_F(GraphFake, TheNodeRegistryHoldsNoNodeAndStaysSmall) {
  GraphDefinition def;
  GraphNode kept = def.empty();
  std::weak_ptr<cucore::detail::NodeBox> dropped;
  {
    GraphNode n = def.empty();
    dropped = n.box();
  }
  EXPECT_TRUE(dropped.expired());  // the graph does not keep a node's state alive
  for (int i = 0; i < 5000; ++i) def.empty();
  EXPECT_LT(def.box()->top().node_boxes.size(), 200u);
  // A node listed again after its GraphNodes are gone gets a new state; a held one, its own.
  for (const GraphNode& n : def.nodes())
    if (n.handle() == kept.handle()) {
      EXPECT_EQ(state_of(n), state_of(kept));
    }
}

TEST_F(GraphFake, AFaceLastsAsLongAsTheGraphNodeThatHoldsIt) {
  GraphDefinition def;
  GraphNode node = def.empty();
  GraphNode other = node;  // the same node
  int tag = 0, tag2 = 0;
  EXPECT_EQ(other.face(), nullptr);
  {
    GraphNode holder = node;
    holder.set_face(&tag);
    EXPECT_EQ(other.face(), &tag);
    GraphNode copy = holder;  // a copy is not the face
    copy = GraphNode();
    EXPECT_EQ(other.face(), &tag);
  }
  EXPECT_EQ(other.face(), nullptr);  // its holder is gone

  GraphNode holder = node;
  holder.set_face(&tag2);
  GraphNode moved = std::move(holder);  // the moved-from address no longer holds the node
  EXPECT_EQ(other.face(), nullptr);
  moved.set_face(&tag2);
  moved = def.empty();  // assigned: it now holds another node
  EXPECT_EQ(other.face(), nullptr);
  EXPECT_EQ(moved.face(), nullptr);
}

// ---- definition-node updates --------------------------------------------------------------

TEST_F(GraphFake, NodeUpdatesReachTheDriverAndTheNodeReportsThem) {
  GraphDefinition def;
  GraphNode fill = def.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
  fill.update_memset({.dptr = 0x2000, .value = 0xBEEF, .element_size = 2, .width = 8, .height = 3, .pitch = 64});
  ASSERT_EQ(FakeGraphs::set.size(), 1u);
  const CUDA_MEMSET_NODE_PARAMS_v2& m = FakeGraphs::set[0].memset;
  EXPECT_EQ(FakeGraphs::set[0].type, CU_GRAPH_NODE_TYPE_MEMSET);
  EXPECT_EQ(m.dst, CUdeviceptr(0x2000));
  EXPECT_EQ(m.value, 0xBEEFu);
  EXPECT_EQ(m.elementSize, 2u);
  EXPECT_EQ(m.width, 8u);
  EXPECT_EQ(m.height, 3u);
  EXPECT_EQ(m.pitch, 64u);
  const MemsetNodeParams now = fill.memset_params();
  EXPECT_EQ(now.dptr, CUdeviceptr(0x2000));
  EXPECT_EQ(now.value, 0xBEEFu);
  EXPECT_EQ(now.element_size, 2u);
  EXPECT_EQ(now.width, 8u);

  GraphNode copy = def.memcpy(CUdeviceptr(0x3000), CUdeviceptr(0x4000), 32);
  copy.update_memcpy({.dst = 0x5000, .src = 0x6000, .size = 48});
  ASSERT_EQ(FakeGraphs::set.size(), 2u);
  const CUDA_MEMCPY3D& c = FakeGraphs::set[1].memcpy.copyParams;
  EXPECT_EQ(FakeGraphs::set[1].type, CU_GRAPH_NODE_TYPE_MEMCPY);
  EXPECT_EQ(c.dstDevice, CUdeviceptr(0x5000));
  EXPECT_EQ(c.srcDevice, CUdeviceptr(0x6000));
  EXPECT_EQ(c.WidthInBytes, 48u);
  EXPECT_EQ(c.Height, 1u);
  EXPECT_EQ(copy.memcpy_params().size, 48u);
  EXPECT_EQ(copy.memcpy_params().src, CUdeviceptr(0x6000));

  int calls = 0;
  GraphNode host = def.callback([&calls] { ++calls; });
  auto before = host.callback_owner();
  host.update_callback([&calls] { calls += 10; });
  ASSERT_EQ(FakeGraphs::set.size(), 3u);
  EXPECT_EQ(FakeGraphs::set[2].type, CU_GRAPH_NODE_TYPE_HOST);
  EXPECT_NE(host.callback_owner(), before);
  FakeGraphs::set[2].host.fn(FakeGraphs::set[2].host.userData);  // what the driver would call
  EXPECT_EQ(calls, 10);
}

TEST_F(GraphFake, ARefusedOrImpossibleUpdateLeavesTheNodeAsItWas) {
  GraphDefinition def;
  GraphNode fill = def.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
  FakeGraphs::set_result = CUDA_ERROR_INVALID_VALUE;
  EXPECT_THROW(fill.update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 16}), CudaError);
  FakeGraphs::set_result = CUDA_SUCCESS;
  EXPECT_EQ(fill.memset_params().dptr, CUdeviceptr(0x1000));
  EXPECT_EQ(fill.memset_params().value, 1u);

  // Checked before the driver: nothing reaches it.
  const auto reached = FakeGraphs::set.size();
  EXPECT_THROW(fill.update_memset({.dptr = 0x2000, .value = 2, .element_size = 3, .width = 16}), std::invalid_argument);
  EXPECT_THROW(fill.update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 0}), std::invalid_argument);
  EXPECT_THROW(fill.update_memcpy({.dst = 1, .src = 2, .size = 4}), std::invalid_argument);  // not a memcpy node
  GraphNode empty = def.empty();
  EXPECT_THROW(empty.update_callback([] {}), std::invalid_argument);
  EXPECT_THROW(empty.update_child(def), std::invalid_argument);
  GraphNode copy = def.memcpy(CUdeviceptr(0x3000), CUdeviceptr(0x4000), 32);
  EXPECT_THROW(copy.update_memcpy({.dst = 1, .src = 2, .size = 0}), std::invalid_argument);
  copy.destroy();
  EXPECT_THROW(copy.update_memcpy({.dst = 1, .src = 2, .size = 4}), ClosedError);
  EXPECT_EQ(FakeGraphs::set.size(), reached);

  // An older driver: refused with what it needs.
  fake.table.version = 12010;
  EXPECT_THROW(fill.update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 16}),
               FeatureUnavailableError);
  EXPECT_EQ(FakeGraphs::set.size(), reached);
  EXPECT_EQ(fill.memset_params().value, 1u);
}

// ---- executable-graph node views (graph[node]) -----------------------------------------------
//
// The user objects as the driver counts them: a graph's references are copied
// into an executable graph at instantiation and replace its own at a
// whole-graph update; an object goes (its destructor called) at its last.
namespace {
struct FakeUserObjects {
  struct Object {
    void* ptr;
    CUhostFn destroy;
    unsigned refs;
  };
  static inline std::map<CUuserObject, Object> objects;
  static inline std::map<CUgraph, std::map<CUuserObject, unsigned>> graph_refs;
  static inline std::map<CUgraphExec, std::map<CUuserObject, unsigned>> exec_refs;
  struct ExecSet {
    CUgraphExec exec;
    CUgraphNode node;
    CUgraphNodeParams params;
  };
  static inline std::vector<ExecSet> exec_set;  // every cuGraphExecNodeSetParams
  static inline CUresult exec_set_result = CUDA_SUCCESS;
  static inline std::map<std::pair<CUgraphExec, CUgraphNode>, unsigned> enabled;
  static inline int exec_destroyed = 0;

  static void drop(CUuserObject o, unsigned n) {
    auto it = objects.find(o);
    ASSERT_NE(it, objects.end());
    ASSERT_GE(it->second.refs, n);
    if ((it->second.refs -= n) == 0) {
      Object gone = it->second;
      objects.erase(it);
      gone.destroy(gone.ptr);
    }
  }
  static void drop_all(std::map<CUuserObject, unsigned>& refs) {
    auto copy = refs;
    refs.clear();
    for (auto [o, n] : copy) drop(o, n);
  }
  static void copy_into(CUgraphExec e, CUgraph g) {
    exec_refs[e] = graph_refs[g];
    for (auto [o, n] : exec_refs[e]) objects.at(o).refs += n;
  }

  static void install(cucore::detail::DriverTable& t) {
    objects.clear();
    graph_refs.clear();
    exec_refs.clear();
    exec_set.clear();
    exec_set_result = CUDA_SUCCESS;
    enabled.clear();
    exec_destroyed = 0;
    t.cuUserObjectCreate = [](CUuserObject* o, void* ptr, CUhostFn destroy, unsigned refs, unsigned) {
      *o = FakeGraphs::make<CUuserObject>();
      objects[*o] = {ptr, destroy, refs};
      return CUDA_SUCCESS;
    };
    t.cuUserObjectRelease = [](CUuserObject o, unsigned n) {
      drop(o, n);
      return CUDA_SUCCESS;
    };
    t.cuGraphRetainUserObject = [](CUgraph g, CUuserObject o, unsigned n, unsigned flags) {
      graph_refs[g][o] += n;
      if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) objects.at(o).refs += n;  // a move hands the caller's over
      return CUDA_SUCCESS;
    };
    t.cuGraphReleaseUserObject = [](CUgraph g, CUuserObject o, unsigned n) {
      auto& held = graph_refs[g][o];
      if (held < n) return CUDA_ERROR_INVALID_VALUE;
      if ((held -= n) == 0) graph_refs[g].erase(o);
      drop(o, n);
      return CUDA_SUCCESS;
    };
    t.cuGraphDestroy = [](CUgraph g) {
      drop_all(graph_refs[g]);
      return CUDA_SUCCESS;
    };
    t.cuGraphInstantiateWithParams = [](CUgraphExec* e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS*) {
      *e = FakeGraphs::make<CUgraphExec>();
      copy_into(*e, g);
      return CUDA_SUCCESS;
    };
    t.cuGraphExecDestroy = [](CUgraphExec e) {
      ++exec_destroyed;
      drop_all(exec_refs[e]);
      exec_refs.erase(e);
      return CUDA_SUCCESS;
    };
    t.cuGraphExecUpdate = [](CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo* info) {
      *info = FakeGraphs::update_result;
      if (info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS) return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
      auto old = exec_refs[e];
      copy_into(e, g);  // the source's references replace the executable graph's
      drop_all(old);
      return CUDA_SUCCESS;
    };
    t.cuGraphExecNodeSetParams = [](CUgraphExec e, CUgraphNode n, CUgraphNodeParams* p) {
      exec_set.push_back({e, n, *p});
      return exec_set_result;
    };
    t.cuGraphNodeGetEnabled = [](CUgraphExec e, CUgraphNode n, unsigned* on) {
      auto it = enabled.find({e, n});
      *on = it == enabled.end() ? 1u : it->second;
      return CUDA_SUCCESS;
    };
    t.cuGraphNodeSetEnabled = [](CUgraphExec e, CUgraphNode n, unsigned on) {
      enabled[{e, n}] = on;
      return CUDA_SUCCESS;
    };
  }
};

class ExecGraphFake : public GraphFake {
 protected:
  void SetUp() override {
    GraphFake::SetUp();
    FakeUserObjects::install(fake.table);
  }
};
}  // namespace

TEST_F(ExecGraphFake, AnExecutableNodesUpdatesReachTheDriverForThatGraphOnly) {
  {
    GraphDefinition def;
    GraphNode fill = def.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
    GraphNode copy = def.memcpy(CUdeviceptr(0x3000), CUdeviceptr(0x4000), 32);
    int calls = 0;
    GraphNode host = def.callback([&calls] { ++calls; });
    Graph g = def.instantiate();
    Graph other = def.instantiate();

    g[fill].update_memset({.dptr = 0x2000, .value = 0xBEEF, .element_size = 2, .width = 8, .height = 3, .pitch = 64});
    ASSERT_EQ(FakeUserObjects::exec_set.size(), 1u);
    const auto& s0 = FakeUserObjects::exec_set[0];
    EXPECT_EQ(s0.exec, g.handle());
    EXPECT_EQ(s0.node, fill.handle());
    EXPECT_EQ(s0.params.type, CU_GRAPH_NODE_TYPE_MEMSET);
    EXPECT_EQ(s0.params.memset.dst, CUdeviceptr(0x2000));
    EXPECT_EQ(s0.params.memset.value, 0xBEEFu);
    EXPECT_EQ(s0.params.memset.elementSize, 2u);
    EXPECT_EQ(s0.params.memset.width, 8u);
    EXPECT_EQ(s0.params.memset.height, 3u);
    EXPECT_EQ(s0.params.memset.pitch, 64u);
    // The definition is not changed: nothing reached cuGraphNodeSetParams, and the node reports what it had.
    EXPECT_TRUE(FakeGraphs::set.empty());
    EXPECT_EQ(fill.memset_params().dptr, CUdeviceptr(0x1000));
    EXPECT_EQ(fill.memset_params().value, 1u);

    other[copy].update_memcpy({.dst = 0x5000, .src = 0x6000, .size = 48});
    ASSERT_EQ(FakeUserObjects::exec_set.size(), 2u);
    const auto& s1 = FakeUserObjects::exec_set[1];
    EXPECT_EQ(s1.exec, other.handle());
    EXPECT_EQ(s1.node, copy.handle());
    EXPECT_EQ(s1.params.type, CU_GRAPH_NODE_TYPE_MEMCPY);
    EXPECT_EQ(s1.params.memcpy.copyParams.dstDevice, CUdeviceptr(0x5000));
    EXPECT_EQ(s1.params.memcpy.copyParams.srcDevice, CUdeviceptr(0x6000));
    EXPECT_EQ(s1.params.memcpy.copyParams.WidthInBytes, 48u);
    EXPECT_EQ(copy.memcpy_params().size, 32u);

    g[host].update_callback([&calls] { calls += 10; });
    ASSERT_EQ(FakeUserObjects::exec_set.size(), 3u);
    const auto& s2 = FakeUserObjects::exec_set[2];
    EXPECT_EQ(s2.params.type, CU_GRAPH_NODE_TYPE_HOST);
    s2.params.host.fn(s2.params.host.userData);  // what the driver would call
    EXPECT_EQ(calls, 10);

    Event e = Device(0).create_event();
    GraphNode rec = def.record(e);
    Graph h = def.instantiate();
    Event e2 = Device(0).create_event();
    h[rec].update_event(e2);
    ASSERT_EQ(FakeUserObjects::exec_set.size(), 4u);
    EXPECT_EQ(FakeUserObjects::exec_set[3].params.type, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    EXPECT_EQ(FakeUserObjects::exec_set[3].params.eventRecord.event, e2.handle());

    // Enabled per executable graph.
    ExecutableGraphNode view = g[fill];
    EXPECT_TRUE(view.is_enabled());
    view.disable();
    EXPECT_FALSE(view.is_enabled());
    EXPECT_FALSE(g[fill].is_enabled());
    EXPECT_TRUE(other[fill].is_enabled());
    view.enable();
    EXPECT_TRUE(view.is_enabled());
    EXPECT_EQ(view.type(), CU_GRAPH_NODE_TYPE_MEMSET);
    EXPECT_EQ(view.graph_handle(), g.handle());
    EXPECT_EQ(view.node(), fill);
  }
  cucore::detail::drain_releases_for_testing();  // the events go while this test's driver is there
}

TEST_F(ExecGraphFake, GraphIndexAndItsViewsRefuseWhatTheyCannotDo) {
  GraphDefinition def;
  GraphNode empty = def.empty();
  GraphNode fill = def.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
  GraphNode host = def.callback([] {});
  GraphNode gone = def.memcpy(CUdeviceptr(0x3000), CUdeviceptr(0x4000), 32);
  Graph g = def.instantiate();
  try {
    (void)g[empty];
    FAIL() << "an empty node was given a view";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("empty node has no executable updates"), std::string::npos) << e.what();
  }
  gone.destroy();
  EXPECT_THROW((void)g[gone], ClosedError);
  EXPECT_THROW((void)g[GraphNode()], ClosedError);
  EXPECT_THROW(g[host].disable(), std::invalid_argument);  // only kernel, memcpy and memset nodes
  EXPECT_THROW((void)g[host].is_enabled(), std::invalid_argument);
  EXPECT_THROW(g[fill].update_memcpy({.dst = 1, .src = 2, .size = 4}), std::invalid_argument);  // a memset node
  EXPECT_THROW(g[fill].update_memset({.dptr = 0x2000, .value = 2, .element_size = 3, .width = 16}),
               std::invalid_argument);
  EXPECT_THROW(ExecutableGraphNode().update_callback([] {}), ClosedError);
  EXPECT_TRUE(FakeUserObjects::exec_set.empty());

  ExecutableGraphNode view = g[fill];
  fill.destroy();  // through any GraphNode of it
  EXPECT_THROW(view.update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 16}), ClosedError);
  g.close();
  EXPECT_THROW((void)g[host], ClosedError);

  // An older driver: refused with what it needs.
  Graph h = def.instantiate();
  fake.table.version = 12010;
  EXPECT_THROW(h[host].update_callback([] {}), FeatureUnavailableError);
  EXPECT_TRUE(FakeUserObjects::exec_set.empty());
}

TEST_F(ExecGraphFake, WhatAnUpdateUsesLivesAsLongAsTheExecutableGraph) {
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> watch = token;
  Graph g;
  {
    GraphDefinition def;
    GraphNode fill = def.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
    g = def.instantiate();
    g[fill].update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 16}, std::move(token));
  }
  // The definition, the node and the view are gone; the executable graph keeps it.
  cucore::detail::drain_releases_for_testing();
  EXPECT_FALSE(watch.expired());
  g.close();  // the driver lets the executable graph go (after its launches, in reality)
  cucore::detail::drain_releases_for_testing();
  EXPECT_TRUE(watch.expired());
}

TEST_F(ExecGraphFake, ARefusedExecutableUpdateKeepsNothingNew) {
  GraphDefinition def;
  GraphNode fill = def.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
  Graph g = def.instantiate();
  auto kept = std::make_shared<int>(1);
  std::weak_ptr<int> kept_watch = kept;
  g[fill].update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 16}, std::move(kept));

  auto refused = std::make_shared<int>(2);
  std::weak_ptr<int> refused_watch = refused;
  FakeUserObjects::exec_set_result = CUDA_ERROR_INVALID_VALUE;  // e.g. a node of another graph
  EXPECT_THROW(g[fill].update_memset({.dptr = 0x3000, .value = 3, .element_size = 1, .width = 16}, std::move(refused)),
               CudaError);
  EXPECT_TRUE(refused_watch.expired());  // released at once, not with the graph
  EXPECT_FALSE(kept_watch.expired());    // what the driver took before stays
}

TEST_F(ExecGraphFake, AWholeGraphUpdateReplacesWhatTheNodeUpdatesKept) {
  GraphDefinition def;
  GraphNode fill = def.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
  Graph g = def.instantiate();
  auto token = std::make_shared<int>(1);
  std::weak_ptr<int> watch = token;
  g[fill].update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 16}, std::move(token));

  GraphDefinition source;
  source.memset(CUdeviceptr(0x4000), std::uint8_t(4), 16);
  FakeGraphs::update_result.result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  EXPECT_THROW(g.update(source), CudaError);
  cucore::detail::drain_releases_for_testing();
  EXPECT_FALSE(watch.expired());  // a refused update leaves the graph as it was
  FakeGraphs::update_result = {};
  g.update(source);
  cucore::detail::drain_releases_for_testing();
  EXPECT_TRUE(watch.expired());  // the source's parameters replaced the node's

  // Node updates after it are kept again, with the executable graph.
  auto later = std::make_shared<int>(2);
  std::weak_ptr<int> later_watch = later;
  g[fill].update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 16}, std::move(later));
  cucore::detail::drain_releases_for_testing();
  EXPECT_FALSE(later_watch.expired());
  g.close();
  cucore::detail::drain_releases_for_testing();
  EXPECT_TRUE(later_watch.expired());
}

TEST_F(ExecGraphFake, AViewKeepsItsExecutableGraph) {
  GraphDefinition def;
  GraphNode fill = def.memset(CUdeviceptr(0x1000), std::uint8_t(1), 16);
  Graph g = def.instantiate();
  const CUgraphExec handle = g.handle();
  ExecutableGraphNode view = g[fill];
  g.close();
  EXPECT_EQ(FakeUserObjects::exec_destroyed, 0);
  view.update_memset({.dptr = 0x2000, .value = 2, .element_size = 1, .width = 16});
  ASSERT_EQ(FakeUserObjects::exec_set.size(), 1u);
  EXPECT_EQ(FakeUserObjects::exec_set[0].exec, handle);
  view = ExecutableGraphNode();
  EXPECT_EQ(FakeUserObjects::exec_destroyed, 1);
}
