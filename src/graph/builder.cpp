// GraphBuilder (stream capture), Graph (the executable graph) and
// GraphMemoryResource.
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/graph.hpp>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "errors/release.hpp"
#include "graph/graph_internal.hpp"
#include "loader/driver.hpp"
#include "runtime/stream_context.hpp"

namespace cucore::graph {

using cucore::detail::BuilderKind;
using cucore::detail::BuilderState;
using cucore::detail::check;
using cucore::detail::driver;
using cucore::detail::require;
using cucore::detail::GraphBox;
using cucore::detail::GraphHandle;

namespace {

[[noreturn]] void state_error(const char* operation, const std::string& why) {
  throw RuntimeError(std::string("GraphBuilder.") + operation + ": " + why);
}

// The graph a stream is capturing into and the nodes new work would follow.
struct CaptureInfo {
  CUgraph graph = nullptr;
  const CUgraphNode* deps = nullptr;
  const CUgraphEdgeData* edges = nullptr;
  std::size_t count = 0;
};

CaptureInfo capture_info(const Stream& stream, const char* operation) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CaptureInfo ci;
  check(driver().cuStreamGetCaptureInfo(stream.handle(), &status, &id, &ci.graph, &ci.deps, &ci.edges, &ci.count),
        "cuStreamGetCaptureInfo");
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    std::string why = "the stream's capture is not active";
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
      why = "the capture was invalidated";
      if (auto call = cucore::detail::last_capture_breaking_call(); !call.empty()) why += " by: " + call;
    }
    state_error(operation, why);
  }
  return ci;
}

// Adds `params` at the capture's current point; later captured work follows it.
CUgraphNode add_captured(const Stream& stream, CUgraphNodeParams& params, const char* what) {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphAddNode), 12030, "graph nodes (cuGraphAddNode)");
  require(reinterpret_cast<const void*>(d.cuStreamUpdateCaptureDependencies), 12030,
          "capture dependencies (cuStreamUpdateCaptureDependencies)");
  CaptureInfo ci = capture_info(stream, what);
  CUgraphNode node = nullptr;
  check(d.cuGraphAddNode(&node, ci.graph, ci.deps, ci.edges, ci.count, &params), "cuGraphAddNode");
  check(d.cuStreamUpdateCaptureDependencies(stream.handle(), &node, nullptr, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES),
        "cuStreamUpdateCaptureDependencies");
  return node;
}

std::shared_ptr<BuilderState> new_state(Stream stream, BuilderKind kind, GraphHandle box) {
  auto s = std::make_shared<BuilderState>(std::move(stream));
  s->kind = kind;
  s->box = std::move(box);
  return s;
}

const char* update_reason(CUgraphExecUpdateResult r) {
  switch (r) {
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: return "the topology differs (nodes or edges were added or removed)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: return "a node's type differs";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: return "a kernel node runs another kernel";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED: return "a node's parameters changed in a way no update can apply";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "a node's change is not supported by an update";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE: return "a kernel node's function changed unsupportedly";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED: return "a node's attributes differ";
    default: return "the update is not allowed (e.g. another context or device)";
  }
}

const char* instantiate_reason(CUgraphInstantiateResult r) {
  switch (r) {
    case CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE: return "the graph's structure is invalid (a cycle?)";
    case CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED: return "a node's operation is not supported here";
    case CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED: return "the nodes span several contexts";
    case CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED: return "a condition is used by no conditional node";
    default: return "instantiation failed";
  }
}

// "node 3 of 5" of `graph` (0-based, in the driver's order).
std::string position(CUgraph graph, CUgraphNode node) {
  const auto& d = driver();
  std::size_t n = 0;
  if (d.cuGraphGetNodes(graph, nullptr, &n) != CUDA_SUCCESS) return "a node";
  std::vector<CUgraphNode> all(n);
  if (n && d.cuGraphGetNodes(graph, all.data(), &n) != CUDA_SUCCESS) return "a node";
  for (std::size_t i = 0; i < n; ++i)
    if (all[i] == node) return "node " + std::to_string(i) + " of " + std::to_string(n);
  return "a node in a nested graph";
}

}  // namespace

// ---- instantiate / update ---------------------------------------------------------------------

namespace detail {

Graph instantiate(const GraphHandle& box, const GraphCompleteOptions& options) {
  if (options.device_launch && options.auto_free_on_launch)
    throw InvalidArgumentError("GraphCompleteOptions: device_launch cannot be combined with auto_free_on_launch");
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphInstantiateWithParams), 12000, "cuGraphInstantiateWithParams");
  CUDA_GRAPH_INSTANTIATE_PARAMS p;
  std::memset(&p, 0, sizeof p);
  if (options.auto_free_on_launch) p.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  if (options.device_launch) p.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  if (options.use_node_priority) p.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (options.upload_stream) {
    if (options.upload_stream->is_closed()) cucore::detail::throw_closed("Stream", "GraphCompleteOptions.upload_stream");
    p.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    p.hUploadStream = options.upload_stream->handle();
  }
  box->attach();  // the executable graph takes the graph's references
  work_context();
  cucore::detail::ExecOwnersStage stage(box->graph);  // and the list of its own nodes' updates
  auto exec = std::make_shared<cucore::detail::GraphExecBox>();
  CUgraphExec e = nullptr;
  if (CUresult r = d.cuGraphInstantiateWithParams(&e, box->graph, &p); r != CUDA_SUCCESS) {
    std::string what = "cuGraphInstantiateWithParams";
    if (p.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS) {
      what += std::string(" (") + instantiate_reason(p.result_out);
      if (p.hErrNode_out) what += ", at " + position(box->graph, p.hErrNode_out) + ", " + describe_node(*box, p.hErrNode_out);
      what += ")";
    }
    throw CudaError(r, what);
  }
  exec->exec = e;
  exec->owners = stage.owners();
  if (box->root) exec->keep = box;  // a view's Owners live on its root
  return Graph(std::move(exec));
}

void update(const cucore::detail::GraphExecBox& exec, const GraphHandle& source) {
  source->attach();  // the update hands the source's references to the executable graph
  const auto& d = driver();
  CUgraphExecUpdateResultInfo info;
  std::memset(&info, 0, sizeof info);
  work_context();
  // The update replaces the executable graph's references with the source's,
  // its node updates' list with them: a new list goes in with the source.
  cucore::detail::ExecOwnersStage stage(source->graph);
  std::unique_lock lock(exec.mutex);
  CUresult r = d.cuGraphExecUpdate(exec.exec, source->graph, &info);
  if (r == CUDA_SUCCESS) {
    if (stage.owners()) exec.owners = stage.owners();  // the old list goes once its launches are done
    return;
  }
  lock.unlock();
  std::string what = "Graph.update";
  if (r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
    what += std::string(": ") + update_reason(info.result);
    if (info.errorNode)
      what += "; first differing node: " + position(source->graph, info.errorNode) + " of the source, " +
              describe_node(*source, info.errorNode);
    else
      what += " (the driver named no node)";
  }
  throw CudaError(r, what);
}

}  // namespace detail

// ---- Graph ---------------------------------------------------------------------------------------

Graph::Graph(std::shared_ptr<const cucore::detail::GraphExecBox> box) noexcept
    : box_(std::move(box)), exec_(box_ ? box_->exec : nullptr) {}

void Graph::launch_fast(CUstream stream) const {
  const auto& d = driver();
  CUresult r = d.cuGraphLaunch(exec_, stream);
  if (r == CUDA_SUCCESS) [[likely]]
    return;
  if (r == CUDA_ERROR_INVALID_CONTEXT && !cucore::detail::is_special_stream(stream)) {
    // A thread with no current context: the stream's, as launch() does.
    CUcontext ctx = nullptr;
    check(d.cuStreamGetCtx(stream, &ctx), "cuStreamGetCtx");
    check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    r = d.cuGraphLaunch(exec_, stream);
  }
  check(r, "cuGraphLaunch");
}

void Graph::launch_slow(StreamRef stream) const {
  if (!exec_) cucore::detail::throw_closed("Graph", "launch");
  cucore::detail::special_or_closed_stream(stream.handle(), "Graph.launch");
  launch_fast(stream.handle());
}

void Graph::upload(StreamRef stream) const {
  if (!exec_) cucore::detail::throw_closed("Graph", "upload");
  cucore::detail::StreamContextGuard guard(stream, "Graph.upload");
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphUpload), 11010, "cuGraphUpload");
  check(d.cuGraphUpload(exec_, stream.handle()), "cuGraphUpload");
}

void Graph::update(const GraphBuilder& source) {
  if (!exec_) cucore::detail::throw_closed("Graph", "update");
  update(source.graph_definition());
}

void Graph::update(const GraphDefinition& source) {
  if (!exec_) cucore::detail::throw_closed("Graph", "update");
  if (!source.is_valid()) cucore::detail::throw_closed("GraphDefinition", "Graph.update (the source)");
  detail::update(*box_, source.box());
}

void Graph::close() noexcept {
  box_.reset();
  exec_ = nullptr;
}

// ---- GraphBuilder --------------------------------------------------------------------------------

GraphBuilder make_graph_builder(const Stream& stream) {
  if (stream.is_closed()) cucore::detail::throw_closed("Stream", "create_graph_builder");
  return GraphBuilder(new_state(stream, BuilderKind::primary, cucore::detail::capture_root()));
}

BuilderState& GraphBuilder::open(const char* operation) const {
  if (!state_ || state_->joined) [[unlikely]]
    cucore::detail::throw_closed("GraphBuilder", operation);
  return *state_;
}

bool GraphBuilder::is_building() const { return state_ && state_->is_building(); }

bool GraphBuilder::is_join_required() const {
  return state_ && state_->kind == BuilderKind::forked && !state_->joined;
}

const Stream& GraphBuilder::stream() const { return open("stream").stream; }

GraphBuilder& GraphBuilder::begin_building(std::string_view mode) {
  BuilderState& s = open("begin_building");
  const CUstreamCaptureMode m = capture_mode(mode);
  if (s.kind == BuilderKind::forked)
    state_error("begin_building", "a builder made by split() captures with the builder it was split from");
  if (s.building) state_error("begin_building", "the builder is already building");
  if (s.kind == BuilderKind::primary && s.ended) state_error("begin_building", "the builder has already built its graph");
  const auto& d = driver();
  if (s.kind == BuilderKind::primary) {
    check(d.cuStreamBeginCapture(s.stream.handle(), m), "cuStreamBeginCapture");
  } else {
    require(reinterpret_cast<const void*>(d.cuStreamBeginCaptureToGraph), 12030,
            "capturing a conditional body (cuStreamBeginCaptureToGraph)");
    check(d.cuStreamBeginCaptureToGraph(s.stream.handle(), s.box->graph, nullptr, nullptr, 0, m),
          "cuStreamBeginCaptureToGraph");
  }
  s.building = true;
  return *this;
}

GraphBuilder& GraphBuilder::end_building() {
  BuilderState& s = open("end_building");
  if (s.kind == BuilderKind::forked)
    state_error("end_building", "a builder made by split() ends with its primary: join() it back first");
  if (!s.building) state_error("end_building", "the builder is not building");
  // The driver's own verdict on an unjoined fork (cuda.core gets it from
  // cuStreamEndCapture), without ending the capture, so a join can still follow.
  if (s.open_forks > 0)
    throw CudaError(CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
                    "GraphBuilder.end_building: " + std::to_string(s.open_forks) +
                        " builder(s) made by split() are not joined back (GraphBuilder.join); cuStreamEndCapture");
  CUgraph g = nullptr;
  CUresult r = driver().cuStreamEndCapture(s.stream.handle(), &g);
  s.building = false;
  s.joined_streams.clear();
  if (r != CUDA_SUCCESS) {
    std::string what = "cuStreamEndCapture";
    if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
      if (auto call = cucore::detail::last_capture_breaking_call(); !call.empty())
        what += " (the capture was broken by an earlier call: " + call + ")";
    throw CudaError(r, what);
  }
  if (s.kind == BuilderKind::primary) s.box->graph = g;  // its box was made to own it (capture_root)
  s.ended = true;
  if (s.kind == BuilderKind::primary) s.box->attach();  // the CUgraph now holds what its nodes use
  return *this;
}

Graph GraphBuilder::complete(const GraphCompleteOptions& options) const {
  return detail::instantiate(graph_definition().box(), options);
}

GraphDefinition GraphBuilder::graph_definition() const {
  BuilderState& s = open("graph_definition");
  if (s.kind == BuilderKind::forked)
    state_error("graph_definition", "a builder made by split() shares its primary's graph: ask the primary");
  if (s.building) state_error("graph_definition", "the builder is building: end_building() first");
  if (s.kind == BuilderKind::primary && !s.ended)
    state_error("graph_definition", "the builder has not built a graph yet (begin_building, then end_building)");
  return GraphDefinition(s.box);
}

void GraphBuilder::debug_dot_print(const std::string& path, const GraphDebugPrintOptions& options) const {
  BuilderState& s = open("debug_dot_print");
  if (s.is_building()) detail::debug_dot_print(capture_info(s.stream, "debug_dot_print").graph, path, options);
  else detail::debug_dot_print(graph_definition().handle(), path, options);
}

std::vector<GraphBuilder> GraphBuilder::split(std::size_t count) {
  BuilderState& s = open("split");
  if (count < 1) throw InvalidArgumentError("GraphBuilder.split: count must be at least 1, got 0");
  if (!s.is_building()) state_error("split", "the builder is not building");
  std::shared_ptr<BuilderState> owner = s.kind == BuilderKind::forked ? s.primary : state_;
  std::vector<GraphBuilder> out{*this};
  out.reserve(count);
  const Context ctx = s.stream.context();
  for (std::size_t i = 1; i < count; ++i) {
    Stream fork(ctx, StreamOptions{});
    fork.wait(s.stream.record());  // the fork joins the capture, after the work so far
    auto st = new_state(std::move(fork), BuilderKind::forked, s.box);
    st->primary = owner;
    ++owner->open_forks;
    out.emplace_back(std::move(st));
  }
  return out;
}

GraphBuilder GraphBuilder::join(std::span<GraphBuilder> builders) {
  if (builders.empty()) throw InvalidArgumentError("GraphBuilder.join: no builders given");
  BuilderState* owner = nullptr;
  GraphBuilder* target = nullptr;
  for (GraphBuilder& b : builders) {
    BuilderState& s = b.open("join");
    if (!s.is_building()) state_error("join", "every builder must be building");
    if (owner && &s.capture_owner() != owner)
      throw InvalidArgumentError("GraphBuilder.join: the builders belong to different captures");
    owner = &s.capture_owner();
    if (!target && s.kind != BuilderKind::forked) target = &b;
  }
  if (!target) target = &builders[0];
  const Stream& into = target->state_->stream;
  for (GraphBuilder& b : builders) {
    if (&b == target || b.state_ == target->state_) continue;
    BuilderState& s = *b.state_;
    into.wait(s.stream.record());
    if (s.kind == BuilderKind::forked && !s.joined) {
      s.joined = true;
      --owner->open_forks;
      owner->joined_streams.push_back(s.stream);  // kept until the capture ends
    }
    b.state_.reset();
  }
  return *target;
}

GraphCondition GraphBuilder::create_condition(std::optional<unsigned> default_value) {
  BuilderState& s = open("create_condition");
  if (!s.is_building()) state_error("create_condition", "the builder is not building");
  CaptureInfo ci = capture_info(s.stream, "create_condition");
  return detail::make_condition(*s.box, ci.graph, s.stream.context().handle(), default_value);
}

std::vector<GraphBuilder> GraphBuilder::conditional(GraphConditionalType type, GraphCondition condition,
                                                    unsigned count, const char* operation) {
  BuilderState& s = open(operation);
  if (!s.is_building()) state_error(operation, "the builder is not building");
  const Context ctx = s.stream.context();
  CUgraphNodeParams p;
  detail::prepare_conditional(*s.box, type, condition, count, ctx.handle(), p, operation);
  CUgraphNode node = add_captured(s.stream, p, operation);
  const CUgraph* bodies = p.conditional.phGraph_out;
  {
    auto info = detail::conditional_info(type, condition, bodies, count);
    info->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    GraphBox& top = s.box->top();
    std::lock_guard lock(top.mutex);
    top.nodes[node] = std::move(info);
  }
  std::vector<GraphBuilder> out;
  for (unsigned i = 0; i < count; ++i)
    out.emplace_back(new_state(Stream(ctx, StreamOptions{}), BuilderKind::body,
                               cucore::detail::view_graph(bodies[i], s.box)));
  return out;
}

GraphBuilder GraphBuilder::if_then(GraphCondition condition) {
  return std::move(conditional(GraphConditionalType::IF, condition, 1, "if_then")[0]);
}

std::pair<GraphBuilder, GraphBuilder> GraphBuilder::if_else(GraphCondition condition) {
  auto b = conditional(GraphConditionalType::IF, condition, 2, "if_else");
  return {std::move(b[0]), std::move(b[1])};
}

GraphBuilder GraphBuilder::while_loop(GraphCondition condition) {
  return std::move(conditional(GraphConditionalType::WHILE, condition, 1, "while_loop")[0]);
}

std::vector<GraphBuilder> GraphBuilder::switch_(GraphCondition condition, std::size_t count) {
  if (count > 0xffffffffu) throw InvalidArgumentError("GraphBuilder.switch: count does not fit in 32 bits");
  return conditional(GraphConditionalType::SWITCH, condition, static_cast<unsigned>(count), "switch");
}

void GraphBuilder::embed(const GraphBuilder& child) {
  BuilderState& s = open("embed");
  if (!s.is_building()) state_error("embed", "the builder is not building");
  if (child.is_closed()) cucore::detail::throw_closed("GraphBuilder", "embed (the child)");
  GraphDefinition def = child.graph_definition();  // refuses a child still building
  def.box()->attach();
  CUgraphNodeParams p;
  std::memset(&p, 0, sizeof p);
  p.type = CU_GRAPH_NODE_TYPE_GRAPH;
  p.graph.graph = def.handle();
  p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
  add_captured(s.stream, p, "embed");
  s.box->retain(def.box());
}

void GraphBuilder::callback(std::function<void()> fn) {
  BuilderState& s = open("callback");
  if (!fn) throw InvalidArgumentError("GraphBuilder.callback: the function is empty");
  if (!s.is_building()) state_error("callback", "the builder is not building");
  auto owned = std::make_shared<const detail::HostFunction>(std::move(fn));
  check(driver().cuLaunchHostFunc(s.stream.handle(), detail::host_trampoline,
                                  const_cast<detail::HostFunction*>(owned.get())),
        "cuLaunchHostFunc");
  s.box->retain(std::move(owned));
}

void GraphBuilder::callback(CUhostFn fn, void* user_data, std::shared_ptr<const void> owner) {
  BuilderState& s = open("callback");
  if (!fn) throw InvalidArgumentError("GraphBuilder.callback: the function is null");
  if (!s.is_building()) state_error("callback", "the builder is not building");
  check(driver().cuLaunchHostFunc(s.stream.handle(), fn, user_data), "cuLaunchHostFunc");
  s.box->retain(std::move(owner));
}

void GraphBuilder::retain(std::shared_ptr<const void> owner) const { open("retain").box->retain(std::move(owner)); }

void GraphBuilder::retain(Buffer&& buffer) const {
  open("retain").box->retain(std::make_shared<const Buffer>(std::move(buffer)));
}

StreamRef GraphBuilder::launch_stream(const Kernel& kernel) const {
  BuilderState& s = open("launch");
  if (!s.is_building()) [[unlikely]]
    state_error("launch", "the builder is not building (begin_building() first)");
  if (kernel) s.box->retain(std::make_shared<const Kernel>(kernel), kernel.info());
  return s.stream;
}

void GraphBuilder::close() noexcept {
  if (!state_) return;
  BuilderState& s = *state_;
  if (s.kind != BuilderKind::forked && s.building) {
    // Abandon the capture: the stream is usable again, the partial graph dropped.
    if (const auto* t = cucore::detail::g_driver.load(std::memory_order_acquire)) {
      CUgraph g = nullptr;
      if (t->cuStreamEndCapture(s.stream.handle(), &g) == CUDA_SUCCESS && g && s.kind == BuilderKind::primary)
        cucore::detail::report_release(t->cuGraphDestroy(g), "cuGraphDestroy");
    }
    s.building = false;
  }
  state_.reset();
}

// ---- GraphMemoryResource -------------------------------------------------------------------------

namespace {
class GraphMemoryImpl final : public MemoryResource::Impl {
 public:
  explicit GraphMemoryImpl(int device) : device_(device) {}
  CUdeviceptr allocate(std::size_t size, StreamRef stream) override {
    if (stream.is_closed()) cucore::detail::throw_closed("Stream", "GraphMemoryResource.allocate");
    const auto& d = driver();
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    check(d.cuStreamIsCapturing(stream.handle(), &status), "cuStreamIsCapturing");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
      throw RuntimeError(
          "GraphMemoryResource.allocate: the stream is not capturing a graph (allocate on a GraphBuilder's stream "
          "between begin_building() and end_building())");
    CUdeviceptr p = 0;
    check(d.cuMemAllocAsync(&p, size, stream.handle()), "cuMemAllocAsync (graph allocation)");
    return p;
  }
  void deallocate(CUdeviceptr ptr, std::size_t, StreamRef stream) override {
    cucore::detail::StreamContextGuard guard(stream, "GraphMemoryResource.deallocate");
    check(driver().cuMemFreeAsync(ptr, stream.handle()), "cuMemFreeAsync (graph allocation)");
  }
  bool is_device_accessible() const noexcept override { return true; }
  bool is_host_accessible() const noexcept override { return false; }
  int device_id() const noexcept override { return device_; }

 private:
  int device_;
};

std::uint64_t graph_mem_attribute(int device, CUgraphMem_attribute attr) {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuDeviceGetGraphMemAttribute), 11040, "graph memory attributes");
  cuuint64_t v = 0;
  check(d.cuDeviceGetGraphMemAttribute(Device(device).handle(), attr, &v), "cuDeviceGetGraphMemAttribute");
  return v;
}

void reset_graph_mem_attribute(int device, CUgraphMem_attribute attr) {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuDeviceSetGraphMemAttribute), 11040, "graph memory attributes");
  cuuint64_t zero = 0;  // the only value the driver takes: reset to the current usage
  check(d.cuDeviceSetGraphMemAttribute(Device(device).handle(), attr, &zero), "cuDeviceSetGraphMemAttribute");
}
}  // namespace

GraphMemoryResource::GraphMemoryResource(const Device& device) : GraphMemoryResource(device.ordinal()) {}

GraphMemoryResource::GraphMemoryResource(int device_id)
    : MemoryResource(std::make_shared<GraphMemoryImpl>(Device(device_id).ordinal())) {}

GraphMemoryResourceAttributes GraphMemoryResource::attributes() const {
  const int dev = device_id();
  return {graph_mem_attribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT),
          graph_mem_attribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH),
          graph_mem_attribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT),
          graph_mem_attribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)};
}

void GraphMemoryResource::reset_used_mem_high() const {
  reset_graph_mem_attribute(device_id(), CU_GRAPH_MEM_ATTR_USED_MEM_HIGH);
}

void GraphMemoryResource::reset_reserved_mem_high() const {
  reset_graph_mem_attribute(device_id(), CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
}

void GraphMemoryResource::trim() const {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuDeviceGraphMemTrim), 11040, "cuDeviceGraphMemTrim");
  check(d.cuDeviceGraphMemTrim(Device(device_id()).handle()), "cuDeviceGraphMemTrim");
}

}  // namespace cucore::graph

namespace cucore {

graph::GraphBuilder Stream::create_graph_builder() const { return graph::make_graph_builder(*this); }

graph::GraphBuilder Device::create_graph_builder() const { return graph::make_graph_builder(create_stream()); }

}  // namespace cucore
