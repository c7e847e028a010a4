// cucore._core._graph: cuda.core.graph's classes over cucore::graph
// (GraphBuilder, Graph, GraphDefinition, GraphNode and its kinds, the
// executable-graph node views graph[node] gives, GraphCondition,
// GraphMemoryResource). The options dataclasses and the
// pred/succ set proxies are Python (cucore/graph/__init__.py).
//
// Lifetimes: every Python object a graph uses that owns memory (a Buffer, a
// StridedMemoryView, an operand's owner, a callback) rides in the graph's
// retained Owners as a py_owner, released with the GIL on cucore's release
// thread once the driver lets the graph go.
#include <cucore/graph.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include "common.hpp"
#include "launch_args.hpp"

namespace cucore::python {
namespace {

using cucore::graph::ExecutableGraphNode;
using cucore::graph::Graph;
using cucore::graph::GraphBuilder;
using cucore::graph::GraphCondition;
using cucore::graph::GraphDefinition;
using cucore::graph::GraphMemoryResource;
using cucore::graph::GraphNode;

// ---- node kinds: each a Python subclass over the same C++ value --------------------------
#define CUCORE_NODE_KIND(Name) \
  struct Name : GraphNode {    \
    Name(const GraphNode& n) : GraphNode(n) {} \
  };
CUCORE_NODE_KIND(EmptyNode)
CUCORE_NODE_KIND(KernelNode)
CUCORE_NODE_KIND(AllocNode)
CUCORE_NODE_KIND(FreeNode)
CUCORE_NODE_KIND(MemsetNode)
CUCORE_NODE_KIND(MemcpyNode)
CUCORE_NODE_KIND(ChildGraphNode)
CUCORE_NODE_KIND(EventRecordNode)
CUCORE_NODE_KIND(EventWaitNode)
CUCORE_NODE_KIND(HostCallbackNode)
CUCORE_NODE_KIND(ConditionalNode)
#undef CUCORE_NODE_KIND
#define CUCORE_CONDITIONAL_KIND(Name) \
  struct Name : ConditionalNode {     \
    Name(const GraphNode& n) : ConditionalNode(n) {} \
  };
CUCORE_CONDITIONAL_KIND(IfNode)
CUCORE_CONDITIONAL_KIND(IfElseNode)
CUCORE_CONDITIONAL_KIND(WhileNode)
CUCORE_CONDITIONAL_KIND(SwitchNode)
#undef CUCORE_CONDITIONAL_KIND

// ---- executable-node views (graph[node]): a Python class per kind over the same C++ view --
#define CUCORE_EXECUTABLE_KIND(Name) \
  struct Name : ExecutableGraphNode { \
    Name(const ExecutableGraphNode& v) : ExecutableGraphNode(v) {} \
  };
CUCORE_EXECUTABLE_KIND(ExecutableKernelNode)
CUCORE_EXECUTABLE_KIND(ExecutableMemsetNode)
CUCORE_EXECUTABLE_KIND(ExecutableMemcpyNode)
CUCORE_EXECUTABLE_KIND(ExecutableChildGraphNode)
CUCORE_EXECUTABLE_KIND(ExecutableEventRecordNode)
CUCORE_EXECUTABLE_KIND(ExecutableEventWaitNode)
CUCORE_EXECUTABLE_KIND(ExecutableHostCallbackNode)
#undef CUCORE_EXECUTABLE_KIND

// ---- GraphNode.type: a CUgraphNodeType member, as cuda.core gives it --------------------
// cuda.bindings.driver.CUgraphNodeType where cuda.bindings imports (cuda.core's
// own), else cucore.graph.CUgraphNodeType, the same names and values; a type
// newer than this build's cuda.h is the plain int in that case.
constexpr std::pair<const char*, CUgraphNodeType> kNodeTypes[] = {
    {"CU_GRAPH_NODE_TYPE_KERNEL", CU_GRAPH_NODE_TYPE_KERNEL},
    {"CU_GRAPH_NODE_TYPE_MEMCPY", CU_GRAPH_NODE_TYPE_MEMCPY},
    {"CU_GRAPH_NODE_TYPE_MEMSET", CU_GRAPH_NODE_TYPE_MEMSET},
    {"CU_GRAPH_NODE_TYPE_HOST", CU_GRAPH_NODE_TYPE_HOST},
    {"CU_GRAPH_NODE_TYPE_GRAPH", CU_GRAPH_NODE_TYPE_GRAPH},
    {"CU_GRAPH_NODE_TYPE_EMPTY", CU_GRAPH_NODE_TYPE_EMPTY},
    {"CU_GRAPH_NODE_TYPE_WAIT_EVENT", CU_GRAPH_NODE_TYPE_WAIT_EVENT},
    {"CU_GRAPH_NODE_TYPE_EVENT_RECORD", CU_GRAPH_NODE_TYPE_EVENT_RECORD},
    {"CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL", CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL},
    {"CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT", CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT},
    {"CU_GRAPH_NODE_TYPE_MEM_ALLOC", CU_GRAPH_NODE_TYPE_MEM_ALLOC},
    {"CU_GRAPH_NODE_TYPE_MEM_FREE", CU_GRAPH_NODE_TYPE_MEM_FREE},
    {"CU_GRAPH_NODE_TYPE_BATCH_MEM_OP", CU_GRAPH_NODE_TYPE_BATCH_MEM_OP},
    {"CU_GRAPH_NODE_TYPE_CONDITIONAL", CU_GRAPH_NODE_TYPE_CONDITIONAL},
};

nb::object node_type_object(CUgraphNodeType t) {
  nb::object v = bindings_handle(HandleKind::graph_node_type, static_cast<std::uintptr_t>(t));
  if (!PyLong_CheckExact(v.ptr())) return v;
  for (const auto& [name, value] : kNodeTypes)
    if (value == t) return nb::cast(t);
  return v;
}

// ConditionalNode.cond_type: cucore.typing.GraphConditionalType's member, as
// cuda.core returns cuda.core.typing's (a StrEnum: equal to "if", ...).
nb::object conditional_type_object(cucore::graph::GraphConditionalType t) {
  static PyObject* cls = [] {
    nb::object c = nb::module_::import_("cucore.typing").attr("GraphConditionalType");
    return c.release().ptr();  // kept for the process
  }();
  return nb::handle(cls)(cucore::graph::to_string(t));
}

// A new Python object of the node's kind.
nb::object new_node_object(const GraphNode& n) {
  switch (n.type()) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return nb::cast(KernelNode(n));
    case CU_GRAPH_NODE_TYPE_MEMCPY: return nb::cast(MemcpyNode(n));
    case CU_GRAPH_NODE_TYPE_MEMSET: return nb::cast(MemsetNode(n));
    case CU_GRAPH_NODE_TYPE_HOST: return nb::cast(HostCallbackNode(n));
    case CU_GRAPH_NODE_TYPE_GRAPH: return nb::cast(ChildGraphNode(n));
    case CU_GRAPH_NODE_TYPE_EMPTY: return nb::cast(EmptyNode(n));
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return nb::cast(EventWaitNode(n));
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return nb::cast(EventRecordNode(n));
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return nb::cast(AllocNode(n));
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return nb::cast(FreeNode(n));
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      try {
        switch (n.conditional_type()) {
          case cucore::graph::GraphConditionalType::WHILE: return nb::cast(WhileNode(n));
          case cucore::graph::GraphConditionalType::SWITCH: return nb::cast(SwitchNode(n));
          default: return n.branches().size() == 2 ? nb::cast(IfElseNode(n)) : nb::cast(IfNode(n));
        }
      } catch (const std::invalid_argument&) {
        return nb::cast(ConditionalNode(n));  // one cucore did not make
      }
    default: return nb::cast(n);
  }
}

// One Python object per node, as cuda.core: the node's shared state (one per
// CUgraphNode, libcucore's) records the GraphNode inside the node's live
// Python object, and that GraphNode's destructor clears the record, so no
// table or weak reference is kept here. Whoever reaches the node (the call
// that made it, nodes(), edges(), pred, succ) gets that object while it lives.
nb::object wrap_node(const GraphNode& n) {
  if (PyObject* o = static_cast<PyObject*>(const_cast<void*>(n.face())); o && Py_REFCNT(o) > 0)
    return nb::borrow(o);  // (a count of 0: being deallocated, its weak references' callbacks running)
  nb::object o = new_node_object(n);
  nb::inst_ptr<GraphNode>(o)->set_face(o.ptr());
  return o;
}

// ---- options: cucore.graph's dataclasses, a dict, None, or any object with the fields ----
nb::object field(nb::handle o, const char* name) {
  if (o.is_none()) return nb::none();
  if (PyDict_Check(o.ptr())) {
    PyObject* v = PyDict_GetItemString(o.ptr(), name);
    return v ? nb::borrow(v) : nb::none();
  }
  return nb::getattr(o, name, nb::none());
}
bool flag(nb::handle o, const char* name) {
  nb::object v = field(o, name);
  if (v.is_none()) return false;
  int t = PyObject_IsTrue(v.ptr());
  if (t < 0) throw nb::python_error();
  return t != 0;
}

cucore::graph::GraphCompleteOptions complete_options(nb::handle o) {
  cucore::graph::GraphCompleteOptions opts;
  opts.auto_free_on_launch = flag(o, "auto_free_on_launch");
  opts.device_launch = flag(o, "device_launch");
  opts.use_node_priority = flag(o, "use_node_priority");
  nb::object s = field(o, "upload_stream");
  if (!s.is_none()) opts.upload_stream = stream_arg(s, "GraphCompleteOptions.upload_stream");
  return opts;
}

cucore::graph::GraphDebugPrintOptions print_options(nb::handle o) {
  cucore::graph::GraphDebugPrintOptions p;
  p.verbose = flag(o, "verbose");
  p.runtime_types = flag(o, "runtime_types");
  p.kernel_node_params = flag(o, "kernel_node_params");
  p.memcpy_node_params = flag(o, "memcpy_node_params");
  p.memset_node_params = flag(o, "memset_node_params");
  p.host_node_params = flag(o, "host_node_params");
  p.event_node_params = flag(o, "event_node_params");
  p.ext_semas_signal_node_params = flag(o, "ext_semas_signal_node_params");
  p.ext_semas_wait_node_params = flag(o, "ext_semas_wait_node_params");
  p.kernel_node_attributes = flag(o, "kernel_node_attributes");
  p.handles = flag(o, "handles");
  p.mem_alloc_node_params = flag(o, "mem_alloc_node_params");
  p.mem_free_node_params = flag(o, "mem_free_node_params");
  p.batch_mem_op_node_params = flag(o, "batch_mem_op_node_params");
  p.extra_topo_info = flag(o, "extra_topo_info");
  p.conditional_node_params = flag(o, "conditional_node_params");
  return p;
}

// debug_dot_print's options, checked as cuda.core checks them: GraphDefinition
// takes a GraphDebugPrintOptions or None (TypeError otherwise); GraphBuilder
// reads any truthy options through the dataclass's own method, so another
// object fails there with AttributeError, and a falsy one means no flags.
bool is_debug_print_options(nb::handle o) {
  static PyObject* cls = [] {
    nb::object c = nb::module_::import_("cucore.graph").attr("GraphDebugPrintOptions");
    return c.release().ptr();  // kept for the process
  }();
  int r = PyObject_IsInstance(o.ptr(), cls);
  if (r < 0) throw nb::python_error();
  return r != 0;
}
cucore::graph::GraphDebugPrintOptions definition_print_options(nb::handle o) {
  if (!o.is_none() && !is_debug_print_options(o)) raise_type_error("options must be a GraphDebugPrintOptions instance");
  return print_options(o);
}
cucore::graph::GraphDebugPrintOptions builder_print_options(nb::handle o) {
  int truthy = PyObject_IsTrue(o.ptr());
  if (truthy < 0) throw nb::python_error();
  if (!truthy) return {};
  if (!is_debug_print_options(o)) {
    const std::string msg = std::string("'") + Py_TYPE(o.ptr())->tp_name +
                            "' object has no attribute '_to_flags' (debug_dot_print's options must be a "
                            "GraphDebugPrintOptions)";
    PyErr_SetString(PyExc_AttributeError, msg.c_str());
    throw nb::python_error();
  }
  return print_options(o);
}

std::optional<unsigned> default_value_arg(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  long long x = nb::cast<long long>(v);
  if (x < 0 || x > 0xffffffffLL) raise_value_error("default_value must fit in 32 bits unsigned");
  return static_cast<unsigned>(x);
}

std::string path_arg(nb::handle p) { return nb::cast<std::string>(nb::str(p)); }

// ---- host callbacks ---------------------------------------------------------------------------
void CUDA_CB py_host_trampoline(void* fn) noexcept {
  if (!python_alive()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* r = PyObject_CallNoArgs(static_cast<PyObject*>(fn));
  if (!r) PyErr_WriteUnraisable(static_cast<PyObject*>(fn));
  Py_XDECREF(r);
  PyGILState_Release(gil);
}

// A callback as (function, user data, owner): a Python callable through the
// trampoline, or a ctypes CFUNCTYPE(None, c_void_p) pointer with its user data
// (an int, or bytes copied and kept with the graph).
struct HostCall {
  CUhostFn fn = nullptr;
  void* data = nullptr;
  std::shared_ptr<const void> owner;
};

HostCall host_call(nb::handle fn, nb::handle user_data) {
  nb::module_ ctypes = nb::module_::import_("ctypes");
  if (PyObject_IsInstance(fn.ptr(), ctypes.attr("_CFuncPtr").ptr()) == 1) {
    nb::object restype = nb::getattr(fn, "restype", nb::none());
    nb::object argtypes = nb::getattr(fn, "argtypes", nb::none());
    const bool ok = restype.is_none() && !argtypes.is_none() && nb::len(argtypes) == 1 &&
                    argtypes[0].is(ctypes.attr("c_void_p"));
    if (!ok)
      raise_type_error("callback: a ctypes function must be declared ctypes.CFUNCTYPE(None, ctypes.c_void_p) "
                       "(the driver's CUhostFn), got restype " + nb::cast<std::string>(nb::repr(restype)) +
                       " and argtypes " + nb::cast<std::string>(nb::repr(argtypes)));
    HostCall c;
    nb::object address = ctypes.attr("cast")(fn, ctypes.attr("c_void_p")).attr("value");
    c.fn = reinterpret_cast<CUhostFn>(pointer_arg(address, "callback"));
    auto fn_owner = py_owner(fn);
    if (user_data.is_none()) {
      c.owner = fn_owner;
    } else if (PyLong_Check(user_data.ptr())) {
      c.data = reinterpret_cast<void*>(pointer_arg(user_data, "user_data"));
      c.owner = fn_owner;
    } else {
      Py_buffer view;
      if (PyObject_GetBuffer(user_data.ptr(), &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
      auto copy = std::make_shared<std::pair<std::shared_ptr<const void>, std::vector<unsigned char>>>();
      copy->first = fn_owner;
      copy->second.assign(static_cast<unsigned char*>(view.buf), static_cast<unsigned char*>(view.buf) + view.len);
      PyBuffer_Release(&view);
      c.data = copy->second.data();
      c.owner = copy;
    }
    return c;
  }
  if (!PyCallable_Check(fn.ptr())) raise_type_error("callback: fn must be callable or a ctypes function pointer");
  if (!user_data.is_none()) raise_value_error("callback: user_data is only for ctypes function pointers");
  return {py_host_trampoline, fn.ptr(), py_owner(fn)};
}

// The Buffers and views among a launch's arguments as one Owner, so a node
// costs the graph one user object for them all.
std::shared_ptr<const void> argument_owners(PyObject* const* items, std::size_t n) {
  std::vector<std::shared_ptr<const void>> owners;
  for (std::size_t i = 0; i < n; ++i)
    if (Py_TYPE(items[i]) == g_types.buffer || Py_TYPE(items[i]) == g_types.view) owners.push_back(py_owner(items[i]));
  if (owners.size() <= 1) return owners.empty() ? nullptr : std::move(owners[0]);
  return std::make_shared<const std::vector<std::shared_ptr<const void>>>(std::move(owners));
}

// ---- the node builders shared by GraphDefinition and GraphNode ------------------------------
GraphDefinition graph_of(const GraphDefinition& d) { return d; }
GraphDefinition graph_of(const GraphNode& n) { return n.graph(); }

// A Buffer (its device pointer; the graph keeps the Buffer) or an int (kept
// alive by `owner` when given).
CUdeviceptr operand(const GraphDefinition& g, nb::handle obj, nb::handle owner, const char* name) {
  if (Py_TYPE(obj.ptr()) == g_types.buffer) {
    if (!owner.is_none())
      raise_value_error(std::string(name) + "_owner must not be given with a Buffer " + name);
    const auto& b = *nb::inst_ptr<cucore::Buffer>(obj);
    if (b.is_closed()) throw cucore::ClosedError("Buffer", name);
    g.retain(py_owner(obj));
    return b.handle();
  }
  if (!owner.is_none()) g.retain(py_owner(owner));
  return static_cast<CUdeviceptr>(pointer_arg(obj, name));
}

GraphCondition condition_arg(nb::handle c) {
  if (!g_types.graph_condition || Py_TYPE(c.ptr()) != g_types.graph_condition)
    raise_type_error("condition must be a GraphCondition (from create_condition())");
  return *nb::inst_ptr<GraphCondition>(c);
}

// A size-like keyword of update(): an int (OverflowError for a negative or
// too large one, TypeError for another type, naming it).
std::size_t size_kw(nb::handle v, const char* what) {
  return static_cast<std::size_t>(uint64_arg(v, std::string("update: ") + what));
}

// A memset's fill value: an int is one byte; else an object of 1, 2 or 4 bytes
// (a numpy scalar, bytes), read through the buffer protocol. (bits, size).
std::pair<std::uint32_t, unsigned> fill_value(nb::handle value) {
  if (PyLong_Check(value.ptr())) {
    long long v = nb::cast<long long>(value);
    if (v < 0 || v > 255) raise_value_error("memset: an int value is one byte, in [0, 256)");
    return {static_cast<std::uint32_t>(v), 1};
  }
  Py_buffer view;
  if (PyObject_GetBuffer(value.ptr(), &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
  std::uint32_t bits = 0;
  const Py_ssize_t len = view.len;
  if (len == 1 || len == 2 || len == 4) std::memcpy(&bits, view.buf, static_cast<std::size_t>(len));
  PyBuffer_Release(&view);
  if (len != 1 && len != 2 && len != 4)
    raise_value_error("memset: value must be an int or an object of 1, 2 or 4 bytes, got " + std::to_string(len) +
                      " bytes");
  return {bits, static_cast<unsigned>(len)};
}

template <typename T>
void bind_node_builders(nb::class_<T, cucore::graph::detail::NodeMaker>& c) {
  c.def("empty", [](const T& self) { return wrap_node(self.empty()); })
      .def("join", [](const T& self, nb::args nodes) {
        std::vector<GraphNode> v;
        for (nb::handle h : nodes) v.push_back(nb::cast<GraphNode>(h));
        return wrap_node(self.join(std::span<const GraphNode>(v)));
      })
      .def("launch", [](const T& self, const cucore::LaunchConfig& config, const cucore::Kernel& kernel,
                        nb::args args) {
        const std::size_t n = nb::len(args);
        PackedArgs packed;
        PyObject* const* items = n ? &PyTuple_GET_ITEM(args.ptr(), 0) : nullptr;
        pack_kernel_args(kernel, items, n, packed);
        GraphNode node = self.add_kernel(config, kernel, packed.pointers, packed.descs, n);
        if (auto owners = argument_owners(items, n)) graph_of(self).retain(std::move(owners));
        return wrap_node(node);
      }, nb::arg("config"), nb::arg("kernel"), nb::arg("args"))
      .def("allocate", [](const T& self, std::size_t size, nb::handle device, nb::handle memory_type,
                          nb::handle peer_access) {
        cucore::graph::GraphAllocOptions o;
        if (!device.is_none())
          o.device = PyObject_TypeCheck(device.ptr(), g_types.device) ? nb::inst_ptr<PyDevice>(device)->dev.ordinal()
                                                                      : nb::cast<int>(device);
        std::string mt = nb::cast<std::string>(nb::str(memory_type));
        if (mt == "device") o.memory_type = cucore::graph::GraphMemoryType::DEVICE;
        else if (mt == "host") o.memory_type = cucore::graph::GraphMemoryType::HOST;
        else if (mt == "managed") o.memory_type = cucore::graph::GraphMemoryType::MANAGED;
        else raise_value_error("allocate: memory_type must be 'device', 'host' or 'managed', got '" + mt + "'");
        if (!peer_access.is_none())
          for (nb::handle p : peer_access)
            o.peer_access.push_back(PyObject_TypeCheck(p.ptr(), g_types.device) ? nb::inst_ptr<PyDevice>(p)->dev.ordinal()
                                                                                : nb::cast<int>(p));
        return wrap_node(self.allocate(size, o));
      }, nb::arg("size"), nb::kw_only(), nb::arg("device") = nb::none(), nb::arg("memory_type") = "device",
         nb::arg("peer_access") = nb::none())
      .def("deallocate", [](const T& self, nb::handle dptr) {
        return wrap_node(self.deallocate(static_cast<CUdeviceptr>(pointer_arg(dptr, "dptr"))));
      }, nb::arg("dptr"))
      .def("memset", [](const T& self, nb::handle dst, nb::handle value, std::size_t width, std::size_t height,
                        std::size_t pitch, nb::handle dst_owner) {
        GraphDefinition g = graph_of(self);
        CUdeviceptr p = operand(g, dst, dst_owner, "dst");
        auto [bits, size] = fill_value(value);
        if (size == 1) return wrap_node(self.memset(p, static_cast<std::uint8_t>(bits), width, height, pitch));
        if (size == 2) return wrap_node(self.memset(p, static_cast<std::uint16_t>(bits), width, height, pitch));
        return wrap_node(self.memset(p, bits, width, height, pitch));
      }, nb::arg("dst"), nb::arg("value"), nb::arg("width"), nb::arg("height") = 1, nb::arg("pitch") = 0,
         nb::kw_only(), nb::arg("dst_owner") = nb::none())
      .def("memcpy", [](const T& self, nb::handle dst, nb::handle src, std::size_t size, nb::handle dst_owner,
                        nb::handle src_owner) {
        GraphDefinition g = graph_of(self);
        CUdeviceptr d = operand(g, dst, dst_owner, "dst");
        CUdeviceptr s = operand(g, src, src_owner, "src");
        return wrap_node(self.memcpy(d, s, size));
      }, nb::arg("dst"), nb::arg("src"), nb::arg("size"), nb::kw_only(), nb::arg("dst_owner") = nb::none(),
         nb::arg("src_owner") = nb::none())
      .def("embed", [](const T& self, const GraphDefinition& child) { return wrap_node(self.embed(child)); },
           nb::arg("child"))
      .def("record", [](const T& self, const cucore::Event& e) { return wrap_node(self.record(e)); }, nb::arg("event"))
      .def("wait", [](const T& self, const cucore::Event& e) { return wrap_node(self.wait(e)); }, nb::arg("event"))
      .def("callback", [](const T& self, nb::handle fn, nb::handle user_data) {
        HostCall c = host_call(fn, user_data);
        return wrap_node(self.callback(c.fn, c.data, std::move(c.owner)));
      }, nb::arg("fn"), nb::kw_only(), nb::arg("user_data") = nb::none())
      .def("if_then", [](const T& self, nb::handle c) { return wrap_node(self.if_then(condition_arg(c))); },
           nb::arg("condition"))
      .def("if_else", [](const T& self, nb::handle c) { return wrap_node(self.if_else(condition_arg(c))); },
           nb::arg("condition"))
      .def("while_loop", [](const T& self, nb::handle c) { return wrap_node(self.while_loop(condition_arg(c))); },
           nb::arg("condition"))
      .def("switch", [](const T& self, nb::handle c, std::size_t count) {
        return wrap_node(self.switch_(condition_arg(c), count));
      }, nb::arg("condition"), nb::arg("count"));
}

nb::tuple builders_tuple(std::vector<GraphBuilder> v) {
  nb::list l;
  for (auto& b : v) l.append(nb::cast(std::move(b)));
  return nb::tuple(l);
}

std::uintptr_t as_int(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

std::string hex(unsigned long long v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", v);
  return buf;
}

// What a node's repr shows after its handle, as cuda.core shows it per kind
// (cucore copies through the unified address space, so MemcpyNode has no
// (H)/(D) marks). A node whose details the driver no longer gives shows none.
std::string node_details(nb::handle self, const GraphNode& n) {
  try {
    switch (n.type()) {
      case CU_GRAPH_NODE_TYPE_KERNEL: return " kernel=" + hex(as_int(n.kernel_params().kernel.handle()));
      case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        auto a = n.alloc_params();
        return " dptr=" + hex(a.dptr) + " size=" + std::to_string(a.bytesize);
      }
      case CU_GRAPH_NODE_TYPE_MEM_FREE: return " dptr=" + hex(n.free_dptr());
      case CU_GRAPH_NODE_TYPE_MEMSET: {
        auto m = n.memset_params();
        return " dptr=" + hex(m.dptr) + " value=" + std::to_string(m.value);
      }
      case CU_GRAPH_NODE_TYPE_MEMCPY: {
        auto c = n.memcpy_params();
        return " dst=" + hex(c.dst) + " src=" + hex(c.src) + " size=" + std::to_string(c.size);
      }
      case CU_GRAPH_NODE_TYPE_GRAPH: return " child=" + hex(as_int(n.child_graph().handle()));
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return " event=" + hex(as_int(n.event().handle()));
      case CU_GRAPH_NODE_TYPE_HOST: {
        PyObject* o = py_owner_object(n.callback_owner());
        if (o && PyCallable_Check(o) && !PyObject_HasAttrString(o, "argtypes"))
          return " callback=" + nb::cast<std::string>(nb::getattr(nb::handle(o), "__name__", nb::str("?")));
        unsigned long long fn = 0;
        if (o) {
          nb::module_ ctypes = nb::module_::import_("ctypes");
          nb::object v = ctypes.attr("cast")(nb::handle(o), ctypes.attr("c_void_p")).attr("value");
          if (!v.is_none()) fn = nb::cast<unsigned long long>(v);
        }
        return " cfunc=" + hex(fn);
      }
      case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        if (Py_TYPE(self.ptr()) == reinterpret_cast<PyTypeObject*>(nb::type<ConditionalNode>().ptr())) return "";
        return " condition=" + hex(n.condition().handle);
      default: return "";
    }
  } catch (const nb::python_error&) {
    PyErr_Clear();
  } catch (const std::exception&) {
  }
  return "";
}

std::string node_repr(nb::handle self) {
  const auto& n = nb::cast<const GraphNode&>(self);
  auto name = nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(self.ptr()))).attr("__name__"));
  if (name == "GraphNode" && !n.handle()) return "<GraphNode destroyed>";
  return "<" + name + " handle=" + hex(as_int(n.handle())) + (n.handle() ? node_details(self, n) : "") + ">";
}

// ---- executable-node views ----------------------------------------------------------------
std::string type_name_of(nb::handle o) {
  return nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(o.ptr()))).attr("__name__"));
}

[[noreturn]] void raise_runtime_error(const char* msg) {
  PyErr_SetString(PyExc_RuntimeError, msg);
  throw nb::python_error();
}

// The view, while its definition node is there (cuda.core's RuntimeError once destroyed).
const ExecutableGraphNode& live_view(const ExecutableGraphNode& v) {
  if (!v.node().is_valid()) raise_runtime_error("GraphNode has been destroyed");
  return v;
}

// graph[node], checked as cuda.core checks it: a GraphNode (TypeError), not
// destroyed (RuntimeError), of a kind with executable updates (TypeError),
// the graph open (ValueError); the view's class is the node's kind's.
nb::object executable_view(const Graph& g, nb::handle node) {
  if (!nb::isinstance<GraphNode>(node))
    raise_type_error("Argument 'node' has incorrect type (expected GraphNode, got " + type_name_of(node) + ")");
  const auto& n = nb::cast<const GraphNode&>(node);
  if (!n.is_valid()) raise_runtime_error("GraphNode has been destroyed");
  const CUgraphNodeType t = n.type();
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_GRAPH:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_HOST: break;
    default: raise_type_error(type_name_of(node) + " does not support executable updates");
  }
  if (g.is_closed()) raise_value_error("executable graph has been closed");
  const ExecutableGraphNode v = g[n];
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return nb::cast(ExecutableKernelNode(v));
    case CU_GRAPH_NODE_TYPE_MEMSET: return nb::cast(ExecutableMemsetNode(v));
    case CU_GRAPH_NODE_TYPE_MEMCPY: return nb::cast(ExecutableMemcpyNode(v));
    case CU_GRAPH_NODE_TYPE_GRAPH: return nb::cast(ExecutableChildGraphNode(v));
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return nb::cast(ExecutableEventRecordNode(v));
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return nb::cast(ExecutableEventWaitNode(v));
    default: return nb::cast(ExecutableHostCallbackNode(v));
  }
}

std::string view_repr(nb::handle self) {
  const auto& v = nb::cast<const ExecutableGraphNode&>(self);
  return "<" + type_name_of(self) + " graph=" + hex(as_int(v.graph_handle())) + " node=" + hex(as_int(v.node().handle())) +
         ">";
}

// An executable update's operand: a Buffer (its device pointer; the executable
// graph keeps the Buffer through `owner`) or an int address (the caller's).
CUdeviceptr view_operand(nb::handle obj, const char* name, std::shared_ptr<const void>& owner) {
  if (Py_TYPE(obj.ptr()) == g_types.buffer) {
    const auto& b = *nb::inst_ptr<cucore::Buffer>(obj);
    if (b.is_closed()) throw cucore::ClosedError("Buffer", name);
    owner = py_owner(obj);
    return b.handle();
  }
  return static_cast<CUdeviceptr>(pointer_arg(obj, name));
}

// graph[node] makes views; cuda.core's error for any other way (nanobind's
// subclasses do not inherit the base's __init__: each class gets it).
template <typename T, typename... Base>
nb::class_<T, Base...> view_class(nb::module_& m, const char* name, const char* doc) {
  auto c = [&] {
    if constexpr (sizeof...(Base) == 0) return nb::class_<T>(m, name, doc, nb::is_weak_referenceable());
    else return nb::class_<T, Base...>(m, name, doc);  // weak references: the base's
  }();
  c.def("__init__", [](T*, nb::args, nb::kwargs) {
    raise_runtime_error("directly constructing an executable graph node is not supported");
  });
  return c;
}

template <typename T>
void bind_enabling(nb::class_<T, ExecutableGraphNode>& c) {
  c.def_prop_ro("is_enabled", [](const T& v) { return live_view(v).is_enabled(); },
                "Whether this node is enabled in the executable graph.")
      .def("enable", [](const T& v) { live_view(v).enable(); }, "Enable this node in the executable graph.")
      .def("disable", [](const T& v) { live_view(v).disable(); },
           "Disable this node in the executable graph: its launches do nothing there.");
}

// GraphMemoryResource.attributes: a view that reads the driver each time.
struct GraphMemoryAttributes {
  GraphMemoryResource mr;
};

}  // namespace

cucore::StreamRef graph_builder_launch_stream(PyObject* builder, const cucore::Kernel& kernel,
                                              PyObject* const* args, std::size_t n) {
  const auto& gb = *nb::inst_ptr<GraphBuilder>(builder);
  cucore::StreamRef s = gb.launch_stream(kernel);
  if (auto owners = argument_owners(args, n)) gb.retain(std::move(owners));
  return s;
}

void bind_graph(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_graph", "cuda.core.graph's classes (see cucore.graph)");

  auto cond = nb::class_<GraphCondition>(m, "GraphCondition",
      "A conditional node's variable; pass it to a kernel as a launch argument (its CUgraphConditionalHandle).",
      nb::is_weak_referenceable())
      .def_prop_ro("handle", [](const GraphCondition& c) { return static_cast<unsigned long long>(c.handle); })
      .def("__eq__", [](const GraphCondition& a, nb::handle b) {
        return Py_TYPE(b.ptr()) == g_types.graph_condition && a == *nb::inst_ptr<GraphCondition>(b);
      })
      .def("__hash__", [](const GraphCondition& c) {
        return nb::hash(nb::make_tuple("GraphCondition", static_cast<unsigned long long>(c.handle)));
      })
      .def("__repr__", [](const GraphCondition& c) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "<GraphCondition handle=0x%llx>", static_cast<unsigned long long>(c.handle));
        return std::string(buf);
      });
  g_types.graph_condition = reinterpret_cast<PyTypeObject*>(cond.ptr());

  nb::class_<Graph>(m, "Graph", "An executable graph: launch(stream), upload(stream), update(source), close().",
                   nb::is_weak_referenceable())
      .def("__init__", [](Graph*, nb::args, nb::kwargs) {
        PyErr_SetString(PyExc_RuntimeError, "directly constructing a Graph instance is not supported");
        throw nb::python_error();
      })
      .def("close", &Graph::close)
      .def_prop_ro("is_closed", &Graph::is_closed)
      .def_prop_ro("handle", [](const Graph& g) { return bindings_handle(HandleKind::graph_exec, g.handle()); },
                   "The CUgraphExec as cuda.core gives it (a cuda.bindings.driver.CUgraphExec, else an int).")
      .def("launch", [](const Graph& g, nb::handle stream) {
        cucore::StreamRef s = stream_arg(stream, "Graph.launch: stream");
        nb::gil_scoped_release release;
        g.launch(s);
      }, nb::arg("stream"))
      .def("upload", [](const Graph& g, nb::handle stream) { g.upload(stream_arg(stream, "Graph.upload: stream")); },
           nb::arg("stream"))
      .def("update", [](Graph& g, nb::handle source) {
        if (nb::isinstance<GraphBuilder>(source)) g.update(nb::cast<const GraphBuilder&>(source));
        else if (nb::isinstance<GraphDefinition>(source)) g.update(nb::cast<const GraphDefinition&>(source));
        else raise_type_error("Graph.update: source must be a GraphBuilder or a GraphDefinition");
      }, nb::arg("source"))
      .def("__getitem__", &executable_view, nb::arg("node"),
           "A view of `node` (a node of the definition this graph was made from) in this executable graph, "
           "whose update() changes this graph's future launches without instantiating it again.")
      .def("__repr__", [](const Graph& g) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "<Graph handle=0x%llx%s>", (unsigned long long)as_int(g.handle()),
                      g.is_closed() ? " closed" : "");
        return std::string(buf);
      });

  // ---- graph[node]: executable-node views, one class per kind (cuda.core 1.2's) ----
  view_class<ExecutableGraphNode>(m, "ExecutableGraphNode",
      "A view pairing an executable graph with a node of its definition; made by graph[node]. The driver "
      "checks the node is one of the graph's when an update is made. The view keeps both alive.")
      .def("__repr__", &view_repr);
  auto ekernel = view_class<ExecutableKernelNode, ExecutableGraphNode>(m, "ExecutableKernelNode",
      "An executable kernel-node view.")
      .def("update", [](const ExecutableKernelNode& v, nb::handle config, nb::handle kernel, nb::handle args) {
        live_view(v);
        if (!nb::isinstance<cucore::LaunchConfig>(config))
          raise_type_error("update: config must be a LaunchConfig, got " + type_name_of(config));
        if (!nb::isinstance<cucore::Kernel>(kernel))
          raise_type_error("update: kernel must be a Kernel, got " + type_name_of(kernel));
        const auto& cfg = nb::cast<const cucore::LaunchConfig&>(config);
        if (cfg.cluster.is_set() || cfg.is_cooperative) {
          PyErr_SetString(PyExc_NotImplementedError, "updating clustered or cooperative kernel nodes is not supported");
          throw nb::python_error();
        }
        const auto& k = nb::cast<const cucore::Kernel&>(kernel);
        nb::object items = nb::steal(PySequence_Tuple(args.ptr()));
        if (!items.is_valid()) throw nb::python_error();
        const std::size_t count = static_cast<std::size_t>(PyTuple_GET_SIZE(items.ptr()));
        PyObject* const* a = count ? &PyTuple_GET_ITEM(items.ptr(), 0) : nullptr;
        PackedArgs packed;
        pack_kernel_args(k, a, count, packed);
        v.update_packed_kernel(cfg, k, packed.pointers, packed.descs, count, argument_owners(a, count));
      }, nb::kw_only(), nb::arg("config"), nb::arg("kernel"), nb::arg("args"),
         "Replaces the whole launch (args: every argument, () for none) for this graph's future launches; "
         "no cluster or cooperative launch.");
  bind_enabling(ekernel);
  auto ememset = view_class<ExecutableMemsetNode, ExecutableGraphNode>(m, "ExecutableMemsetNode",
      "An executable memset-node view.")
      .def("update", [](const ExecutableMemsetNode& v, nb::handle dst, nb::handle value, nb::handle width,
                        nb::handle height, nb::handle pitch) {
        live_view(v);
        std::shared_ptr<const void> owner;
        const CUdeviceptr p = view_operand(dst, "dst", owner);
        auto [bits, size] = fill_value(value);
        v.update_memset({.dptr = p, .value = bits, .element_size = size, .width = size_kw(width, "width"),
                         .height = size_kw(height, "height"), .pitch = size_kw(pitch, "pitch")},
                        std::move(owner));
      }, nb::kw_only(), nb::arg("dst"), nb::arg("value"), nb::arg("width"), nb::arg("height") = 1,
         nb::arg("pitch") = 0,
         "Replaces every memset parameter for this graph's future launches (in the current context, the node's).");
  bind_enabling(ememset);
  auto ememcpy = view_class<ExecutableMemcpyNode, ExecutableGraphNode>(m, "ExecutableMemcpyNode",
      "An executable memcpy-node view.")
      .def("update", [](const ExecutableMemcpyNode& v, nb::handle dst, nb::handle src, nb::handle size) {
        live_view(v);
        std::shared_ptr<const void> dst_owner, src_owner;
        const CUdeviceptr d = view_operand(dst, "dst", dst_owner);
        const CUdeviceptr s = view_operand(src, "src", src_owner);
        std::shared_ptr<const void> owners = dst_owner && src_owner
            ? std::make_shared<const std::pair<std::shared_ptr<const void>, std::shared_ptr<const void>>>(dst_owner,
                                                                                                          src_owner)
            : dst_owner ? dst_owner : src_owner;
        v.update_memcpy({.dst = d, .src = s, .size = size_kw(size, "size")}, std::move(owners));
      }, nb::kw_only(), nb::arg("dst"), nb::arg("src"), nb::arg("size"),
         "Replaces every one-dimensional memcpy parameter for this graph's future launches (in the current "
         "context, the node's).");
  bind_enabling(ememcpy);
  view_class<ExecutableChildGraphNode, ExecutableGraphNode>(m, "ExecutableChildGraphNode",
      "An executable child-graph-node view.")
      .def("update", [](const ExecutableChildGraphNode& v, const GraphDefinition& child) {
        live_view(v).update_child(child);
      }, nb::arg("child"), "The node runs a copy of child (of its graph's shape) in this graph's future launches.");
  view_class<ExecutableEventRecordNode, ExecutableGraphNode>(m, "ExecutableEventRecordNode",
      "An executable event-record-node view.")
      .def("update", [](const ExecutableEventRecordNode& v, const cucore::Event& e) { live_view(v).update_event(e); },
           nb::arg("event"), "Replaces the event recorded by this graph's future launches.");
  view_class<ExecutableEventWaitNode, ExecutableGraphNode>(m, "ExecutableEventWaitNode",
      "An executable event-wait-node view.")
      .def("update", [](const ExecutableEventWaitNode& v, const cucore::Event& e) { live_view(v).update_event(e); },
           nb::arg("event"), "Replaces the event waited on by this graph's future launches.");
  view_class<ExecutableHostCallbackNode, ExecutableGraphNode>(m, "ExecutableHostCallbackNode",
      "An executable host-callback-node view.")
      .def("update", [](const ExecutableHostCallbackNode& v, nb::handle fn, nb::handle user_data) {
        live_view(v);
        HostCall c = host_call(fn, user_data);
        v.update_callback(c.fn, c.data, std::move(c.owner));
      }, nb::arg("fn"), nb::kw_only(), nb::arg("user_data") = nb::none(),
         "Replaces the callback (as callback() takes it) for this graph's future launches; it must not call CUDA.");

  nb::class_<cucore::graph::detail::NodeMaker>(m, "_NodeBuilder", nb::is_weak_referenceable());

  auto node_types = nb::enum_<CUgraphNodeType>(m, "CUgraphNodeType", nb::is_arithmetic(),
      "cuda.bindings.driver.CUgraphNodeType's names and values, for GraphNode.type where cuda.bindings "
      "is not installed.");
  for (const auto& [name, value] : kNodeTypes) node_types.value(name, value);

  auto def = nb::class_<GraphDefinition, cucore::graph::detail::NodeMaker>(m, "GraphDefinition",
      "A graph built node by node; instantiate() gives the executable Graph.", nb::is_weak_referenceable())
      .def(nb::init<>())
      .def_prop_ro("is_valid", &GraphDefinition::is_valid)
      .def_prop_ro("handle", [](const GraphDefinition& d) { return bindings_handle(HandleKind::graph, d.handle()); },
                   "The CUgraph as cuda.core gives it (a cuda.bindings.driver.CUgraph, else an int).")
      .def("create_condition", [](const GraphDefinition& d, nb::handle v) {
        return d.create_condition(default_value_arg(v));
      }, nb::arg("default_value") = nb::none())
      .def("instantiate", [](const GraphDefinition& d, nb::handle options) {
        return d.instantiate(complete_options(options));
      }, nb::arg("options") = nb::none())
      .def("debug_dot_print", [](const GraphDefinition& d, nb::handle path, nb::handle options) {
        d.debug_dot_print(path_arg(path), definition_print_options(options));
      }, nb::arg("path"), nb::arg("options") = nb::none())
      .def("nodes", [](const GraphDefinition& d) {
        nb::set s;
        for (const GraphNode& n : d.nodes()) s.add(wrap_node(n));
        return s;
      })
      .def("edges", [](const GraphDefinition& d) {
        nb::set s;
        for (const auto& [a, b] : d.edges()) s.add(nb::make_tuple(wrap_node(a), wrap_node(b)));
        return s;
      })
      .def("__eq__", [](const GraphDefinition& a, nb::handle b) {
        return nb::isinstance<GraphDefinition>(b) && a == nb::cast<const GraphDefinition&>(b);
      })
      .def("__hash__", [](const GraphDefinition& d) {
        return nb::hash(nb::make_tuple("GraphDefinition", as_int(d.handle())));
      })
      .def("__repr__", [](const GraphDefinition& d) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "<GraphDefinition handle=0x%llx>", (unsigned long long)as_int(d.handle()));
        return std::string(buf);
      });
  bind_node_builders(def);

  auto node = nb::class_<GraphNode, cucore::graph::detail::NodeMaker>(m, "GraphNode",
      "A node of a graph definition; its builder methods add nodes that depend on it.", nb::is_weak_referenceable())
      .def_prop_ro("type", [](const GraphNode& n) -> nb::object {
        if (!n.handle()) return nb::none();  // destroyed (cuda.core: None for no node)
        return node_type_object(n.type());
      }, "The node's CUgraphNodeType: cuda.bindings.driver's member where cuda.bindings is installed, "
         "else cucore.graph.CUgraphNodeType's (the same names and values); None once destroyed.")
      .def_prop_ro("graph", &GraphNode::graph)
      .def_prop_ro("handle", [](const GraphNode& n) -> nb::object {
        if (!n.handle()) return nb::none();  // as cuda.core: no node (the entry point)
        return bindings_handle(HandleKind::graph_node, n.handle());
      }, "The CUgraphNode as cuda.core gives it (a cuda.bindings.driver.CUgraphNode, else an int); None for none.")
      .def_prop_ro("is_valid", &GraphNode::is_valid)
      .def("destroy", &GraphNode::destroy)
      .def("_adjacent", [](const GraphNode& n, bool forward) {
        nb::list l;
        for (const GraphNode& x : forward ? n.succ() : n.pred()) l.append(wrap_node(x));
        return l;
      })
      .def("_change_edges", [](const GraphNode& n, bool forward, bool add, std::vector<GraphNode> others) {
        if (forward) add ? n.add_succ(others) : n.remove_succ(others);
        else add ? n.add_pred(others) : n.remove_pred(others);
      })
      .def("__eq__", [](const GraphNode& a, nb::handle b) {
        return nb::isinstance<GraphNode>(b) && a == nb::cast<const GraphNode&>(b);
      })
      // By the node's shared state: stable across destroy() (a set holding the node still finds it).
      .def("__hash__", [](const GraphNode& n) { return nb::hash(nb::make_tuple("GraphNode", as_int(n.box().get()))); })
      .def("__repr__", &node_repr);
  bind_node_builders(node);

  nb::class_<EmptyNode, GraphNode>(m, "EmptyNode", "An empty (synchronization) node.");
  nb::class_<KernelNode, GraphNode>(m, "KernelNode", "A kernel launch node.")
      .def_prop_ro("grid", [](const KernelNode& n) {
        auto g = n.kernel_params().config.grid;
        return nb::make_tuple(g.x, g.y, g.z);
      })
      .def_prop_ro("block", [](const KernelNode& n) {
        auto b = n.kernel_params().config.block;
        return nb::make_tuple(b.x, b.y, b.z);
      })
      .def_prop_ro("shmem_size", [](const KernelNode& n) { return n.kernel_params().config.shmem_size; })
      .def_prop_ro("kernel", [](const KernelNode& n) { return n.kernel_params().kernel; })
      .def_prop_ro("config", [](const KernelNode& n) {
        cucore::LaunchConfig c = n.kernel_params().config;
        c.cluster = {};
        c.is_cooperative = false;
        return c;
      })
      .def("update", [](const KernelNode& n, nb::handle config, nb::handle kernel, nb::handle args) {
        if (!kernel.is_none() && args.is_none()) raise_value_error("changing kernel requires args");
        if (config.is_none() && kernel.is_none() && args.is_none()) return;
        if (!config.is_none() && !nb::isinstance<cucore::LaunchConfig>(config))
          raise_type_error("update: config must be a LaunchConfig");
        if (!kernel.is_none() && !nb::isinstance<cucore::Kernel>(kernel))
          raise_type_error("update: kernel must be a Kernel");
        const cucore::graph::KernelNodeParams now = n.kernel_params();
        const cucore::LaunchConfig cfg = config.is_none() ? now.config : nb::cast<cucore::LaunchConfig>(config);
        if (args.is_none()) return n.update_kernel(cfg);  // the same kernel and arguments
        const cucore::Kernel k = kernel.is_none() ? now.kernel : nb::cast<cucore::Kernel>(kernel);
        nb::object items = nb::steal(PySequence_Tuple(args.ptr()));
        if (!items.is_valid()) throw nb::python_error();
        const std::size_t count = static_cast<std::size_t>(PyTuple_GET_SIZE(items.ptr()));
        PyObject* const* v = count ? &PyTuple_GET_ITEM(items.ptr(), 0) : nullptr;
        PackedArgs packed;
        pack_kernel_args(k, v, count, packed);
        n.update_packed_kernel(cfg, k, packed.pointers, packed.descs, count);
        if (auto owners = argument_owners(v, count)) n.graph().retain(std::move(owners));
      }, nb::kw_only(), nb::arg("config") = nb::none(), nb::arg("kernel") = nb::none(), nb::arg("args") = nb::none(),
         "Replaces the given launch parameters for graphs instantiated from now on; changing kernel needs args.");
  nb::class_<AllocNode, GraphNode>(m, "AllocNode", "A memory allocation node.")
      .def_prop_ro("dptr", [](const AllocNode& n) { return static_cast<std::uintptr_t>(n.alloc_params().dptr); })
      .def_prop_ro("bytesize", [](const AllocNode& n) { return n.alloc_params().bytesize; })
      .def_prop_ro("device_id", [](const AllocNode& n) { return n.alloc_params().device_id; })
      .def_prop_ro("memory_type", [](const AllocNode& n) {
        return std::string(cucore::graph::to_string(n.alloc_params().memory_type));
      })
      .def_prop_ro("peer_access", [](const AllocNode& n) {
        nb::list l;
        for (int p : n.alloc_params().peer_access) l.append(p);
        return nb::tuple(l);
      });
  nb::class_<FreeNode, GraphNode>(m, "FreeNode", "A memory free node.")
      .def_prop_ro("dptr", [](const FreeNode& n) { return static_cast<std::uintptr_t>(n.free_dptr()); });
  nb::class_<MemsetNode, GraphNode>(m, "MemsetNode", "A memset node.")
      .def_prop_ro("dptr", [](const MemsetNode& n) { return static_cast<std::uintptr_t>(n.memset_params().dptr); })
      .def_prop_ro("value", [](const MemsetNode& n) { return n.memset_params().value; })
      .def_prop_ro("element_size", [](const MemsetNode& n) { return n.memset_params().element_size; })
      .def_prop_ro("width", [](const MemsetNode& n) { return n.memset_params().width; })
      .def_prop_ro("height", [](const MemsetNode& n) { return n.memset_params().height; })
      .def_prop_ro("pitch", [](const MemsetNode& n) { return n.memset_params().pitch; })
      .def("update", [](const MemsetNode& n, nb::handle dst, nb::handle value, nb::handle width, nb::handle height,
                        nb::handle pitch, nb::handle dst_owner) {
        if (dst.is_none() && !dst_owner.is_none()) raise_value_error("dst_owner requires dst");
        if (dst.is_none() && value.is_none() && width.is_none() && height.is_none() && pitch.is_none()) return;
        cucore::graph::MemsetNodeParams m = n.memset_params();
        if (!value.is_none()) std::tie(m.value, m.element_size) = fill_value(value);
        if (!width.is_none()) m.width = size_kw(width, "width");
        if (!height.is_none()) m.height = size_kw(height, "height");
        if (!pitch.is_none()) m.pitch = size_kw(pitch, "pitch");
        if (!dst.is_none()) m.dptr = operand(n.graph(), dst, dst_owner, "dst");  // last: it retains
        n.update_memset(m);
      }, nb::kw_only(), nb::arg("dst") = nb::none(), nb::arg("value") = nb::none(), nb::arg("width") = nb::none(),
         nb::arg("height") = nb::none(), nb::arg("pitch") = nb::none(), nb::arg("dst_owner") = nb::none(),
         "Replaces the given memset parameters for graphs instantiated from now on.");
  nb::class_<MemcpyNode, GraphNode>(m, "MemcpyNode", "A memcpy node.")
      .def_prop_ro("dst", [](const MemcpyNode& n) { return static_cast<std::uintptr_t>(n.memcpy_params().dst); })
      .def_prop_ro("src", [](const MemcpyNode& n) { return static_cast<std::uintptr_t>(n.memcpy_params().src); })
      .def_prop_ro("size", [](const MemcpyNode& n) { return n.memcpy_params().size; })
      .def("update", [](const MemcpyNode& n, nb::handle dst, nb::handle src, nb::handle size, nb::handle dst_owner,
                        nb::handle src_owner) {
        if (dst.is_none() && !dst_owner.is_none()) raise_value_error("dst_owner requires dst");
        if (src.is_none() && !src_owner.is_none()) raise_value_error("src_owner requires src");
        if (dst.is_none() && src.is_none() && size.is_none()) return;
        cucore::graph::MemcpyNodeParams m = n.memcpy_params();
        if (!size.is_none()) m.size = size_kw(size, "size");
        if (!dst.is_none()) m.dst = operand(n.graph(), dst, dst_owner, "dst");
        if (!src.is_none()) m.src = operand(n.graph(), src, src_owner, "src");
        n.update_memcpy(m);
      }, nb::kw_only(), nb::arg("dst") = nb::none(), nb::arg("src") = nb::none(), nb::arg("size") = nb::none(),
         nb::arg("dst_owner") = nb::none(), nb::arg("src_owner") = nb::none(),
         "Replaces the given memcpy parameters for graphs instantiated from now on.");
  nb::class_<ChildGraphNode, GraphNode>(m, "ChildGraphNode", "A child graph node.")
      .def_prop_ro("child_graph", [](const ChildGraphNode& n) { return n.child_graph(); })
      .def("update", [](const ChildGraphNode& n, const GraphDefinition& child) { n.update_child(child); },
           nb::arg("child"), "Replaces the embedded graph with a copy of child for graphs instantiated from now on.");
  nb::class_<EventRecordNode, GraphNode>(m, "EventRecordNode", "An event record node.")
      .def_prop_ro("event", [](const EventRecordNode& n) { return n.event(); })
      .def("update", [](const EventRecordNode& n, const cucore::Event& e) { n.update_event(e); }, nb::arg("event"),
           "Replaces the event recorded, for graphs instantiated from now on.");
  nb::class_<EventWaitNode, GraphNode>(m, "EventWaitNode", "An event wait node.")
      .def_prop_ro("event", [](const EventWaitNode& n) { return n.event(); })
      .def("update", [](const EventWaitNode& n, const cucore::Event& e) { n.update_event(e); }, nb::arg("event"),
           "Replaces the event waited on, for graphs instantiated from now on.");
  nb::class_<HostCallbackNode, GraphNode>(m, "HostCallbackNode", "A host callback node.")
      .def_prop_ro("callback", [](const HostCallbackNode& n) -> nb::object {
        PyObject* o = py_owner_object(n.callback_owner());
        if (!o || !PyCallable_Check(o) || PyObject_HasAttrString(o, "argtypes")) return nb::none();
        return nb::borrow(o);
      })
      .def("update", [](const HostCallbackNode& n, nb::handle fn, nb::handle user_data) {
        HostCall c = host_call(fn, user_data);
        n.update_callback(c.fn, c.data, std::move(c.owner));
      }, nb::arg("fn"), nb::kw_only(), nb::arg("user_data") = nb::none(),
         "Replaces the callback (as callback() takes it) for graphs instantiated from now on.");
  auto cn = nb::class_<ConditionalNode, GraphNode>(m, "ConditionalNode", "Base of the conditional nodes.")
      .def_prop_ro("condition", [](const ConditionalNode& n) { return n.condition(); })
      .def_prop_ro("cond_type", [](const ConditionalNode& n) { return conditional_type_object(n.conditional_type()); },
                   "The conditional's kind: a cucore.typing.GraphConditionalType member (IF, WHILE, SWITCH).")
      .def_prop_ro("branches", [](const ConditionalNode& n) {
        nb::list l;
        for (auto& b : n.branches()) l.append(nb::cast(b));
        return nb::tuple(l);
      });
  nb::class_<IfNode, ConditionalNode>(m, "IfNode", "An if-conditional node.")
      .def_prop_ro("then", [](const IfNode& n) { return n.branches().at(0); });
  nb::class_<IfElseNode, ConditionalNode>(m, "IfElseNode", "An if-else conditional node.")
      .def_prop_ro("then", [](const IfElseNode& n) { return n.branches().at(0); })
      .def_prop_ro("else_", [](const IfElseNode& n) { return n.branches().at(1); });
  nb::class_<WhileNode, ConditionalNode>(m, "WhileNode", "A while-loop conditional node.")
      .def_prop_ro("body", [](const WhileNode& n) { return n.branches().at(0); });
  nb::class_<SwitchNode, ConditionalNode>(m, "SwitchNode", "A switch conditional node.");

  auto gbc = nb::class_<GraphBuilder>(m, "GraphBuilder",
      "A graph under construction by stream capture; made by Device.create_graph_builder() or "
      "Stream.create_graph_builder().", nb::is_weak_referenceable())
      .def("__init__", [](GraphBuilder*, nb::args, nb::kwargs) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "directly creating a Graph object can be ambiguous. Please either call "
                        "Device.create_graph_builder() or stream.create_graph_builder()");
        throw nb::python_error();
      })
      .def("close", &GraphBuilder::close)
      .def_prop_ro("is_closed", &GraphBuilder::is_closed)
      .def_prop_ro("stream", [](const GraphBuilder& b) { return b.stream(); })
      .def_prop_ro("is_join_required", &GraphBuilder::is_join_required)
      .def_prop_ro("graph_definition", &GraphBuilder::graph_definition)
      .def("begin_building", [](nb::handle self, nb::handle mode) {
        std::string m = mode.is_none() ? "relaxed" : nb::cast<std::string>(mode);
        nb::cast<GraphBuilder&>(self).begin_building(m);
        return nb::borrow(self);
      }, nb::arg("mode") = "relaxed")
      .def_prop_ro("is_building", [](const GraphBuilder& b) {
        if (!b.is_building()) return false;
        // A capture an unsupported call broke: cuda.core's RuntimeError (end_building() then clears it).
        if (b.stream().capture_status() == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
          PyErr_SetString(PyExc_RuntimeError, "Build process encountered an error and has been invalidated. "
                                               "Build process must now be ended.");
          throw nb::python_error();
        }
        return true;
      })
      .def("end_building", [](nb::handle self) {
        nb::cast<GraphBuilder&>(self).end_building();
        return nb::borrow(self);
      })
      .def("complete", [](const GraphBuilder& b, nb::handle options) { return b.complete(complete_options(options)); },
           nb::arg("options") = nb::none())
      .def("debug_dot_print", [](const GraphBuilder& b, nb::handle path, nb::handle options) {
        b.debug_dot_print(path_arg(path), builder_print_options(options));
      }, nb::arg("path"), nb::arg("options") = nb::none())
      .def("split", [](nb::handle self, long long count) {
        if (count < 2) raise_value_error("Invalid split count: expecting >= 2, got " + std::to_string(count));
        auto v = nb::cast<GraphBuilder&>(self).split(static_cast<std::size_t>(count));
        nb::list l;
        l.append(self);  // the original comes back first, as itself
        for (std::size_t i = 1; i < v.size(); ++i) l.append(nb::cast(std::move(v[i])));
        return nb::tuple(l);
      }, nb::arg("count"))
      .def_static("join", [](nb::args builders) -> nb::object {
        // cuda.core's checks, in its order: the types, then the count.
        for (nb::handle h : builders)
          if (!nb::isinstance<GraphBuilder>(h)) raise_type_error("All arguments must be GraphBuilder instances");
        if (nb::len(builders) < 2) raise_value_error("Must join with at least two graph builders");
        std::vector<GraphBuilder> v;
        for (nb::handle h : builders) v.push_back(nb::cast<GraphBuilder>(h));
        GraphBuilder joined = GraphBuilder::join(v);
        for (nb::handle h : builders)  // the builder continuing is returned as itself
          if (nb::cast<const GraphBuilder&>(h).state() == joined.state()) return nb::borrow(h);
        return nb::cast(joined);
      })
      .def("__cuda_stream__", [](const GraphBuilder& b) {
        return nb::make_tuple(0, as_int(b.stream().handle()));
      })
      .def("create_condition", [](GraphBuilder& b, nb::handle v) { return b.create_condition(default_value_arg(v)); },
           nb::arg("default_value") = nb::none())
      .def("if_then", [](GraphBuilder& b, nb::handle c) { return b.if_then(condition_arg(c)); }, nb::arg("condition"))
      .def("if_else", [](GraphBuilder& b, nb::handle c) {
        auto [t, e] = b.if_else(condition_arg(c));
        return nb::make_tuple(std::move(t), std::move(e));
      }, nb::arg("condition"))
      .def("while_loop", [](GraphBuilder& b, nb::handle c) { return b.while_loop(condition_arg(c)); },
           nb::arg("condition"))
      .def("switch", [](GraphBuilder& b, nb::handle c, long long count) {
        if (count < 1) raise_value_error("switch: count must be at least 1, got " + std::to_string(count));
        return builders_tuple(b.switch_(condition_arg(c), static_cast<std::size_t>(count)));
      }, nb::arg("condition"), nb::arg("count"))
      .def("embed", [](GraphBuilder& b, const GraphBuilder& child) { b.embed(child); }, nb::arg("child"))
      .def("callback", [](GraphBuilder& b, nb::handle fn, nb::handle user_data) {
        HostCall c = host_call(fn, user_data);
        b.callback(c.fn, c.data, std::move(c.owner));
      }, nb::arg("fn"), nb::kw_only(), nb::arg("user_data") = nb::none())
      .def("__repr__", [](const GraphBuilder& b) {
        return std::string("<GraphBuilder") + (b.is_closed() ? " closed" : b.is_building() ? " building" : "") + ">";
      });
  g_types.graph_builder = reinterpret_cast<PyTypeObject*>(gbc.ptr());

  // Stream.create_graph_builder() and Device.create_graph_builder().
  nb::handle(reinterpret_cast<PyObject*>(g_types.stream)).attr("create_graph_builder") =
      nb::cpp_function([](const cucore::Stream& s) { return s.create_graph_builder(); }, nb::is_method(),
                       nb::name("create_graph_builder"), nb::scope(nb::handle(reinterpret_cast<PyObject*>(g_types.stream))),
                       "A GraphBuilder capturing this stream.");
  nb::handle(reinterpret_cast<PyObject*>(g_types.device)).attr("create_graph_builder") =
      nb::cpp_function([](nb::handle self) { return nb::inst_ptr<PyDevice>(self)->dev.create_graph_builder(); },
                       nb::is_method(), nb::name("create_graph_builder"),
                       nb::scope(nb::handle(reinterpret_cast<PyObject*>(g_types.device))),
                       "A GraphBuilder capturing a new stream of this device.");

  // ---- GraphMemoryResource ----
  nb::class_<GraphMemoryAttributes>(m, "GraphMemoryResourceAttributes",
      "Graph memory of a device, in bytes; the high watermarks can be set to 0 (reset to the current usage).",
      nb::is_weak_referenceable())
      .def_prop_ro("reserved_mem_current", [](const GraphMemoryAttributes& a) { return a.mr.attributes().reserved_mem_current; })
      .def_prop_rw("reserved_mem_high", [](const GraphMemoryAttributes& a) { return a.mr.attributes().reserved_mem_high; },
                   [](GraphMemoryAttributes& a, long long v) {
                     if (v != 0) raise_value_error("reserved_mem_high can only be set to 0 (a reset)");
                     a.mr.reset_reserved_mem_high();
                   })
      .def_prop_ro("used_mem_current", [](const GraphMemoryAttributes& a) { return a.mr.attributes().used_mem_current; })
      .def_prop_rw("used_mem_high", [](const GraphMemoryAttributes& a) { return a.mr.attributes().used_mem_high; },
                   [](GraphMemoryAttributes& a, long long v) {
                     if (v != 0) raise_value_error("used_mem_high can only be set to 0 (a reset)");
                     a.mr.reset_used_mem_high();
                   })
      .def("__repr__", [](const GraphMemoryAttributes& a) {
        auto x = a.mr.attributes();
        return "GraphMemoryResourceAttributes(reserved_mem_current=" + std::to_string(x.reserved_mem_current) +
               ", reserved_mem_high=" + std::to_string(x.reserved_mem_high) + ", used_mem_current=" +
               std::to_string(x.used_mem_current) + ", used_mem_high=" + std::to_string(x.used_mem_high) + ")";
      });
  nb::class_<GraphMemoryResource, cucore::MemoryResource>(m, "GraphMemoryResource",
      "Memory allocated inside a graph under capture: allocate(size, stream=graph_builder).",
      nb::is_weak_referenceable())
      .def("__init__", [](GraphMemoryResource* self, nb::handle device_id) {
        int id = PyObject_TypeCheck(device_id.ptr(), g_types.device) ? nb::inst_ptr<PyDevice>(device_id)->dev.ordinal()
                                                                     : nb::cast<int>(device_id);
        new (self) GraphMemoryResource(id);
        register_memory_resource_face(nb::find(self));
      }, nb::arg("device_id"))
      .def_prop_ro("attributes", [](const GraphMemoryResource& r) { return GraphMemoryAttributes{r}; })
      .def("trim", &GraphMemoryResource::trim)
      .def("close", [](const GraphMemoryResource&) {}, "No operation (cuda.core's, for compatibility).");
}

}  // namespace cucore::python
