#pragma once
// Graph boxes (the handle layer's, as handles.hpp): a CUgraph's box and a
// CUgraphExec's box.
//
// What a graph's nodes use (kernels and so their libraries, events, child
// graphs, host callbacks, retained Buffers and Python objects) is kept as
// Owners. They wait in the root graph's box until the graph is instantiated,
// then move onto a CUDA user object of the CUgraph: the driver hands its
// references on to every executable graph made from it (and to a graph
// updated from it), and lets them go only once those are destroyed and their
// launches have finished. The user object's destructor runs on a driver
// thread where CUDA calls are forbidden, so it only queues the Owners; a
// cucore thread releases them (release_later).
//
// A body graph of a conditional node, or the copy inside a child graph node,
// is a view: a box that does not own its CUgraph and holds its root's box,
// where its retained Owners and node facts go.
#include <cuda.h>

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

struct GraphBox {
  CUgraph graph = nullptr;            // a builder's root box gets it when its capture ends
  bool owned = false;                 // cuGraphDestroy when the box goes
  std::shared_ptr<GraphBox> root;     // for a view: the box owning the hierarchy
  mutable std::mutex mutex;           // guards what follows (on the root)
  std::vector<Owner> pending;         // kept until the next attach()
  std::map<CUgraphNode, std::shared_ptr<const graph::detail::NodeInfo>> nodes;  // what cucore added
  std::set<CUgraphConditionalHandle> conditions;  // made for this hierarchy

  GraphBox() = default;
  GraphBox(const GraphBox&) = delete;
  GraphBox& operator=(const GraphBox&) = delete;
  ~GraphBox();

  GraphBox& top() noexcept { return root ? *root : *this; }
  // Keeps `owner` with the hierarchy (consecutive repeats are kept once).
  void retain(Owner owner);
  // Moves the pending Owners onto a user object of the root CUgraph.
  void attach();
};
using GraphHandle = std::shared_ptr<GraphBox>;

GraphHandle create_graph();                           // cuGraphCreate
GraphHandle own_graph(CUgraph graph);                 // destroyed with the box
GraphHandle view_graph(CUgraph graph, GraphHandle root);  // never destroyed by its box

struct GraphExecBox {
  CUgraphExec exec = nullptr;
  Owner keep;  // the source hierarchy when it is a view (its Owners are on its root)
  GraphExecBox() = default;
  GraphExecBox(const GraphExecBox&) = delete;
  GraphExecBox& operator=(const GraphExecBox&) = delete;
  ~GraphExecBox();  // cuGraphExecDestroy: launches in flight finish first
};
using GraphExecHandle = std::shared_ptr<const GraphExecBox>;

// Releases `owners` on cucore's release thread (never the caller's): for
// driver callbacks, where dropping a last share could call CUDA.
void release_later(std::vector<Owner>* owners) noexcept;
// Waits until everything queued so far has been released (tests).
void drain_releases_for_testing();

}  // namespace cucore::detail
