// LaunchConfig and launch(stream, config, kernel, *args).
//
// launch() is a METH_FASTCALL C function (no argument tuple, no nanobind
// dispatch): it resolves the stream, reads the prebuilt cucore::LaunchConfig,
// packs each argument into a stack array in C++ and calls libcucore's checked
// launch (which compares count and sizes with the kernel's cached parameter
// layout) with the GIL released.
//
// Packing (cuda.core's rules, made exact where cuda.core guesses):
//   Buffer                 -> its device pointer (8 bytes)
//   StridedMemoryView      -> its ptr (cucore extra)
//   TensorMapDescriptor    -> its 128 bytes, by value
//   int (and bool)         -> an integer at the parameter's width (cuda.core: always
//                             intptr_t); out of range for that width is ValueError
//   float                  -> double;  complex -> complex<double>
//   numpy scalars          -> at their own width (numpy.float32 -> 4 bytes, ...),
//                             read through the buffer protocol
//   ctypes scalars/structs -> their bytes (ctypes.c_int -> 4 bytes, Structure -> by value)
// A count or size mismatch raises ValueError naming the kernel and parameter
// (libcucore's one argument check); a closed Buffer or Stream, ClosedError.
#include <cucore/launch.hpp>
#include <cucore/texture.hpp>

#include <cstdint>
#include <complex>
#include <cstring>
#include <typeinfo>

#include "common.hpp"

#include "launch_args.hpp"
#include "tensor_map.hpp"
#include "view.hpp"

namespace cucore::python {
namespace {

using Slot = ArgSlot;

// ---- numpy / ctypes scalar types, recognised by type object -----------------
struct ScalarType {
  PyTypeObject* type;
  std::size_t size;             // 0: not a scalar we pack
  const std::type_info* ctype;  // its C++ equivalent, for messages
};
const std::type_info& int_type(std::size_t size, bool is_signed) {
  switch (size) {
    case 1: return is_signed ? typeid(std::int8_t) : typeid(std::uint8_t);
    case 2: return is_signed ? typeid(std::int16_t) : typeid(std::uint16_t);
    case 4: return is_signed ? typeid(std::int32_t) : typeid(std::uint32_t);
    default: return is_signed ? typeid(std::int64_t) : typeid(std::uint64_t);
  }
}

std::vector<ScalarType> g_numpy_types;  // grows as new numpy scalar types are seen
PyObject* g_numpy_generic = nullptr;    // numpy.generic
PyObject* g_numpy_module = nullptr;
PyObject* g_ctypes_simple = nullptr;    // ctypes._SimpleCData
PyObject* g_ctypes_structure = nullptr;
PyObject* g_ctypes_union = nullptr;
bool g_ctypes_loaded = false;

bool numpy_loaded() {
  if (g_numpy_module) return true;
  PyObject* mods = PyImport_GetModuleDict();
  PyObject* np = PyDict_GetItemString(mods, "numpy");  // borrowed; only if already imported
  if (!np) return false;
  g_numpy_module = Py_NewRef(np);
  g_numpy_generic = PyObject_GetAttrString(np, "generic");
  if (!g_numpy_generic) PyErr_Clear();
  return true;
}

const std::type_info* ctype_of(char kind, std::size_t size) {
  switch (kind) {
    case 'b': return &typeid(bool);
    case 'i': return &int_type(size, true);
    case 'u': return &int_type(size, false);
    case 'f': return size == 2 ? &typeid(std::uint16_t) : size == 4 ? &typeid(float) : &typeid(double);
    case 'c': return size == 8 ? &typeid(std::complex<float>) : &typeid(std::complex<double>);
    default: return &typeid(void);
  }
}

// A numpy numeric scalar type's entry (size 0 if not one), cached per type.
const ScalarType& numpy_scalar(PyTypeObject* t) {
  for (const auto& s : g_numpy_types)
    if (s.type == t) return s;
  static const ScalarType none{nullptr, 0, nullptr};
  if (!numpy_loaded() || !g_numpy_generic) return none;
  ScalarType st{t, 0, nullptr};
  if (PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(g_numpy_generic))) {
    nb::object dtype = nb::steal(PyObject_CallMethod(g_numpy_module, "dtype", "O", (PyObject*)t));
    if (dtype.is_valid()) {
      std::string kind = nb::cast<std::string>(dtype.attr("kind"));
      std::size_t size = nb::cast<std::size_t>(dtype.attr("itemsize"));
      if (kind.size() == 1 && std::strchr("biufc", kind[0]) && size <= 16) {
        st.size = size;
        st.ctype = ctype_of(kind[0], size);
      }
    } else {
      PyErr_Clear();
    }
  }
  Py_INCREF(t);  // keep the cached type alive
  g_numpy_types.push_back(st);
  return g_numpy_types.back();
}

bool is_ctypes_value(PyObject* o) {
  if (!g_ctypes_loaded) {
    PyObject* mods = PyImport_GetModuleDict();
    PyObject* ct = PyDict_GetItemString(mods, "ctypes");
    if (!ct) return false;
    g_ctypes_simple = PyObject_GetAttrString(ct, "_SimpleCData");
    g_ctypes_structure = PyObject_GetAttrString(ct, "Structure");
    g_ctypes_union = PyObject_GetAttrString(ct, "Union");
    PyErr_Clear();
    g_ctypes_loaded = true;
  }
  auto is = [&](PyObject* t) { return t && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(t)); };
  return is(g_ctypes_simple) || is(g_ctypes_structure) || is(g_ctypes_union);
}


[[noreturn]] void arg_error(PyObject* exc, const cucore::Kernel& k, std::size_t i, const std::string& what) {
  std::string msg = (k ? k.name() : std::string("kernel")) + ": argument " + std::to_string(i) + " " + what;
  PyErr_SetString(exc, msg.c_str());
  throw nb::python_error();
}

// A numpy scalar's value: its bytes through the buffer protocol (numpy's
// scalars export their value in place, in native byte order at the scalar's
// own width), with no Python object made on the way.
void pack_numpy_scalar(const cucore::Kernel& kernel, std::size_t i, PyObject* o, const ScalarType& st, Slot& out) {
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
  const bool ok = static_cast<std::size_t>(view.len) == st.size;
  if (ok) std::memcpy(out.bytes, view.buf, st.size);
  PyBuffer_Release(&view);
  if (!ok) arg_error(PyExc_ValueError, kernel, i, "(a numpy scalar) has an unexpected size");
}

// Packs a Python int into `slot` at `width` bytes (range-checked).
void pack_int(PyObject* o, std::size_t width, Slot& slot, cucore::detail::ArgDesc& desc, const cucore::Kernel& k,
              std::size_t i) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  bool is_signed = true;
  unsigned long long u = 0;
  if (overflow > 0) {
    u = PyLong_AsUnsignedLongLong(o);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Clear();
      arg_error(PyExc_ValueError, k, i, "does not fit in 64 bits");
    }
    is_signed = false;
  } else if (overflow < 0) {
    arg_error(PyExc_ValueError, k, i, "does not fit in 64 bits");
  } else if (v == -1 && PyErr_Occurred()) {
    throw nb::python_error();
  } else {
    u = static_cast<unsigned long long>(v);
  }
  auto fits = [&](long long lo, unsigned long long hi) {
    return is_signed ? (v >= lo && (v < 0 || static_cast<unsigned long long>(v) <= hi)) : u <= hi;
  };
  switch (width) {
    case 1:
      if (!fits(INT8_MIN, UINT8_MAX)) arg_error(PyExc_ValueError, k, i, "(an int) does not fit the 1-byte parameter");
      slot.bytes[0] = static_cast<unsigned char>(u);
      break;
    case 2: {
      if (!fits(INT16_MIN, UINT16_MAX)) arg_error(PyExc_ValueError, k, i, "(an int) does not fit the 2-byte parameter");
      std::uint16_t x = static_cast<std::uint16_t>(u);
      std::memcpy(slot.bytes, &x, 2);
      break;
    }
    case 4: {
      if (!fits(INT32_MIN, UINT32_MAX)) arg_error(PyExc_ValueError, k, i, "(an int) does not fit the 4-byte parameter");
      std::uint32_t x = static_cast<std::uint32_t>(u);
      std::memcpy(slot.bytes, &x, 4);
      break;
    }
    default:
      width = 8;
      std::memcpy(slot.bytes, &u, 8);
      break;
  }
  desc = {width, &int_type(width, is_signed), false};
}

// ---- LaunchConfig -------------------------------------------------------------
// None is "not set": grid and block are required (cucore::validate says so).
cucore::Dim3 dim_arg(nb::handle v, const char* field) {
  if (v.is_none()) return {};
  // The field's name is built only for an error: LaunchConfig is made per
  // launch by some callers (numba-cuda).
  auto what = [&] { return std::string("LaunchConfig.") + field; };
  auto one = [&](nb::handle x) -> long long {
    if (PyLong_CheckExact(x.ptr())) {
      int overflow = 0;
      const long long r = PyLong_AsLongLongAndOverflow(x.ptr(), &overflow);
      if (!overflow && !(r == -1 && PyErr_Occurred())) return r;
      PyErr_Clear();
    }
    if (PyBool_Check(x.ptr()) || !PyIndex_Check(x.ptr()))
      raise_type_error(what() + " must be an int or a tuple of up to 3 ints, got " + repr_text(v));
    return int64_arg(x, what());
  };
  if (PyTuple_Check(v.ptr()) || PyList_Check(v.ptr())) {
    std::size_t n = nb::len(v);
    if (n == 0 || n > 3)
      throw nb::value_error((std::string("LaunchConfig.") + field + " must have 1 to 3 dimensions").c_str());
    long long d[3] = {1, 1, 1};
    for (std::size_t j = 0; j < n; ++j) d[j] = one(v[j]);
    return cucore::Dim3(d[0], d[1], d[2]);
  }
  return cucore::Dim3(one(v));
}

nb::tuple dim_tuple(const cucore::Dim3& d) {
  if (!d.is_set()) return nb::tuple();
  return nb::make_tuple(d.x, d.y, d.z);
}

}  // namespace

namespace {
// A Buffer, or an instance of a subclass (ManagedBuffer), as its device pointer.
inline void pack_buffer(const cucore::Kernel& kernel, std::size_t i, PyObject* o, Slot& s,
                        cucore::detail::ArgDesc& desc) {
  const cucore::Buffer& b = *nb::inst_ptr<cucore::Buffer>(o);
  if (b.is_closed()) [[unlikely]]
    cucore::detail::throw_closed_buffer(kernel, i);
  CUdeviceptr p = b.handle();
  std::memcpy(s.bytes, &p, sizeof p);
  desc = {sizeof(CUdeviceptr), &typeid(cucore::Buffer), true};
}
}  // namespace

void pack_kernel_args(const cucore::Kernel& kernel, PyObject* const* args, std::size_t n, PackedArgs& out) {
  if (n > kMaxKernelArgs) raise_value_error("launch: more than 64 kernel arguments");
  Slot* slots = out.slots;
  void** pointers = out.pointers;
  cucore::detail::ArgDesc* descs = out.descs;
  // The parameter layout (cached in the Kernel): widths for Python ints.
  const std::vector<cucore::ParamInfo>* params = nullptr;
  try {
    params = &kernel.arguments_info();
  } catch (const cucore::FeatureUnavailableError&) {
    params = nullptr;  // old driver: ints go as intptr_t, as cuda.core
  }

  for (std::size_t i = 0; i < n; ++i) {
    PyObject* o = args[i];
    PyTypeObject* t = Py_TYPE(o);
    Slot& s = slots[i];
    pointers[i] = s.bytes;
    if (t == g_types.buffer) {
      pack_buffer(kernel, i, o, s, descs[i]);
    } else if (PyLong_CheckExact(o) || PyBool_Check(o)) {
      std::size_t width = params && i < params->size() ? (*params)[i].size : 8;
      if (width != 1 && width != 2 && width != 4 && width != 8) width = 8;  // the size check reports it
      pack_int(o, width, s, descs[i], kernel, i);
    } else if (PyFloat_CheckExact(o)) {
      double d = PyFloat_AS_DOUBLE(o);
      std::memcpy(s.bytes, &d, 8);
      descs[i] = {8, &typeid(double), false};
    } else if (const ScalarType& st = numpy_scalar(t); st.size) {
      pack_numpy_scalar(kernel, i, o, st, s);
      descs[i] = {st.size, st.ctype, false};
    } else if (PyLong_Check(o) || PyFloat_Check(o)) {
      // int/float subclasses (e.g. IntEnum, numpy.float64 handled above)
      if (PyLong_Check(o)) {
        std::size_t width = params && i < params->size() ? (*params)[i].size : 8;
        if (width != 1 && width != 2 && width != 4 && width != 8) width = 8;
        pack_int(o, width, s, descs[i], kernel, i);
      } else {
        double d = PyFloat_AsDouble(o);
        std::memcpy(s.bytes, &d, 8);
        descs[i] = {8, &typeid(double), false};
      }
    } else if (PyComplex_CheckExact(o)) {
      std::complex<double> c(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o));
      std::memcpy(s.bytes, &c, 16);
      descs[i] = {16, &typeid(std::complex<double>), false};
    } else if (t == g_types.graph_condition) {
      CUgraphConditionalHandle h = nb::inst_ptr<cucore::graph::GraphCondition>(o)->handle;
      std::memcpy(s.bytes, &h, sizeof h);
      descs[i] = {sizeof h, &typeid(CUgraphConditionalHandle), false};
    } else if (t == g_types.tensor_map) {
      // By value: the driver copies the descriptor's 128 bytes from where it lives.
      pointers[i] = nb::inst_ptr<PyTensorMap>(o)->map.get();
      descs[i] = {sizeof(cucore::TensorMapDescriptor), &typeid(cucore::TensorMapDescriptor), false};
    } else if (t == g_types.view) {
      std::uintptr_t p = nb::inst_ptr<PyView>(o)->view.ptr();
      std::memcpy(s.bytes, &p, sizeof p);
      descs[i] = {sizeof(void*), &typeid(void*), false};
    } else if (t == g_types.texture_object || t == g_types.surface_object) {
      // Bindless handles: 64 bits, as cudaTextureObject_t / cudaSurfaceObject_t.
      unsigned long long h = t == g_types.texture_object
                                 ? nb::inst_ptr<cucore::texture::TextureObject>(o)->kernel_argument()
                                 : nb::inst_ptr<cucore::texture::SurfaceObject>(o)->kernel_argument();
      std::memcpy(s.bytes, &h, sizeof h);
      descs[i] = {sizeof h, &typeid(unsigned long long), false};
    } else if (PyType_IsSubtype(t, g_types.buffer)) {  // ManagedBuffer and other Buffer subclasses
      pack_buffer(kernel, i, o, s, descs[i]);
    } else if (is_bindings_handle(o, HandleKind::graph_conditional)) {
      // cuda.core takes cuda.bindings' conditional handle too (by its value, 64 bits).
      CUgraphConditionalHandle h = handle_arg(o, HandleKind::graph_conditional, "kernel argument");
      std::memcpy(s.bytes, &h, sizeof h);
      descs[i] = {sizeof h, &typeid(CUgraphConditionalHandle), false};
    } else if (is_ctypes_value(o)) {
      Py_buffer view;
      if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
      std::size_t len = static_cast<std::size_t>(view.len);
      if (len > sizeof(Slot)) {
        PyBuffer_Release(&view);
        arg_error(PyExc_ValueError, kernel, i, "(a ctypes value) is larger than 16 bytes");
      }
      std::memcpy(s.bytes, view.buf, len);
      PyBuffer_Release(&view);
      descs[i] = {len, &typeid(void), false};
    } else {
      std::string msg = std::string("is of unsupported type: ") + t->tp_name;
      arg_error(PyExc_TypeError, kernel, i, msg);
    }
  }

}

namespace {

// ---- launch ---------------------------------------------------------------------
PyObject* launch_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 3) {
    PyErr_SetString(PyExc_TypeError, "launch(stream, config, kernel, *kernel_args): missing arguments");
    return nullptr;
  }
  try {
    if (!PyObject_TypeCheck(args[1], g_types.launch_config)) {
      PyErr_Format(PyExc_TypeError, "launch: config must be a LaunchConfig, got %.200s", Py_TYPE(args[1])->tp_name);
      return nullptr;
    }
    if (!PyObject_TypeCheck(args[2], g_types.kernel)) {
      PyErr_Format(PyExc_TypeError, "launch: kernel must be a Kernel, got %.200s", Py_TYPE(args[2])->tp_name);
      return nullptr;
    }
    const auto& config = *nb::inst_ptr<cucore::LaunchConfig>(args[1]);
    const auto& kernel = *nb::inst_ptr<cucore::Kernel>(args[2]);
    const std::size_t n = static_cast<std::size_t>(nargs - 3);
    PackedArgs packed;
    pack_kernel_args(kernel, args + 3, n, packed);
    // A GraphBuilder captures on its stream and keeps what the launch uses.
    cucore::StreamRef stream = Py_TYPE(args[0]) == g_types.graph_builder
                                   ? graph_builder_launch_stream(args[0], kernel, args + 3, n)
                                   : stream_arg(args[0], "launch: stream");

    PyThreadState* ts = PyEval_SaveThread();
    try {
      cucore::detail::launch_checked(stream.handle(), config, kernel, packed.pointers, packed.descs, n);
    } catch (...) {
      PyEval_RestoreThread(ts);
      set_error_from_current_exception();
      return nullptr;
    }
    PyEval_RestoreThread(ts);
    Py_RETURN_NONE;
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef g_launch_def = {
    "launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch_fast)), METH_FASTCALL,
    "launch(stream, config, kernel, *kernel_args)\n--\n\n"
    "Launches `kernel` on `stream` (a Stream or any object with __cuda_stream__) with `config`.\n"
    "Arguments: Buffer -> its pointer; int -> an integer at the parameter's width; float -> double;\n"
    "numpy and ctypes scalars at their own width. Count or size mismatches raise ValueError naming\n"
    "the parameter. The GIL is released around the driver call."};

}  // namespace

void bind_launch(nb::module_& m) {
  auto lc = nb::class_<cucore::LaunchConfig>(m, "LaunchConfig",
      "Launch configuration: grid (blocks, or clusters when cluster is set), block (threads), cluster, "
      "shmem_size (dynamic shared memory bytes), is_cooperative. Dimensions: an int or a tuple of up to 3.",
      nb::is_weak_referenceable());
  lc.def("__init__", [](cucore::LaunchConfig* self, nb::handle grid, nb::handle cluster, nb::handle block,
                        nb::handle shmem_size, bool is_cooperative, bool programmatic_stream_serialization,
                        nb::handle cooperative_launch) {
        if (programmatic_stream_serialization)
          throw nb::value_error("LaunchConfig: programmatic_stream_serialization is not supported by cucore yet");
        cucore::LaunchConfig c;
        c.grid = dim_arg(grid, "grid");
        c.cluster = dim_arg(cluster, "cluster");
        c.block = dim_arg(block, "block");
        if (!shmem_size.is_none()) {
          const std::int64_t v = int64_arg(shmem_size, "LaunchConfig.shmem_size");
          if (v < 0) throw nb::value_error("LaunchConfig: shmem_size must be >= 0");
          c.shmem_size = static_cast<std::size_t>(v);
        }
        c.is_cooperative = is_cooperative || (!cooperative_launch.is_none() && PyObject_IsTrue(cooperative_launch.ptr()) == 1);
        cucore::validate(c);  // grid and block are required, as in cuda.core
        new (self) cucore::LaunchConfig(c);
      }, nb::arg("grid") = nb::none(), nb::arg("cluster") = nb::none(), nb::arg("block") = nb::none(),
         nb::arg("shmem_size") = nb::none(), nb::arg("is_cooperative") = false,
         nb::arg("programmatic_stream_serialization") = false, nb::kw_only(),
         nb::arg("cooperative_launch") = nb::none())
      .def_prop_ro("grid", [](const cucore::LaunchConfig& c) { return dim_tuple(c.grid); })
      .def_prop_ro("block", [](const cucore::LaunchConfig& c) { return dim_tuple(c.block); })
      .def_prop_ro("cluster", [](const cucore::LaunchConfig& c) -> nb::object {
        if (!c.cluster.is_set()) return nb::none();
        return dim_tuple(c.cluster);
      })
      .def_prop_ro("shmem_size", [](const cucore::LaunchConfig& c) { return c.shmem_size; })
      .def_prop_ro("is_cooperative", [](const cucore::LaunchConfig& c) { return c.is_cooperative; })
      .def_prop_ro("programmatic_stream_serialization", [](const cucore::LaunchConfig&) { return false; })
      .def("__eq__", [](const cucore::LaunchConfig& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.launch_config) && a == *nb::inst_ptr<cucore::LaunchConfig>(b);
      })
      .def("__hash__", [](const cucore::LaunchConfig& c) {
        return nb::hash(nb::make_tuple("LaunchConfig", dim_tuple(c.grid), dim_tuple(c.block), dim_tuple(c.cluster),
                                       c.shmem_size, c.is_cooperative));
      })
      .def("__repr__", [](const cucore::LaunchConfig& c) {
        auto d = [](const cucore::Dim3& x) {
          return "(" + std::to_string(x.x) + ", " + std::to_string(x.y) + ", " + std::to_string(x.z) + ")";
        };
        return "LaunchConfig(grid=" + d(c.grid) + ", cluster=" + (c.cluster.is_set() ? d(c.cluster) : "None") +
               ", block=" + d(c.block) + ", shmem_size=" + std::to_string(c.shmem_size) +
               ", is_cooperative=" + (c.is_cooperative ? "True" : "False") +
               ", programmatic_stream_serialization=False)";
      });
  g_types.launch_config = reinterpret_cast<PyTypeObject*>(lc.ptr());

  PyObject* f = PyCFunction_NewEx(&g_launch_def, nullptr, m.attr("__name__").ptr());
  if (!f) throw nb::python_error();
  m.attr("launch") = nb::steal(f);
}

}  // namespace cucore::python
