"""cucore.graph, as cuda.core.graph: names, options, enums and the executable-node
view classes everywhere; on a GPU, a captured chain equals the stream result,
split/join, a 1000-node chain, every explicit node type, conditionals (cond_type
an enum member), update and its mismatch error, graph[node] views (updates of
one executable graph, enabling, refusals, what they keep alive), a broken
capture, lifetimes (every handle dropped, gc, 100 launches) and graph memory."""
import dataclasses
import gc
import os
import re
import time
import weakref

import pytest

import cucore
from cucore import Device, LaunchConfig, Program, ProgramOptions, launch
from cucore.graph import (
    GraphBuilder,
    GraphCompleteOptions,
    GraphDebugPrintOptions,
    GraphDefinition,
)

from conftest import require_gpu

np = pytest.importorskip("numpy")

KERNELS = r"""
extern "C" __device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                                unsigned int value);
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);  // no FMA: rounded as the host rounds
}
extern "C" __global__ void axpb(float* data, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = __fadd_rn(__fmul_rn(a, data[i]), b);  // no FMA: rounded as the host rounds
}
extern "C" __global__ void add_int(int* data, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += v;
}
extern "C" __global__ void count_until(int* counter, int limit, cudaGraphConditionalHandle cond) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    int v = ++*counter;
    cudaGraphSetConditional(cond, v < limit ? 1u : 0u);
  }
}
extern "C" __global__ void set_condition(cudaGraphConditionalHandle cond, const int* value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(cond, (unsigned)*value);
}
"""

# cuda.core 1.2's cuda.core.graph names (its __all__), all of which cucore.graph has.
EXECUTABLE_VIEWS = [
    "ExecutableChildGraphNode", "ExecutableEventRecordNode", "ExecutableEventWaitNode", "ExecutableHostCallbackNode",
    "ExecutableKernelNode", "ExecutableMemcpyNode", "ExecutableMemsetNode",
]
CUDA_CORE_GRAPH_NAMES = [
    "AllocNode", "ChildGraphNode", "ConditionalNode", "EmptyNode", "EventRecordNode", "EventWaitNode",
    "ExecutableGraphNode", *EXECUTABLE_VIEWS, "FreeNode",
    "Graph", "GraphBuilder", "GraphCompleteOptions", "GraphCondition", "GraphDebugPrintOptions", "GraphDefinition",
    "GraphNode", "HostCallbackNode", "IfElseNode", "IfNode", "KernelNode", "MemcpyNode", "MemsetNode", "SwitchNode",
    "WhileNode",
]


# ---- everywhere ---------------------------------------------------------------------------
def test_graph_names_as_cuda_core():
    missing = [n for n in CUDA_CORE_GRAPH_NAMES if not hasattr(cucore.graph, n)]
    assert not missing, missing
    assert set(CUDA_CORE_GRAPH_NAMES) <= set(cucore.graph.__all__)
    assert cucore.GraphMemoryResource is cucore.graph.GraphMemoryResource
    assert issubclass(cucore.graph.IfNode, cucore.graph.ConditionalNode)
    assert issubclass(cucore.graph.KernelNode, cucore.graph.GraphNode)
    # One enum per concept, as cuda.core: cucore.graph's are cucore.typing's.
    assert cucore.graph.GraphConditionalType is cucore.typing.GraphConditionalType
    assert cucore.graph.GraphMemoryType is cucore.typing.GraphMemoryType


NODE_TYPES = ["KERNEL", "MEMCPY", "MEMSET", "HOST", "GRAPH", "EMPTY", "WAIT_EVENT", "EVENT_RECORD", "EXT_SEMAS_SIGNAL",
              "EXT_SEMAS_WAIT", "MEM_ALLOC", "MEM_FREE", "BATCH_MEM_OP", "CONDITIONAL"]  # cuda.h's order = value


def test_node_type_enum_has_every_cugraphnodetype():
    """GraphNode.type's enum without cuda.bindings: cuda.h's CUgraphNodeType, every member, the same names."""
    t = cucore.graph.CUgraphNodeType
    assert [(m.name, int(m)) for m in t] == [(f"CU_GRAPH_NODE_TYPE_{n}", i) for i, n in enumerate(NODE_TYPES)]
    assert t(13) is t.CU_GRAPH_NODE_TYPE_CONDITIONAL and t.CU_GRAPH_NODE_TYPE_KERNEL == 0
    try:
        from cuda.bindings import driver
    except ImportError:
        return
    # The same members as the bindings' enum; a newer cuda.bindings may add
    # reserved values (CU_GRAPH_NODE_TYPE_RESERVED_16) that no node reports.
    theirs = [(m.name, int(m)) for m in driver.CUgraphNodeType if "RESERVED" not in m.name]
    assert theirs == [(m.name, int(m)) for m in t]


def _driver_conditional_types():
    """CUgraphConditionalNodeType's members as (name, value): cuda.bindings' where
    it imports, else cuda.h's (the toolkit's headers), else None."""
    try:
        from cuda.bindings import driver
    except ImportError:
        pass
    else:
        return [(m.name, int(m)) for m in driver.CUgraphConditionalNodeType]
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    for root in filter(None, roots):
        header = os.path.join(root, "include", "cuda.h")
        if os.path.exists(header):
            with open(header) as f:
                text = f.read()
            body = re.search(r"typedef enum CUgraphConditionalNodeType_enum \{(.*?)\}", text, re.S).group(1)
            return [(n, int(v)) for n, v in re.findall(r"(CU_GRAPH_COND_TYPE_\w+)\s*=\s*(\d+)", body)]
    return None


def test_conditional_type_enum_covers_the_driver():
    """ConditionalNode.cond_type's enum, cuda.core.typing's GraphConditionalType:
    one member per CUgraphConditionalNodeType member, by the same name, with
    cuda.core's values (a StrEnum: equal to the strings)."""
    t = cucore.typing.GraphConditionalType
    assert [(m.name, m.value) for m in t] == [("IF", "if"), ("WHILE", "while"), ("SWITCH", "switch")]
    assert t.IF == "if" and t("switch") is t.SWITCH and isinstance(t.WHILE, str)
    driver_members = _driver_conditional_types()
    if driver_members is None:
        pytest.skip("neither cuda.bindings nor cuda.h is here to read CUgraphConditionalNodeType from")
    assert [n.removeprefix("CU_GRAPH_COND_TYPE_") for n, _ in sorted(driver_members, key=lambda m: m[1])] == [
        m.name for m in t]


def test_executable_node_views_as_cuda_core():
    """graph[node]'s view classes: one per node kind with executable updates,
    all ExecutableGraphNode, made only by graph[node] (cuda.core's error)."""
    g = cucore.graph
    for name in EXECUTABLE_VIEWS:
        cls = getattr(g, name)
        assert issubclass(cls, g.ExecutableGraphNode) and cls is not g.ExecutableGraphNode, name
        assert callable(cls.update), name
        with pytest.raises(RuntimeError, match=r"^directly constructing an executable graph node is not supported$"):
            cls()
    with pytest.raises(RuntimeError, match=r"^directly constructing an executable graph node is not supported$"):
        g.ExecutableGraphNode()
    for name in ("ExecutableKernelNode", "ExecutableMemcpyNode", "ExecutableMemsetNode"):
        cls = getattr(g, name)
        assert isinstance(cls.is_enabled, property) and callable(cls.enable) and callable(cls.disable), name
    for name in ("ExecutableChildGraphNode", "ExecutableEventRecordNode", "ExecutableEventWaitNode",
                 "ExecutableHostCallbackNode"):
        assert not hasattr(getattr(g, name), "is_enabled"), name  # as cuda.core: kernel, memcpy, memset only
    assert callable(g.Graph.__getitem__)


def test_adjacency_proxy_is_a_mutable_set():
    from collections.abc import MutableSet

    assert issubclass(cucore.graph.AdjacencySetProxy, MutableSet)
    assert isinstance(cucore.graph.GraphNode.pred, property) and isinstance(cucore.graph.GraphNode.succ, property)
    assert cucore.graph.GraphNode.pred.fset is not None  # assignable, as cuda.core's


def test_option_dataclasses_as_cuda_core():
    assert [f.name for f in dataclasses.fields(GraphCompleteOptions)] == [
        "auto_free_on_launch", "upload_stream", "device_launch", "use_node_priority"]
    o = GraphCompleteOptions()
    assert (o.auto_free_on_launch, o.upload_stream, o.device_launch, o.use_node_priority) == (False, None, False, False)
    names = [f.name for f in dataclasses.fields(GraphDebugPrintOptions)]
    assert len(names) == 16 and names[0] == "verbose" and names[-1] == "conditional_node_params"
    assert not any(getattr(GraphDebugPrintOptions(), n) for n in names)


def test_graph_builder_is_not_made_directly():
    with pytest.raises(NotImplementedError, match="directly creating a Graph object can be ambiguous"):
        GraphBuilder()


# ---- on a GPU -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mod():
    require_gpu()
    d = Device(0)
    d.set_current()
    arch = f"sm_{d.compute_capability.major}{d.compute_capability.minor}"
    return Program(KERNELS, "c++", ProgramOptions(arch=arch)).compile("cubin")


def cfg(n):
    return LaunchConfig(grid=(n + 255) // 256, block=256)


def upload(host, stream):
    b = Device(0).memory_resource.allocate(host.nbytes, stream=stream)
    b.copy_from(host, stream=stream)
    return b


def download(buf, dtype, stream):
    out = np.empty(buf.size // np.dtype(dtype).itemsize, dtype=dtype)
    buf.copy_to(out, stream=stream)
    stream.sync()
    return out


def test_captured_saxpy_chain_equals_stream(mod):
    n = 1 << 20
    rng = np.random.default_rng(1)
    s = Device(0).create_stream()
    x = upload(rng.uniform(-100, 100, n).astype(np.float32), s)
    y = upload(rng.uniform(-100, 100, n).astype(np.float32), s)
    out_s = Device(0).memory_resource.allocate(n * 4, stream=s)
    out_g = Device(0).memory_resource.allocate(n * 4, stream=s)
    steps = [(float(a), float(b)) for a, b in rng.uniform(-2, 2, (10, 2))]

    def chain(where, out):
        launch(where, cfg(n), mod.get_kernel("saxpy"), np.float32(2.5), x, y, out, n)
        for a, b in steps:
            launch(where, cfg(n), mod.get_kernel("axpb"), out, np.float32(a), np.float32(b), n)

    chain(s, out_s)
    gb = Device(0).create_graph_builder().begin_building()
    assert gb.is_building
    chain(gb, out_g)
    g = gb.end_building().complete()
    assert len(gb.graph_definition.nodes()) == len(steps) + 1
    g.launch(s)
    np.testing.assert_array_equal(download(out_g, np.float32, s), download(out_s, np.float32, s))


def test_split_join_four_branches(mod):
    n = 50000
    rng = np.random.default_rng(2)
    s = Device(0).create_stream()
    hosts = [rng.uniform(-10, 10, n).astype(np.float32) for _ in range(4)]
    bufs = [upload(h, s) for h in hosts]
    s.sync()
    gb = s.create_graph_builder().begin_building()
    branches = gb.split(4)
    assert len(branches) == 4 and branches[0] is gb
    assert not gb.is_join_required and branches[1].is_join_required
    for i, b in enumerate(branches):
        launch(b, cfg(n), mod.get_kernel("axpb"), bufs[i], np.float32(i + 2), np.float32(-i), n)
    assert GraphBuilder.join(*branches) is gb
    g = gb.end_building().complete()
    assert len(gb.graph_definition.nodes()) == 4
    g.launch(s)
    for i in range(4):
        want = np.float32(i + 2) * hosts[i] + np.float32(-i)
        np.testing.assert_allclose(download(bufs[i], np.float32, s), want, rtol=1e-6)


def test_thousand_node_chain(mod):
    n = 4096
    s = Device(0).create_stream()
    h = np.random.default_rng(3).integers(1, 10**6, n).astype(np.int32)
    d = upload(h, s)
    gb = s.create_graph_builder().begin_building()
    total = 0
    for i in range(1000):
        launch(gb, cfg(n), mod.get_kernel("add_int"), d, i % 7 + 1, n)
        total += i % 7 + 1
    g = gb.end_building().complete()
    definition = gb.graph_definition
    assert len(definition.nodes()) == 1000 and len(definition.edges()) == 999
    g.launch(s)
    g.launch(s)
    np.testing.assert_array_equal(download(d, np.int32, s), h + 2 * total)


def test_every_explicit_node_type(mod):
    n = 20000
    rng = np.random.default_rng(4)
    s = Device(0).create_stream()
    hsrc = rng.uniform(-100, 100, n).astype(np.float32)
    hc = rng.integers(1, 10**6, n).astype(np.int32)
    src, child_data = upload(hsrc, s), upload(hc, s)
    dst = Device(0).memory_resource.allocate(n * 4, stream=s)
    filled = Device(0).memory_resource.allocate(n * 4, stream=s)
    s.sync()
    calls = []
    recorded = Device(0).create_event()

    child = GraphDefinition()
    child.launch(cfg(n), mod.get_kernel("add_int"), child_data, 17, n)
    g = GraphDefinition()
    alloc = g.allocate(n * 4)
    assert isinstance(alloc, cucore.graph.AllocNode) and alloc.bytesize == n * 4 and alloc.memory_type == "device"
    copy_in = alloc.memcpy(alloc.dptr, src, n * 4)
    scale = copy_in.launch(cfg(n), mod.get_kernel("axpb"), alloc.dptr, np.float32(3), np.float32(1), n)
    assert isinstance(scale, cucore.graph.KernelNode) and scale.grid == ((n + 255) // 256, 1, 1)
    copy_out = scale.memcpy(dst, alloc.dptr, n * 4)
    freed = copy_out.deallocate(alloc.dptr)
    assert isinstance(freed, cucore.graph.FreeNode) and freed.dptr == alloc.dptr
    fill = g.memset(filled, np.float32(2.5), n)
    assert isinstance(fill, cucore.graph.MemsetNode) and fill.element_size == 4
    fill_scale = fill.launch(cfg(n), mod.get_kernel("axpb"), filled, np.float32(-2), np.float32(0.5), n)
    embedded = g.embed(child)
    assert isinstance(embedded, cucore.graph.ChildGraphNode)
    host = embedded.callback(lambda: calls.append(1))
    assert isinstance(host, cucore.graph.HostCallbackNode)
    joined = g.join(freed, fill_scale, host)
    assert isinstance(joined, cucore.graph.EmptyNode) and set(joined.pred) == {freed, fill_scale, host}
    rec = joined.record(recorded)
    assert isinstance(rec, cucore.graph.EventRecordNode)
    waited = rec.wait(recorded)
    assert isinstance(waited, cucore.graph.EventWaitNode)
    kinds = {type(node).__name__ for node in g.nodes()}
    assert kinds >= {"AllocNode", "MemcpyNode", "KernelNode", "FreeNode", "MemsetNode", "ChildGraphNode",
                     "HostCallbackNode", "EmptyNode", "EventRecordNode", "EventWaitNode"}
    assert (rec, waited) in g.edges()
    # One Python object per node: what made it is what nodes() and edges() give.
    made = [alloc, copy_in, scale, copy_out, freed, fill, fill_scale, embedded, host, joined, rec, waited]
    listed = {int(node.handle): node for node in g.nodes()}
    assert len(listed) == len(made)
    for node in made:
        assert listed[int(node.handle)] is node, node
    assert {(id(x), id(y)) for x, y in g.edges()} == {
        (id(alloc), id(copy_in)), (id(copy_in), id(scale)), (id(scale), id(copy_out)), (id(copy_out), id(freed)),
        (id(fill), id(fill_scale)), (id(embedded), id(host)), (id(freed), id(joined)), (id(fill_scale), id(joined)),
        (id(host), id(joined)), (id(joined), id(rec)), (id(rec), id(waited))}

    exe = g.instantiate()
    exe.launch(s)
    exe.launch(s)
    s.sync()
    np.testing.assert_allclose(download(dst, np.float32, s), 3 * hsrc + 1, rtol=1e-6)
    np.testing.assert_array_equal(download(filled, np.float32, s), np.full(n, -2 * 2.5 + 0.5, np.float32))
    np.testing.assert_array_equal(download(child_data, np.int32, s), hc + 2 * 17)
    assert calls == [1, 1]
    # CUDA keeps every node and edge of a graph with memory nodes: a typed
    # error that says so, and the graph stays as it was.
    with pytest.raises(cucore.CUDAError, match="memory allocation or free nodes"):
        waited.pred.discard(rec)
    with pytest.raises(cucore.CUDAError, match="memory allocation or free nodes"):
        waited.destroy()
    assert waited.is_valid and set(waited.pred) == {rec}

    # Elsewhere, edges write through: removing the a -> b edge leaves b a root.
    plain = GraphDefinition()
    a = plain.empty()
    b = a.empty()
    c = b.empty()
    b.pred.discard(a)
    assert len(b.pred) == 0 and len(a.succ) == 0
    b.destroy()
    assert not b.is_valid and len(c.pred) == 0 and len(plain.nodes()) == 2


def test_one_object_per_node_everywhere(mod):
    """The same CUgraphNode is the same Python object from the call that made
    it, nodes(), edges(), pred and succ (as cuda.core); the graph keeps none of
    them alive; destroy() through any of them invalidates the one object."""
    import weakref

    s = Device(0).create_stream()
    data = upload(np.zeros(256, np.int32), s)
    g = GraphDefinition()
    a = g.empty()
    b = a.empty()
    k = b.launch(cfg(256), mod.get_kernel("add_int"), data, 1, 256)
    m = g.memset(data, 0, 1024)
    j = g.join(k, m)
    assert g.nodes() == {a, b, k, m, j}
    listed = {int(x.handle): x for x in g.nodes()}
    assert all(listed[int(x.handle)] is x for x in (a, b, k, m, j))
    assert {(id(x), id(y)) for x, y in g.edges()} == {(id(a), id(b)), (id(b), id(k)), (id(k), id(j)),
                                                       (id(m), id(j))}
    assert {id(x) for x in j.pred} == {id(k), id(m)}
    assert [id(x) for x in a.succ] == [id(b)] and [id(x) for x in b.pred] == [id(a)]
    assert len(a.pred) == 0 and len(j.succ) == 0

    # The node's kind comes back as a CUgraphNodeType member, as cuda.core gives it.
    try:
        from cuda.bindings import driver
        node_type = driver.CUgraphNodeType
    except ImportError:
        node_type = cucore.graph.CUgraphNodeType
    assert type(a.type) is node_type and type(k.type) is node_type
    assert (a.type.name, k.type.name, m.type.name) == (
        "CU_GRAPH_NODE_TYPE_EMPTY", "CU_GRAPH_NODE_TYPE_KERNEL", "CU_GRAPH_NODE_TYPE_MEMSET")
    assert (int(a.type), int(k.type), int(m.type)) == (5, 0, 2)

    # Nobody keeps a node's object but its users: gone, and a new one of its kind next time.
    gone = weakref.ref(b)
    handle_b = int(b.handle)
    del b, listed
    gc.collect()
    assert gone() is None
    b = next(x for x in g.nodes() if int(x.handle) == handle_b)
    assert type(b) is cucore.graph.EmptyNode and next(iter(a.succ)) is b and next(iter(k.pred)) is b

    # A body graph's nodes are their objects too.
    cond = g.create_condition()
    n_if = j.if_then(cond)
    inner = n_if.then.empty()
    assert next(iter(n_if.then.nodes())) is inner

    # destroy() through the object nodes() gives is destroy() of the one object.
    held = {m}
    alias = next(x for x in g.nodes() if x == m)
    assert alias is m
    alias.destroy()
    assert not m.is_valid and m.handle is None and m.type is None
    assert m in held  # its hash does not change with destroy()
    assert g.nodes() == {a, b, k, j, n_if}
    assert {id(x) for x in j.pred} == {id(k)}
    with pytest.raises(cucore.ClosedError):
        m.empty()  # no node (never an entry node) from a destroyed one
    assert len(g.nodes()) == 5

    # A captured graph's definition gives the same objects each time.
    gb = s.create_graph_builder().begin_building()
    launch(gb, cfg(256), mod.get_kernel("add_int"), data, 1, 256)
    launch(gb, cfg(256), mod.get_kernel("add_int"), data, 2, 256)
    gb.end_building()
    first = gb.graph_definition.nodes()
    assert {id(x) for x in gb.graph_definition.nodes()} == {id(x) for x in first}
    (x, y), = gb.graph_definition.edges()
    assert {id(x), id(y)} == {id(n) for n in first} and next(iter(x.succ)) is y


def test_pred_and_succ_are_mutable_sets_over_the_edges(mod):
    from collections.abc import MutableSet

    g = GraphDefinition()
    a, b, c = g.empty(), g.empty(), g.empty()
    d = a.empty()
    assert isinstance(d.pred, MutableSet) and isinstance(d.succ, MutableSet)
    p = d.pred
    p.add(b)
    p.add(b)  # already there: no second edge
    assert g.edges() == {(a, d), (b, d)} and set(b.succ) == {d}
    p.remove(a)
    assert g.edges() == {(b, d)}
    with pytest.raises(KeyError):
        p.remove(a)
    p.discard(a)  # absent: nothing happens
    p.discard(object())  # not a node: nothing happens
    assert object() not in p and 5 not in p
    with pytest.raises(TypeError, match="expected GraphNode"):
        p.add(object())
    with pytest.raises(TypeError, match="expected GraphNode"):
        p.update([a, "b"])
    assert g.edges() == {(b, d)}  # a refused update adds nothing
    p.update(a, [c, a])  # nodes and iterables of nodes; each edge once
    assert g.edges() == {(a, d), (b, d), (c, d)}
    p -= {a, b}
    assert g.edges() == {(c, d)}
    p |= {a}
    assert g.edges() == {(a, d), (c, d)}
    assert p & {a, b} == {a} and type(p & {a}) is set
    d.pred = [b]  # the setter replaces the whole set
    assert g.edges() == {(b, d)}
    a.succ = {b, c}
    assert g.edges() == {(b, d), (a, b), (a, c)}
    popped = a.succ.pop()
    assert popped in (b, c) and g.edges() == {(b, d), (a, b), (a, c)} - {(a, popped)}
    a.succ.clear()
    p -= p
    assert g.edges() == set() and len(d.pred) == 0
    with pytest.raises(ValueError):
        p.add(GraphDefinition().empty())  # a node of another graph


def test_conditionals(mod):
    n = 1000
    s = Device(0).create_stream()
    h = np.random.default_rng(5).integers(1, 10**6, n).astype(np.int32)
    data = upload(h, s)
    flag = upload(np.zeros(1, np.int32), s)
    g = GraphDefinition()
    c_if, c_ie, c_sw = g.create_condition(), g.create_condition(), g.create_condition()
    one = LaunchConfig(grid=1, block=1)
    node = g.launch(one, mod.get_kernel("set_condition"), c_if, flag)
    node = node.launch(one, mod.get_kernel("set_condition"), c_ie, flag)
    node = node.launch(one, mod.get_kernel("set_condition"), c_sw, flag)
    n_if = node.if_then(c_if)
    assert isinstance(n_if, cucore.graph.IfNode) and n_if.condition == c_if
    # cond_type: cuda.core.typing's enum member (a StrEnum, so still equal to the string)
    assert n_if.cond_type is cucore.typing.GraphConditionalType.IF and n_if.cond_type.name == "IF"
    assert n_if.cond_type == "if"
    n_if.then.launch(cfg(n), mod.get_kernel("add_int"), data, 1, n)
    n_ie = n_if.if_else(c_ie)
    assert isinstance(n_ie, cucore.graph.IfElseNode) and n_ie.cond_type is cucore.typing.GraphConditionalType.IF
    n_ie.then.launch(cfg(n), mod.get_kernel("add_int"), data, 10, n)
    n_ie.else_.launch(cfg(n), mod.get_kernel("add_int"), data, 100, n)
    n_sw = n_ie.switch(c_sw, 3)
    assert isinstance(n_sw, cucore.graph.SwitchNode) and len(n_sw.branches) == 3
    assert n_sw.cond_type is cucore.typing.GraphConditionalType.SWITCH and n_sw.cond_type.name == "SWITCH"
    n_wl = GraphDefinition()
    n_wl = n_wl.while_loop(n_wl.create_condition())
    assert n_wl.cond_type is cucore.typing.GraphConditionalType.WHILE and n_wl.cond_type.name == "WHILE"
    for i, b in enumerate(n_sw.branches):
        b.launch(cfg(n), mod.get_kernel("add_int"), data, 1000 * (i + 1), n)
    exe = g.instantiate()
    want = h.copy()
    for value, add in [(0, 100 + 1000), (1, 1 + 10 + 2000), (2, 1 + 10 + 3000), (9, 1 + 10)]:
        flag.copy_from(np.array([value], np.int32), stream=s)
        exe.launch(s)
        want += add
        np.testing.assert_array_equal(download(data, np.int32, s), want, err_msg=f"flag {value}")

    counter = upload(np.zeros(1, np.int32), s)
    gb = s.create_graph_builder().begin_building()
    cond = gb.create_condition(1)
    body = gb.while_loop(cond)
    body.begin_building()
    launch(body, one, mod.get_kernel("count_until"), counter, 23, cond)
    body.end_building()
    gb.end_building().complete().launch(s)
    assert download(counter, np.int32, s)[0] == 23

    with pytest.raises(ValueError):
        GraphDefinition().if_then(c_if)  # a condition of another graph


def test_definition_node_updates_change_later_instantiations(mod):
    """cuda.core 1.2's node update(): graphs instantiated after an update use
    the new parameters, those made before keep the old; the node reports the
    new ones; refused updates change nothing."""
    import threading

    n = 256
    s = Device(0).create_stream()
    add = mod.get_kernel("add_int")
    zeros = np.zeros(n, np.int32)

    # kernel: arguments, then dimensions, then kernel and arguments together
    a, b = upload(zeros, s), upload(zeros, s)
    g = GraphDefinition()
    k = g.launch(cfg(n), add, a, 1, n)
    old = g.instantiate()
    k.update(args=(b, 5, n))
    new = g.instantiate()
    old.launch(s)
    new.launch(s)
    np.testing.assert_array_equal(download(a, np.int32, s), zeros + 1)
    np.testing.assert_array_equal(download(b, np.int32, s), zeros + 5)
    k.update(config=LaunchConfig(grid=1, block=128))
    assert (k.grid, k.block) == ((1, 1, 1), (128, 1, 1))
    g.instantiate().launch(s)
    np.testing.assert_array_equal(download(b, np.int32, s), np.r_[np.full(128, 10), np.full(n - 128, 5)])
    with pytest.raises(ValueError, match="changing kernel requires args"):
        k.update(kernel=add)
    with pytest.raises(TypeError):
        k.update(config=object())
    with pytest.raises(TypeError):
        k.update(LaunchConfig(grid=1, block=1))  # keyword-only
    k.update(kernel=add, args=(a, 100, n), config=cfg(n))
    g.instantiate().launch(s)
    np.testing.assert_array_equal(download(a, np.int32, s), zeros + 101)
    assert k.grid == ((n + 255) // 256, 1, 1)

    # memset: value, then destination and width
    buf, other = upload(zeros, s), upload(zeros, s)
    g = GraphDefinition()
    ms = g.memset(buf, np.int32(7), n)
    old = g.instantiate()
    ms.update(value=np.int32(9))
    assert (ms.value, ms.element_size, ms.width, ms.dptr) == (9, 4, n, int(buf.handle))
    new = g.instantiate()
    old.launch(s)
    np.testing.assert_array_equal(download(buf, np.int32, s), zeros + 7)
    new.launch(s)
    np.testing.assert_array_equal(download(buf, np.int32, s), zeros + 9)
    ms.update(dst=other, width=n // 2)
    g.instantiate().launch(s)
    np.testing.assert_array_equal(download(other, np.int32, s), np.r_[np.full(n // 2, 9), np.zeros(n // 2)])
    with pytest.raises(TypeError):
        ms.update(buf)  # keyword-only
    with pytest.raises(ValueError):
        ms.update(value=256)
    with pytest.raises(ValueError, match="dst_owner requires dst"):
        ms.update(dst_owner=buf)
    with pytest.raises(OverflowError):
        ms.update(width=-1)
    assert (ms.value, ms.width, ms.dptr) == (9, n // 2, int(other.handle))

    # memcpy: source and size
    src1, src2, dst = upload(np.arange(n, dtype=np.int32), s), upload(2 * np.arange(n, dtype=np.int32), s), upload(zeros, s)
    g = GraphDefinition()
    mc = g.memcpy(dst, src1, n * 4)
    old = g.instantiate()
    mc.update(src=src2, size=n * 2)
    assert (mc.src, mc.dst, mc.size) == (int(src2.handle), int(dst.handle), n * 2)
    new = g.instantiate()
    old.launch(s)
    np.testing.assert_array_equal(download(dst, np.int32, s), np.arange(n))
    dst.copy_from(zeros, stream=s)
    new.launch(s)
    np.testing.assert_array_equal(download(dst, np.int32, s), np.r_[2 * np.arange(n // 2), np.zeros(n // 2)])
    with pytest.raises(OverflowError):
        mc.update(size=-1)
    with pytest.raises(TypeError):
        mc.update(src=object())
    assert mc.size == n * 2

    # event record: the event a launch leaves pending while a callback blocks it
    e1, e2 = Device(0).create_event(), Device(0).create_event()
    started, release = threading.Event(), threading.Event()

    def block():
        started.set()
        release.wait(30)

    g = GraphDefinition()
    rec = g.callback(block).record(e1)
    old = g.instantiate()
    rec.update(e2)
    assert rec.event == e2
    new = g.instantiate()

    def records(graph, pending, done):
        started.clear()
        release.clear()
        st = Device(0).create_stream()
        graph.launch(st)
        try:
            assert started.wait(5)
            assert pending.is_done is False and done.is_done is True
        finally:
            release.set()
            st.sync()

    records(old, e1, e2)
    records(new, e2, e1)
    with pytest.raises(TypeError):
        rec.update(object())

    # event wait: the updated node waits on the new event
    g = GraphDefinition()
    w = g.wait(e1)
    w.update(e2)
    assert w.event == e2

    # host callback and child graph
    called = []

    def first():
        called.append(1)

    def second():
        called.append(2)

    g = GraphDefinition()
    hc = g.callback(first)
    old = g.instantiate()
    hc.update(second)
    assert hc.callback is second
    new = g.instantiate()
    old.launch(s)
    s.sync()
    new.launch(s)
    s.sync()
    assert called == [1, 2]
    with pytest.raises(ValueError):
        hc.update(first, user_data=b"x")  # user_data is for ctypes functions
    with pytest.raises(TypeError):
        hc.update(object())
    assert hc.callback is second

    c1, c2 = GraphDefinition(), GraphDefinition()
    c1.callback(lambda: called.append("c1"))
    c2.callback(lambda: called.append("c2"))
    g = GraphDefinition()
    ch = g.embed(c1)
    old = g.instantiate()
    ch.update(c2)
    new = g.instantiate()
    called.clear()
    old.launch(s)
    s.sync()
    new.launch(s)
    s.sync()
    assert called == ["c1", "c2"]
    with pytest.raises(ValueError):
        ch.update(ch.child_graph)  # of its own hierarchy
    with pytest.raises(TypeError):
        ch.update(object())

    ms.destroy()
    with pytest.raises(cucore.ClosedError):
        ms.update(value=1)


def _wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not within the time allowed"
        gc.collect()
        time.sleep(0.02)


def test_executable_node_views_update_that_graph_only(mod):
    """cuda.core 1.2's graph[node]: a view of a definition node in one executable
    graph; its update() (complete parameters) changes that graph's launches, not
    the definition's nor another executable graph's; kernel, memcpy and memset
    views enable and disable the node."""
    n = 256
    s = Device(0).create_stream()
    add = mod.get_kernel("add_int")
    zeros = np.zeros(n, np.int32)

    # kernel
    a, b = upload(zeros, s), upload(zeros, s)
    g = GraphDefinition()
    k = g.launch(cfg(n), add, a, 1, n)
    changed, other = g.instantiate(), g.instantiate()
    view = changed[k]
    assert type(view) is cucore.graph.ExecutableKernelNode
    assert repr(view) == f"<ExecutableKernelNode graph=0x{int(changed.handle):x} node=0x{int(k.handle):x}>"
    view.update(config=LaunchConfig(grid=1, block=128), kernel=add, args=(b, 5, n))
    assert (k.grid, k.block) == (((n + 255) // 256, 1, 1), (256, 1, 1))  # the definition keeps its own
    changed.launch(s)
    np.testing.assert_array_equal(download(a, np.int32, s), zeros)
    np.testing.assert_array_equal(download(b, np.int32, s), np.r_[np.full(128, 5), np.zeros(n - 128)])
    other.launch(s)
    g.instantiate().launch(s)
    np.testing.assert_array_equal(download(a, np.int32, s), zeros + 2)
    assert view.is_enabled
    view.disable()
    view.disable()
    assert not view.is_enabled and not changed[k].is_enabled and other[k].is_enabled
    changed.launch(s)
    np.testing.assert_array_equal(download(b, np.int32, s), np.r_[np.full(128, 5), np.zeros(n - 128)])
    view.enable()
    assert view.is_enabled
    changed.launch(s)
    np.testing.assert_array_equal(download(b, np.int32, s), np.r_[np.full(128, 10), np.zeros(n - 128)])
    with pytest.raises(TypeError):
        view.update(config=cfg(n), kernel=add)  # every parameter: args too
    with pytest.raises(TypeError):
        view.update(cfg(n), add, (b, 1, n))  # keyword-only
    with pytest.raises(TypeError):
        view.update(config=object(), kernel=add, args=(b, 1, n))
    coop = LaunchConfig(grid=1, block=1, is_cooperative=True)
    with pytest.raises(NotImplementedError, match=r"^updating clustered or cooperative kernel nodes is not supported$"):
        view.update(config=coop, kernel=add, args=(b, 1, n))

    # memset and memcpy
    buf, dst = upload(zeros, s), upload(zeros, s)
    g = GraphDefinition()
    ms = g.memset(buf, np.int32(7), n)
    mc = ms.memcpy(dst, buf, n * 4)
    changed, other = g.instantiate(), g.instantiate()
    assert type(changed[ms]) is cucore.graph.ExecutableMemsetNode
    assert type(changed[mc]) is cucore.graph.ExecutableMemcpyNode
    changed[ms].update(dst=buf, value=np.int32(9), width=n)
    changed[mc].update(dst=dst, src=buf, size=n * 2)
    assert (ms.value, mc.size) == (7, n * 4)
    changed.launch(s)
    np.testing.assert_array_equal(download(buf, np.int32, s), zeros + 9)
    np.testing.assert_array_equal(download(dst, np.int32, s), np.r_[np.full(n // 2, 9), np.zeros(n // 2)])
    other.launch(s)
    np.testing.assert_array_equal(download(dst, np.int32, s), zeros + 7)
    changed[ms].disable()
    buf.copy_from(zeros, stream=s)
    changed.launch(s)
    np.testing.assert_array_equal(download(buf, np.int32, s), zeros)  # the memset did nothing
    with pytest.raises(TypeError):
        changed[ms].update(buf, 1, n)  # keyword-only
    with pytest.raises(OverflowError):
        changed[mc].update(dst=dst, src=buf, size=-1)

    # host callback and child graph
    called = []
    g = GraphDefinition()
    hc = g.callback(lambda: called.append("old"))
    c1, c2 = GraphDefinition(), GraphDefinition()
    c1.callback(lambda: called.append("c1"))
    c2.callback(lambda: called.append("c2"))
    ch = hc.embed(c1)
    changed, other = g.instantiate(), g.instantiate()
    assert type(changed[hc]) is cucore.graph.ExecutableHostCallbackNode
    assert type(changed[ch]) is cucore.graph.ExecutableChildGraphNode
    changed[hc].update(lambda: called.append("new"))
    changed[ch].update(c2)
    changed.launch(s)
    s.sync()
    other.launch(s)
    s.sync()
    assert called == ["new", "c2", "old", "c1"]
    with pytest.raises(ValueError):
        changed[hc].update(lambda: None, user_data=b"x")  # user_data is for ctypes functions
    with pytest.raises(TypeError):
        changed[ch].update(object())

    # events: the record view's new event is the one a blocked launch leaves pending
    import threading

    e1, e2 = Device(0).create_event(), Device(0).create_event()
    started, release = threading.Event(), threading.Event()

    def block():
        started.set()
        release.wait(30)

    g = GraphDefinition()
    rec = g.callback(block).record(e1)
    changed = g.instantiate()
    assert type(changed[rec]) is cucore.graph.ExecutableEventRecordNode
    changed[rec].update(e2)
    assert rec.event == e1
    st = Device(0).create_stream()
    changed.launch(st)
    try:
        assert started.wait(5)
        assert e2.is_done is False and e1.is_done is True
    finally:
        release.set()
        st.sync()
    with pytest.raises(TypeError):
        changed[rec].update(object())
    g = GraphDefinition()
    w = g.wait(e1)
    waiting = g.instantiate()
    assert type(waiting[w]) is cucore.graph.ExecutableEventWaitNode
    waiting[w].update(e2)
    assert w.event == e1
    waiting.launch(s)
    s.sync()


def test_executable_node_views_refuse_as_cuda_core(mod):
    """graph[node]'s errors as cuda.core 1.2's: a non-node TypeError, a kind
    with no executable updates TypeError, a destroyed node RuntimeError, a
    closed graph ValueError; a node of another definition is refused by the
    driver (CUDAError) when updated, and what that update would have kept is
    not kept."""
    n = 256
    s = Device(0).create_stream()
    add = mod.get_kernel("add_int")
    a = upload(np.zeros(n, np.int32), s)
    g = GraphDefinition()
    empty = g.empty()
    k = empty.launch(cfg(n), add, a, 1, n)
    cond_node = k.if_then(g.create_condition())
    cond_node.then.empty()
    gone = k.launch(cfg(n), add, a, 1, n)
    graph = g.instantiate()
    with pytest.raises(TypeError, match="EmptyNode does not support executable updates"):
        graph[empty]
    with pytest.raises(TypeError, match="IfNode does not support executable updates"):
        graph[cond_node]
    with pytest.raises(TypeError):
        graph[object()]
    view = graph[gone]
    gone.destroy()
    with pytest.raises(RuntimeError, match="GraphNode has been destroyed"):
        graph[gone]
    with pytest.raises(RuntimeError, match="GraphNode has been destroyed"):
        view.update(config=cfg(n), kernel=add, args=(a, 1, n))

    stranger = GraphDefinition().launch(cfg(n), add, a, 1, n)
    rejected = upload(np.zeros(n, np.int32), s)
    rejected_ref = weakref.ref(rejected)
    with pytest.raises(cucore.CUDAError):
        graph[stranger].update(config=cfg(n), kernel=add, args=(rejected, 1, n))
    del rejected
    gc.collect()
    assert rejected_ref() is None  # not kept by the graph
    graph.launch(s)
    # Both kernels add 1: the executable graph was instantiated before `gone` left the definition.
    np.testing.assert_array_equal(download(a, np.int32, s), np.full(n, 2))

    kept = graph[k]
    graph.close()
    with pytest.raises(ValueError, match="executable graph has been closed"):
        graph[k]
    kept.update(config=cfg(n), kernel=add, args=(a, 2, n))  # the view keeps its executable graph


def test_executable_node_views_keep_what_they_use(mod):
    """What an executable-node update uses lives as long as the executable
    graph (and its launches), the replaced ones included, not longer; the view
    keeps the definition node while it lives."""
    called = []

    def original():
        called.append("original")

    def first():
        called.append("first")

    def second():
        called.append("second")

    first_ref, second_ref = weakref.ref(first), weakref.ref(second)
    source = GraphDefinition()
    node = source.callback(original)
    graph = source.instantiate()
    view = graph[node]
    del source, node
    gc.collect()
    view.update(first)  # the view's definition node is still there
    view.update(second)
    del view, first, second, original
    gc.collect()
    assert first_ref() is not None and second_ref() is not None  # CUDA cannot tell which launch reads which
    s = Device(0).create_stream()
    graph.launch(s)
    s.sync()
    assert called == ["second"]
    del graph
    _wait_until(lambda: first_ref() is None and second_ref() is None)


def test_update_and_mismatch(mod):
    n = 65536
    rng = np.random.default_rng(6)
    s = Device(0).create_stream()
    hx, hy = rng.uniform(-1, 1, (2, n)).astype(np.float32)
    x, y = upload(hx, s), upload(hy, s)
    out = Device(0).memory_resource.allocate(n * 4, stream=s)

    def capture(a):
        gb = s.create_graph_builder().begin_building()
        launch(gb, cfg(n), mod.get_kernel("saxpy"), np.float32(a), x, y, out, n)
        return gb.end_building()

    g = capture(2.0).complete()
    g.update(capture(-3.0))
    g.launch(s)
    np.testing.assert_allclose(download(out, np.float32, s), np.float32(-3) * hx + hy, rtol=1e-6)
    other = GraphDefinition()
    other.memset(out, 1, n * 4)
    with pytest.raises(cucore.CUDAError, match="memset node"):
        g.update(other)


def test_synchronous_call_breaks_global_capture(mod):
    # Garbage of earlier tests (a Buffer freed with cuMemFreeAsync) freed during
    # a global-mode capture would break it first: collect it now.
    gc.collect()
    s = Device(0).create_stream()
    gb = s.create_graph_builder().begin_building("global")
    with pytest.raises(cucore.CUDAError, match="cuStreamSynchronize"):
        gb.stream.sync()
    with pytest.raises(cucore.CUDAError, match="cuStreamSynchronize") as e:
        gb.end_building()
    assert "INVALIDATED" in str(e.value)
    with pytest.raises(ValueError):
        gb.begin_building("sideways")


def test_lifetimes_drop_everything_then_launch_100_times(gpu):
    n = 100000
    rng = np.random.default_rng(7)
    hx, hy = rng.uniform(-100, 100, (2, n)).astype(np.float32)
    keep = Device(0).create_stream()
    out = Device(0).memory_resource.allocate(n * 4, stream=keep)

    def build():
        d = Device(0)
        arch = f"sm_{d.compute_capability.major}{d.compute_capability.minor}"
        code = Program(KERNELS, "c++", ProgramOptions(arch=arch)).compile("cubin")
        s = d.create_stream()
        x, y = upload(hx, s), upload(hy, s)
        s.sync()
        gb = s.create_graph_builder().begin_building()
        launch(gb, cfg(n), code.get_kernel("saxpy"), np.float32(1.5), x, y, out, n)
        return gb.end_building().complete()

    g = build()
    gc.collect()
    other = Device(0).create_stream()
    for _ in range(100):
        g.launch(other)
    np.testing.assert_allclose(download(out, np.float32, other), np.float32(1.5) * hx + hy, rtol=1e-6)


def test_a_driver_clone_keeps_what_every_node_uses(gpu):
    """Another library clones a definition through its handle (cuGraphClone),
    then every cucore object it used is dropped and collected: the clone's
    executable graph still runs right, and the objects go once it is gone."""
    import ctypes
    import weakref

    cuda = ctypes.CDLL("libcuda.so.1")
    n = 1 << 15
    h = np.random.default_rng(9).integers(1, 10**6, n).astype(np.int32)
    keep = Device(0).create_stream()
    out = Device(0).memory_resource.allocate(n * 4, stream=keep)
    calls = []

    class Callback:
        def __call__(self):
            calls.append(1)

    def build():
        d = Device(0)
        arch = f"sm_{d.compute_capability.major}{d.compute_capability.minor}"
        code = Program(KERNELS, "c++", ProgramOptions(arch=arch)).compile("cubin")
        add = code.get_kernel("add_int")
        s = d.create_stream()
        src = upload(h, s)
        mid = d.memory_resource.allocate(n * 4, stream=s)
        s.sync()
        e = d.create_event()
        child = GraphDefinition()
        child.launch(cfg(n), add, mid, 7, n)
        g = GraphDefinition()
        node = g.memcpy(mid, src, n * 4).launch(cfg(n), add, mid, 5, n)
        fn = Callback()
        node = node.record(e).wait(e).callback(fn).embed(child)
        node.memcpy(out, mid, n * 4)
        clone = ctypes.c_void_p()
        assert cuda.cuGraphClone(ctypes.byref(clone), ctypes.c_void_p(int(g.handle))) == 0
        return clone, weakref.ref(fn), weakref.ref(src)

    clone, fn_ref, src_ref = build()  # the event and the code go with it: only the graph holds them
    gc.collect()
    assert fn_ref() is not None and src_ref() is not None
    exe = ctypes.c_void_p()
    assert cuda.cuGraphInstantiateWithFlags(ctypes.byref(exe), clone, ctypes.c_ulonglong(0)) == 0
    assert cuda.cuGraphDestroy(clone) == 0
    for _ in range(2):
        assert cuda.cuGraphLaunch(exe, ctypes.c_void_p(int(keep.handle))) == 0
    np.testing.assert_array_equal(download(out, np.int32, keep), h + 5 + 7)
    assert calls == [1, 1]
    assert cuda.cuGraphExecDestroy(exe) == 0
    keep.sync()
    import time
    deadline = time.monotonic() + 10
    while (fn_ref() or src_ref()) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.005)
    assert fn_ref() is None and src_ref() is None


def test_example_graphs(gpu):
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(cucore.__file__)), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, str(root / "examples" / "python" / "graphs.py")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the counter reached 100 (limit 100)" in r.stdout


def test_graph_memory_resource(mod):
    n = 1 << 16
    s = Device(0).create_stream()
    gmr = cucore.GraphMemoryResource(0)
    with pytest.raises(RuntimeError):
        gmr.allocate(1024, stream=s)  # not capturing
    h = np.random.default_rng(8).integers(1, 10**6, n).astype(np.int32)
    src, out = upload(h, s), Device(0).memory_resource.allocate(n * 4, stream=s)
    s.sync()
    gb = s.create_graph_builder().begin_building()
    tmp = gmr.allocate(n * 4, stream=gb)
    src.copy_to(tmp, stream=gb)
    launch(gb, cfg(n), mod.get_kernel("add_int"), tmp, 3, n)
    tmp.copy_to(out, stream=gb)
    tmp.close(stream=gb)  # a free node
    g = gb.end_building().complete(GraphCompleteOptions(auto_free_on_launch=True))
    kinds = {type(node).__name__ for node in gb.graph_definition.nodes()}
    assert {"AllocNode", "FreeNode"} <= kinds
    for _ in range(3):
        g.launch(s)
    np.testing.assert_array_equal(download(out, np.int32, s), h + 3)
    a = gmr.attributes
    assert a.reserved_mem_current >= a.used_mem_current >= 0
    assert a.used_mem_high >= a.used_mem_current
    a.used_mem_high = 0
    with pytest.raises(ValueError):
        a.used_mem_high = 5
    gmr.trim()
