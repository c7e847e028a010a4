// StridedMemoryView: DLPack, CUDA Array Interface, NumPy array interface, and
// a fast path for PyTorch tensors through PyTorch's stable C ABI (the AOTI
// shim: aoti_torch_get_data_ptr & co., exported by libtorch), which reads the
// tensor's metadata with no Python attribute access.
#include <dlfcn.h>

#include <cstring>

#include "view.hpp"

namespace cucore::python {

PyView::PyView(PyView&& o) noexcept
    : ptr(o.ptr), device_id(o.device_id), is_device_accessible(o.is_device_accessible), readonly(o.readonly),
      has_strides(o.has_strides), ndim(o.ndim), dl(o.dl), big_shape(std::move(o.big_shape)),
      big_strides(std::move(o.big_strides)), exporting_obj(std::move(o.exporting_obj)),
      dtype_obj(std::move(o.dtype_obj)), managed(o.managed), managed_versioned(o.managed_versioned) {
  std::memcpy(inline_shape, o.inline_shape, sizeof inline_shape);
  std::memcpy(inline_strides, o.inline_strides, sizeof inline_strides);
  o.managed = nullptr;
}

PyView::~PyView() {
  if (!managed) return;
  if (managed_versioned) {
    auto* t = static_cast<dlpack::DLManagedTensorVersioned*>(managed);
    if (t->deleter) t->deleter(t);
  } else {
    auto* t = static_cast<dlpack::DLManagedTensor*>(managed);
    if (t->deleter) t->deleter(t);
  }
}

namespace {

// ---- dtypes ---------------------------------------------------------------------
bool dl_from_typestr(const std::string& ts, dlpack::DLDataType& dl) {
  if (ts.size() < 3) return false;
  char kind = ts[1];
  int bytes = std::atoi(ts.c_str() + 2);
  uint8_t code;
  switch (kind) {
    case 'f': code = dlpack::kDLFloat; break;
    case 'i': code = dlpack::kDLInt; break;
    case 'u': code = dlpack::kDLUInt; break;
    case 'b': code = dlpack::kDLBool; break;
    case 'c': code = dlpack::kDLComplex; break;
    default: return false;
  }
  dl = {code, static_cast<uint8_t>(bytes * 8), 1};
  return true;
}

std::string typestr_from_dl(const dlpack::DLDataType& dl) {
  char kind;
  switch (dl.code) {
    case dlpack::kDLFloat: kind = 'f'; break;
    case dlpack::kDLInt: kind = 'i'; break;
    case dlpack::kDLUInt: kind = 'u'; break;
    case dlpack::kDLBool: kind = 'b'; break;
    case dlpack::kDLComplex: kind = 'c'; break;
    case dlpack::kDLBfloat: return "bfloat16";
    default: return {};
  }
  return std::string(dl.bits == 8 ? "|" : "<") + kind + std::to_string(dl.bits / 8);
}

nb::object numpy_dtype(const PyView& v) {
  if (v.dl.lanes == 0) return nb::none();
  std::string ts = typestr_from_dl(v.dl);
  if (ts.empty()) return nb::none();
  if (ts == "bfloat16") {
    try {
      return nb::module_::import_("numpy").attr("dtype")(nb::module_::import_("ml_dtypes").attr("bfloat16"));
    } catch (nb::python_error&) {
      throw nb::type_error("bfloat16 needs the ml_dtypes package for a NumPy dtype");
    }
  }
  return nb::module_::import_("numpy").attr("dtype")(ts);
}

std::size_t itemsize(const PyView& v) { return v.dl.lanes ? (v.dl.bits / 8u) * v.dl.lanes : 1; }

int pointer_device(std::uintptr_t p) {
  try {
    return cucore::Buffer::from_handle(static_cast<CUdeviceptr>(p), 0).device_id();
  } catch (...) {
    return -1;
  }
}

// Stream ordering: the consumer stream waits for the producer stream.
void order_streams(std::uintptr_t producer, nb::handle consumer_ptr) {
  if (consumer_ptr.is_none()) return;
  long long c = nb::cast<long long>(consumer_ptr);
  if (c == -1 || static_cast<std::uintptr_t>(c) == producer) return;
  cucore::StreamRef cons(reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(c)));
  cons.wait(cucore::StreamRef(reinterpret_cast<CUstream>(producer)));
}

// ---- DLPack -----------------------------------------------------------------------
void fill_from_dltensor(PyView& v, const dlpack::DLTensor& t) {
  v.ptr = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
  v.dl = t.dtype;
  v.set_ndim(t.ndim);
  for (int i = 0; i < t.ndim; ++i) v.shape()[i] = t.shape[i];
  v.has_strides = t.strides != nullptr;
  if (t.strides)
    for (int i = 0; i < t.ndim; ++i) v.strides()[i] = t.strides[i];
  switch (t.device.device_type) {
    case dlpack::kDLCUDA:
    case dlpack::kDLCUDAManaged:
      v.device_id = t.device.device_id;
      v.is_device_accessible = true;
      break;
    case dlpack::kDLCUDAHost:
      v.device_id = t.device.device_id;
      v.is_device_accessible = true;
      break;
    default:
      v.device_id = -1;
      v.is_device_accessible = false;
  }
}

PyView view_from_dlpack(nb::handle obj, nb::handle stream_ptr) {
  nb::object dev = obj.attr("__dlpack_device__")();
  int dev_type = nb::cast<int>(dev[0]);
  nb::object stream = nb::none();
  if (dev_type != dlpack::kDLCPU) {
    if (stream_ptr.is_none()) stream = nb::int_(-1);
    else stream = nb::borrow(stream_ptr);
  }
  nb::object cap;
  try {
    cap = obj.attr("__dlpack__")(nb::arg("stream") = stream, nb::arg("max_version") = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = obj.attr("__dlpack__")(nb::arg("stream") = stream);  // a producer without max_version
  }
  PyView v;
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* t = static_cast<dlpack::DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    if (t->version.major > dlpack::kMajor) throw nb::buffer_error("DLPack: unsupported major version");
    fill_from_dltensor(v, t->dl_tensor);
    v.readonly = (t->flags & dlpack::kDLFlagBitMaskReadOnly) != 0;
    v.managed = t;
    v.managed_versioned = true;
    PyCapsule_SetName(c, "used_dltensor_versioned");
  } else if (PyCapsule_IsValid(c, "dltensor")) {
    auto* t = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    fill_from_dltensor(v, t->dl_tensor);
    v.managed = t;
    v.managed_versioned = false;
    PyCapsule_SetName(c, "used_dltensor");
  } else {
    throw nb::buffer_error("__dlpack__ did not return a DLPack capsule");
  }
  v.exporting_obj = nb::borrow(obj);
  return v;
}

// ---- CUDA Array Interface / NumPy array interface ---------------------------------
PyView view_from_interface(nb::handle obj, nb::dict d, bool cuda, nb::handle stream_ptr) {
  PyView v;
  nb::object data = d["data"];
  if (data.is_none()) {
    v.ptr = 0;
  } else {
    v.ptr = static_cast<std::uintptr_t>(nb::cast<unsigned long long>(data[0]));
    v.readonly = nb::cast<bool>(data[1]);
  }
  std::string ts = nb::cast<std::string>(d["typestr"]);
  if (!dl_from_typestr(ts, v.dl)) v.dl = {0, 0, 0};
  nb::tuple shape = nb::cast<nb::tuple>(d["shape"]);
  int n = static_cast<int>(nb::len(shape));
  v.set_ndim(n);
  for (int i = 0; i < n; ++i) v.shape()[i] = nb::cast<int64_t>(shape[i]);
  nb::object strides = d.contains("strides") ? nb::object(d["strides"]) : nb::none();
  if (!strides.is_none()) {
    v.has_strides = true;
    int64_t isz = static_cast<int64_t>(itemsize(v));
    if (v.dl.lanes == 0) {
      // unknown dtype: itemsize from the typestr's byte count
      isz = std::max(1, std::atoi(ts.c_str() + 2));
    }
    for (int i = 0; i < n; ++i) v.strides()[i] = nb::cast<int64_t>(strides[i]) / isz;
  }
  if (v.dl.lanes == 0) v.dtype_obj = nb::module_::import_("numpy").attr("dtype")(ts);
  if (cuda) {
    v.is_device_accessible = true;
    v.device_id = v.ptr ? pointer_device(v.ptr) : -1;
    nb::object s = d.contains("stream") ? nb::object(d["stream"]) : nb::none();
    if (!s.is_none()) order_streams(static_cast<std::uintptr_t>(nb::cast<unsigned long long>(s)), stream_ptr);
  } else {
    v.is_device_accessible = false;
    v.device_id = -1;
  }
  v.exporting_obj = nb::borrow(obj);
  return v;
}

// ---- PyTorch fast path ----------------------------------------------------------------
using AtenTensorHandle = void*;
struct TorchApi {
  bool tried = false, ok = false;
  PyObject* tensor_type = nullptr;  // torch.Tensor
  std::size_t offset = 0;           // of the at::Tensor inside THPVariable
  int32_t (*get_data_ptr)(AtenTensorHandle, void**) = nullptr;
  int32_t (*get_dim)(AtenTensorHandle, int64_t*) = nullptr;
  int32_t (*get_sizes)(AtenTensorHandle, int64_t**) = nullptr;
  int32_t (*get_strides)(AtenTensorHandle, int64_t**) = nullptr;
  int32_t (*get_dtype)(AtenTensorHandle, int32_t*) = nullptr;
  int32_t (*get_device_type)(AtenTensorHandle, int32_t*) = nullptr;
  int32_t (*get_device_index)(AtenTensorHandle, int32_t*) = nullptr;
  int32_t (*get_current_cuda_stream)(int32_t, void**) = nullptr;
  int32_t device_cuda = 1;
  struct DType { int32_t code; dlpack::DLDataType dl; };
  std::vector<DType> dtypes;
};
TorchApi g_torch;

template <typename F>
bool resolve(void* h, const char* name, F& fn) {
  void* p = dlsym(h, name);
  if (!p) p = dlsym(RTLD_DEFAULT, name);
  fn = reinterpret_cast<F>(p);
  return p != nullptr;
}

// Set up on first sight of a loaded torch; stays off when anything is missing.
bool torch_ready() {
  if (g_torch.tried) return g_torch.ok;
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
  if (!torch) return false;  // not imported (yet): try again next time
  g_torch.tried = true;
  try {
    nb::handle t(torch);
    g_torch.tensor_type = t.attr("Tensor").inc_ref().ptr();
    std::string ver = nb::cast<std::string>(t.attr("__version__"));
    int major = std::atoi(ver.c_str());
    int minor = std::atoi(ver.c_str() + ver.find('.') + 1);
    // PyTorch 2.10+: THPVariable holds at::Tensor right after the header;
    // 2.3-2.9: a c10::MaybeOwned<at::Tensor> (an 8-byte flag first).
    if (major < 2 || (major == 2 && minor < 3)) return false;
    g_torch.offset = sizeof(PyObject) + ((major == 2 && minor < 10) ? 8 : 0);
    std::string so = nb::cast<std::string>(t.attr("_C").attr("__file__"));
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    bool ok = h && resolve(h, "aoti_torch_get_data_ptr", g_torch.get_data_ptr) &&
              resolve(h, "aoti_torch_get_dim", g_torch.get_dim) &&
              resolve(h, "aoti_torch_get_sizes", g_torch.get_sizes) &&
              resolve(h, "aoti_torch_get_strides", g_torch.get_strides) &&
              resolve(h, "aoti_torch_get_dtype", g_torch.get_dtype) &&
              resolve(h, "aoti_torch_get_device_type", g_torch.get_device_type) &&
              resolve(h, "aoti_torch_get_device_index", g_torch.get_device_index);
    if (!ok) return false;
    resolve(h, "aoti_torch_get_current_cuda_stream", g_torch.get_current_cuda_stream);
    int32_t (*dev_cuda)() = nullptr;
    if (resolve(h, "aoti_torch_device_type_cuda", dev_cuda)) g_torch.device_cuda = dev_cuda();
    struct { const char* fn; dlpack::DLDataType dl; } table[] = {
        {"aoti_torch_dtype_float16", {dlpack::kDLFloat, 16, 1}},  {"aoti_torch_dtype_float32", {dlpack::kDLFloat, 32, 1}},
        {"aoti_torch_dtype_float64", {dlpack::kDLFloat, 64, 1}},  {"aoti_torch_dtype_bfloat16", {dlpack::kDLBfloat, 16, 1}},
        {"aoti_torch_dtype_uint8", {dlpack::kDLUInt, 8, 1}},      {"aoti_torch_dtype_uint16", {dlpack::kDLUInt, 16, 1}},
        {"aoti_torch_dtype_uint32", {dlpack::kDLUInt, 32, 1}},    {"aoti_torch_dtype_uint64", {dlpack::kDLUInt, 64, 1}},
        {"aoti_torch_dtype_int8", {dlpack::kDLInt, 8, 1}},        {"aoti_torch_dtype_int16", {dlpack::kDLInt, 16, 1}},
        {"aoti_torch_dtype_int32", {dlpack::kDLInt, 32, 1}},      {"aoti_torch_dtype_int64", {dlpack::kDLInt, 64, 1}},
        {"aoti_torch_dtype_bool", {dlpack::kDLBool, 8, 1}},       {"aoti_torch_dtype_complex64", {dlpack::kDLComplex, 64, 1}},
        {"aoti_torch_dtype_complex128", {dlpack::kDLComplex, 128, 1}},
    };
    for (auto& e : table) {
      int32_t (*f)() = nullptr;
      if (resolve(h, e.fn, f)) g_torch.dtypes.push_back({f(), e.dl});
    }
    g_torch.ok = true;
  } catch (...) {
    PyErr_Clear();
    g_torch.ok = false;
  }
  return g_torch.ok;
}

bool is_torch_tensor(PyObject* o) {
  if (!torch_ready()) return false;
  return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g_torch.tensor_type));
}

bool view_from_torch(PyObject* o, nb::handle stream_ptr, PyView& v) {
  auto h = reinterpret_cast<AtenTensorHandle>(reinterpret_cast<char*>(o) + g_torch.offset);
  void* data = nullptr;
  int64_t dim = 0;
  int64_t *sizes = nullptr, *strides = nullptr;
  int32_t dtype = 0, dev_type = 0, dev_index = 0;
  if (g_torch.get_data_ptr(h, &data) || g_torch.get_dim(h, &dim) || g_torch.get_sizes(h, &sizes) ||
      g_torch.get_strides(h, &strides) || g_torch.get_dtype(h, &dtype) || g_torch.get_device_type(h, &dev_type) ||
      g_torch.get_device_index(h, &dev_index))
    return false;
  v.dl = {0, 0, 0};
  for (const auto& d : g_torch.dtypes)
    if (d.code == dtype) v.dl = d.dl;
  if (v.dl.lanes == 0) return false;  // a dtype we do not map: take the DLPack path
  v.ptr = reinterpret_cast<std::uintptr_t>(data);
  v.set_ndim(static_cast<int>(dim));
  std::memcpy(v.shape(), sizes, sizeof(int64_t) * dim);
  std::memcpy(v.strides(), strides, sizeof(int64_t) * dim);
  v.has_strides = true;
  if (dev_type == g_torch.device_cuda) {
    v.device_id = dev_index;
    v.is_device_accessible = true;
    if (!stream_ptr.is_none() && g_torch.get_current_cuda_stream) {
      long long c = nb::cast<long long>(stream_ptr);
      if (c != -1) {
        void* producer = nullptr;
        if (g_torch.get_current_cuda_stream(dev_index, &producer) == 0)
          order_streams(reinterpret_cast<std::uintptr_t>(producer), stream_ptr);
      }
    }
  } else {
    v.device_id = -1;
    v.is_device_accessible = false;
  }
  v.exporting_obj = nb::borrow(o);
  return true;
}

PyView view_from_any(nb::handle obj, nb::handle stream_ptr) {
  PyObject* o = obj.ptr();
  if (is_torch_tensor(o)) {
    PyView v;
    if (view_from_torch(o, stream_ptr, v)) return v;
  }
  if (PyObject_HasAttrString(o, "__dlpack__")) {
    try {
      return view_from_dlpack(obj, stream_ptr);
    } catch (nb::python_error& e) {
      // e.g. numpy refuses to export read-only arrays through DLPack 0.x
      if (!e.matches(PyExc_BufferError)) throw;
    }
  }
  if (PyObject_HasAttrString(o, "__cuda_array_interface__"))
    return view_from_interface(obj, nb::cast<nb::dict>(obj.attr("__cuda_array_interface__")), true, stream_ptr);
  if (PyObject_HasAttrString(o, "__array_interface__"))
    return view_from_interface(obj, nb::cast<nb::dict>(obj.attr("__array_interface__")), false, stream_ptr);
  throw nb::buffer_error("StridedMemoryView: the object supports neither DLPack, the CUDA Array Interface nor the "
                         "array interface");
}

nb::tuple to_tuple(const int64_t* p, int n) {
  nb::object t = nb::steal(PyTuple_New(n));
  for (int i = 0; i < n; ++i) PyTuple_SET_ITEM(t.ptr(), i, PyLong_FromLongLong(p[i]));
  return nb::borrow<nb::tuple>(t);
}

// View construction through the type call, bypassing __init__ dispatch.
PyObject* view_vectorcall(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* obj = nargs > 0 ? args[0] : nullptr;
  PyObject* stream = nargs > 1 ? args[1] : Py_None;
  if (nargs > 2) {
    PyErr_SetString(PyExc_TypeError, "StridedMemoryView(obj=None, stream_ptr=None)");
    return nullptr;
  }
  if (kwnames) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      if (PyUnicode_CompareWithASCIIString(key, "obj") == 0) obj = args[nargs + k];
      else if (PyUnicode_CompareWithASCIIString(key, "stream_ptr") == 0) stream = args[nargs + k];
      else {
        PyErr_Format(PyExc_TypeError, "StridedMemoryView() got an unexpected keyword argument %R", key);
        return nullptr;
      }
    }
  }
  try {
    if (!obj || obj == Py_None) return nb::cast(PyView()).release().ptr();
    return nb::cast(view_from_any(obj, stream)).release().ptr();
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

}  // namespace

void bind_view(nb::module_& m) {
  auto vc = nb::class_<PyView>(m, "StridedMemoryView",
      "A zero-copy view of a strided array from another library: DLPack, the CUDA Array Interface or the "
      "NumPy array interface (PyTorch tensors are read directly through PyTorch's C ABI). stream_ptr is the "
      "consumer stream (-1: no stream ordering). strides are in elements; None means C-contiguous.");
  vc.def("__init__", [](PyView* self, nb::handle obj, nb::handle stream_ptr) {
        if (obj.is_none()) new (self) PyView();
        else new (self) PyView(view_from_any(obj, stream_ptr));
      }, nb::arg("obj") = nb::none(), nb::arg("stream_ptr") = nb::none())
      .def_static("from_dlpack", [](nb::handle obj, nb::handle stream_ptr) { return view_from_dlpack(obj, stream_ptr); },
                  nb::arg("obj"), nb::arg("stream_ptr") = nb::none())
      .def_static("from_cuda_array_interface", [](nb::handle obj, nb::handle stream_ptr) {
        return view_from_interface(obj, nb::cast<nb::dict>(obj.attr("__cuda_array_interface__")), true, stream_ptr);
      }, nb::arg("obj"), nb::arg("stream_ptr") = nb::none())
      .def_static("from_array_interface", [](nb::handle obj) {
        return view_from_interface(obj, nb::cast<nb::dict>(obj.attr("__array_interface__")), false, nb::none());
      }, nb::arg("obj"))
      .def_static("from_any_interface", [](nb::handle obj, nb::handle stream_ptr) { return view_from_any(obj, stream_ptr); },
                  nb::arg("obj"), nb::arg("stream_ptr") = nb::none())
      .def_static("from_buffer", [](nb::handle buffer, nb::handle shape, nb::handle strides, nb::handle itemsize_arg,
                                    nb::handle dtype, bool is_readonly) {
        if (!PyObject_TypeCheck(buffer.ptr(), g_types.buffer)) throw nb::type_error("buffer must be a cucore.Buffer");
        PyBuffer& b = *nb::inst_ptr<PyBuffer>(buffer);
        PyView v;
        v.ptr = b.buf.handle();
        v.device_id = b.buf.device_id();
        v.is_device_accessible = b.buf.is_device_accessible();
        v.readonly = is_readonly;
        if (!dtype.is_none()) {
          nb::object dt = nb::module_::import_("numpy").attr("dtype")(dtype);
          std::string ts = nb::cast<std::string>(dt.attr("str"));
          if (!dl_from_typestr(ts, v.dl)) v.dtype_obj = dt;
        } else if (!itemsize_arg.is_none()) {
          int isz = nb::cast<int>(itemsize_arg);
          v.dl = {dlpack::kDLUInt, static_cast<uint8_t>(isz * 8), 1};
        } else {
          throw nb::value_error("from_buffer: give dtype or itemsize");
        }
        nb::tuple sh = nb::cast<nb::tuple>(shape);
        int n = static_cast<int>(nb::len(sh));
        v.set_ndim(n);
        std::size_t count = 1;
        for (int i = 0; i < n; ++i) {
          v.shape()[i] = nb::cast<int64_t>(sh[i]);
          count *= static_cast<std::size_t>(v.shape()[i]);
        }
        if (count * itemsize(v) > b.buf.size()) throw nb::value_error("from_buffer: the shape needs more bytes than the buffer has");
        if (!strides.is_none()) {
          v.has_strides = true;
          for (int i = 0; i < n; ++i) v.strides()[i] = nb::cast<int64_t>(strides[i]);
        }
        v.exporting_obj = nb::borrow(buffer);
        return v;
      }, nb::arg("buffer"), nb::arg("shape"), nb::arg("strides") = nb::none(), nb::kw_only(),
         nb::arg("itemsize") = nb::none(), nb::arg("dtype") = nb::none(), nb::arg("is_readonly") = false)
      .def_prop_ro("ptr", [](const PyView& v) { return v.ptr; })
      .def_prop_ro("device_id", [](const PyView& v) { return v.device_id; })
      .def_prop_ro("is_device_accessible", [](const PyView& v) { return v.is_device_accessible; })
      .def_prop_ro("readonly", [](const PyView& v) { return v.readonly; })
      .def_prop_ro("exporting_obj", [](const PyView& v) { return v.exporting_obj.is_valid() ? v.exporting_obj : nb::none(); })
      .def_prop_ro("shape", [](const PyView& v) { return to_tuple(v.shape(), v.ndim); })
      .def_prop_ro("strides", [](const PyView& v) -> nb::object {
        if (!v.has_strides) return nb::none();
        return to_tuple(v.strides(), v.ndim);
      })
      .def_prop_ro("ndim", [](const PyView& v) { return v.ndim; })
      .def_prop_ro("size", [](const PyView& v) {
        int64_t n = 1;
        for (int i = 0; i < v.ndim; ++i) n *= v.shape()[i];
        return n;
      })
      .def_prop_ro("dtype", [](PyView& v) -> nb::object {
        if (!v.dtype_obj.is_valid()) v.dtype_obj = numpy_dtype(v);
        return v.dtype_obj;
      })
      .def("__dlpack_device__", [](const PyView& v) {
        if (!v.is_device_accessible) return nb::make_tuple((int)dlpack::kDLCPU, 0);
        return nb::make_tuple((int)dlpack::kDLCUDA, v.device_id);
      })
      .def("__repr__", [](const PyView& v) {
        std::string s = "StridedMemoryView(ptr=" + std::to_string(v.ptr) + ", shape=(";
        for (int i = 0; i < v.ndim; ++i) s += std::to_string(v.shape()[i]) + (v.ndim == 1 || i + 1 < v.ndim ? "," : "");
        s += "), device_id=" + std::to_string(v.device_id) + ", is_device_accessible=" +
             (v.is_device_accessible ? "True" : "False") + ", readonly=" + (v.readonly ? "True" : "False") + ")";
        return s;
      });
  g_types.view = reinterpret_cast<PyTypeObject*>(vc.ptr());
  g_types.view->tp_vectorcall = view_vectorcall;
}

}  // namespace cucore::python
