#pragma once
// Shared by the graph sources: what cucore knows of the nodes it added, a
// builder's state, and the steps explicit definitions and captures share.
#include <cucore/graph.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "handles/graph_handles.hpp"

namespace cucore::graph::detail {

// What a node was made with (the driver cannot tell all of it back).
struct NodeInfo {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  KernelNodeParams kernel;
  AllocNodeParams alloc;
  CUdeviceptr free_dptr = 0;
  MemsetNodeParams memset;
  MemcpyNodeParams memcpy;
  std::optional<Event> event;
  CUgraph child = nullptr;
  GraphCondition condition{};
  GraphConditionalType conditional_type = GraphConditionalType::IF;
  std::vector<CUgraph> branches;
  std::shared_ptr<const void> callback;
};

// The context graph work is made in: the current one, else device 0's
// primary context, made current (the runtime API's convention).
CUcontext work_context();

// Parameters of `type`, every other field zero.
CUgraphNodeParams blank(CUgraphNodeType type);
// A kernel node's launch shape from `config`, which is checked first (`op`
// names the call in the error): graph kernel nodes have no cluster or
// cooperative form. A node's creation and its updates (definition and
// executable) share it.
void set_kernel_shape(decltype(CUgraphNodeParams::kernel)& k, const LaunchConfig& config, const char* op);

// Adds a node of `params` after `deps` in `box`'s graph; `info` (may be null)
// is recorded for the node's accessors.
GraphNode add_node(const cucore::detail::GraphHandle& box, std::span<const CUgraphNode> deps,
                   CUgraphNodeParams& params, std::shared_ptr<NodeInfo> info, const char* what);

// A conditional handle for `graph` (in `box`'s hierarchy).
GraphCondition make_condition(cucore::detail::GraphBox& box, CUgraph graph, CUcontext ctx,
                              std::optional<unsigned> default_value);
// Checks the driver has the conditional kind and that `condition` was made
// for `box`'s hierarchy; fills `params` (the driver returns the bodies in
// params.conditional.phGraph_out).
void prepare_conditional(cucore::detail::GraphBox& box, GraphConditionalType type, GraphCondition condition,
                         unsigned count, CUcontext ctx, CUgraphNodeParams& params, const char* operation);
std::shared_ptr<NodeInfo> conditional_info(GraphConditionalType type, GraphCondition condition,
                                           const CUgraph* bodies, unsigned count);

Graph instantiate(const cucore::detail::GraphHandle& box, const GraphCompleteOptions& options);
void update(const cucore::detail::GraphExecBox& exec, const cucore::detail::GraphHandle& source);
void debug_dot_print(CUgraph graph, const std::string& path, const GraphDebugPrintOptions& options);

// "kernel node 'saxpy'", "memset node", ... for messages.
std::string describe_node(const cucore::detail::GraphBox& box, CUgraphNode node);
const char* node_type_name(CUgraphNodeType type) noexcept;

// A host function object, called by the driver through host_trampoline.
using HostFunction = std::function<void()>;
void CUDA_CB host_trampoline(void* fn) noexcept;

}  // namespace cucore::graph::detail

namespace cucore::detail {

enum class BuilderKind { primary, forked, body };

struct BuilderState {
  BuilderKind kind = BuilderKind::primary;
  Stream stream;
  // Where the graph's Owners and node facts go: a primary's own box (its
  // CUgraph set when the capture ends), a body's view of its body graph, a
  // forked builder's primary's box.
  GraphHandle box;
  std::shared_ptr<BuilderState> primary;  // a forked builder's
  bool building = false;                  // primary and body builders
  bool ended = false;                     // a capture has ended: the graph is complete
  bool joined = false;                    // a forked builder, joined back
  int open_forks = 0;                     // a primary's forked builders not yet joined
  std::vector<Stream> joined_streams;     // forked streams, kept until the capture ends

  explicit BuilderState(Stream s) : stream(std::move(s)) {}
  BuilderState& capture_owner() noexcept { return kind == BuilderKind::forked ? *primary : *this; }
  bool is_building() noexcept { return capture_owner().building && !joined; }
};

// The message text of the last call that broke a stream capture (a CUDA
// error of the capture family), for end_building's report; empty if none.
std::string last_capture_breaking_call();

}  // namespace cucore::detail
