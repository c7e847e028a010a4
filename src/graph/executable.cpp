// Executable-graph node views (Graph::operator[], cuda.core 1.2's graph[node]):
// parameter updates of one node of an executable graph through
// cuGraphExecNodeSetParams, and enabling or disabling it.
#include <cucore/errors.hpp>
#include <cucore/graph.hpp>

#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

#include "graph/graph_internal.hpp"
#include "launch/kernel_info.hpp"
#include "launch/launch_internal.hpp"
#include "loader/driver.hpp"

namespace cucore::graph {

using cucore::detail::check;
using cucore::detail::driver;
using cucore::detail::require;
using detail::blank;
using detail::work_context;

ExecutableGraphNode Graph::operator[](const GraphNode& node) const {
  if (!exec_) cucore::detail::throw_closed("Graph", "graph[node]");
  if (!node.is_valid()) cucore::detail::throw_closed("GraphNode", "graph[node]");
  switch (const CUgraphNodeType t = node.type()) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_GRAPH:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_HOST: break;
    default:
      throw InvalidArgumentError(std::string("graph[node]: a ") + detail::node_type_name(t) +
                                  " node has no executable updates (kernel, memcpy, memset, child graph, event and "
                                  "host callback nodes have)");
  }
  return ExecutableGraphNode(box_, node);
}

CUgraphExec ExecutableGraphNode::graph_handle() const noexcept { return exec_ ? exec_->exec : nullptr; }

CUgraphNodeType ExecutableGraphNode::type() const {
  if (!exec_) cucore::detail::throw_closed("ExecutableGraphNode", "type");
  return node_.type();
}

void ExecutableGraphNode::expect(std::initializer_list<CUgraphNodeType> kinds, const char* what) const {
  if (!exec_) cucore::detail::throw_closed("ExecutableGraphNode", what);  // default-made: views nothing
  if (!node_.is_valid()) cucore::detail::throw_closed("GraphNode", what);
  const CUgraphNodeType t = node_.type();
  for (CUgraphNodeType k : kinds)
    if (t == k) return;
  std::string kinds_text;
  for (CUgraphNodeType k : kinds) kinds_text += std::string(kinds_text.empty() ? "" : " or ") + detail::node_type_name(k);
  throw InvalidArgumentError(std::string(what) + ": this is a " + detail::node_type_name(t) + " node, not a " +
                              kinds_text + " node");
}

bool ExecutableGraphNode::is_enabled() const {
  expect({CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_MEMSET}, "is_enabled");
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphNodeGetEnabled), 11060, "cuGraphNodeGetEnabled");
  unsigned enabled = 0;
  check(d.cuGraphNodeGetEnabled(exec_->exec, node_.handle(), &enabled), "cuGraphNodeGetEnabled");
  return enabled != 0;
}

void ExecutableGraphNode::set_enabled(bool enabled) const {
  expect({CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_MEMSET},
         enabled ? "enable" : "disable");
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphNodeSetEnabled), 11060, "cuGraphNodeSetEnabled");
  check(d.cuGraphNodeSetEnabled(exec_->exec, node_.handle(), enabled ? 1u : 0u), "cuGraphNodeSetEnabled");
}

void ExecutableGraphNode::set_params(CUgraphNodeParams& params, std::vector<std::shared_ptr<const void>> keep,
                                     const char* what) const {
  const auto& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphExecNodeSetParams), 12020,
          "executable graph node updates (cuGraphExecNodeSetParams)");
  std::erase(keep, nullptr);
  const cucore::detail::GraphExecBox& box = *exec_;
  std::vector<std::shared_ptr<const void>> refused;
  CUresult r;
  {
    // Held across the call: the list only grows by what the driver took.
    std::lock_guard lock(box.mutex);
    if (!keep.empty() && !box.owners) require(nullptr, 11030, "graph user objects (cuUserObjectCreate)");
    const std::size_t before = box.owners ? box.owners->size() : 0;
    if (!keep.empty())  // kept before the driver can use them
      box.owners->insert(box.owners->end(), std::make_move_iterator(keep.begin()), std::make_move_iterator(keep.end()));
    r = d.cuGraphExecNodeSetParams(box.exec, node_.handle(), &params);
    if (r != CUDA_SUCCESS && box.owners && box.owners->size() > before) {
      refused.assign(std::make_move_iterator(box.owners->begin() + static_cast<std::ptrdiff_t>(before)),
                     std::make_move_iterator(box.owners->end()));
      box.owners->resize(before);
    }
  }
  refused.clear();  // released outside the lock: a Python owner's release takes the GIL
  check(r, what);
}

void ExecutableGraphNode::update_packed_kernel(const LaunchConfig& config, const Kernel& kernel, void** args,
                                               const ::cucore::detail::ArgDesc* descs, std::size_t count,
                                               std::shared_ptr<const void> keep) const {
  expect({CU_GRAPH_NODE_TYPE_KERNEL}, "update (kernel)");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_KERNEL);
  detail::set_kernel_shape(p.kernel, config, "update");
  cucore::detail::KernelInfo& k = cucore::detail::checked_kernel(kernel, descs, count);
  p.kernel.kern = k.handle;
  p.kernel.ctx = work_context();
  p.kernel.kernelParams = count ? args : nullptr;  // copied by the driver
  set_params(p, {std::make_shared<const Kernel>(kernel), std::move(keep)},
             ("cuGraphExecNodeSetParams (kernel " + k.name + ")").c_str());
}

void ExecutableGraphNode::update_memset(const MemsetNodeParams& m, std::shared_ptr<const void> keep) const {
  expect({CU_GRAPH_NODE_TYPE_MEMSET}, "update (memset)");
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
  set_params(p, {std::move(keep)}, "cuGraphExecNodeSetParams (memset)");
}

void ExecutableGraphNode::update_memcpy(const MemcpyNodeParams& m, std::shared_ptr<const void> keep) const {
  expect({CU_GRAPH_NODE_TYPE_MEMCPY}, "update (memcpy)");
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
  set_params(p, {std::move(keep)}, "cuGraphExecNodeSetParams (memcpy)");
}

void ExecutableGraphNode::update_child(const GraphDefinition& child) const {
  expect({CU_GRAPH_NODE_TYPE_GRAPH}, "update (child graph)");
  if (!child.is_valid()) cucore::detail::throw_closed("GraphDefinition", "update (the child)");
  child.box()->attach();  // the copy takes the child's references with it
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_GRAPH);
  p.graph.graph = child.handle();
  work_context();
  // The child's hierarchy too: a view's references are on its root, which the copy does not take.
  set_params(p, {child.box()}, "cuGraphExecNodeSetParams (child graph)");
}

void ExecutableGraphNode::update_event(const Event& event) const {
  expect({CU_GRAPH_NODE_TYPE_EVENT_RECORD, CU_GRAPH_NODE_TYPE_WAIT_EVENT}, "update (event)");
  if (event.is_closed()) cucore::detail::throw_closed("Event", "update");
  const bool record = node_.type() == CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  CUgraphNodeParams p = blank(record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT);
  if (record) p.eventRecord.event = event.handle();
  else p.eventWait.event = event.handle();
  work_context();
  set_params(p, {std::make_shared<const Event>(event)},
             record ? "cuGraphExecNodeSetParams (event record)" : "cuGraphExecNodeSetParams (event wait)");
}

void ExecutableGraphNode::update_callback(std::function<void()> fn) const {
  if (!fn) throw InvalidArgumentError("update: the callback function is empty");
  auto owned = std::make_shared<const detail::HostFunction>(std::move(fn));
  update_callback(detail::host_trampoline, const_cast<detail::HostFunction*>(owned.get()), owned);
}

void ExecutableGraphNode::update_callback(CUhostFn fn, void* user_data, std::shared_ptr<const void> owner) const {
  expect({CU_GRAPH_NODE_TYPE_HOST}, "update (callback)");
  if (!fn) throw InvalidArgumentError("update: the callback function is null");
  CUgraphNodeParams p = blank(CU_GRAPH_NODE_TYPE_HOST);
  p.host.fn = fn;
  p.host.userData = user_data;
  work_context();
  set_params(p, {std::move(owner)}, "cuGraphExecNodeSetParams (host callback)");
}

}  // namespace cucore::graph
