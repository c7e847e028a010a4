"""Python object protocols as cuda.core 1.2 has them on every public class:
weak references, hashing and equality by the underlying handle (two wrappers
of one handle are equal and hash alike; objects of different types never
compare equal), cuda.core's repr formats, pickling of Device and ObjectCode,
truthiness kept after close, and refused direct construction. Objects that
need no GPU are tested everywhere; the rest behind the GPU fixture."""
import itertools
import pickle
import re
import weakref

import pytest

import cucore
from cucore import Buffer, Device, DeviceProperties, Event, Kernel, LaunchConfig, ObjectCode, Program, ProgramOptions, Stream

from conftest import require_gpu

KERNEL = 'extern "C" __global__ void test_kernel() {}'
KERNEL_ALT = 'extern "C" __global__ void test_kernel_alt() {}'


# ---- samples --------------------------------------------------------------------------
def _cpu_samples():
    arch = "sm_90"
    return {
        "launch_config": LaunchConfig(grid=(1,), block=(1,)),
        "launch_config_alt": LaunchConfig(grid=(2,), block=(2,)),
        "object_code": Program(KERNEL, "c++", ProgramOptions(arch=arch)).compile("cubin"),
        "object_code_alt": Program(KERNEL_ALT, "c++", ProgramOptions(arch=arch)).compile("cubin"),
        "program": Program(KERNEL, "c++", ProgramOptions(arch=arch)),
        "stream": Stream.from_handle(0x5A5A50),
        "stream_alt": Stream.from_handle(0x5A5A60),
    }


def _gpu_samples():
    require_gpu()
    dev = Device(0)
    dev.set_current()
    arch = "sm_" + dev.arch
    obj = Program(KERNEL, "c++", ProgramOptions(arch=arch)).compile("cubin")
    obj_alt = Program(KERNEL_ALT, "c++", ProgramOptions(arch=arch)).compile("cubin")
    return {
        "device": dev,
        "stream": dev.create_stream(),
        "stream_alt": dev.create_stream(),
        "event": dev.create_event(),
        "event_alt": dev.create_event(),
        "context": dev.context,
        "buffer": dev.allocate(64, stream=dev.default_stream),
        "buffer_alt": dev.allocate(1024, stream=dev.default_stream),
        "launch_config": LaunchConfig(grid=(1,), block=(1,)),
        "launch_config_alt": LaunchConfig(grid=(2,), block=(2,)),
        "object_code": obj,
        "object_code_alt": obj_alt,
        "kernel": obj.get_kernel("test_kernel"),
        "kernel_alt": obj_alt.get_kernel("test_kernel_alt"),
        "program": Program(KERNEL, "c++", ProgramOptions(arch=arch)),
    }


HASHABLE = ["device", "stream", "event", "context", "buffer", "launch_config", "object_code", "kernel"]
CPU_HASHABLE = ["stream", "launch_config", "object_code"]
REPR = {
    "device": r"<Device \d+ \(.+\)>",
    "stream": r"<Stream handle=0x[0-9a-f]+ context=0x[0-9a-f]+>",
    "event": r"<Event handle=0x[0-9a-f]+>",
    "context": r"<Context handle=0x[0-9a-f]+ device=\d+>",
    "buffer": r"<Buffer ptr=0x[0-9a-f]+ size=\d+>",
    "launch_config": r"LaunchConfig\(grid=\(\d+, \d+, \d+\), cluster=.+, block=\(\d+, \d+, \d+\), shmem_size=\d+, "
                     r"is_cooperative=(?:True|False), programmatic_stream_serialization=(?:True|False)\)",
    "kernel": r"<Kernel handle=0x[0-9a-f]+>",
    "object_code": r"<ObjectCode handle=0x[0-9a-f]+ code_type='cubin'>",
    "program": r"<Program backend='NVRTC'>",
}


def _check_protocols(samples, names):
    for name in names:
        a, b = samples[name], samples[name + "_alt"] if name + "_alt" in samples else None
        assert weakref.ref(a)() is a, name
        wvd = weakref.WeakValueDictionary()
        wvd["k"] = a
        assert wvd["k"] is a
        assert a == a and a != "string" and a is not None, name
        if name not in ("program", "object_code", "launch_config"):  # an ObjectCode's handle loads it
            assert a != a.handle, name
        assert hash(a) == hash(a)
        assert {a: 1}[a] == 1 and a in {a}
        wkd = weakref.WeakKeyDictionary()
        wkd[a] = 2
        assert wkd[a] == 2
        ws = weakref.WeakSet()
        ws.add(a)
        assert a in ws
        if b is not None:
            assert a is not b and a != b and hash(a) != hash(b), name
    for x, y in itertools.combinations(names, 2):
        assert samples[x] != samples[y], (x, y)
        assert hash(samples[x]) != hash(samples[y]), (x, y)


# ---- everywhere ---------------------------------------------------------------------
def test_cpu_objects_follow_the_protocols():
    s = _cpu_samples()
    _check_protocols(s, CPU_HASHABLE)
    p = s["program"]
    assert weakref.ref(p)() is p and re.fullmatch(REPR["program"], repr(p))
    for name in ("launch_config", "object_code"):
        assert re.fullmatch(REPR[name], repr(s[name])), repr(s[name])
    assert repr(s["launch_config"]) == (
        "LaunchConfig(grid=(1, 1, 1), cluster=None, block=(1, 1, 1), shmem_size=0, is_cooperative=False, "
        "programmatic_stream_serialization=False)")
    # Two wrappers of one handle are equal and hash alike.
    twin = Stream.from_handle(int(s["stream"].handle))
    assert twin == s["stream"] and hash(twin) == hash(s["stream"]) and twin is not s["stream"]
    assert {s["stream"]: "v"}[twin] == "v"
    legacy, per_thread = cucore.LEGACY_DEFAULT_STREAM, cucore.PER_THREAD_DEFAULT_STREAM
    assert hash(legacy) != hash(per_thread) and len({legacy: 1, per_thread: 2}) == 2
    assert LaunchConfig(grid=3, block=(4, 2)) == LaunchConfig(grid=(3, 1, 1), block=(4, 2, 1))
    assert hash(LaunchConfig(grid=3, block=(4, 2))) == hash(LaunchConfig(grid=(3, 1, 1), block=(4, 2, 1)))


def test_object_code_pickles():
    obj = _cpu_samples()["object_code"]
    back = pickle.loads(pickle.dumps(obj))
    assert type(back) is ObjectCode and back.code == obj.code and back.code_type == obj.code_type


@pytest.mark.parametrize("cls, message", [
    (Stream, "Stream objects cannot be instantiated directly."),
    (Event, "Event objects cannot be instantiated directly."),
    (Buffer, "Buffer objects cannot be instantiated directly."),
    (DeviceProperties, "DeviceProperties cannot be instantiated directly."),
    (cucore.Context, "Context objects cannot be instantiated directly."),
])
def test_direct_construction_is_refused(cls, message):
    with pytest.raises(RuntimeError, match="^" + re.escape(message)):
        cls()


def test_closed_stream_keeps_its_truth_and_inspection():
    s = Stream.from_handle(0x5A5A70)
    assert not s.is_closed
    s.close()
    assert s.is_closed and bool(s) is True
    repr(s)
    _ = s.handle
    s.close()
    assert s.is_closed


# ---- with a GPU ---------------------------------------------------------------------
def test_gpu_objects_follow_the_protocols():
    s = _gpu_samples()
    _check_protocols(s, [n for n in HASHABLE if n != "device"])
    dev = s["device"]
    assert weakref.ref(dev)() is dev and dev == Device(0) and hash(dev) == hash(Device(0))
    assert dev != 0 and dev != "0"
    for x in HASHABLE:
        if x != "device":
            assert dev != s[x] and hash(dev) != hash(s[x]), x
    for name, pattern in REPR.items():
        assert re.fullmatch(pattern, repr(s[name])), (name, repr(s[name]))
    assert repr(s["context"]).endswith("device=0>")
    # Two wrappers of one handle are equal and hash alike.
    for name, copy in (("stream", lambda x: Stream.from_handle(int(x.handle))),
                       ("buffer", lambda x: Buffer.from_handle(x.handle, x.size)),
                       ("kernel", lambda x: Kernel.from_handle(int(x.handle)))):
        twin = copy(s[name])
        assert twin == s[name] and hash(twin) == hash(s[name]), name
    back = pickle.loads(pickle.dumps(dev))
    assert type(back) is Device and back.device_id == dev.device_id
    dev.sync()


def test_gpu_closeable_objects_keep_truth_and_inspection():
    s = _gpu_samples()
    for name in ("stream", "event", "buffer", "program"):
        obj = s[name]
        assert not obj.is_closed, name
        obj.close()
        assert obj.is_closed and bool(obj) is True, name
        repr(obj)
        _ = obj.handle
        obj.close()
        assert obj.is_closed, name
    Device(0).sync()


# ---- the classes of graphs, green contexts, NVML and the caches ------------------------
from cucore import graph as _graph  # noqa: E402

WEAKREFABLE = [
    cucore.Buffer, cucore.Context, cucore.Device, cucore.DeviceMemoryResource, cucore.Event, cucore.Kernel,
    cucore.LaunchConfig, cucore.ObjectCode, cucore.Program, cucore.Stream, cucore.Linker,
    cucore.SMResource, cucore.WorkqueueResource, cucore.DeviceResources, cucore.GraphMemoryResource,
    _graph.Graph, _graph.GraphBuilder, _graph.GraphDefinition, _graph.GraphCondition, _graph.GraphNode,
    _graph.EmptyNode, _graph.KernelNode, _graph.AllocNode, _graph.FreeNode, _graph.MemsetNode, _graph.MemcpyNode,
    _graph.ChildGraphNode, _graph.EventRecordNode, _graph.EventWaitNode, _graph.HostCallbackNode,
    _graph.ConditionalNode, _graph.IfNode, _graph.IfElseNode, _graph.WhileNode, _graph.SwitchNode,
    cucore.system.Device,
]


@pytest.mark.parametrize("cls", WEAKREFABLE, ids=lambda c: c.__qualname__)
def test_classes_take_weak_references(cls):
    # A type whose instances take weak references has a weak-reference slot
    # (a positive offset, or -1 where Python manages it).
    assert cls.__weakrefoffset__ != 0, cls


def test_program_caches_take_weak_references(tmp_path):
    from cucore.utils import FileStreamProgramCache, InMemoryProgramCache
    for cache in (InMemoryProgramCache(), FileStreamProgramCache(str(tmp_path / "c"))):
        assert weakref.ref(cache)() is cache


@pytest.mark.parametrize("cls, error, message", [
    (_graph.Graph, RuntimeError, "directly constructing a Graph instance is not supported"),
    (_graph.GraphBuilder, NotImplementedError, "directly creating a Graph object can be ambiguous. Please either "
                                               "call Device.create_graph_builder() or stream.create_graph_builder()"),
    (cucore.SMResource, RuntimeError, "SMResource cannot be instantiated directly. "
                                      "Use dev.resources.sm or SMResource.split()."),
    (cucore.WorkqueueResource, RuntimeError, "WorkqueueResource cannot be instantiated directly. "
                                             "Use dev.resources.workqueue."),
    (cucore.DeviceResources, RuntimeError, "DeviceResources cannot be instantiated directly. Use dev.resources."),
])
def test_graph_and_resource_construction_is_refused_as_cuda_core(cls, error, message):
    with pytest.raises(error) as info:
        cls()
    assert str(info.value) == message


def _node_kernels(dev):
    src = r'''
    extern "C" __global__ void add_one(int* p, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) p[i] += 1;
    }'''
    return Program(src, "c++", ProgramOptions(arch="sm_" + dev.arch)).compile("cubin").get_kernel("add_one")


def test_gpu_graph_objects_follow_the_protocols():
    require_gpu()
    dev = Device(0)
    dev.set_current()
    kernel = _node_kernels(dev)
    stream = dev.create_stream()
    buf = dev.allocate(4096, stream=stream)
    src = dev.allocate(4096, stream=stream)
    event = dev.create_event()
    stream.sync()

    def callback_fn():
        pass

    child = _graph.GraphDefinition()
    child.empty()
    g = _graph.GraphDefinition()
    other = _graph.GraphDefinition()
    cond, loop_cond = g.create_condition(1), g.create_condition(0)  # one conditional node per handle
    alloc = g.allocate(1024)
    nodes = {
        "empty": g.empty(),
        "kernel": g.launch(LaunchConfig(grid=1, block=32), kernel, buf, 32),
        "alloc": alloc,
        "free": alloc.deallocate(alloc.dptr),
        "memset": g.memset(buf, 7, 64),
        "memcpy": g.memcpy(buf, src, 256),
        "child": g.embed(child),
        "record": g.record(event),
        "wait": g.wait(event),
        "callback": g.callback(callback_fn),
        "if": g.if_then(cond),
        "while": g.while_loop(loop_cond),
    }
    h = lambda x: "0x%x" % int(x)  # noqa: E731
    expected = {
        "empty": f"<EmptyNode handle={h(nodes['empty'].handle)}>",
        "kernel": f"<KernelNode handle={h(nodes['kernel'].handle)} kernel={h(kernel.handle)}>",
        "alloc": f"<AllocNode handle={h(alloc.handle)} dptr={h(alloc.dptr)} size=1024>",
        "free": f"<FreeNode handle={h(nodes['free'].handle)} dptr={h(alloc.dptr)}>",
        "memset": f"<MemsetNode handle={h(nodes['memset'].handle)} dptr={h(buf.handle)} value=7>",
        "memcpy": f"<MemcpyNode handle={h(nodes['memcpy'].handle)} dst={h(buf.handle)} src={h(src.handle)} size=256>",
        "child": f"<ChildGraphNode handle={h(nodes['child'].handle)} "
                 f"child={h(nodes['child'].child_graph.handle)}>",
        "record": f"<EventRecordNode handle={h(nodes['record'].handle)} event={h(event.handle)}>",
        "wait": f"<EventWaitNode handle={h(nodes['wait'].handle)} event={h(event.handle)}>",
        "callback": f"<HostCallbackNode handle={h(nodes['callback'].handle)} callback=callback_fn>",
        "if": f"<IfNode handle={h(nodes['if'].handle)} condition={h(cond.handle)}>",
        "while": f"<WhileNode handle={h(nodes['while'].handle)} condition={h(loop_cond.handle)}>",
    }
    for name, node in nodes.items():
        assert repr(node) == expected[name], (name, repr(node))
        assert weakref.ref(node)() is node, name
    # The graph's listing gives back the very objects its calls made (one Python object per node).
    listed = {n: n for n in g.nodes()}
    for name, node in nodes.items():
        assert listed[node] is node, name
    for (a, x), (b, y) in itertools.combinations(nodes.items(), 2):
        assert x != y and hash(x) != hash(y), (a, b)
    # Definitions, conditions: by handle; never equal across types.
    assert repr(g) == f"<GraphDefinition handle={h(g.handle)}>" and weakref.ref(g)() is g
    assert g == nodes["empty"].graph and hash(g) == hash(nodes["empty"].graph) and g != other
    assert repr(cond) == f"<GraphCondition handle={h(cond.handle)}>" and weakref.ref(cond)() is cond
    assert cond == nodes["if"].condition and hash(cond) == hash(nodes["if"].condition)
    assert cond != loop_cond and hash(cond) != hash(loop_cond)
    mixed = [g, cond, nodes["empty"], buf, stream, event, kernel]
    for x, y in itertools.combinations(mixed, 2):
        assert x != y and hash(x) != hash(y), (x, y)
    assert g != int(g.handle) and cond != int(cond.handle) and nodes["empty"] != int(nodes["empty"].handle)
    # Executable graphs and builders take weak references (identity, as cuda.core).
    exe = child.instantiate()
    assert weakref.ref(exe)() is exe and exe == exe and exe != child.instantiate()
    builder = dev.create_graph_builder()
    assert weakref.ref(builder)() is builder
    builder.close()
    exe.close()
    # A destroyed node keeps its kind's repr, with a null handle (in a graph
    # without memory nodes: CUDA keeps every node of one that has them).
    plain = type(g)()
    lone = plain.empty()
    lone.destroy()
    assert repr(lone) == "<EmptyNode handle=0x0>"
    dev.sync()


def test_gpu_green_and_nvml_objects_follow_the_protocols():
    require_gpu()
    dev = Device(0)
    dev.set_current()
    res = dev.resources
    sm = res.sm
    for obj in (res, sm):
        assert weakref.ref(obj)() is obj
        assert obj == obj and obj != res.sm  # identity, as cuda.core: a fresh query is another object
    groups, _ = sm.split(cucore.SMResourceOptions(count=sm.min_partition_size))
    ctx = dev.create_context(cucore.ContextOptions([groups[0]]))
    try:
        assert weakref.ref(ctx)() is ctx
        assert re.fullmatch(r"<Context handle=0x[0-9a-f]+ device=0>", repr(ctx)), repr(ctx)
        assert ctx != dev.context and hash(ctx) != hash(dev.context)
        s = ctx.create_stream()
        assert s.context == ctx and hash(s.context) == hash(ctx)
        s.close()
    finally:
        ctx.close()
    sysdev = dev.to_system_device()
    twin = cucore.system.Device(index=0)
    assert weakref.ref(sysdev)() is sysdev
    assert sysdev == twin and hash(sysdev) == hash(twin) and sysdev is not twin
    assert sysdev != dev and sysdev != 0
