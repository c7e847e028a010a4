// Explicit graph construction: GraphDefinition, GraphNode and the node
// builders they share (detail::NodeMaker), all through cuGraphAddNode.
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/graph.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "graph/graph_internal.hpp"
#include "launch/kernel_info.hpp"
#include "launch/launch_internal.hpp"
#include "loader/driver.hpp"
#include "runtime/device_state.hpp"

namespace cucore::graph {

using cucore::detail::check;
using cucore::detail::driver;
using cucore::detail::require;
using cucore::detail::GraphBox;
using cucore::detail::GraphHandle;

// ---- small facts ---------------------------------------------------------------------

unsigned GraphDebugPrintOptions::to_flags() const noexcept {
  unsigned f = 0;
  const bool bits[] = {verbose,
                       runtime_types,
                       kernel_node_params,
                       memcpy_node_params,
                       memset_node_params,
                       host_node_params,
                       event_node_params,
                       ext_semas_signal_node_params,
                       ext_semas_wait_node_params,
                       kernel_node_attributes,
                       handles,
                       mem_alloc_node_params,
                       mem_free_node_params,
                       batch_mem_op_node_params,
                       extra_topo_info,
                       conditional_node_params};
  // CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE (1 << 0) through ..._CONDITIONAL_NODE_PARAMS (1 << 15), in this order.
  static_assert(CU_GRAPH_DEBUG_DOT_FLAGS_CONDITIONAL_NODE_PARAMS == 1 << 15);
  for (unsigned i = 0; i < 16; ++i)
    if (bits[i]) f |= 1u << i;
  return f;
}

const char* to_string(GraphMemoryType type) noexcept {
  switch (type) {
    case GraphMemoryType::HOST: return "host";
    case GraphMemoryType::MANAGED: return "managed";
    default: return "device";
  }
}

const char* to_string(GraphConditionalType type) noexcept {
  switch (type) {
    case GraphConditionalType::WHILE: return "while";
    case GraphConditionalType::SWITCH: return "switch";
    default: return "if";
  }
}

CUstreamCaptureMode capture_mode(std::string_view mode) {
  if (mode == "relaxed") return CU_STREAM_CAPTURE_MODE_RELAXED;
  if (mode == "thread_local") return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  if (mode == "global") return CU_STREAM_CAPTURE_MODE_GLOBAL;
  throw InvalidArgumentError("begin_building: mode must be 'relaxed', 'thread_local' or 'global', got '" +
                              std::string(mode) + "'");
}

namespace detail {

const char* node_type_name(CUgraphNodeType type) noexcept {
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case CU_GRAPH_NODE_TYPE_HOST: return "host callback";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "child graph";
    case CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL: return "semaphore signal";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: return "semaphore wait";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "allocation";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "free";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return "batch memory operation";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "conditional";
    default: return "unknown";
  }
}

CUcontext work_context() {
  const auto& d = driver();
  CUcontext ctx = nullptr;
  check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (ctx) return ctx;
  Context c = cucore::detail::current_context_or_device0();
  c.set_current();
  return c.handle();
}

void CUDA_CB host_trampoline(void* fn) noexcept {
  try {
    (*static_cast<const HostFunction*>(fn))();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cucore: a graph's host callback threw: %s\n", e.what());
  } catch (...) {
    std::fputs("cucore: a graph's host callback threw\n", stderr);
  }
}

GraphNode add_node(const GraphHandle& box, std::span<const CUgraphNode> deps, CUgraphNodeParams& params,
                   std::shared_ptr<NodeInfo> info, const char* what) {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphAddNode), 12030, "graph nodes (cuGraphAddNode)");
  CUgraphNode node = nullptr;
  check(d.cuGraphAddNode(&node, box->graph, deps.data(), nullptr, deps.size(), &params), what);
  if (info) {
    info->type = params.type;
    GraphBox& top = box->top();
    std::lock_guard lock(top.mutex);
    top.nodes[node] = std::move(info);
  }
  return GraphNode(cucore::detail::node_box(box, node));
}

GraphCondition make_condition(GraphBox& box, CUgraph graph, CUcontext ctx, std::optional<unsigned> default_value) {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphConditionalHandleCreate), 12040,
          "conditional graph nodes (cuGraphConditionalHandleCreate)");
  CUgraphConditionalHandle h = 0;
  check(d.cuGraphConditionalHandleCreate(&h, graph, ctx, default_value.value_or(0),
                                         default_value ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0),
        "cuGraphConditionalHandleCreate");
  GraphBox& top = box.top();
  std::lock_guard lock(top.mutex);
  top.conditions.insert(h);
  return GraphCondition{h};
}

void prepare_conditional(GraphBox& box, GraphConditionalType type, GraphCondition condition, unsigned count,
                         CUcontext ctx, CUgraphNodeParams& params, const char* operation) {
  const bool two_way = type == GraphConditionalType::SWITCH || count == 2;
  const auto& d = driver();
  if (two_way)
    require(reinterpret_cast<const void*>(d.cuGraphConditionalHandleCreate), 12080,
            type == GraphConditionalType::SWITCH ? "switch graph nodes" : "if-else graph nodes");
  else
    require(reinterpret_cast<const void*>(d.cuGraphConditionalHandleCreate), 12040, "conditional graph nodes");
  if (type == GraphConditionalType::SWITCH && count == 0)
    throw InvalidArgumentError(std::string(operation) + ": a switch needs at least one case (count >= 1)");
  {
    GraphBox& top = box.top();
    std::lock_guard lock(top.mutex);
    if (!top.conditions.count(condition.handle))
      throw InvalidArgumentError(std::string(operation) +
                                  ": the condition was not made by this graph's create_condition()");
  }
  std::memset(&params, 0, sizeof params);
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.handle = condition.handle;
  params.conditional.type = type == GraphConditionalType::IF      ? CU_GRAPH_COND_TYPE_IF
                            : type == GraphConditionalType::WHILE ? CU_GRAPH_COND_TYPE_WHILE
                                                                  : CU_GRAPH_COND_TYPE_SWITCH;
  params.conditional.size = count;
  params.conditional.phGraph_out = nullptr;  // the driver's array, set on creation
  params.conditional.ctx = ctx;
}

std::shared_ptr<NodeInfo> conditional_info(GraphConditionalType type, GraphCondition condition, const CUgraph* bodies,
                                           unsigned count) {
  auto info = std::make_shared<NodeInfo>();
  info->condition = condition;
  info->conditional_type = type;
  info->branches.assign(bodies, bodies + count);
  return info;
}

std::string describe_node(const GraphBox& box, CUgraphNode node) {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  const auto& d = driver();
  std::string s;
  if (node && d.cuGraphNodeGetType(node, &type) == CUDA_SUCCESS) s = std::string("a ") + node_type_name(type) + " node";
  else s = "a node";
  GraphBox& top = const_cast<GraphBox&>(box).top();
  std::lock_guard lock(top.mutex);
  if (auto it = top.nodes.find(node); it != top.nodes.end() && it->second->type == CU_GRAPH_NODE_TYPE_KERNEL &&
                                      it->second->kernel.kernel)
    s += " launching " + it->second->kernel.kernel.name();
  return s;
}

void debug_dot_print(CUgraph graph, const std::string& path, const GraphDebugPrintOptions& options) {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphDebugDotPrint), 11030, "cuGraphDebugDotPrint");
  check(d.cuGraphDebugDotPrint(graph, path.c_str(), options.to_flags()),
        ("cuGraphDebugDotPrint (" + path + ")").c_str());
}

// ---- NodeMaker -----------------------------------------------------------------------------

NodeMaker::NodeMaker(cucore::detail::NodeHandle node) noexcept : node_(std::move(node)) {
  if (node_) graph_ = node_->graph;
}

const GraphBox& NodeMaker::open_graph(const char* operation) const {
  if (!graph_ || !graph_->graph) [[unlikely]]
    cucore::detail::throw_closed("GraphDefinition", operation);
  if (node_ && !node_->node) [[unlikely]]
    cucore::detail::throw_closed("GraphNode", operation);  // destroyed: no entry-node fallback
  return *graph_;
}

CUgraphNode NodeMaker::after() const noexcept { return node_ ? node_->node : nullptr; }

namespace {
// This node as the one dependency, or none for a GraphDefinition.
std::span<const CUgraphNode> deps_of(const CUgraphNode& node) {
  return node ? std::span<const CUgraphNode>(&node, 1) : std::span<const CUgraphNode>();
}

}  // namespace

CUgraphNodeParams blank(CUgraphNodeType type) {
  CUgraphNodeParams p;
  std::memset(&p, 0, sizeof p);
  p.type = type;
  return p;
}

void set_kernel_shape(decltype(CUgraphNodeParams::kernel)& k, const LaunchConfig& config, const char* op) {
  if (config.cluster.is_set() || config.is_cooperative)
    throw InvalidArgumentError(std::string(op) + ": graph kernel nodes take no cluster or cooperative configuration");
  cucore::detail::NativeLaunchConfig native;
  cucore::detail::to_native(config, nullptr, native);  // validates
  const CUlaunchConfig& c = native.config;
  k.gridDimX = c.gridDimX;
  k.gridDimY = c.gridDimY;
  k.gridDimZ = c.gridDimZ;
  k.blockDimX = c.blockDimX;
  k.blockDimY = c.blockDimY;
  k.blockDimZ = c.blockDimZ;
  k.sharedMemBytes = c.sharedMemBytes;
}

GraphNode NodeMaker::empty() const {
  open_graph("empty");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_EMPTY);
  return add_node(graph_, deps_of(after()), p, nullptr, "cuGraphAddNode (empty)");
}

GraphNode NodeMaker::join(std::initializer_list<GraphNode> nodes) const {
  return join(std::span<const GraphNode>(nodes.begin(), nodes.size()));
}

GraphNode NodeMaker::join(std::span<const GraphNode> nodes) const {
  open_graph("join");
  std::vector<CUgraphNode> deps;
  if (CUgraphNode self = after()) deps.push_back(self);
  for (const GraphNode& n : nodes) {
    if (!n.is_valid()) throw InvalidArgumentError("join: a node is invalid (destroyed or default-made)");
    if (n.graph_->graph != graph_->graph) throw InvalidArgumentError("join: a node belongs to another graph");
    deps.push_back(n.handle());
  }
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_EMPTY);
  return add_node(graph_, deps, p, nullptr, "cuGraphAddNode (join)");
}

GraphNode NodeMaker::add_kernel(const LaunchConfig& config, const Kernel& kernel, void** args,
                                const ::cucore::detail::ArgDesc* descs, std::size_t count) const {
  open_graph("launch");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_KERNEL);
  set_kernel_shape(p.kernel, config, "launch");
  cucore::detail::KernelInfo& info = cucore::detail::checked_kernel(kernel, descs, count);
  p.kernel.func = nullptr;
  p.kernel.kern = info.handle;
  p.kernel.ctx = work_context();
  p.kernel.kernelParams = count ? args : nullptr;  // copied by the driver
  auto node_info = std::make_shared<NodeInfo>();
  node_info->kernel = {kernel, config};
  GraphNode n = add_node(graph_, deps_of(after()), p, node_info, ("cuGraphAddNode (kernel " + info.name + ")").c_str());
  graph_->retain(std::make_shared<const Kernel>(kernel), kernel.info());
  return n;
}

GraphNode NodeMaker::launch(const LaunchConfig& config, const Kernel& kernel, const KernelArgs& args) const {
  const std::size_t n = args.size();
  std::vector<::cucore::detail::ArgDesc> descs(n);
  for (std::size_t i = 0; i < n; ++i) descs[i] = {args.size_of(i), nullptr, false};
  return add_kernel(config, kernel, const_cast<void**>(args.pointers()), descs.data(), n);
}

GraphNode NodeMaker::allocate(std::size_t size, const GraphAllocOptions& options) const {
  open_graph("allocate");
  if (size == 0) throw InvalidArgumentError("allocate: size must be at least 1 byte");
  const int device = options.device ? *options.device : cucore::detail::current_context_or_device0().device_id();
  Device dev(device);  // std::out_of_range for a bad ordinal
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  CUmemPoolProps& props = p.alloc.poolProps;
  props.allocType =
      options.memory_type == GraphMemoryType::MANAGED ? CU_MEM_ALLOCATION_TYPE_MANAGED : CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type =
      options.memory_type == GraphMemoryType::HOST ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = options.memory_type == GraphMemoryType::HOST ? 0 : device;
  std::vector<CUmemAccessDesc> access;
  for (int peer : options.peer_access) {
    (void)Device(peer);  // std::out_of_range for a bad ordinal
    CUmemAccessDesc a;
    std::memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = peer;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access.push_back(a);
  }
  p.alloc.accessDescs = access.empty() ? nullptr : access.data();
  p.alloc.accessDescCount = access.size();
  p.alloc.bytesize = size;
  auto info = std::make_shared<NodeInfo>();
  GraphNode n = add_node(graph_, deps_of(after()), p, info, "cuGraphAddNode (allocation)");
  info->alloc = {p.alloc.dptr, size, device, options.memory_type, options.peer_access};
  return n;
}

GraphNode NodeMaker::deallocate(CUdeviceptr dptr) const {
  open_graph("deallocate");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_MEM_FREE);
  p.free.dptr = dptr;
  auto info = std::make_shared<NodeInfo>();
  info->free_dptr = dptr;
  return add_node(graph_, deps_of(after()), p, info, "cuGraphAddNode (free)");
}

namespace {
GraphNode add_memset(const GraphHandle& graph, CUgraphNode after, CUdeviceptr dst,
                     unsigned value, unsigned element_size, std::size_t width, std::size_t height, std::size_t pitch) {
  if (width == 0 || height == 0) throw InvalidArgumentError("memset: width and height must be at least 1");
  if (height > 1 && pitch < width * element_size)
    throw InvalidArgumentError("memset: pitch (" + std::to_string(pitch) + " bytes) is less than a row of " +
                                std::to_string(width * element_size) + " bytes");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_MEMSET);
  p.memset.dst = dst;
  p.memset.pitch = height > 1 ? pitch : 0;
  p.memset.value = value;
  p.memset.elementSize = element_size;
  p.memset.width = width;
  p.memset.height = height;
  p.memset.ctx = work_context();
  auto info = std::make_shared<NodeInfo>();
  info->memset = {dst, value, element_size, width, height, pitch};
  return add_node(graph, deps_of(after), p, info, "cuGraphAddNode (memset)");
}

CUdeviceptr buffer_pointer(const Buffer& b, const char* operation) {
  if (b.is_closed()) cucore::detail::throw_closed("Buffer", operation);
  return b.handle();
}
}  // namespace

GraphNode NodeMaker::memset(CUdeviceptr dst, std::uint8_t value, std::size_t width, std::size_t height,
                            std::size_t pitch) const {
  open_graph("memset");
  return add_memset(graph_, after(), dst, value, 1, width, height, pitch);
}
GraphNode NodeMaker::memset(CUdeviceptr dst, std::uint16_t value, std::size_t width, std::size_t height,
                            std::size_t pitch) const {
  open_graph("memset");
  return add_memset(graph_, after(), dst, value, 2, width, height, pitch);
}
GraphNode NodeMaker::memset(CUdeviceptr dst, std::uint32_t value, std::size_t width, std::size_t height,
                            std::size_t pitch) const {
  open_graph("memset");
  return add_memset(graph_, after(), dst, value, 4, width, height, pitch);
}
GraphNode NodeMaker::memset(const Buffer& dst, std::uint8_t value, std::size_t width, std::size_t height,
                            std::size_t pitch) const {
  return memset(buffer_pointer(dst, "memset"), value, width, height, pitch);
}
GraphNode NodeMaker::memset(const Buffer& dst, std::uint16_t value, std::size_t width, std::size_t height,
                            std::size_t pitch) const {
  return memset(buffer_pointer(dst, "memset"), value, width, height, pitch);
}
GraphNode NodeMaker::memset(const Buffer& dst, std::uint32_t value, std::size_t width, std::size_t height,
                            std::size_t pitch) const {
  return memset(buffer_pointer(dst, "memset"), value, width, height, pitch);
}

GraphNode NodeMaker::memcpy(CUdeviceptr dst, CUdeviceptr src, std::size_t size) const {
  open_graph("memcpy");
  if (size == 0) throw InvalidArgumentError("memcpy: size must be at least 1 byte");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_MEMCPY);
  p.memcpy.copyCtx = work_context();
  CUDA_MEMCPY3D& c = p.memcpy.copyParams;
  c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;  // any address of the unified space: device or pinned host
  c.srcDevice = src;
  c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.dstDevice = dst;
  c.WidthInBytes = size;
  c.Height = 1;
  c.Depth = 1;
  auto info = std::make_shared<NodeInfo>();
  info->memcpy = {dst, src, size};
  return add_node(graph_, deps_of(after()), p, info, "cuGraphAddNode (memcpy)");
}

GraphNode NodeMaker::memcpy(const Buffer& dst, const Buffer& src, std::size_t size) const {
  if (size > dst.size() || size > src.size())
    throw InvalidArgumentError("memcpy: " + std::to_string(size) + " bytes exceed the buffers (" +
                                std::to_string(src.size()) + " -> " + std::to_string(dst.size()) + " bytes)");
  return memcpy(buffer_pointer(dst, "memcpy"), buffer_pointer(src, "memcpy"), size);
}

GraphNode NodeMaker::embed(const GraphDefinition& child) const {
  open_graph("embed");
  if (!child.is_valid()) cucore::detail::throw_closed("GraphDefinition", "embed (the child)");
  child.box()->attach();  // the copy takes the child's references with it
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_GRAPH);
  p.graph.graph = child.handle();
  p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
  auto info = std::make_shared<NodeInfo>();
  GraphNode n = add_node(graph_, deps_of(after()), p, info, "cuGraphAddNode (child graph)");
  CUgraph copy = nullptr;
  if (driver().cuGraphChildGraphNodeGetGraph(n.handle(), &copy) == CUDA_SUCCESS) info->child = copy;
  graph_->retain(child.box());
  return n;
}

namespace {
GraphNode add_event_node(const GraphHandle& graph, CUgraphNode after, const Event& event, bool record) {
  if (event.is_closed()) cucore::detail::throw_closed("Event", record ? "record" : "wait");
  CUgraphNodeParams p = blank(record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT);
  if (record) p.eventRecord.event = event.handle();
  else p.eventWait.event = event.handle();
  auto info = std::make_shared<NodeInfo>();
  info->event = event;
  GraphNode n = add_node(graph, deps_of(after), p, info, record ? "cuGraphAddNode (event record)" : "cuGraphAddNode (event wait)");
  graph->retain(std::make_shared<const Event>(event));
  return n;
}

GraphNode add_host_node(const GraphHandle& graph, CUgraphNode after, CUhostFn fn, void* data,
                        std::shared_ptr<const void> owner) {
  if (!fn) throw InvalidArgumentError("callback: the function is null");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_HOST);
  p.host.fn = fn;
  p.host.userData = data;
  auto info = std::make_shared<NodeInfo>();
  info->callback = owner;
  GraphNode n = add_node(graph, deps_of(after), p, info, "cuGraphAddNode (host callback)");
  graph->retain(std::move(owner));
  return n;
}
}  // namespace

GraphNode NodeMaker::record(const Event& event) const {
  open_graph("record");
  return add_event_node(graph_, after(), event, true);
}

GraphNode NodeMaker::wait(const Event& event) const {
  open_graph("wait");
  return add_event_node(graph_, after(), event, false);
}

GraphNode NodeMaker::callback(std::function<void()> fn) const {
  open_graph("callback");
  if (!fn) throw InvalidArgumentError("callback: the function is empty");
  auto owned = std::make_shared<const HostFunction>(std::move(fn));
  return add_host_node(graph_, after(), host_trampoline, const_cast<HostFunction*>(owned.get()), owned);
}

GraphNode NodeMaker::callback(CUhostFn fn, void* user_data, std::shared_ptr<const void> owner) const {
  open_graph("callback");
  return add_host_node(graph_, after(), fn, user_data, std::move(owner));
}

namespace {
GraphNode add_conditional(const GraphHandle& graph, CUgraphNode after, GraphConditionalType type,
                          GraphCondition condition, unsigned count, const char* operation) {
  CUgraphNodeParams p;
  CUcontext ctx = work_context();
  prepare_conditional(*graph, type, condition, count, ctx, p, operation);
  GraphNode n = add_node(graph, deps_of(after), p, nullptr, (std::string("cuGraphAddNode (") + operation + ")").c_str());
  auto info = conditional_info(type, condition, p.conditional.phGraph_out, count);
  info->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  GraphBox& top = graph->top();
  std::lock_guard lock(top.mutex);
  top.nodes[n.handle()] = std::move(info);
  return n;
}
}  // namespace

GraphNode NodeMaker::if_then(GraphCondition condition) const {
  open_graph("if_then");
  return add_conditional(graph_, after(), GraphConditionalType::IF, condition, 1, "if_then");
}
GraphNode NodeMaker::if_else(GraphCondition condition) const {
  open_graph("if_else");
  return add_conditional(graph_, after(), GraphConditionalType::IF, condition, 2, "if_else");
}
GraphNode NodeMaker::while_loop(GraphCondition condition) const {
  open_graph("while_loop");
  return add_conditional(graph_, after(), GraphConditionalType::WHILE, condition, 1, "while_loop");
}
GraphNode NodeMaker::switch_(GraphCondition condition, std::size_t count) const {
  open_graph("switch");
  if (count > 0xffffffffu) throw InvalidArgumentError("switch: count does not fit in 32 bits");
  return add_conditional(graph_, after(), GraphConditionalType::SWITCH, condition, static_cast<unsigned>(count), "switch");
}

}  // namespace detail

// ---- GraphDefinition ---------------------------------------------------------------------

GraphDefinition::GraphDefinition() : NodeMaker(cucore::detail::create_graph()) {}

GraphDefinition::GraphDefinition(std::shared_ptr<GraphBox> box) noexcept : NodeMaker(std::move(box)) {}

CUgraph GraphDefinition::handle() const noexcept { return graph_ ? graph_->graph : nullptr; }

bool GraphDefinition::is_valid() const noexcept { return graph_ && graph_->graph; }

GraphCondition GraphDefinition::create_condition(std::optional<unsigned> default_value) const {
  open_graph("create_condition");
  return detail::make_condition(*graph_, graph_->graph, detail::work_context(), default_value);
}

Graph GraphDefinition::instantiate(const GraphCompleteOptions& options) const {
  open_graph("instantiate");
  return detail::instantiate(graph_, options);
}

void GraphDefinition::debug_dot_print(const std::string& path, const GraphDebugPrintOptions& options) const {
  open_graph("debug_dot_print");
  detail::debug_dot_print(graph_->graph, path, options);
}

std::vector<GraphNode> GraphDefinition::nodes() const {
  open_graph("nodes");
  const auto& d = driver();
  std::size_t n = 0;
  check(d.cuGraphGetNodes(graph_->graph, nullptr, &n), "cuGraphGetNodes");
  std::vector<CUgraphNode> raw(n);
  if (n) check(d.cuGraphGetNodes(graph_->graph, raw.data(), &n), "cuGraphGetNodes");
  std::vector<GraphNode> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(cucore::detail::node_box(graph_, raw[i]));
  return out;
}

std::vector<std::pair<GraphNode, GraphNode>> GraphDefinition::edges() const {
  open_graph("edges");
  const auto& d = driver();
  std::size_t n = 0;
  check(d.cuGraphGetEdges(graph_->graph, nullptr, nullptr, nullptr, &n), "cuGraphGetEdges");
  std::vector<CUgraphNode> from(n), to(n);
  std::vector<CUgraphEdgeData> data(n);
  if (n) check(d.cuGraphGetEdges(graph_->graph, from.data(), to.data(), data.data(), &n), "cuGraphGetEdges");
  std::vector<std::pair<GraphNode, GraphNode>> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(GraphNode(cucore::detail::node_box(graph_, from[i])),
                     GraphNode(cucore::detail::node_box(graph_, to[i])));
  return out;
}

void GraphDefinition::retain(std::shared_ptr<const void> owner) const {
  open_graph("retain");
  graph_->retain(std::move(owner));
}

void GraphDefinition::retain(Buffer&& buffer) const {
  open_graph("retain");
  graph_->retain(std::make_shared<const Buffer>(std::move(buffer)));
}

// ---- GraphNode -----------------------------------------------------------------------------

bool GraphNode::is_valid() const noexcept { return graph_ && graph_->graph && node_ && node_->node; }

CUgraphNode GraphNode::handle() const noexcept { return node_ ? node_->node : nullptr; }

// The face is set and cleared by the module holding the GIL; relaxed atomics
// keep other threads' reads (a GraphNode destroyed elsewhere) well defined.
void GraphNode::set_face(const void* tag) const noexcept {
  if (!node_) return;
  node_->face.store(tag, std::memory_order_relaxed);
  node_->face_holder.store(this, std::memory_order_relaxed);
}

const void* GraphNode::face() const noexcept {
  if (!node_ || !node_->face_holder.load(std::memory_order_relaxed)) return nullptr;
  return node_->face.load(std::memory_order_relaxed);
}

namespace {
void drop_face(const GraphNode& n, cucore::detail::NodeBox* box) noexcept {
  const void* self = &n;
  if (box && box->face_holder.compare_exchange_strong(self, nullptr, std::memory_order_relaxed))
    box->face.store(nullptr, std::memory_order_relaxed);
}
}  // namespace

GraphNode::GraphNode(GraphNode&& other) noexcept : NodeMaker(std::move(other)) {
  drop_face(other, node_.get());  // its address no longer holds the node
}

GraphNode::~GraphNode() { drop_face(*this, node_.get()); }

GraphNode& GraphNode::operator=(const GraphNode& other) {
  if (this != &other) {
    drop_face(*this, node_.get());
    NodeMaker::operator=(other);
  }
  return *this;
}

GraphNode& GraphNode::operator=(GraphNode&& other) noexcept {
  if (this != &other) {
    drop_face(*this, node_.get());
    drop_face(other, other.node_.get());  // its address no longer holds the node
    NodeMaker::operator=(std::move(other));
  }
  return *this;
}

CUgraphNodeType GraphNode::type() const {
  if (!is_valid()) cucore::detail::throw_closed("GraphNode", "type");
  CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
  check(driver().cuGraphNodeGetType(node_->node, &t), "cuGraphNodeGetType");
  return t;
}

GraphDefinition GraphNode::graph() const {
  if (!graph_) cucore::detail::throw_closed("GraphNode", "graph");
  return GraphDefinition(graph_);
}

namespace {
// CUDA keeps every node and edge of a graph that holds memory allocation or
// free nodes; say so rather than leave the user with a bare NOT_SUPPORTED.
void check_removal(CUresult r, const char* call) {
  if (r == CUDA_ERROR_NOT_SUPPORTED)
    throw CudaError(r, std::string(call) + " (CUDA cannot remove nodes or edges from a graph that has memory "
                                           "allocation or free nodes)");
  check(r, call);
}
}  // namespace

void GraphNode::destroy() const {
  if (!is_valid()) return;
  check_removal(driver().cuGraphDestroyNode(node_->node), "cuGraphDestroyNode");
  GraphBox& top = graph_->top();
  {
    std::lock_guard lock(top.mutex);
    top.nodes.erase(node_->node);
  }
  cucore::detail::forget_node(*node_);  // every GraphNode of it sees the node gone
}

namespace {
std::vector<GraphNode> adjacent(const GraphHandle& graph, CUgraphNode node, bool forward) {
  const auto& d = driver();
  auto query = forward ? d.cuGraphNodeGetDependentNodes : d.cuGraphNodeGetDependencies;
  const char* call = forward ? "cuGraphNodeGetDependentNodes" : "cuGraphNodeGetDependencies";
  std::size_t n = 0;
  check(query(node, nullptr, nullptr, &n), call);
  std::vector<CUgraphNode> raw(n);
  std::vector<CUgraphEdgeData> data(n);
  if (n) check(query(node, raw.data(), data.data(), &n), call);
  std::vector<GraphNode> out;
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(cucore::detail::node_box(graph, raw[i]));
  return out;
}

void change_edges(const GraphHandle& graph, CUgraphNode node, std::span<const GraphNode> others, bool node_is_to,
                  bool add) {
  std::vector<CUgraphNode> from, to;
  for (const GraphNode& o : others) {
    if (!o.is_valid()) throw InvalidArgumentError("edge: a node is invalid (destroyed or default-made)");
    if (o.graph().handle() != graph->graph) throw InvalidArgumentError("edge: the nodes belong to different graphs");
    (node_is_to ? from : to).push_back(o.handle());
    (node_is_to ? to : from).push_back(node);
  }
  if (from.empty()) return;
  const auto& d = driver();
  if (add)
    check(d.cuGraphAddDependencies(graph->graph, from.data(), to.data(), nullptr, from.size()), "cuGraphAddDependencies");
  else
    check_removal(d.cuGraphRemoveDependencies(graph->graph, from.data(), to.data(), nullptr, from.size()),
                  "cuGraphRemoveDependencies");
}
}  // namespace

std::vector<GraphNode> GraphNode::pred() const {
  if (!is_valid()) cucore::detail::throw_closed("GraphNode", "pred");
  return adjacent(graph_, node_->node, false);
}
std::vector<GraphNode> GraphNode::succ() const {
  if (!is_valid()) cucore::detail::throw_closed("GraphNode", "succ");
  return adjacent(graph_, node_->node, true);
}
void GraphNode::add_pred(std::span<const GraphNode> nodes) const {
  if (!is_valid()) cucore::detail::throw_closed("GraphNode", "pred");
  change_edges(graph_, node_->node, nodes, true, true);
}
void GraphNode::remove_pred(std::span<const GraphNode> nodes) const {
  if (!is_valid()) cucore::detail::throw_closed("GraphNode", "pred");
  change_edges(graph_, node_->node, nodes, true, false);
}
void GraphNode::add_succ(std::span<const GraphNode> nodes) const {
  if (!is_valid()) cucore::detail::throw_closed("GraphNode", "succ");
  change_edges(graph_, node_->node, nodes, false, true);
}
void GraphNode::remove_succ(std::span<const GraphNode> nodes) const {
  if (!is_valid()) cucore::detail::throw_closed("GraphNode", "succ");
  change_edges(graph_, node_->node, nodes, false, false);
}

const detail::NodeInfo* GraphNode::info(CUgraphNodeType expected, const char* what) const {
  if (!is_valid()) cucore::detail::throw_closed("GraphNode", what);
  const CUgraphNodeType t = type();
  const bool ok = t == expected || (expected == CU_GRAPH_NODE_TYPE_EVENT_RECORD && t == CU_GRAPH_NODE_TYPE_WAIT_EVENT);
  if (!ok)
    throw InvalidArgumentError(std::string(what) + ": this is a " + detail::node_type_name(t) + " node, not a " +
                                detail::node_type_name(expected) + " node");
  GraphBox& top = graph_->top();
  std::lock_guard lock(top.mutex);
  auto it = top.nodes.find(node_->node);
  return it == top.nodes.end() ? nullptr : it->second.get();
}

namespace {
[[noreturn]] void unknown(const char* what) {
  throw InvalidArgumentError(std::string(what) + ": not known for a node cucore did not add");
}
}  // namespace

KernelNodeParams GraphNode::kernel_params() const {
  if (const auto* i = info(CU_GRAPH_NODE_TYPE_KERNEL, "kernel_params")) return i->kernel;
  // A captured kernel: its shape from the driver.
  CUDA_KERNEL_NODE_PARAMS k;
  std::memset(&k, 0, sizeof k);
  check(driver().cuGraphKernelNodeGetParams(node_->node, &k), "cuGraphKernelNodeGetParams");
  KernelNodeParams out;
  if (k.kern) out.kernel = Kernel::from_handle(k.kern);
  out.config.grid = Dim3(k.gridDimX, k.gridDimY, k.gridDimZ);
  out.config.block = Dim3(k.blockDimX, k.blockDimY, k.blockDimZ);
  out.config.shmem_size = k.sharedMemBytes;
  return out;
}

AllocNodeParams GraphNode::alloc_params() const {
  if (const auto* i = info(CU_GRAPH_NODE_TYPE_MEM_ALLOC, "alloc_params")) return i->alloc;
  CUDA_MEM_ALLOC_NODE_PARAMS a;
  std::memset(&a, 0, sizeof a);
  check(driver().cuGraphMemAllocNodeGetParams(node_->node, &a), "cuGraphMemAllocNodeGetParams");
  AllocNodeParams out;
  out.dptr = a.dptr;
  out.bytesize = a.bytesize;
  out.device_id = a.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? a.poolProps.location.id : -1;
  out.memory_type = a.poolProps.allocType == CU_MEM_ALLOCATION_TYPE_MANAGED ? GraphMemoryType::MANAGED
                    : a.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? GraphMemoryType::DEVICE
                                                                                : GraphMemoryType::HOST;
  for (std::size_t j = 0; j < a.accessDescCount; ++j) out.peer_access.push_back(a.accessDescs[j].location.id);
  return out;
}

CUdeviceptr GraphNode::free_dptr() const {
  if (const auto* i = info(CU_GRAPH_NODE_TYPE_MEM_FREE, "free_dptr")) return i->free_dptr;
  CUdeviceptr p = 0;
  check(driver().cuGraphMemFreeNodeGetParams(node_->node, &p), "cuGraphMemFreeNodeGetParams");
  return p;
}

MemsetNodeParams GraphNode::memset_params() const {
  if (const auto* i = info(CU_GRAPH_NODE_TYPE_MEMSET, "memset_params")) return i->memset;
  unknown("memset_params");
}

MemcpyNodeParams GraphNode::memcpy_params() const {
  if (const auto* i = info(CU_GRAPH_NODE_TYPE_MEMCPY, "memcpy_params")) return i->memcpy;
  unknown("memcpy_params");
}

Event GraphNode::event() const {
  if (const auto* i = info(CU_GRAPH_NODE_TYPE_EVENT_RECORD, "event"); i && i->event) return *i->event;
  unknown("event");
}

GraphDefinition GraphNode::child_graph() const {
  const auto* i = info(CU_GRAPH_NODE_TYPE_GRAPH, "child_graph");
  CUgraph g = i ? i->child : nullptr;
  if (!g) check(driver().cuGraphChildGraphNodeGetGraph(node_->node, &g), "cuGraphChildGraphNodeGetGraph");
  return GraphDefinition(cucore::detail::view_graph(g, graph_));
}

GraphCondition GraphNode::condition() const {
  if (const auto* i = info(CU_GRAPH_NODE_TYPE_CONDITIONAL, "condition")) return i->condition;
  unknown("condition");
}

GraphConditionalType GraphNode::conditional_type() const {
  if (const auto* i = info(CU_GRAPH_NODE_TYPE_CONDITIONAL, "conditional_type")) return i->conditional_type;
  unknown("conditional_type");
}

std::vector<GraphDefinition> GraphNode::branches() const {
  const auto* i = info(CU_GRAPH_NODE_TYPE_CONDITIONAL, "branches");
  std::vector<GraphDefinition> out;
  if (!i) return out;
  for (CUgraph g : i->branches) out.emplace_back(cucore::detail::view_graph(g, graph_));
  return out;
}

std::shared_ptr<const void> GraphNode::callback_owner() const {
  const auto* i = info(CU_GRAPH_NODE_TYPE_HOST, "callback");
  return i ? i->callback : nullptr;
}

// ---- definition-node updates ---------------------------------------------------------------

using detail::blank;
using detail::host_trampoline;
using detail::HostFunction;
using detail::NodeInfo;
using detail::work_context;

namespace {
// One cuGraphNodeSetParams; `info` (the node's new facts) replaces the old
// ones only once the driver took the parameters.
void set_params(const GraphNode& node, CUgraphNodeParams& params, std::shared_ptr<NodeInfo> info,
                const char* what) {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphNodeSetParams), 12020,
          "graph node updates (cuGraphNodeSetParams)");
  check(d.cuGraphNodeSetParams(node.handle(), &params), what);
  info->type = params.type;
  GraphBox& top = node.box()->graph->top();
  std::lock_guard lock(top.mutex);
  top.nodes[node.handle()] = std::move(info);
}

// The node's facts as cucore recorded them, copied (a node cucore did not add: blank).
std::shared_ptr<NodeInfo> copy_info(const GraphNode& node) {
  GraphBox& top = node.box()->graph->top();
  std::lock_guard lock(top.mutex);
  auto it = top.nodes.find(node.handle());
  return it == top.nodes.end() ? std::make_shared<NodeInfo>() : std::make_shared<NodeInfo>(*it->second);
}

void expect_type(const GraphNode& node, std::initializer_list<CUgraphNodeType> kinds, const char* what) {
  if (!node.is_valid()) cucore::detail::throw_closed("GraphNode", what);
  const CUgraphNodeType t = node.type();
  for (CUgraphNodeType k : kinds)
    if (t == k) return;
  throw InvalidArgumentError(std::string(what) + ": this is a " + detail::node_type_name(t) + " node, not a " +
                              detail::node_type_name(*kinds.begin()) + " node");
}
}  // namespace

void GraphNode::update_event(const Event& event) const {
  expect_type(*this, {CU_GRAPH_NODE_TYPE_EVENT_RECORD, CU_GRAPH_NODE_TYPE_WAIT_EVENT}, "update (event)");
  if (event.is_closed()) cucore::detail::throw_closed("Event", "update");
  const bool record = type() == CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  CUgraphNodeParams p = blank(record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT);
  if (record) p.eventRecord.event = event.handle();
  else p.eventWait.event = event.handle();
  auto info = copy_info(*this);
  info->event = event;
  graph_->retain(std::make_shared<const Event>(event));  // before the node can use it
  set_params(*this, p, std::move(info), record ? "cuGraphNodeSetParams (event record)" : "cuGraphNodeSetParams (event wait)");
}

void GraphNode::update_callback(std::function<void()> fn) const {
  if (!fn) throw InvalidArgumentError("update: the callback function is empty");
  auto owned = std::make_shared<const HostFunction>(std::move(fn));
  update_callback(host_trampoline, const_cast<HostFunction*>(owned.get()), owned);
}

void GraphNode::update_callback(CUhostFn fn, void* user_data, std::shared_ptr<const void> owner) const {
  expect_type(*this, {CU_GRAPH_NODE_TYPE_HOST}, "update (callback)");
  if (!fn) throw InvalidArgumentError("update: the callback function is null");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_HOST);
  p.host.fn = fn;
  p.host.userData = user_data;
  auto info = copy_info(*this);
  info->callback = owner;
  graph_->retain(std::move(owner));
  set_params(*this, p, std::move(info), "cuGraphNodeSetParams (host callback)");
}

void GraphNode::update_memset(const MemsetNodeParams& m) const {
  expect_type(*this, {CU_GRAPH_NODE_TYPE_MEMSET}, "update (memset)");
  if (m.element_size != 1 && m.element_size != 2 && m.element_size != 4)
    throw InvalidArgumentError("update: a memset element is 1, 2 or 4 bytes, not " + std::to_string(m.element_size));
  if (m.width == 0 || m.height == 0) throw InvalidArgumentError("update: memset width and height must be at least 1");
  if (m.height > 1 && m.pitch < m.width * m.element_size)
    throw InvalidArgumentError("update: memset pitch (" + std::to_string(m.pitch) + " bytes) is less than a row of " +
                                std::to_string(m.width * m.element_size) + " bytes");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_MEMSET);
  p.memset.dst = m.dptr;
  p.memset.pitch = m.height > 1 ? m.pitch : 0;
  p.memset.value = m.value;
  p.memset.elementSize = m.element_size;
  p.memset.width = m.width;
  p.memset.height = m.height;
  p.memset.ctx = work_context();
  auto info = copy_info(*this);
  info->memset = m;
  set_params(*this, p, std::move(info), "cuGraphNodeSetParams (memset)");
}

void GraphNode::update_memcpy(const MemcpyNodeParams& m) const {
  expect_type(*this, {CU_GRAPH_NODE_TYPE_MEMCPY}, "update (memcpy)");
  if (m.size == 0) throw InvalidArgumentError("update: memcpy size must be at least 1 byte");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_MEMCPY);
  p.memcpy.copyCtx = work_context();
  CUDA_MEMCPY3D& c = p.memcpy.copyParams;
  c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;  // as memcpy() adds them
  c.srcDevice = m.src;
  c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.dstDevice = m.dst;
  c.WidthInBytes = m.size;
  c.Height = 1;
  c.Depth = 1;
  auto info = copy_info(*this);
  info->memcpy = m;
  set_params(*this, p, std::move(info), "cuGraphNodeSetParams (memcpy)");
}

void GraphNode::update_child(const GraphDefinition& child) const {
  expect_type(*this, {CU_GRAPH_NODE_TYPE_GRAPH}, "update (child graph)");
  if (!child.is_valid()) cucore::detail::throw_closed("GraphDefinition", "update (the child)");
  if (&child.box()->top() == &graph_->top())
    throw InvalidArgumentError("update: the child graph must not be of this node's own graph hierarchy");
  child.box()->attach();  // the copy takes the child's references with it
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_GRAPH);
  p.graph.graph = child.handle();
  auto info = copy_info(*this);
  graph_->retain(child.box());
  set_params(*this, p, info, "cuGraphNodeSetParams (child graph)");
  CUgraph copy = nullptr;
  if (driver().cuGraphChildGraphNodeGetGraph(handle(), &copy) == CUDA_SUCCESS) info->child = copy;
}

void GraphNode::update_kernel(const LaunchConfig& config) const {
  expect_type(*this, {CU_GRAPH_NODE_TYPE_KERNEL}, "update (kernel)");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_KERNEL);
  // The driver's current parameters: its own copies of the arguments stay valid for the call.
  static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS) == sizeof(p.kernel), "the node's kernel parameters, one layout");
  check(driver().cuGraphKernelNodeGetParams(handle(), reinterpret_cast<CUDA_KERNEL_NODE_PARAMS*>(&p.kernel)),
        "cuGraphKernelNodeGetParams");
  detail::set_kernel_shape(p.kernel, config, "update");  // before the driver is told anything
  auto info = copy_info(*this);
  if (!info->kernel.kernel && p.kernel.kern) info->kernel.kernel = Kernel::from_handle(p.kernel.kern);
  info->kernel.config = config;
  set_params(*this, p, std::move(info), "cuGraphNodeSetParams (kernel)");
}

void GraphNode::update_packed_kernel(const LaunchConfig& config, const Kernel& kernel, void** args,
                              const ::cucore::detail::ArgDesc* descs, std::size_t count) const {
  expect_type(*this, {CU_GRAPH_NODE_TYPE_KERNEL}, "update (kernel)");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_KERNEL);
  detail::set_kernel_shape(p.kernel, config, "update");
  cucore::detail::KernelInfo& k = cucore::detail::checked_kernel(kernel, descs, count);
  p.kernel.kern = k.handle;
  p.kernel.ctx = work_context();
  p.kernel.kernelParams = count ? args : nullptr;  // copied by the driver
  auto info = copy_info(*this);
  info->kernel = {kernel, config};
  graph_->retain(std::make_shared<const Kernel>(kernel), kernel.info());
  set_params(*this, p, std::move(info), ("cuGraphNodeSetParams (kernel " + k.name + ")").c_str());
}

}  // namespace cucore::graph
