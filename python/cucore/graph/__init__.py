"""CUDA graphs, as cuda.core.graph: GraphBuilder (stream capture), GraphDefinition
(explicit nodes), Graph (the executable graph), GraphNode and its kinds,
graph[node]'s executable-node views (ExecutableGraphNode and its kinds),
GraphCondition, GraphCompleteOptions, GraphDebugPrintOptions.

cucore's graphs keep alive what their nodes use (kernels, Buffers passed as
arguments or operands, events, child graphs, callbacks) until every executable
graph made from them and every launch in flight is done.
"""
from collections.abc import MutableSet as _MutableSet
from dataclasses import dataclass

from cucore._core import _graph as _native
from cucore._core._graph import (
    AllocNode,
    CUgraphNodeType,
    ChildGraphNode,
    ConditionalNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    ExecutableChildGraphNode,
    ExecutableEventRecordNode,
    ExecutableEventWaitNode,
    ExecutableGraphNode,
    ExecutableHostCallbackNode,
    ExecutableKernelNode,
    ExecutableMemcpyNode,
    ExecutableMemsetNode,
    FreeNode,
    Graph,
    GraphBuilder,
    GraphCondition,
    GraphDefinition,
    GraphMemoryResource,
    GraphMemoryResourceAttributes,
    GraphNode,
    HostCallbackNode,
    IfElseNode,
    IfNode,
    KernelNode,
    MemcpyNode,
    MemsetNode,
    SwitchNode,
    WhileNode,
)
from cucore.typing import GraphConditionalType, GraphMemoryType  # the same enums as cucore.typing, as cuda.core

__all__ = [
    "AllocNode", "ChildGraphNode", "ConditionalNode", "EmptyNode", "EventRecordNode", "EventWaitNode",
    "ExecutableChildGraphNode", "ExecutableEventRecordNode", "ExecutableEventWaitNode", "ExecutableGraphNode",
    "ExecutableHostCallbackNode", "ExecutableKernelNode", "ExecutableMemcpyNode", "ExecutableMemsetNode",
    "FreeNode", "Graph", "GraphBuilder", "GraphCompleteOptions", "GraphCondition", "GraphConditionalType",
    "GraphDebugPrintOptions", "GraphDefinition", "GraphMemoryType", "GraphNode", "HostCallbackNode",
    "IfElseNode", "IfNode", "KernelNode", "MemcpyNode", "MemsetNode", "SwitchNode", "WhileNode",
]


@dataclass
class GraphCompleteOptions:
    """Options for GraphBuilder.complete() and GraphDefinition.instantiate().

    auto_free_on_launch: free the graph's allocations before each relaunch.
    upload_stream: upload the graph on this stream right after instantiating.
    device_launch: launchable from the device (not with auto_free_on_launch).
    use_node_priority: run with the nodes' priorities, not the launch stream's.
    """

    auto_free_on_launch: bool = False
    upload_stream: object = None
    device_launch: bool = False
    use_node_priority: bool = False


@dataclass
class GraphDebugPrintOptions:
    """Options for debug_dot_print(): each adds a kind of detail to the DOT output."""

    verbose: bool = False
    runtime_types: bool = False
    kernel_node_params: bool = False
    memcpy_node_params: bool = False
    memset_node_params: bool = False
    host_node_params: bool = False
    event_node_params: bool = False
    ext_semas_signal_node_params: bool = False
    ext_semas_wait_node_params: bool = False
    kernel_node_attributes: bool = False
    handles: bool = False
    mem_alloc_node_params: bool = False
    mem_free_node_params: bool = False
    batch_mem_op_node_params: bool = False
    extra_topo_info: bool = False
    conditional_node_params: bool = False


class AdjacencySetProxy(_MutableSet):
    """A node's predecessors (or successors) as a mutable set, as cuda.core's:
    changes write through to the graph's edges. Its members are the nodes'
    own objects (the one Python object per node)."""

    __slots__ = ("_node", "_forward")

    def __init__(self, node, forward):
        self._node = node
        self._forward = forward

    def _items(self):
        return self._node._adjacent(self._forward)

    @classmethod
    def _from_iterable(cls, it):
        return set(it)  # &, |, ^, - give plain sets

    def __contains__(self, x):
        return isinstance(x, GraphNode) and x in self._items()

    def __iter__(self):
        return iter(self._items())

    def __len__(self):
        return len(self._items())

    def add(self, value):
        if not isinstance(value, GraphNode):
            raise TypeError(f"expected GraphNode, got {type(value).__name__}")
        if value not in self:
            self._node._change_edges(self._forward, True, [value])

    def discard(self, value):
        if isinstance(value, GraphNode) and value in self:
            self._node._change_edges(self._forward, False, [value])

    def clear(self):
        items = self._items()
        if items:  # one driver call for all
            self._node._change_edges(self._forward, False, items)

    def update(self, *others):
        """Adds edges to every node given (nodes, or iterables of nodes) in one driver call."""
        nodes = []
        for other in others:
            if isinstance(other, GraphNode):
                nodes.append(other)
                continue
            for n in other:
                if not isinstance(n, GraphNode):
                    raise TypeError(f"expected GraphNode, got {type(n).__name__}")
                nodes.append(n)
        present = self._items()
        new = []
        for n in nodes:
            if n not in present and n not in new:
                new.append(n)
        if new:
            self._node._change_edges(self._forward, True, new)

    def __ior__(self, it):
        self.update(it)
        return self

    def __isub__(self, it):
        if it is self:
            self.clear()
            return self
        present = self._items()
        gone = []
        for n in it:
            if isinstance(n, GraphNode) and n in present and n not in gone:
                gone.append(n)
        if gone:
            self._node._change_edges(self._forward, False, gone)
        return self

    def __repr__(self):
        return "{" + ", ".join(repr(n) for n in self._items()) + "}"


def _adjacency(forward):
    def get(self):
        return AdjacencySetProxy(self, forward)

    def set_(self, value):
        proxy = AdjacencySetProxy(self, forward)
        proxy.clear()
        proxy.update(value)

    return property(get, set_)


GraphNode.pred = _adjacency(False)
GraphNode.succ = _adjacency(True)
del _native
