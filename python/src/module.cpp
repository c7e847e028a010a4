// The extension module cucore._core; option conversion helpers; pathfinder.
#include <cucore/log.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/program.hpp>

#include <climits>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "common.hpp"

namespace cucore::python {

Types g_types;
void bind_compute(nb::module_& m);  // compute.cpp

nb::module_& options_module() {
  // Imported on first use (never at import of _core, so stubgen can import the
  // extension alone).
  static nb::module_* mod = new nb::module_(nb::module_::import_("cucore._options"));
  return *mod;
}

std::string repr_text(nb::handle v) {
  nb::object r = nb::steal(PyObject_Repr(v.ptr()));
  if (!r.is_valid()) {
    PyErr_Clear();
    return std::string("<") + Py_TYPE(v.ptr())->tp_name + " object>";
  }
  Py_ssize_t n = 0;
  if (const char* s = PyUnicode_AsUTF8AndSize(r.ptr(), &n)) return std::string(s, static_cast<std::size_t>(n));
  PyErr_Clear();  // a repr UTF-8 cannot encode: its ascii() form
  nb::object a = nb::steal(PyObject_ASCII(v.ptr()));
  if (!a.is_valid()) {
    PyErr_Clear();
    return std::string("<") + Py_TYPE(v.ptr())->tp_name + " object>";
  }
  return PyUnicode_AsUTF8(a.ptr());
}

namespace {
// The UnicodeEncodeError being raised for `str`, raised again with `what` in
// its reason ("surrogates not allowed in arch"), so that it says which
// argument it is about.
[[noreturn]] void raise_encode_error_naming(nb::handle str, const std::string& what) {
  if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) throw nb::python_error();
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  nb::object t = nb::steal(type), v = nb::steal(value), trace = nb::steal(tb);
  Py_ssize_t start = 0, end = 0;
  if (v.is_valid() && PyUnicodeEncodeError_GetStart(v.ptr(), &start) == 0 &&
      PyUnicodeEncodeError_GetEnd(v.ptr(), &end) == 0) {
    nb::object reason = nb::steal(PyUnicodeEncodeError_GetReason(v.ptr()));
    nb::object encoding = nb::steal(PyUnicodeEncodeError_GetEncoding(v.ptr()));
    nb::object msg = reason.is_valid() ? nb::steal(PyUnicode_FromFormat("%U in %s", reason.ptr(), what.c_str()))
                                       : nb::object();
    if (encoding.is_valid() && msg.is_valid()) {
      nb::object err = nb::steal(PyObject_CallFunction(PyExc_UnicodeEncodeError, "OOnnO", encoding.ptr(), str.ptr(),
                                                       start, end, msg.ptr()));
      if (err.is_valid()) {
        PyErr_SetObject(PyExc_UnicodeEncodeError, err.ptr());
        throw nb::python_error();
      }
    }
  }
  PyErr_Clear();  // could not rebuild it: the original stands
  PyErr_Restore(t.release().ptr(), v.release().ptr(), trace.release().ptr());
  throw nb::python_error();
}

// An int (not a bool) as Python's int, TypeError naming `what` otherwise.
nb::object index_of(nb::handle v, const std::string& what) {
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr())) raise_type_error(what + " must be an int, got " + repr_text(v));
  nb::object i = nb::steal(PyNumber_Index(v.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  return i;
}
}  // namespace

std::string utf8_arg(nb::handle v, const std::string& what) {
  if (!PyUnicode_Check(v.ptr())) raise_type_error(what + " must be a str, got " + repr_text(v));
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(v.ptr(), &n);
  if (!s) raise_encode_error_naming(v, what);
  return std::string(s, static_cast<std::size_t>(n));
}

std::string fs_path_arg(nb::handle v, const std::string& what) {
  if (!PyUnicode_Check(v.ptr()) && !PyBytes_Check(v.ptr()) && !PyObject_HasAttrString(v.ptr(), "__fspath__"))
    raise_type_error(what + " must be a str, bytes or os.PathLike, got " + repr_text(v));
  nb::object p = nb::steal(PyOS_FSPath(v.ptr()));
  if (!p.is_valid()) throw nb::python_error();
  nb::object bytes = PyBytes_Check(p.ptr()) ? p : nb::steal(PyUnicode_EncodeFSDefault(p.ptr()));
  if (!bytes.is_valid()) raise_encode_error_naming(p, what);
  return std::string(PyBytes_AS_STRING(bytes.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(bytes.ptr())));
}

std::int64_t int64_arg(nb::handle v, const std::string& what) {
  nb::object i = index_of(v, what);
  int overflow = 0;
  const long long r = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (r == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow) raise_overflow_error(what + " = " + repr_text(v) + " does not fit in a signed 64-bit integer");
  return r;
}

std::uint64_t uint64_arg(nb::handle v, const std::string& what) {
  nb::object i = index_of(v, what);
  const unsigned long long r = PyLong_AsUnsignedLongLong(i.ptr());
  if (r == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw nb::python_error();
    PyErr_Clear();
    raise_overflow_error(what + " = " + repr_text(v) + " does not fit in an unsigned 64-bit integer");
  }
  return r;
}

int int_arg(nb::handle v, const std::string& what) {
  const std::int64_t r = int64_arg(v, what);
  if (r < INT_MIN || r > INT_MAX) raise_overflow_error(what + " = " + repr_text(v) + " does not fit in a C int");
  return static_cast<int>(r);
}

nb::object options_arg(nb::handle options, const char* cls_name) {
  nb::object cls = options_module().attr(cls_name);
  if (options.is_none()) return cls();
  if (PyDict_Check(options.ptr())) return cls(**nb::borrow<nb::dict>(options));
  if (PyObject_IsInstance(options.ptr(), cls.ptr()) == 1) return nb::borrow(options);
  // Duck typing (e.g. cuda.core's own dataclass of the same name): copy the
  // fields the cucore dataclass knows.
  nb::dict kw;
  for (nb::handle f : nb::borrow<nb::dict>(cls.attr("__dataclass_fields__")).keys()) {
    if (nb::hasattr(options, f)) kw[f] = options.attr(f);
  }
  if (nb::len(kw) == 0)
    raise_type_error(std::string("options must be a ") + cls_name + ", a dict or None, got " +
                     Py_TYPE(options.ptr())->tp_name);
  return cls(**kw);
}

std::optional<bool> opt_bool(nb::handle o, const char* name) {
  nb::object v = nb::getattr(o, name, nb::none());
  if (v.is_none()) return std::nullopt;
  int t = PyObject_IsTrue(v.ptr());
  if (t < 0) throw nb::python_error();
  return t != 0;
}

std::optional<long long> opt_int(nb::handle o, const char* name) {
  nb::object v = nb::getattr(o, name, nb::none());
  if (v.is_none()) return std::nullopt;
  return int64_arg(v, name);
}

std::string opt_str(nb::handle o, const char* name) {
  nb::object v = nb::getattr(o, name, nb::none());
  if (v.is_none()) return {};
  if (PyBytes_Check(v.ptr())) return std::string(PyBytes_AsString(v.ptr()), PyBytes_Size(v.ptr()));
  return utf8_arg(v, name);
}

void read_option(bool& field, nb::handle o, const char* name) {
  if (auto v = opt_bool(o, name)) field = *v;
}
void read_option(std::size_t& field, nb::handle o, const char* name) {
  if (auto v = opt_int(o, name)) {
    if (*v < 0) raise_value_error(std::string(name) + " must be >= 0, got " + std::to_string(*v));
    field = static_cast<std::size_t>(*v);
  }
}
void read_option(std::optional<int>& field, nb::handle o, const char* name) {
  if (auto v = opt_int(o, name)) {
    if (*v < INT_MIN || *v > INT_MAX)
      raise_overflow_error(std::string(name) + " = " + std::to_string(*v) + " does not fit in a C int");
    field = static_cast<int>(*v);
  }
}
void read_option(std::string& field, nb::handle o, const char* name) {
  nb::object v = nb::getattr(o, name, nb::none());
  if (!v.is_none()) field = opt_str(o, name);
}

bool python_alive() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

void release_py_object(PyObject* obj) noexcept {
  if (!python_alive()) return;
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF(obj);
  PyGILState_Release(g);
}

namespace {
// Releases a Python owner from whichever thread drops the last share.
struct PyOwnerRelease {
  void operator()(const void* p) const noexcept { release_py_object(static_cast<PyObject*>(const_cast<void*>(p))); }
};
}  // namespace

std::shared_ptr<const void> py_owner(nb::handle obj) {
  if (!obj.is_valid() || obj.is_none()) return {};
  return std::shared_ptr<const void>(obj.inc_ref().ptr(), PyOwnerRelease{});
}

cucore::ForeignRef py_ref(nb::handle obj) {
  return {obj.inc_ref().ptr(), [](void* o) noexcept { release_py_object(static_cast<PyObject*>(o)); }};
}

PyObject* py_owner_object(const std::shared_ptr<const void>& owner) noexcept {
  if (!std::get_deleter<PyOwnerRelease>(owner)) return nullptr;
  return static_cast<PyObject*>(const_cast<void*>(owner.get()));
}

std::uintptr_t pointer_arg(nb::handle obj, const char* what) {
  PyObject* o = obj.ptr();
  if (PyLong_Check(o)) {
    unsigned long long v = PyLong_AsUnsignedLongLongMask(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) throw nb::python_error();
    return static_cast<std::uintptr_t>(v);
  }
  if (PyObject_TypeCheck(o, g_types.buffer)) return nb::inst_ptr<cucore::Buffer>(obj)->handle();
  // cuda.bindings handle types implement __int__; ctypes pointers expose .value
  if (PyIndex_Check(o) || (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_int)) {
    nb::object i = nb::steal(PyNumber_Long(o));
    if (!i.is_valid()) throw nb::python_error();
    return static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLongMask(i.ptr()));
  }
  raise_type_error(std::string(what) + ": expected an int (a pointer or handle), got " +
                   nb::cast<std::string>(nb::str(nb::handle((PyObject*)Py_TYPE(o)).attr("__name__"))));
}

namespace {
struct HandleClass {
  int module;              // index into kBindingsModules
  const char* name;        // the class in that module
  const char* qualified;   // its type's tp_name, as Cython sets it
};
constexpr const char* kBindingsModules[] = {"cuda.bindings.driver", "cuda.bindings.nvrtc"};
constexpr HandleClass kHandleClasses[] = {
    {0, "CUcontext", "cuda.bindings.driver.CUcontext"},
    {0, "CUstream", "cuda.bindings.driver.CUstream"},
    {0, "CUevent", "cuda.bindings.driver.CUevent"},
    {0, "CUkernel", "cuda.bindings.driver.CUkernel"},
    {0, "CUlibrary", "cuda.bindings.driver.CUlibrary"},
    {0, "CUmodule", "cuda.bindings.driver.CUmodule"},
    {0, "CUmemoryPool", "cuda.bindings.driver.CUmemoryPool"},
    {0, "CUgraph", "cuda.bindings.driver.CUgraph"},
    {0, "CUgraphExec", "cuda.bindings.driver.CUgraphExec"},
    {0, "CUgraphNode", "cuda.bindings.driver.CUgraphNode"},
    {0, "CUgraphConditionalHandle", "cuda.bindings.driver.CUgraphConditionalHandle"},
    {0, "CUlinkState", "cuda.bindings.driver.CUlinkState"},
    {0, "CUgraphNodeType", "cuda.bindings.driver.CUgraphNodeType"},
    {1, "nvrtcProgram", "cuda.bindings.nvrtc.nvrtcProgram"},
};
static_assert(std::size(kHandleClasses) == static_cast<std::size_t>(HandleKind::count));

// Per module: 0 not tried yet, 1 imported, 2 not importable. Read and written
// with the GIL held; no C++ static guard around the import, which may release
// the GIL (another thread blocking on such a guard with the GIL held would
// deadlock). Two threads racing here both import, harmlessly.
int g_bindings_state[std::size(kBindingsModules)] = {};
PyObject* g_handle_class[std::size(kHandleClasses)] = {};  // kept for the process

const HandleClass& handle_class(HandleKind kind) { return kHandleClasses[static_cast<int>(kind)]; }

PyObject* bindings_class(HandleKind kind) {
  const int mod = handle_class(kind).module;
  if (g_bindings_state[mod] == 0) {
    if (!python_alive()) return nullptr;  // at exit: ints, and nothing cached
    PyObject* m = PyImport_ImportModule(kBindingsModules[mod]);
    if (!m) {
      PyErr_Clear();
      g_bindings_state[mod] = 2;
      return nullptr;
    }
    for (std::size_t i = 0; i < std::size(kHandleClasses); ++i) {
      if (kHandleClasses[i].module != mod || g_handle_class[i]) continue;
      g_handle_class[i] = PyObject_GetAttrString(m, kHandleClasses[i].name);
      if (!g_handle_class[i]) PyErr_Clear();  // an older cuda.bindings without the class: ints
    }
    Py_DECREF(m);
    g_bindings_state[mod] = 1;
  }
  return g_handle_class[static_cast<int>(kind)];
}
}  // namespace

nb::object bindings_handle(HandleKind kind, std::uintptr_t value) {
  nb::object v = nb::steal(PyLong_FromUnsignedLongLong(value));
  if (!v.is_valid()) throw nb::python_error();
  PyObject* cls = bindings_class(kind);
  if (!cls) return v;
  PyObject* h = PyObject_CallOneArg(cls, v.ptr());
  if (!h) throw nb::python_error();
  return nb::steal(h);
}

bool is_bindings_handle(nb::handle obj, HandleKind kind) noexcept {
  return std::strcmp(Py_TYPE(obj.ptr())->tp_name, handle_class(kind).qualified) == 0;
}

std::uintptr_t handle_arg(nb::handle obj, HandleKind kind, const char* what) {
  PyObject* o = obj.ptr();
  const bool bindings = is_bindings_handle(obj, kind);
  // Another cuda.bindings class (a CUevent for a stream) is a mistake, though it has __index__.
  const bool other_bindings = !bindings && std::strncmp(Py_TYPE(o)->tp_name, "cuda.bindings.", 14) == 0;
  if (PyLong_Check(o) || (PyIndex_Check(o) && !other_bindings) || bindings) {
    // cuda.bindings' handle classes implement __int__ (most __index__ too).
    nb::object i = PyLong_Check(o) ? nb::borrow<nb::object>(o)
                                   : nb::steal(bindings ? PyNumber_Long(o) : PyNumber_Index(o));
    if (!i.is_valid()) throw nb::python_error();
    unsigned long long v = PyLong_AsUnsignedLongLongMask(i.ptr());
    if (v == (unsigned long long)-1 && PyErr_Occurred()) throw nb::python_error();
    return static_cast<std::uintptr_t>(v);
  }
  raise_type_error(std::string(what) + ": expected an int or a " + handle_class(kind).qualified + ", got " +
                   Py_TYPE(o)->tp_name);
}

void bind_misc(nb::module_& m) {
  m.attr("__version__") = CUCORE_VERSION_STRING;

  nb::class_<cucore::pathfinder::ComponentInfo>(m, "ComponentInfo",
                                                "Where one CUDA component comes from (cucore.pathfinder.report()).")
      .def_ro("name", &cucore::pathfinder::ComponentInfo::name)
      .def_ro("found", &cucore::pathfinder::ComponentInfo::found)
      .def_ro("path", &cucore::pathfinder::ComponentInfo::path)
      .def_ro("version", &cucore::pathfinder::ComponentInfo::version)
      .def_ro("found_by", &cucore::pathfinder::ComponentInfo::found_by)
      .def_ro("searched", &cucore::pathfinder::ComponentInfo::searched)
      .def_ro("hint", &cucore::pathfinder::ComponentInfo::hint)
      .def("__repr__", [](const cucore::pathfinder::ComponentInfo& c) {
        return "<ComponentInfo " + c.name + (c.found ? " found at " + c.path : " not found") + ">";
      });

  nb::module_ pf = m.def_submodule("pathfinder", "Which CUDA components this process loads, and from where.");
  pf.def("component_names", &cucore::pathfinder::component_names);
  pf.def("find", [](std::string_view c) { return cucore::pathfinder::find(c); }, nb::arg("component"),
         nb::call_guard<nb::gil_scoped_release>());
  pf.def("report", &cucore::pathfinder::report, nb::call_guard<nb::gil_scoped_release>(),
         "Every component: path and version, or every place searched and a hint.");
  pf.def("set_python_site_packages", &cucore::pathfinder::set_python_site_packages, nb::arg("dirs"));
  pf.def("cuda_include_dir", &cucore::pathfinder::cuda_include_dir);
  pf.def("cccl_include_dir", &cucore::pathfinder::cccl_include_dir);

  m.def("nvrtc_version", &cucore::nvrtc_version, nb::call_guard<nb::gil_scoped_release>(),
        "NVRTC's version as (major, minor).");
  m.def("nvrtc_supported_archs", &cucore::nvrtc_supported_archs, nb::call_guard<nb::gil_scoped_release>());
  m.def("device_count", &cucore::Device::count, "Number of CUDA devices (0 when the driver reports none).");
}

}  // namespace cucore::python

namespace cucore::python {
void bind_system(nb::module_& m);  // python/src/system.cpp
void bind_doctor(nb::module_& m);  // python/src/doctor.cpp
void bind_graph(nb::module_& m);   // python/src/graph.cpp
void bind_green(nb::module_& m);   // python/src/green.cpp
void bind_ipc(nb::module_& m);     // python/src/ipc.cpp
void bind_checkpoint(nb::module_& m);  // python/src/checkpoint.cpp
void bind_graphics(nb::module_& m);    // python/src/graphics.cpp

namespace {
// A Python exception that reached libcucore reads as nanobind's what(): a
// traceback, then "Type: message". The warning keeps the exception.
std::string without_traceback(const std::string& text) {
  const std::string header = "Traceback (most recent call last):\n";
  const std::size_t at = text.find(header);
  if (at == std::string::npos) return text;
  std::size_t line = at + header.size();
  while (line < text.size() && text[line] == ' ') {  // the traceback's indented lines
    const std::size_t end = text.find('\n', line);
    if (end == std::string::npos) return text;
    line = end + 1;
  }
  return text.substr(0, at) + text.substr(line);
}

// A release failure as cucore.CUDAWarning, from a destructor (any thread, the
// GIL held or not, an exception perhaps being raised): never raises; a warning
// an "error" filter escalates goes to sys.unraisablehook, as cuda.core's.
void warn_release_failure(const std::string& message) noexcept {
  if (!python_alive()) return;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);  // the exception in flight, if any, is not this one's business
  std::string text;
  try {
    text = without_traceback(message);
  } catch (...) {  // no memory for the copy: the message as it came
  }
  if (PyErr_WarnEx(cuda_warning_class(), text.empty() ? message.c_str() : text.c_str(), 1) < 0) {
    PyObject* where = PyUnicode_FromString(text.empty() ? message.c_str() : text.c_str());
    PyErr_WriteUnraisable(where);
    Py_XDECREF(where);
  }
  PyErr_Restore(type, value, trace);
  PyGILState_Release(g);
}
}  // namespace

// libcucore's log hook (cucore/log.hpp) into Python: warnings become
// UserWarning at the caller's line (an "error" filter raises from the call),
// release failures cucore.CUDAWarning, other messages go to the "cucore"
// logger.
void forward_log_to_python() {
  cucore::set_log_handler([](cucore::LogLevel level, std::string_view message) {
    if (level == cucore::LogLevel::release_failure) return warn_release_failure(std::string(message));
    if (!python_alive()) return;
    nb::gil_scoped_acquire gil;
    std::string text(message);
    if (level == cucore::LogLevel::warning) {
      if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), 1) < 0) throw nb::python_error();
      return;
    }
    nb::module_::import_("logging").attr("getLogger")("cucore").attr("info")(text);
  });
}
}  // namespace cucore::python

NB_MODULE(_core, m) {
  using namespace cucore::python;
  m.doc() = "cucore's C++ core (libcucore) bound with nanobind; use the `cucore` package.";
  // Per-thread Device singletons and cached type objects live until the
  // interpreter tears thread states down, after nanobind's leak check.
  nb::set_leak_warnings(false);
  bind_errors(m);
  bind_misc(m);
  bind_green(m);  // before Device, Context and Stream, whose methods return its types
  bind_device(m);
  bind_stream(m);
  bind_memory(m);
  bind_memory_ops(m);
  bind_texture(m);
  bind_graphics(m);  // after Buffer and OpaqueArray, which its maps give
  bind_ipc(m);  // after Stream, Event, Buffer and the resources: it adds their IPC members
  bind_checkpoint(m);
  bind_program(m);
  bind_cache(m);
  bind_launch(m);
  bind_view(m);
  bind_layout(m);
  bind_graph(m);
  bind_tensor_map(m);
  bind_compute(m);
  bind_system(m);
  bind_doctor(m);
  forward_log_to_python();
}
