#pragma once
// CUDA graphs (cuda.core's cuda.core.graph): record work once, replay it with
// one launch.
//
//   GraphBuilder   builds a graph by stream capture: Stream::create_graph_builder()
//                  or Device::create_graph_builder(); begin_building(), launch
//                  into it as into a stream, end_building(), complete() -> Graph.
//   GraphDefinition builds a graph node by node (kernel, memcpy, memset,
//                  allocate/deallocate, event record/wait, host callback, empty,
//                  child graph, join, conditionals); instantiate() -> Graph.
//   Graph          the executable graph: launch(stream), upload(stream),
//                  update(source) of the same topology, close(); graph[node]
//                  views a definition node in it (ExecutableGraphNode), whose
//                  parameters can be replaced without instantiating again.
//   GraphMemoryResource  allocations made inside a graph under capture.
//
//   auto gb = stream.create_graph_builder().begin_building();
//   for (int i = 0; i < 100; ++i) cucore::launch(gb, cfg, step, x, n);
//   cucore::graph::Graph g = gb.end_building().complete();
//   g.launch(stream);
//
// Lifetimes. Kernel arguments are copied when captured or added. A graph keeps
// alive everything its nodes use that cucore can share: the kernels (and so
// their loaded code), events, child graphs, host callbacks and whatever was
// given to retain() (a Buffer moved in, a Python object). They ride on CUDA
// user objects of the graph from the moment the CUgraph exists, so every copy
// (a clone by another library, an executable graph, launches still in flight)
// keeps them too; they are released on a cucore thread once the driver lets
// go (never on the driver's own thread, where CUDA calls are forbidden).
// C++ Buffers are move-only: the caller keeps a Buffer a graph reads, or moves
// it in with retain().
//
// Conditionals (CUDA 12.4+ for if/while, 12.8+ for if-else and switch): a
// GraphCondition is the 8-byte CUgraphConditionalHandle, so it is passed to a
// kernel as a launch argument as it is; device code sets it with
// cudaGraphSetConditional.
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cucore/buffer.hpp>
#include <cucore/event.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

namespace cucore {

class Device;

namespace detail {
struct GraphBox;
struct GraphExecBox;
struct NodeBox;
struct BuilderState;
}  // namespace detail

namespace graph {

class ExecutableGraphNode;
class Graph;
class GraphBuilder;
class GraphDefinition;
class GraphNode;

// cuda.core's GraphCompleteOptions (cuGraphInstantiateWithParams flags).
struct GraphCompleteOptions {
  bool auto_free_on_launch = false;      // free the graph's allocations before each relaunch
  std::optional<StreamRef> upload_stream{};  // upload on this stream right after instantiating
  bool device_launch = false;            // launchable from the device; excludes auto_free_on_launch
  bool use_node_priority = false;        // per-node priorities instead of the launch stream's
};

// cuda.core's GraphDebugPrintOptions (CU_GRAPH_DEBUG_DOT_FLAGS_*).
struct GraphDebugPrintOptions {
  bool verbose = false;
  bool runtime_types = false;
  bool kernel_node_params = false;
  bool memcpy_node_params = false;
  bool memset_node_params = false;
  bool host_node_params = false;
  bool event_node_params = false;
  bool ext_semas_signal_node_params = false;
  bool ext_semas_wait_node_params = false;
  bool kernel_node_attributes = false;
  bool handles = false;
  bool mem_alloc_node_params = false;
  bool mem_free_node_params = false;
  bool batch_mem_op_node_params = false;
  bool extra_topo_info = false;
  bool conditional_node_params = false;
  unsigned to_flags() const noexcept;
};

enum class GraphMemoryType { DEVICE, HOST, MANAGED };
enum class GraphConditionalType { IF, WHILE, SWITCH };
const char* to_string(GraphMemoryType type) noexcept;       // "device", "host", "managed"
const char* to_string(GraphConditionalType type) noexcept;  // "if", "while", "switch"

// A conditional node's variable: the driver's CUgraphConditionalHandle and
// nothing else, so it goes to a kernel as a launch argument unchanged.
struct GraphCondition {
  CUgraphConditionalHandle handle = 0;
  friend bool operator==(const GraphCondition&, const GraphCondition&) = default;
};
static_assert(sizeof(GraphCondition) == sizeof(CUgraphConditionalHandle));

// How a capture treats potentially unsafe calls (cuStreamBeginCapture modes),
// by cuda.core's names: "global", "thread_local", "relaxed" (the default).
// Any other name is std::invalid_argument.
CUstreamCaptureMode capture_mode(std::string_view mode);

// ---- executable graphs --------------------------------------------------------

class Graph {
 public:
  Graph() noexcept = default;  // closed

  // Enqueues one run of the graph on `stream` (one cuGraphLaunch).
  void launch(StreamRef stream) const {
    if (!exec_ || ::cucore::detail::is_special_or_closed(stream.handle())) [[unlikely]]
      return launch_slow(stream);
    launch_fast(stream.handle());
  }
  // Uploads the graph's work to the device ahead of its first launch.
  void upload(StreamRef stream) const;
  // Replaces every node's parameters with those of `source`, which must have
  // the same topology. On a mismatch nothing changes and CudaError names the
  // first node that differs and why.
  void update(const GraphBuilder& source);
  void update(const GraphDefinition& source);

  // A view of `node`, a node of the definition this graph was made from, in
  // this executable graph (cuda.core 1.2's graph[node]): its updates change
  // what this graph's future launches do. Kernel, memcpy, memset, child graph,
  // event record/wait and host callback nodes; std::invalid_argument for
  // another kind, ClosedError for a destroyed node or a closed graph. The
  // driver checks the node belongs to this graph when an update is made.
  ExecutableGraphNode operator[](const GraphNode& node) const;

  // Releases this share (idempotent); the executable graph is destroyed once
  // none is left (launches in flight complete first).
  void close() noexcept;
  bool is_closed() const noexcept { return exec_ == nullptr; }
  CUgraphExec handle() const noexcept { return exec_; }

  // Internal.
  explicit Graph(std::shared_ptr<const ::cucore::detail::GraphExecBox> box) noexcept;

 private:
  void launch_fast(CUstream stream) const;
  void launch_slow(StreamRef stream) const;
  std::shared_ptr<const ::cucore::detail::GraphExecBox> box_;
  CUgraphExec exec_ = nullptr;
};

// ---- explicit graph construction --------------------------------------------

struct GraphAllocOptions {
  std::optional<int> device{};                        // the current context's device when empty
  GraphMemoryType memory_type = GraphMemoryType::DEVICE;
  std::vector<int> peer_access{};                     // devices given read-write access
};

// What a node does, as it was added (or as the driver reports it).
struct KernelNodeParams {
  Kernel kernel{};
  LaunchConfig config{};
};
struct AllocNodeParams {
  CUdeviceptr dptr = 0;
  std::size_t bytesize = 0;
  int device_id = -1;
  GraphMemoryType memory_type = GraphMemoryType::DEVICE;
  std::vector<int> peer_access{};
};
struct MemsetNodeParams {
  CUdeviceptr dptr = 0;
  unsigned value = 0;
  unsigned element_size = 1;  // bytes: 1, 2 or 4
  std::size_t width = 0;      // elements per row
  std::size_t height = 1;
  std::size_t pitch = 0;      // bytes between rows
};
struct MemcpyNodeParams {
  CUdeviceptr dst = 0;
  CUdeviceptr src = 0;
  std::size_t size = 0;
};

namespace detail {
struct NodeInfo;
// The node builders shared by GraphDefinition (entry nodes: no dependency)
// and GraphNode (nodes that depend on it).
class NodeMaker {
 public:
  GraphNode empty() const;
  // An empty node depending on `nodes` (and on this node, for a GraphNode).
  GraphNode join(std::span<const GraphNode> nodes) const;
  GraphNode join(std::initializer_list<GraphNode> nodes) const;

  // A kernel node; arguments are packed and checked as launch() does, and
  // copied into the node. Clusters and cooperative launches are refused.
  template <typename... Args>
    requires(!::cucore::detail::is_erased_pack_v<Args...>)
  GraphNode launch(const LaunchConfig& config, const Kernel& kernel, Args&&... args) const;
  GraphNode launch(const LaunchConfig& config, const Kernel& kernel, const KernelArgs& args) const;

  GraphNode allocate(std::size_t size, const GraphAllocOptions& options = {}) const;
  GraphNode deallocate(CUdeviceptr dptr) const;
  // Fills `width` elements (× `height` rows, `pitch` bytes apart) with a 1-,
  // 2- or 4-byte value, the width of the value's type.
  GraphNode memset(CUdeviceptr dst, std::uint8_t value, std::size_t width, std::size_t height = 1,
                   std::size_t pitch = 0) const;
  GraphNode memset(CUdeviceptr dst, std::uint16_t value, std::size_t width, std::size_t height = 1,
                   std::size_t pitch = 0) const;
  GraphNode memset(CUdeviceptr dst, std::uint32_t value, std::size_t width, std::size_t height = 1,
                   std::size_t pitch = 0) const;
  GraphNode memset(const Buffer& dst, std::uint8_t value, std::size_t width, std::size_t height = 1,
                   std::size_t pitch = 0) const;
  GraphNode memset(const Buffer& dst, std::uint16_t value, std::size_t width, std::size_t height = 1,
                   std::size_t pitch = 0) const;
  GraphNode memset(const Buffer& dst, std::uint32_t value, std::size_t width, std::size_t height = 1,
                   std::size_t pitch = 0) const;
  // Copies `size` bytes between device or pinned host memory.
  GraphNode memcpy(CUdeviceptr dst, CUdeviceptr src, std::size_t size) const;
  GraphNode memcpy(const Buffer& dst, const Buffer& src, std::size_t size) const;
  // A child graph node holding a copy of `child` (which must hold no
  // allocation, free or conditional node).
  GraphNode embed(const GraphDefinition& child) const;
  GraphNode record(const Event& event) const;
  GraphNode wait(const Event& event) const;
  // A host function run when the graph reaches the node; it must not call CUDA.
  GraphNode callback(std::function<void()> fn) const;
  // A raw host function; `owner` (what `fn` and `user_data` need) is kept with the graph.
  GraphNode callback(CUhostFn fn, void* user_data, std::shared_ptr<const void> owner = {}) const;

  // Conditional nodes over `condition` (made by this graph's create_condition):
  // their bodies are GraphDefinitions reached through conditional_params().
  GraphNode if_then(GraphCondition condition) const;
  GraphNode if_else(GraphCondition condition) const;
  GraphNode while_loop(GraphCondition condition) const;
  GraphNode switch_(GraphCondition condition, std::size_t count) const;

  // Internal: a kernel node from packed arguments (checked like a launch).
  GraphNode add_kernel(const LaunchConfig& config, const Kernel& kernel, void** args,
                       const ::cucore::detail::ArgDesc* descs, std::size_t count) const;

 protected:
  NodeMaker() noexcept = default;
  explicit NodeMaker(std::shared_ptr<::cucore::detail::GraphBox> graph) noexcept : graph_(std::move(graph)) {}
  explicit NodeMaker(std::shared_ptr<::cucore::detail::NodeBox> node) noexcept;
  // The graph, open, and for a GraphNode the node, not destroyed (ClosedError naming `operation`).
  const ::cucore::detail::GraphBox& open_graph(const char* operation) const;
  // The node new nodes depend on: none for a GraphDefinition, this node for a GraphNode.
  CUgraphNode after() const noexcept;
  std::shared_ptr<::cucore::detail::GraphBox> graph_;
  std::shared_ptr<::cucore::detail::NodeBox> node_;  // null for a GraphDefinition (entry nodes)
};
}  // namespace detail

class GraphDefinition : public detail::NodeMaker {
 public:
  // A new, empty graph (cuGraphCreate).
  GraphDefinition();

  CUgraph handle() const noexcept;
  // False once the builder or graph it viewed is gone (a default-made or
  // moved-from definition holds none).
  bool is_valid() const noexcept;

  // A condition variable for this graph's conditional nodes; with a default
  // value, it is set to it at the start of every launch.
  GraphCondition create_condition(std::optional<unsigned> default_value = std::nullopt) const;

  Graph instantiate(const GraphCompleteOptions& options = {}) const;
  void debug_dot_print(const std::string& path, const GraphDebugPrintOptions& options = {}) const;
  std::vector<GraphNode> nodes() const;
  std::vector<std::pair<GraphNode, GraphNode>> edges() const;  // (from, to)

  // Keeps `owner` (or the Buffer) alive as long as this graph and every copy
  // of it (clones, executable graphs, their launches): on the CUgraph's
  // user objects at once.
  void retain(std::shared_ptr<const void> owner) const;
  void retain(Buffer&& buffer) const;

  friend bool operator==(const GraphDefinition& a, const GraphDefinition& b) noexcept {
    return a.handle() == b.handle();
  }

  // Internal: a view of `graph` (a body or child graph) kept alive by `box`.
  explicit GraphDefinition(std::shared_ptr<::cucore::detail::GraphBox> box) noexcept;
  const std::shared_ptr<::cucore::detail::GraphBox>& box() const noexcept { return graph_; }
};

// A node of a definition. Every GraphNode of one CUgraphNode (copies, and
// those nodes(), edges(), pred() and succ() give) shares one state while any
// of them lives: destroy() through one invalidates them all, and == compares
// that state (so a destroyed node still equals itself and nothing else).
class GraphNode : public detail::NodeMaker {
 public:
  GraphNode() noexcept = default;  // invalid

  CUgraphNode handle() const noexcept;  // null once destroyed
  CUgraphNodeType type() const;
  GraphDefinition graph() const;
  bool is_valid() const noexcept;
  // Removes the node and its edges (idempotent); every GraphNode of it is then invalid.
  void destroy() const;

  std::vector<GraphNode> pred() const;  // the nodes it depends on
  std::vector<GraphNode> succ() const;  // the nodes that depend on it
  void add_pred(std::span<const GraphNode> nodes) const;
  void remove_pred(std::span<const GraphNode> nodes) const;
  void add_succ(std::span<const GraphNode> nodes) const;
  void remove_succ(std::span<const GraphNode> nodes) const;

  // What the node does; std::invalid_argument when it is not of that kind.
  KernelNodeParams kernel_params() const;
  AllocNodeParams alloc_params() const;
  CUdeviceptr free_dptr() const;
  MemsetNodeParams memset_params() const;
  MemcpyNodeParams memcpy_params() const;
  Event event() const;              // event record and wait nodes
  GraphDefinition child_graph() const;
  GraphCondition condition() const;  // conditional nodes
  GraphConditionalType conditional_type() const;
  std::vector<GraphDefinition> branches() const;
  // The host function object of a callback node (empty for a raw CUhostFn).
  std::shared_ptr<const void> callback_owner() const;

  // Changes what the node does in graphs instantiated from now on (cuda.core
  // 1.2's update(); CUDA 12.2+, cuGraphNodeSetParams); executable graphs made
  // before keep what they had. What the new parameters use (events, kernels,
  // callbacks, child graphs) is kept by the graph. std::invalid_argument for a
  // node of another kind; on a driver refusal the node is as it was.
  void update_event(const Event& event) const;  // event record and wait nodes
  void update_callback(std::function<void()> fn) const;
  void update_callback(CUhostFn fn, void* user_data, std::shared_ptr<const void> owner = {}) const;
  void update_memset(const MemsetNodeParams& params) const;  // pitch is ignored for one row
  void update_memcpy(const MemcpyNodeParams& params) const;
  // A copy of `child` replaces the node's graph.
  void update_child(const GraphDefinition& child) const;
  // New dimensions; the kernel and its arguments stay.
  void update_kernel(const LaunchConfig& config) const;
  // A new launch: arguments packed and checked as launch() does.
  template <typename... Args>
    requires(!::cucore::detail::is_erased_pack_v<Args...>)
  void update_kernel(const LaunchConfig& config, const Kernel& kernel, Args&&... args) const;
  // Internal: the same from packed arguments.
  void update_packed_kernel(const LaunchConfig& config, const Kernel& kernel, void** args,
                     const ::cucore::detail::ArgDesc* descs, std::size_t count) const;

  friend bool operator==(const GraphNode& a, const GraphNode& b) noexcept { return a.node_ == b.node_; }

  GraphNode(const GraphNode&) = default;
  GraphNode(GraphNode&& other) noexcept;
  GraphNode& operator=(const GraphNode& other);
  GraphNode& operator=(GraphNode&& other) noexcept;
  ~GraphNode();

  // Internal: the node's shared state (its address identifies the node).
  explicit GraphNode(std::shared_ptr<::cucore::detail::NodeBox> box) noexcept : NodeMaker(std::move(box)) {}
  const std::shared_ptr<::cucore::detail::NodeBox>& box() const noexcept { return node_; }
  // Internal, for the Python module's one object per node: registers this
  // GraphNode as its node's face with an opaque `tag` (the Python object
  // holding it); face() is the tag while that GraphNode lives unchanged, and
  // null once it is destroyed or assigned (it never outlives its holder).
  void set_face(const void* tag) const noexcept;
  const void* face() const noexcept;

 private:
  const detail::NodeInfo* info(CUgraphNodeType expected, const char* what) const;
};

// A node of an executable graph: the definition node it was instantiated from,
// viewed in that graph (Graph::operator[]). Its updates replace the node's
// parameters for the executable graph's future launches without instantiating
// it again (CUDA 12.2+, cuGraphExecNodeSetParams); launches in flight, the
// definition and other executable graphs keep what they had. Each update takes
// the node's complete parameters. What they use (kernels, arguments' owners,
// operands' owners, events, callbacks, child graphs) is kept until the
// executable graph and its launches are done; a replaced one stays kept until
// then too, or until a whole-graph update (CUDA cannot tell which launch still
// reads it). A refused update (cucore's checks or the driver's, e.g. a node
// of another graph: CudaError) changes nothing and keeps nothing new. The view
// keeps the executable graph and the definition node alive.
class ExecutableGraphNode {
 public:
  ExecutableGraphNode() noexcept = default;  // views nothing

  const GraphNode& node() const noexcept { return node_; }  // the definition node
  CUgraphExec graph_handle() const noexcept;
  CUgraphNodeType type() const;  // the definition node's kind

  // Kernel, memcpy and memset nodes only (cuGraphNodeSetEnabled): a disabled
  // node does nothing when the graph runs.
  bool is_enabled() const;
  void enable() const { set_enabled(true); }
  void disable() const { set_enabled(false); }
  void set_enabled(bool enabled) const;

  // A new launch: arguments packed and checked as launch() does; no cluster
  // or cooperative configuration. `keep` is kept with the parameters.
  template <typename... Args>
    requires(!::cucore::detail::is_erased_pack_v<Args...>)
  void update_kernel(const LaunchConfig& config, const Kernel& kernel, Args&&... args) const;
  void update_packed_kernel(const LaunchConfig& config, const Kernel& kernel, void** args,
                            const ::cucore::detail::ArgDesc* descs, std::size_t count,
                            std::shared_ptr<const void> keep = {}) const;
  // In the current context, which must be the node's (the driver refuses another).
  void update_memset(const MemsetNodeParams& params, std::shared_ptr<const void> keep = {}) const;
  void update_memcpy(const MemcpyNodeParams& params, std::shared_ptr<const void> keep = {}) const;
  // The node runs a copy of `child` (of the same shape as its graph).
  void update_child(const GraphDefinition& child) const;
  void update_event(const Event& event) const;  // event record and wait nodes
  void update_callback(std::function<void()> fn) const;
  void update_callback(CUhostFn fn, void* user_data, std::shared_ptr<const void> owner = {}) const;

  // Internal (Graph::operator[]).
  ExecutableGraphNode(std::shared_ptr<const ::cucore::detail::GraphExecBox> exec, GraphNode node) noexcept
      : exec_(std::move(exec)), node_(std::move(node)) {}

 private:
  void expect(std::initializer_list<CUgraphNodeType> kinds, const char* what) const;
  // One cuGraphExecNodeSetParams; `keep` joins the executable graph's Owners
  // first and leaves them again when the driver refuses.
  void set_params(CUgraphNodeParams& params, std::vector<std::shared_ptr<const void>> keep, const char* what) const;
  std::shared_ptr<const ::cucore::detail::GraphExecBox> exec_;
  GraphNode node_;
};

// ---- stream capture ---------------------------------------------------------------

class GraphBuilder {
 public:
  GraphBuilder() noexcept = default;  // closed

  // Starts capturing the builder's stream (mode: capture_mode()).
  GraphBuilder& begin_building(std::string_view mode = "relaxed");
  // Ends the capture; the builder then holds its graph.
  GraphBuilder& end_building();
  bool is_building() const;
  bool is_join_required() const;  // a builder made by split(): join it before ending
  bool is_closed() const noexcept { return state_ == nullptr; }

  Graph complete(const GraphCompleteOptions& options = {}) const;
  void debug_dot_print(const std::string& path, const GraphDebugPrintOptions& options = {}) const;
  // The captured graph as a definition (after end_building; for the body of a
  // conditional, also before begin_building); never for a split-off builder.
  GraphDefinition graph_definition() const;
  // The stream captured into: pass it to anything that takes a stream.
  const Stream& stream() const;

  // `count` builders that continue from here: this one first, then count-1
  // new ones on streams of their own; join() them back before ending.
  std::vector<GraphBuilder> split(std::size_t count);
  // The first builder, continuing after all of them; the others are closed.
  static GraphBuilder join(std::span<GraphBuilder> builders);

  GraphCondition create_condition(std::optional<unsigned> default_value = std::nullopt);
  // A conditional node at this point of the capture; the returned builders
  // capture its bodies (begin_building() each, add work, end_building()).
  GraphBuilder if_then(GraphCondition condition);
  std::pair<GraphBuilder, GraphBuilder> if_else(GraphCondition condition);
  GraphBuilder while_loop(GraphCondition condition);
  std::vector<GraphBuilder> switch_(GraphCondition condition, std::size_t count);
  // A child graph node holding a copy of `child`'s graph (which has ended building).
  void embed(const GraphBuilder& child);
  // A host function node; it must not call CUDA.
  void callback(std::function<void()> fn);
  void callback(CUhostFn fn, void* user_data, std::shared_ptr<const void> owner = {});

  // Keeps `owner` (or the Buffer) alive with the graph (see the header's top).
  void retain(std::shared_ptr<const void> owner) const;
  void retain(Buffer&& buffer) const;

  // Ends a capture still running (its graph is dropped) and releases the
  // builder's share (idempotent).
  void close() noexcept;

  // Internal: the stream to launch on, after checking the builder is building;
  // the kernel is retained by the graph.
  StreamRef launch_stream(const Kernel& kernel) const;
  explicit GraphBuilder(std::shared_ptr<::cucore::detail::BuilderState> state) noexcept : state_(std::move(state)) {}
  const std::shared_ptr<::cucore::detail::BuilderState>& state() const noexcept { return state_; }

 private:
  ::cucore::detail::BuilderState& open(const char* operation) const;
  std::vector<GraphBuilder> conditional(GraphConditionalType type, GraphCondition condition, unsigned count,
                                        const char* operation);
  std::shared_ptr<::cucore::detail::BuilderState> state_;
};

// A builder capturing `stream` (which it shares).
GraphBuilder make_graph_builder(const Stream& stream);

// ---- graph memory --------------------------------------------------------------

// Used/reserved memory of the device's graph allocations, in bytes.
struct GraphMemoryResourceAttributes {
  std::uint64_t reserved_mem_current = 0;
  std::uint64_t reserved_mem_high = 0;
  std::uint64_t used_mem_current = 0;
  std::uint64_t used_mem_high = 0;
};

// Memory allocated inside a graph: allocate() on a stream under capture (a
// GraphBuilder's stream) adds an allocation node; freeing it on a capturing
// stream adds a free node, otherwise it is freed stream-ordered after the
// graph's launch. Allocating on a stream that is not capturing throws.
class GraphMemoryResource : public MemoryResource {
 public:
  explicit GraphMemoryResource(const Device& device);
  explicit GraphMemoryResource(int device_id);

  GraphMemoryResourceAttributes attributes() const;
  // The high watermarks can only be reset (to the current usage).
  void reset_used_mem_high() const;
  void reset_reserved_mem_high() const;
  // Returns memory cached for graph allocations and not in use to the OS.
  void trim() const;
};

// ---- node builders' templates ----------------------------------------------------

template <typename... Args>
  requires(!::cucore::detail::is_erased_pack_v<Args...>)
GraphNode detail::NodeMaker::launch(const LaunchConfig& config, const Kernel& kernel, Args&&... args) const {
  (::cucore::detail::check_argument_type<Args>(), ...);
  constexpr std::size_t n = sizeof...(Args);
  static constexpr ::cucore::detail::ArgDesc descs[n ? n : 1] = {
      ::cucore::detail::arg_desc<std::remove_cvref_t<Args>>()...};
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    [[maybe_unused]] CUdeviceptr slots[n ? n : 1];
    void* pointers[n ? n : 1] = {::cucore::detail::arg_address(kernel, I, args, slots[I])...};
    return add_kernel(config, kernel, pointers, descs, n);
  }(std::index_sequence_for<Args...>{});
}

template <typename... Args>
  requires(!::cucore::detail::is_erased_pack_v<Args...>)
void GraphNode::update_kernel(const LaunchConfig& config, const Kernel& kernel, Args&&... args) const {
  (::cucore::detail::check_argument_type<Args>(), ...);
  constexpr std::size_t n = sizeof...(Args);
  static constexpr ::cucore::detail::ArgDesc descs[n ? n : 1] = {
      ::cucore::detail::arg_desc<std::remove_cvref_t<Args>>()...};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    [[maybe_unused]] CUdeviceptr slots[n ? n : 1];
    void* pointers[n ? n : 1] = {::cucore::detail::arg_address(kernel, I, args, slots[I])...};
    update_packed_kernel(config, kernel, pointers, descs, n);
  }(std::index_sequence_for<Args...>{});
}

template <typename... Args>
  requires(!::cucore::detail::is_erased_pack_v<Args...>)
void ExecutableGraphNode::update_kernel(const LaunchConfig& config, const Kernel& kernel, Args&&... args) const {
  (::cucore::detail::check_argument_type<Args>(), ...);
  constexpr std::size_t n = sizeof...(Args);
  static constexpr ::cucore::detail::ArgDesc descs[n ? n : 1] = {
      ::cucore::detail::arg_desc<std::remove_cvref_t<Args>>()...};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    [[maybe_unused]] CUdeviceptr slots[n ? n : 1];
    void* pointers[n ? n : 1] = {::cucore::detail::arg_address(kernel, I, args, slots[I])...};
    update_packed_kernel(config, kernel, pointers, descs, n);
  }(std::index_sequence_for<Args...>{});
}

}  // namespace graph

// ---- launching into a GraphBuilder: as into its stream, the kernel kept by the graph

template <typename... Args>
  requires(!detail::is_erased_pack_v<Args...>)
void launch(const graph::GraphBuilder& builder, const LaunchConfig& config, const Kernel& kernel, Args&&... args) {
  launch(builder.launch_stream(kernel), config, kernel, std::forward<Args>(args)...);
}
template <typename... Params, typename... Args>
  requires(sizeof...(Params) == sizeof...(Args))
void launch(const graph::GraphBuilder& builder, const LaunchConfig& config, const TypedKernel<void(Params...)>& kernel,
            Args&&... args) {
  launch(builder.launch_stream(kernel.kernel()), config, kernel, std::forward<Args>(args)...);
}
inline void launch(const graph::GraphBuilder& builder, const LaunchConfig& config, const Kernel& kernel,
                   const KernelArgs& args) {
  launch(builder.launch_stream(kernel), config, kernel, args);
}
inline void launch(const graph::GraphBuilder& builder, const LaunchConfig& config, const Kernel& kernel,
                   std::span<void* const> args) {
  launch(builder.launch_stream(kernel), config, kernel, args);
}

}  // namespace cucore
