#pragma once
// Graph boxes (the handle layer's, as handles.hpp): a CUgraph's box and a
// CUgraphExec's box.
//
// What a graph's nodes use (kernels and so their libraries, events, child
// graphs, host callbacks, retained Buffers and Python objects) is kept as
// Owners on CUDA user objects of the root CUgraph, attached as soon as the
// CUgraph exists: when a node is added to a definition, or when a capture
// ends. So the driver itself keeps them for every copy of the graph made by
// anyone (cuGraphClone on the handle, a child graph node, an executable graph,
// a graph updated from it), and lets them go only once the last copy is
// destroyed and its launches have finished. The user object's destructor runs
// on a driver thread where CUDA calls are forbidden, so it only queues the
// Owners; a cucore thread releases them (release_later).
//
// A body graph of a conditional node, or the copy inside a child graph node,
// is a view: a box that does not own its CUgraph and holds its root's box,
// where its retained Owners and node facts go.
//
// A node is a NodeBox: one per CUgraphNode while anything holds it (the
// root's registry keeps weak references), so every GraphNode of one node,
// however it was reached (made, listed, an edge's end, a neighbour), shares
// it, and destroying the node through any of them invalidates them all. The
// Python module finds a node's one Python object through it (`face`).
#include <cuda.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "handles/handles.hpp"

namespace cucore::graph::detail {
struct NodeInfo;
}

namespace cucore::detail {

struct GraphBox;

struct NodeBox {
  std::shared_ptr<GraphBox> graph;  // the graph (or view) the node is in
  CUgraphNode node = nullptr;       // null once destroyed
  // The GraphNode registered as the node's face (GraphNode::set_face) and its
  // opaque tag: never dereferenced; the face clears both when destroyed or assigned.
  std::atomic<const void*> face_holder{nullptr};
  std::atomic<const void*> face{nullptr};

  NodeBox(std::shared_ptr<GraphBox> g, CUgraphNode n) noexcept : graph(std::move(g)), node(n) {}
  NodeBox(const NodeBox&) = delete;
  NodeBox& operator=(const NodeBox&) = delete;
};
using NodeHandle = std::shared_ptr<NodeBox>;

struct GraphBox {
  CUgraph graph = nullptr;            // a builder's root box gets it when its capture ends
  const Release release;              // destroy: cuGraphDestroy when the box goes; none: a view
  std::shared_ptr<GraphBox> root;     // for a view: the box owning the hierarchy
  mutable std::mutex mutex;           // guards what follows (on the root)
  std::vector<Owner> pending;         // kept until the next attach() (a capture's, until it ends)
  const void* last_key = nullptr;     // the last Owner retained: a repeat is held already
  std::map<CUgraphNode, std::shared_ptr<const graph::detail::NodeInfo>> nodes;  // what cucore added
  std::set<CUgraphConditionalHandle> conditions;  // made for this hierarchy
  std::map<CUgraphNode, std::weak_ptr<NodeBox>> node_boxes;  // the nodes held now (on the root)
  std::size_t node_boxes_swept = 0;  // the registry's size after its last sweep of expired entries

  explicit GraphBox(Release r) noexcept : release(r) {}
  GraphBox(const GraphBox&) = delete;
  GraphBox& operator=(const GraphBox&) = delete;
  ~GraphBox();

  GraphBox& top() noexcept { return root ? *root : *this; }
  // Keeps `owner` with the hierarchy: on a user object of the root CUgraph at
  // once when it exists, else pending until attach(). Consecutive repeats
  // (the same `key`, by default the owned object) are kept once.
  void retain(Owner owner, const void* key = nullptr);
  // Moves the pending Owners onto one user object of the root CUgraph.
  void attach();
};
using GraphHandle = std::shared_ptr<GraphBox>;

// The one NodeBox of `node` (in `graph`, or a view of its hierarchy): the
// live one if any GraphNode still holds it, else a new one, registered.
NodeHandle node_box(const GraphHandle& graph, CUgraphNode node);
// Invalidates `box` (its node was destroyed) and forgets it: the driver may
// reuse the address for a new node, which gets a box of its own.
void forget_node(NodeBox& box) noexcept;

GraphHandle create_graph();                           // cuGraphCreate
GraphHandle capture_root();                           // a builder's: owns the CUgraph its capture ends with
GraphHandle own_graph(CUgraph graph);                 // destroyed with the box
GraphHandle view_graph(CUgraph graph, GraphHandle root);  // never destroyed by its box

struct GraphExecBox {
  CUgraphExec exec = nullptr;
  Owner keep;  // the source hierarchy when it is a view (its Owners are on its root)
  // What updates of the executable graph's own nodes use (Graph[node]): an
  // append-only list owned by a user object that only the executable graph
  // holds, as its launches do, so it goes once they are all done. CUDA
  // attaches no user object to a CUgraphExec, so the list is staged on the
  // source graph before each instantiation or whole-graph update
  // (ExecOwnersStage), which copies it in; null when the driver has no user
  // objects. `mutex` guards the pointer and the list.
  mutable std::mutex mutex;
  mutable std::vector<Owner>* owners = nullptr;
  GraphExecBox() = default;
  GraphExecBox(const GraphExecBox&) = delete;
  GraphExecBox& operator=(const GraphExecBox&) = delete;
  ~GraphExecBox();  // cuGraphExecDestroy: launches in flight finish first
};
using GraphExecHandle = std::shared_ptr<const GraphExecBox>;

// A new list for an executable graph's Owners on a user object, with its one
// reference retained on `graph` for the call that follows (an instantiation
// or a whole-graph update of `graph`) to copy into the executable graph. The
// stage's end drops the graph's reference: the executable graph then holds the
// only one, or, when the call failed, nobody and the list goes. No list
// (owners() null) when the driver has no user objects.
class ExecOwnersStage {
 public:
  explicit ExecOwnersStage(CUgraph graph);
  ~ExecOwnersStage();
  ExecOwnersStage(const ExecOwnersStage&) = delete;
  ExecOwnersStage& operator=(const ExecOwnersStage&) = delete;
  std::vector<Owner>* owners() const noexcept { return owners_; }

 private:
  CUgraph graph_ = nullptr;
  CUuserObject object_ = nullptr;
  std::vector<Owner>* owners_ = nullptr;
};

// `graph` (a definition, or the graph a stream capture is building) keeps
// `owners` until it and every graph instantiated from it are destroyed: one
// CUDA user object, moved to the graph, whose destructor releases them on
// cucore's release thread. On failure throws, and `owners` go with the call.
void retain_in_graph(CUgraph graph, std::vector<Owner>&& owners);

// Releases `owners` on cucore's release thread (never the caller's): for
// driver callbacks, where dropping a last share could call CUDA.
void release_later(std::vector<Owner>* owners) noexcept;
// Waits until everything queued so far has been released (tests).
void drain_releases_for_testing();

}  // namespace cucore::detail
