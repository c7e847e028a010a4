// StridedMemoryView's imports: another library's array described through
// public protocols only, fastest first: the DLPack C exchange API (a type's
// __dlpack_c_exchange_api__: PyTorch's tensors, and cucore's own Buffer and
// StridedMemoryView; a C call, no capsule), then __dlpack__, the CUDA Array
// Interface and NumPy's array interface. Every description is checked and
// held by libcucore's StridedMemoryView (from_dltensor, adopt_dlpack,
// from_array_interface); this file reads the protocols' Python objects into
// it. Also compute's array reader, through the same readers.
#include <cstdint>
#include <array>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "view.hpp"

namespace cucore::python {
namespace {

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
  const std::int64_t c = int64_arg(consumer_ptr, "stream_ptr");
  if (c == -1 || static_cast<std::uintptr_t>(c) == producer) return;
  cucore::StreamRef cons(reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(c)));
  cons.wait(cucore::StreamRef(reinterpret_cast<CUstream>(producer)));
}

// Makes v.view in place (no temporary to move, on the hot interop paths):
// `make` returns libcucore's view; its std::invalid_argument is BufferError.
template <typename Make>
void emplace_view(PyView& v, Make&& make) {
  cucore::StridedMemoryView* p = &v.view;
  std::destroy_at(p);
  try {
    ::new (static_cast<void*>(p)) cucore::StridedMemoryView(make());
  } catch (const std::invalid_argument& e) {
    ::new (static_cast<void*>(p)) cucore::StridedMemoryView();
    throw nb::buffer_error(e.what());
  } catch (...) {
    ::new (static_cast<void*>(p)) cucore::StridedMemoryView();
    throw;
  }
}

// ---- DLPack -----------------------------------------------------------------------
// libcucore's DLPack checks and view, as BufferError: a tensor they refuse is
// not read any further.
cucore::StridedMemoryView dltensor_view(const dlpack::DLTensor& t, bool readonly) {
  try {
    return cucore::StridedMemoryView::from_dltensor(t, readonly);
  } catch (const std::invalid_argument& e) {
    throw nb::buffer_error(e.what());
  }
}

// What the view reports besides libcucore's view, for a DLPack tensor (its
// device as DLPack says; strides None when the tensor has none).
void described_by_dlpack(PyView& v, const dlpack::DLTensor& t) {
  v.has_strides = t.strides != nullptr;
  v.device_id = v.view.device_id();
}

// The view owns `t` (libcucore's adopt_dlpack: its deleter runs with the
// view's last copy). Refused by the checks, `t` is released at once, or with
// `release_if_refused` false stays the caller's.
template <typename Managed>
void adopt(PyView& v, Managed* t, bool release_if_refused = true) {
  emplace_view(v, [&] { return cucore::StridedMemoryView::adopt_dlpack(t, release_if_refused); });
  described_by_dlpack(v, t->dl_tensor);
}

// obj.__dlpack_device__(): a (device_type, device_id) tuple of ints, as DLPack
// has it (TypeError or OverflowError naming it otherwise).
dlpack::DLDevice dlpack_device_of_object(nb::handle obj) {
  nb::object dev = obj.attr("__dlpack_device__")();
  if (!PyTuple_Check(dev.ptr()) || PyTuple_GET_SIZE(dev.ptr()) != 2)
    raise_type_error("__dlpack_device__() must return a (device_type, device_id) tuple, got " + repr_text(dev));
  return {static_cast<dlpack::DLDeviceType>(int_arg(PyTuple_GET_ITEM(dev.ptr(), 0), "__dlpack_device__()[0]")),
          int_arg(PyTuple_GET_ITEM(dev.ptr(), 1), "__dlpack_device__()[1]")};
}

void view_from_dlpack(nb::handle obj, nb::handle stream_ptr, PyView& v) {
  const int dev_type = dlpack_device_of_object(obj).device_type;
  nb::object stream = nb::none();
  if (dev_type != dlpack::kDLCPU) {
    if (stream_ptr.is_none()) stream = nb::int_(-1);
    // 0 is not a stream the DLPack protocol lets a consumer name (ambiguous):
    // cuda.core passes None for it (the producer's default-stream rule).
    else if (int overflow = 0; !(PyLong_CheckExact(stream_ptr.ptr()) &&
                                 PyLong_AsLongLongAndOverflow(stream_ptr.ptr(), &overflow) == 0 && !overflow))
      stream = nb::borrow(stream_ptr);
  }
  nb::object cap;
  try {
    cap = obj.attr("__dlpack__")(nb::arg("stream") = stream,
                                 nb::arg("max_version") = nb::make_tuple(dlpack::kMajor, dlpack::kMinor));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = obj.attr("__dlpack__")(nb::arg("stream") = stream);  // a producer without max_version
  }
  // A refused tensor stays in its capsule, unconsumed (its producer's to
  // release); an accepted one is the view's, and the capsule used.
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* t = static_cast<dlpack::DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    adopt(v, t, false);
    PyCapsule_SetName(c, "used_dltensor_versioned");
  } else if (PyCapsule_IsValid(c, "dltensor")) {
    auto* t = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    adopt(v, t, false);
    PyCapsule_SetName(c, "used_dltensor");
  } else {
    throw nb::buffer_error("__dlpack__ did not return a DLPack capsule");
  }
  v.exporting_obj = nb::borrow(obj);
}

// ---- CUDA Array Interface / NumPy array interface ---------------------------------
// An array interface dict (obj.__cuda_array_interface__ or
// obj.__array_interface__) read into plain values, each conversion's error
// naming its key (TypeError for a value of the wrong type, OverflowError for
// an int out of range, BufferError for what the protocol refuses). The checks
// of the values themselves are libcucore's
// (StridedMemoryView::from_array_interface), as ValueError.
struct InterfaceDict {
  const char* attr;       // "__cuda_array_interface__" / "__array_interface__"
  nb::object dict;        // kept while the values are used
  std::string typestr;
  std::vector<std::int64_t> shape, strides;
  bool has_strides = false;
  cucore::ArrayInterface values;  // its spans point into this struct
  std::optional<std::int64_t> stream;  // the CUDA Array Interface's producer stream

  std::string key(const char* name) const { return std::string(attr) + "['" + name + "']"; }
  // The value at `name`, or null when the dict has none (borrowed).
  PyObject* get(const char* name) const {
    PyObject* v = PyDict_GetItemString(dict.ptr(), name);
    return v == Py_None ? nullptr : v;
  }
  PyObject* required(const char* name) const {
    PyObject* v = PyDict_GetItemString(dict.ptr(), name);
    if (!v) throw nb::key_error((std::string(attr) + " has no '" + name + "'").c_str());
    return v;
  }
  std::vector<std::int64_t> ints(PyObject* seq, const char* name) const { return int64_tuple_arg(seq, key(name)); }
};

// `dict` is the value of the object's attribute (read once: a producer may
// build it anew on every access).
void read_interface(nb::object dict, bool cuda, InterfaceDict& d) {
  d.attr = cuda ? "__cuda_array_interface__" : "__array_interface__";
  d.dict = std::move(dict);
  if (!PyDict_Check(d.dict.ptr())) raise_type_error(std::string(d.attr) + " must be a dict, got " + repr_text(d.dict));
  if (cuda) {
    PyObject* version = d.get("version");
    if (!version || int64_arg(version, d.key("version")) < 3)
      throw nb::buffer_error("only CUDA Array Interface v3 or above is supported");
  }
  if (d.get("mask")) throw nb::buffer_error("mask is not supported");
  PyObject* data = d.required("data");
  if (data != Py_None) {
    if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2)
      raise_type_error(d.key("data") + " must be a (pointer, read_only) tuple, got " + repr_text(data));
    d.values.data = static_cast<std::uintptr_t>(uint64_arg(PyTuple_GET_ITEM(data, 0), d.key("data") + "[0]"));
    PyObject* ro = PyTuple_GET_ITEM(data, 1);
    if (!PyBool_Check(ro)) raise_type_error(d.key("data") + "[1] (read_only) must be a bool, got " + repr_text(ro));
    d.values.readonly = ro == Py_True;
  }
  d.typestr = utf8_arg(d.required("typestr"), d.key("typestr"));
  d.shape = d.ints(d.required("shape"), "shape");
  if (PyObject* strides = d.get("strides")) {
    d.strides = d.ints(strides, "strides");
    d.has_strides = true;
  }
  if (cuda) {
    if (PyObject* s = d.get("stream")) {
      // v3: 1 (legacy default), 2 (per-thread default) or a stream handle; 0 is disallowed.
      d.stream = int64_arg(s, d.key("stream"));
      if (*d.stream <= 0)
        raise_value_error(d.key("stream") + " must be None, 1, 2 or a stream handle, got " + repr_text(s));
    }
  }
  d.values.typestr = d.typestr;
  d.values.shape = d.shape;
  if (d.has_strides) d.values.strides = std::span<const std::int64_t>(d.strides);
  d.values.device = {cuda ? dlpack::kDLCUDA : dlpack::kDLCPU, 0};
}

// libcucore's view of what `d` describes: ValueError naming the dict for what
// its checks refuse.
cucore::StridedMemoryView interface_view(const InterfaceDict& d) {
  try {
    return cucore::StridedMemoryView::from_array_interface(d.values);
  } catch (const std::invalid_argument& e) {
    raise_value_error(std::string(d.attr) + ": " + e.what());
  }
}

// ---- the DLPack C exchange API: reading ------------------------------------------
// A type's __dlpack_c_exchange_api__ (a PyCapsule; the older
// __c_dlpack_exchange_api__, a capsule or an int, too) is looked up once per
// type and kept in a small cache, which the type's version tag invalidates
// when the type changes (an attribute set later, as some libraries do).
struct ApiEntry {
  PyTypeObject* type = nullptr;  // a strong reference while cached
  unsigned int version = 0;
  const dlpack::DLPackExchangeAPI* api = nullptr;
};
std::array<ApiEntry, 8> g_api_cache;
std::size_t g_api_next = 0;

const dlpack::DLPackExchangeAPI* api_from_attr(PyObject* attr) {
  void* p = nullptr;
  if (PyCapsule_IsValid(attr, dlpack::kExchangeApiCapsule)) {
    p = PyCapsule_GetPointer(attr, dlpack::kExchangeApiCapsule);
  } else if (PyLong_Check(attr)) {
    p = PyLong_AsVoidPtr(attr);
  }
  if (!p) {
    PyErr_Clear();
    return nullptr;
  }
  // A table newer than ours may chain to one of our major version.
  for (auto* h = static_cast<dlpack::DLPackExchangeAPIHeader*>(p); h; h = h->prev_api)
    if (h->version.major == dlpack::kMajor) {
      auto* api = reinterpret_cast<const dlpack::DLPackExchangeAPI*>(h);
      return api->managed_tensor_from_py_object_no_sync ? api : nullptr;
    }
  return nullptr;
}

const dlpack::DLPackExchangeAPI* exchange_api(PyTypeObject* type) {
  for (const ApiEntry& e : g_api_cache)
    if (e.type == type && e.version == type->tp_version_tag && e.version != 0) [[likely]]
      return e.api;
  const dlpack::DLPackExchangeAPI* api = nullptr;
  for (const char* name : {dlpack::kExchangeApiAttr, dlpack::kExchangeApiOldAttr}) {
    PyObject* attr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), name);
    if (!attr) {
      PyErr_Clear();
      continue;
    }
    api = api_from_attr(attr);
    Py_DECREF(attr);
    if (api) break;
  }
  if (type->tp_version_tag != 0) {  // a type without a tag cannot be cached safely
    ApiEntry& slot = g_api_cache[g_api_next++ % g_api_cache.size()];
    Py_XDECREF(reinterpret_cast<PyObject*>(slot.type));
    Py_INCREF(reinterpret_cast<PyObject*>(type));
    slot = {type, type->tp_version_tag, api};
  }
  return api;
}

// Through the exchange API. With the producer's non-owning form (no
// allocation on either side: PyTorch fills it from the tensor itself) the view
// copies the description and holds the object, as a view through the CUDA
// Array Interface does; else it owns a managed tensor, as through __dlpack__.
// (The non-owning form has no read-only flag: such views are writable, but
// for cucore's own views, which say.)
void view_from_exchange(const dlpack::DLPackExchangeAPI* api, nb::handle obj, nb::handle stream_ptr, PyView& v) {
  if (api->dltensor_from_py_object_no_sync) {
    dlpack::DLTensor t{};
    if (api->dltensor_from_py_object_no_sync(obj.ptr(), &t) != 0) throw nb::python_error();
    const bool readonly =
        PyObject_TypeCheck(obj.ptr(), g_types.view) && nb::inst_ptr<PyView>(obj)->view.readonly();
    emplace_view(v, [&] { return cucore::StridedMemoryView::from_dltensor(t, readonly); });
    described_by_dlpack(v, t);
  } else {
    dlpack::DLManagedTensorVersioned* t = nullptr;
    if (api->managed_tensor_from_py_object_no_sync(obj.ptr(), &t) != 0 || !t) {
      if (PyErr_Occurred()) throw nb::python_error();
      throw nb::buffer_error("the DLPack exchange API gave no tensor");
    }
    adopt(v, t);
  }
  v.exporting_obj = nb::borrow(obj);
  // No synchronization was done: the consumer stream waits for the producer's
  // current stream, as __dlpack__(stream=...) would have arranged.
  if (v.view.device().device_type == dlpack::kDLCUDA && !stream_ptr.is_none() &&
      int64_arg(stream_ptr, "stream_ptr") != -1) {
    void* producer = nullptr;
    if (api->current_work_stream(dlpack::kDLCUDA, v.device_id, &producer) != 0) throw nb::python_error();
    order_streams(reinterpret_cast<std::uintptr_t>(producer), stream_ptr);
  }
}

}  // namespace

std::vector<std::int64_t> int64_tuple_arg(nb::handle seq, const std::string& what) {
  if (!PyTuple_Check(seq.ptr()) && !PyList_Check(seq.ptr()))
    raise_type_error(what + " must be a tuple of ints, got " + repr_text(seq));
  nb::object items = nb::steal(PySequence_Tuple(seq.ptr()));
  if (!items.is_valid()) throw nb::python_error();
  const Py_ssize_t n = PyTuple_GET_SIZE(items.ptr());
  if (n > cucore::kMaxNdim)
    raise_value_error(what + " has " + std::to_string(n) + " entries (at most " + std::to_string(cucore::kMaxNdim) +
                      " dimensions)");
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] = int64_arg(PyTuple_GET_ITEM(items.ptr(), i), what + "[" + std::to_string(i) + "]");
  return out;
}

void view_from_interface(nb::handle obj, bool cuda, nb::handle stream_ptr, PyView& v) {
  InterfaceDict d;
  read_interface(obj.attr(cuda ? "__cuda_array_interface__" : "__array_interface__"), cuda, d);
  // The CUDA Array Interface says nothing of the device: the pointer's, asked
  // of the driver (-1 when it does not know it).
  if (cuda) d.values.device.device_id = d.values.data ? pointer_device(d.values.data) : -1;
  v.view = interface_view(d);
  v.has_strides = d.has_strides;
  v.device_id = v.view.device_id();
  if (!cucore::parse_typestr(d.typestr).dtype) {  // checked by interface_view
    // No DLPack type (a structured or otherwise unusual dtype): the view's
    // elements are its bytes, and NumPy's dtype is kept, from the field list
    // when there is one.
    v.dtype_known = false;
    nb::object numpy = nb::module_::import_("numpy");
    nb::object descr = d.get("descr") ? nb::borrow(d.get("descr")) : nb::none();
    const bool fields = !descr.is_none() && nb::len(descr) > 0 &&
                        !(nb::len(descr) == 1 && descr[0][0].equal(nb::str("")));
    v.dtype_obj = fields ? nb::module_::import_("numpy.lib.format").attr("descr_to_dtype")(descr)
                         : numpy.attr("dtype")(d.typestr);
  }
  if (cuda && d.stream) order_streams(static_cast<std::uintptr_t>(*d.stream), stream_ptr);
  v.exporting_obj = nb::borrow(obj);
}

void adopt_dlpack_tensor(PyView& v, dlpack::DLManagedTensorVersioned* tensor) { adopt(v, tensor); }

void view_from_dlpack_any(nb::handle obj, nb::handle stream_ptr, PyView& v) {
  if (const auto* api = exchange_api(Py_TYPE(obj.ptr()))) return view_from_exchange(api, obj, stream_ptr, v);
  view_from_dlpack(obj, stream_ptr, v);
}

void view_from_any(nb::handle obj, nb::handle stream_ptr, PyView& v) {
  PyObject* o = obj.ptr();
  if (const auto* api = exchange_api(Py_TYPE(o))) return view_from_exchange(api, obj, stream_ptr, v);
  if (PyObject_HasAttrString(o, "__dlpack__")) {
    try {
      return view_from_dlpack(obj, stream_ptr, v);
    } catch (nb::python_error& e) {
      // e.g. numpy refuses to export read-only arrays through DLPack 0.x
      if (!e.matches(PyExc_BufferError)) throw;
      v = PyView();  // start the description afresh
    }
  }
  if (PyObject_HasAttrString(o, "__cuda_array_interface__"))
    return view_from_interface(obj, true, stream_ptr, v);
  if (PyObject_HasAttrString(o, "__array_interface__"))
    return view_from_interface(obj, false, stream_ptr, v);
  throw nb::buffer_error("StridedMemoryView: the object supports neither DLPack, the CUDA Array Interface nor the "
                         "array interface");
}

namespace {
[[noreturn]] void not_contiguous() { throw nb::value_error("cucore.compute: arrays must be C-contiguous"); }
}  // namespace

bool read_device_array(nb::handle obj, DeviceArrayInfo& out) {
  PyObject* o = obj.ptr();
  if (const auto* api = exchange_api(Py_TYPE(o)); api && api->dltensor_from_py_object_no_sync) {
    dlpack::DLTensor t{};
    if (api->dltensor_from_py_object_no_sync(o, &t) != 0) throw nb::python_error();
    const cucore::StridedMemoryView v = dltensor_view(t, false);  // libcucore's checks; inline: no allocation
    const auto type = v.device().device_type;
    if (type != dlpack::kDLCUDA && type != dlpack::kDLCUDAManaged && type != dlpack::kDLCUDAHost) return false;
    out.ptr = v.ptr();
    out.dtype = t.dtype;
    out.itemsize = v.itemsize();
    out.count = static_cast<std::uint64_t>(v.size());
    if (!v.is_contiguous_c()) not_contiguous();
    return true;
  }
  PyObject* raw = PyObject_GetAttrString(o, "__cuda_array_interface__");
  if (!raw) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();
    PyErr_Clear();
    return false;
  }
  // The one reader of the CUDA Array Interface (the views' own).
  InterfaceDict d;
  read_interface(nb::steal(raw), true, d);
  const cucore::StridedMemoryView v = interface_view(d);
  const cucore::TypeStr type = cucore::parse_typestr(d.typestr);  // parsed (and checked) above
  out.ptr = v.ptr();
  out.dtype = type.dtype ? type.dtype->to_dlpack() : dlpack::DLDataType{0, 0, 0};  // a struct: its itemsize counts
  out.itemsize = type.itemsize;
  out.count = static_cast<std::uint64_t>(v.size());
  if (!v.is_contiguous_c()) not_contiguous();
  return true;
}

}  // namespace cucore::python
