// StridedMemoryView through public protocols only, fastest first: the DLPack
// C exchange API (a type's __dlpack_c_exchange_api__: PyTorch's tensors, and
// cucore's own Buffer and StridedMemoryView; a C call, no capsule), then
// __dlpack__, the CUDA Array Interface and NumPy's array interface. And the
// exchange API's producer side.
#include <cstdint>
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>

#include "view.hpp"

namespace cucore::python {

PyView::PyView(PyView&& o) noexcept
    : ptr(o.ptr), device_id(o.device_id), is_device_accessible(o.is_device_accessible), readonly(o.readonly),
      has_strides(o.has_strides), ndim(o.ndim), dl_device(o.dl_device), dl(o.dl), big_shape(std::move(o.big_shape)),
      big_strides(std::move(o.big_strides)), exporting_obj(std::move(o.exporting_obj)),
      dtype_obj(std::move(o.dtype_obj)), managed(o.managed), managed_versioned(o.managed_versioned) {
  if (ndim <= 6) {
    std::copy_n(o.inline_shape, ndim, inline_shape);
    std::copy_n(o.inline_strides, ndim, inline_strides);
  }
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
// A typestr's DLPack type (libcucore's reading of typestrs); false when DLPack
// has none. ValueError naming `what` for a malformed typestr.
bool dl_from_typestr(const std::string& ts, dlpack::DLDataType& dl, const std::string& what) {
  cucore::TypeStr t;
  try {
    t = cucore::parse_typestr(ts);
  } catch (const std::invalid_argument& e) {
    raise_value_error(what + ": " + e.what());
  }
  if (!t.dtype) return false;
  dl = t.dtype->to_dlpack();
  return true;
}

// A NumPy dtype's DLPack type: by its typestr, and ml_dtypes' bfloat16 (a
// void typestr) by name. False when DLPack has none.
bool dl_from_numpy_dtype(nb::handle dt, dlpack::DLDataType& dl) {
  if (utf8_arg(dt.attr("name"), "dtype.name") == "bfloat16") {
    dl = {dlpack::kDLBfloat, 16, 1};
    return true;
  }
  return dl_from_typestr(utf8_arg(dt.attr("str"), "dtype.str"), dl, "dtype");
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
    } catch (nb::python_error&) {  // cuda.core's error for a narrow type without ml_dtypes
      PyErr_SetString(PyExc_NotImplementedError,
                      "bfloat16 needs the optional ml_dtypes package for a NumPy dtype (pip install ml_dtypes)");
      throw nb::python_error();
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
  const std::int64_t c = int64_arg(consumer_ptr, "stream_ptr");
  if (c == -1 || static_cast<std::uintptr_t>(c) == producer) return;
  cucore::StreamRef cons(reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(c)));
  cons.wait(cucore::StreamRef(reinterpret_cast<CUstream>(producer)));
}

// ---- DLPack -----------------------------------------------------------------------
// C-contiguous strides (in elements) for the shape already set.
void fill_compact_strides(PyView& v) {
  int64_t step = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    v.strides()[i] = step;
    step *= v.shape()[i];
  }
}

// libcucore's DLPack checks (the one importer's: cucore::check_dlpack), as
// BufferError: a tensor that fails them is not read any further.
template <typename Tensor>
void check_dlpack_tensor(const Tensor& t) {
  try {
    if constexpr (std::is_same_v<Tensor, dlpack::DLTensor>)
      cucore::check_dltensor(t);
    else
      cucore::check_dlpack(&t);
  } catch (const std::invalid_argument& e) {
    throw nb::buffer_error(e.what());
  }
}

// The view describes `t`, which passed check_dlpack_tensor.
void fill_from_dltensor(PyView& v, const dlpack::DLTensor& t) {
  v.ptr = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
  v.dl = t.dtype;
  v.dl_device = t.device.device_type;
  v.set_ndim(t.ndim);
  for (int i = 0; i < t.ndim; ++i) v.shape()[i] = t.shape[i];
  v.has_strides = t.strides != nullptr;
  if (t.strides)
    for (int i = 0; i < t.ndim; ++i) v.strides()[i] = t.strides[i];
  else
    fill_compact_strides(v);
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
    else stream = nb::borrow(stream_ptr);
  }
  nb::object cap;
  try {
    cap = obj.attr("__dlpack__")(nb::arg("stream") = stream,
                                 nb::arg("max_version") = nb::make_tuple(dlpack::kMajor, dlpack::kMinor));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = obj.attr("__dlpack__")(nb::arg("stream") = stream);  // a producer without max_version
  }
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* t = static_cast<dlpack::DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    check_dlpack_tensor(*t);  // the capsule stays unconsumed (its producer's to release) when refused
    fill_from_dltensor(v, t->dl_tensor);
    v.readonly = (t->flags & dlpack::kDLFlagBitMaskReadOnly) != 0;
    v.managed = t;
    v.managed_versioned = true;
    PyCapsule_SetName(c, "used_dltensor_versioned");
  } else if (PyCapsule_IsValid(c, "dltensor")) {
    auto* t = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    check_dlpack_tensor(*t);
    fill_from_dltensor(v, t->dl_tensor);
    v.managed = t;
    v.managed_versioned = false;
    PyCapsule_SetName(c, "used_dltensor");
  } else {
    throw nb::buffer_error("__dlpack__ did not return a DLPack capsule");
  }
  v.exporting_obj = nb::borrow(obj);
}

// ---- layouts from Python ---------------------------------------------------------
// A shape or strides: a tuple or list of at most kMaxNdim ints, each error
// naming `what` (TypeError, OverflowError, ValueError for too many).
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

// The view takes `cv`'s pointer, shape and strides (checked by libcucore).
void take_layout(PyView& v, const cucore::StridedMemoryView& cv) {
  v.ptr = cv.ptr();
  v.set_ndim(cv.ndim());
  std::copy(cv.shape().begin(), cv.shape().end(), v.shape());
  std::copy(cv.strides().begin(), cv.strides().end(), v.strides());
}

// The view (its ptr set) takes this shape and these strides (in elements; none:
// C-contiguous) of `itemsize`-byte items once libcucore's layout checks pass
// (no negative extent, at most kMaxNdim dimensions, nothing that overflows or
// wraps): ValueError naming `what` otherwise. Returns libcucore's view.
cucore::StridedMemoryView checked_layout(PyView& v, std::span<const std::int64_t> shape,
                                         const std::optional<std::vector<std::int64_t>>& strides,
                                         std::size_t itemsize, const std::string& what) {
  if (itemsize == 0 || itemsize > 0xffff)
    raise_value_error(what + ": an itemsize of " + std::to_string(itemsize) + " bytes is out of range");
  const cucore::DataType bytes{dlpack::kDLUInt, 8, static_cast<std::uint16_t>(itemsize)};  // any itemsize
  try {
    cucore::StridedMemoryView cv(reinterpret_cast<void*>(v.ptr), shape,
                                 strides ? std::span<const std::int64_t>(*strides) : std::span<const std::int64_t>(),
                                 bytes, {dlpack::kDLCUDA, 0});
    take_layout(v, cv);
    v.has_strides = strides.has_value();
    return cv;
  } catch (const std::invalid_argument& e) {
    raise_value_error(what + ": " + e.what());
  }
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

void view_from_interface(nb::handle obj, bool cuda, nb::handle stream_ptr, PyView& v) {
  InterfaceDict d;
  read_interface(obj.attr(cuda ? "__cuda_array_interface__" : "__array_interface__"), cuda, d);
  const cucore::StridedMemoryView cv = interface_view(d);
  take_layout(v, cv);
  v.readonly = cv.readonly();
  v.has_strides = d.has_strides;
  if (!dl_from_typestr(d.typestr, v.dl, d.key("typestr"))) {
    v.dl = {0, 0, 0};
    // No DLPack type (a structured or otherwise unusual dtype): NumPy's own,
    // from the field list when there is one.
    nb::object numpy = nb::module_::import_("numpy");
    nb::object descr = d.get("descr") ? nb::borrow(d.get("descr")) : nb::none();
    const bool fields = !descr.is_none() && nb::len(descr) > 0 &&
                        !(nb::len(descr) == 1 && descr[0][0].equal(nb::str("")));
    v.dtype_obj = fields ? nb::module_::import_("numpy.lib.format").attr("descr_to_dtype")(descr)
                         : numpy.attr("dtype")(d.typestr);
  }
  v.dl_device = cuda ? dlpack::kDLCUDA : dlpack::kDLCPU;
  if (cuda) {
    v.is_device_accessible = true;
    v.device_id = v.ptr ? pointer_device(v.ptr) : -1;
    if (d.stream) order_streams(static_cast<std::uintptr_t>(*d.stream), stream_ptr);
  } else {
    v.is_device_accessible = false;
    v.device_id = -1;
  }
  v.exporting_obj = nb::borrow(obj);
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
    check_dlpack_tensor(t);
    fill_from_dltensor(v, t);
    if (PyObject_TypeCheck(obj.ptr(), g_types.view)) v.readonly = nb::inst_ptr<PyView>(obj)->readonly;
  } else {
    dlpack::DLManagedTensorVersioned* t = nullptr;
    if (api->managed_tensor_from_py_object_no_sync(obj.ptr(), &t) != 0 || !t) {
      if (PyErr_Occurred()) throw nb::python_error();
      throw nb::buffer_error("the DLPack exchange API gave no tensor");
    }
    v.managed = t;  // owned from here: the view's destructor calls the deleter
    v.managed_versioned = true;
    check_dlpack_tensor(*t);
    fill_from_dltensor(v, t->dl_tensor);
    v.readonly = (t->flags & dlpack::kDLFlagBitMaskReadOnly) != 0;
  }
  v.exporting_obj = nb::borrow(obj);
  // No synchronization was done: the consumer stream waits for the producer's
  // current stream, as __dlpack__(stream=...) would have arranged.
  if (v.dl_device == dlpack::kDLCUDA && !stream_ptr.is_none() && int64_arg(stream_ptr, "stream_ptr") != -1) {
    void* producer = nullptr;
    if (api->current_work_stream(dlpack::kDLCUDA, v.device_id, &producer) != 0) throw nb::python_error();
    order_streams(reinterpret_cast<std::uintptr_t>(producer), stream_ptr);
  }
}

// DLPack, through the exchange API when the type has one.
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
      v.~PyView();  // start the description afresh
      new (&v) PyView();
    }
  }
  if (PyObject_HasAttrString(o, "__cuda_array_interface__"))
    return view_from_interface(obj, true, stream_ptr, v);
  if (PyObject_HasAttrString(o, "__array_interface__"))
    return view_from_interface(obj, false, stream_ptr, v);
  throw nb::buffer_error("StridedMemoryView: the object supports neither DLPack, the CUDA Array Interface nor the "
                         "array interface");
}

// A new StridedMemoryView, its PyView default-constructed in place (no
// temporary to move, no lookup by address): `fill` describes the memory. On
// an error the instance goes, and its destructor releases what `fill` took.
template <typename Fill>
nb::object new_view(Fill&& fill) {
  nb::object o = nb::inst_alloc(nb::handle(reinterpret_cast<PyObject*>(g_types.view)));
  PyView* v = new (nb::inst_ptr<PyView>(o)) PyView;  // default-initialized: no zeroing of the shape arrays
  nb::inst_mark_ready(o);
  fill(*v);
  return o;
}

// ---- the DLPack C exchange API: producing ------------------------------------------
// Describes `v` as a DLTensor whose shape and strides point at `shape`/`strides`.
void describe(const PyView& v, dlpack::DLTensor& d, int64_t* shape, int64_t* strides) {
  if (v.dl.lanes == 0)
    throw nb::buffer_error("StridedMemoryView: its dtype has no DLPack equivalent, so it cannot be exported");
  d.data = reinterpret_cast<void*>(v.ptr);
  d.device = {v.dl_device, v.dl_device == dlpack::kDLCUDA ? v.device_id : 0};
  d.ndim = v.ndim;
  d.dtype = v.dl;
  d.shape = v.ndim ? shape : nullptr;
  d.strides = v.ndim ? strides : nullptr;
  d.byte_offset = 0;
}

// An exported tensor holds the view (which holds the memory's exporter).
template <typename Managed>
Managed* export_view(nb::handle self) {
  const cucore::StridedMemoryView v = cpp_view(*nb::inst_ptr<PyView>(self));
  if constexpr (std::is_same_v<Managed, dlpack::DLManagedTensorVersioned>)
    return v.to_dlpack(py_owner(self));
  else
    return v.to_dlpack_unversioned(py_owner(self));
}

int view_exchange_export(void* py_object, dlpack::DLManagedTensorVersioned** out) {
  try {
    if (!out) throw nb::value_error("out is null");
    *out = nullptr;
    nb::handle obj(static_cast<PyObject*>(py_object));
    if (!PyObject_TypeCheck(obj.ptr(), g_types.view)) throw nb::type_error("py_object is not a StridedMemoryView");
    *out = export_view<dlpack::DLManagedTensorVersioned>(obj);
    return 0;
  } catch (...) {
    set_error_from_current_exception();
    return -1;
  }
}

int view_exchange_dltensor(void* py_object, dlpack::DLTensor* out) {
  try {
    if (!out) throw nb::value_error("out is null");
    nb::handle obj(static_cast<PyObject*>(py_object));
    if (!PyObject_TypeCheck(obj.ptr(), g_types.view)) throw nb::type_error("py_object is not a StridedMemoryView");
    PyView& v = *nb::inst_ptr<PyView>(obj);
    describe(v, *out, v.shape(), v.strides());  // the view's own arrays: valid while it lives
    return 0;
  } catch (...) {
    set_error_from_current_exception();
    return -1;
  }
}

// A StridedMemoryView owning `tensor`.
int exchange_to_view(dlpack::DLManagedTensorVersioned* tensor, void** out_py_object) {
  try {
    if (!out_py_object || !tensor) throw nb::value_error("tensor and out_py_object must not be null");
    *out_py_object = nullptr;
    nb::object view = new_view([tensor](PyView& v) {
      v.managed = tensor;
      v.managed_versioned = true;
      check_dlpack_tensor(*tensor);
      fill_from_dltensor(v, tensor->dl_tensor);
      v.readonly = (tensor->flags & dlpack::kDLFlagBitMaskReadOnly) != 0;
    });
    *out_py_object = view.release().ptr();
    return 0;
  } catch (...) {
    set_error_from_current_exception();
    return -1;
  }
}

int exchange_current_work_stream(dlpack::DLDeviceType device_type, int32_t, void** out_current_stream) {
  if (!out_current_stream) {
    PyErr_SetString(PyExc_ValueError, "out_current_stream is null");
    return -1;
  }
  // cucore has no current stream of its own: work goes to the default stream.
  *out_current_stream = device_type == dlpack::kDLCPU
                            ? nullptr
                            : static_cast<void*>(default_stream_ref().handle());
  return 0;
}

int exchange_allocator(dlpack::DLTensor*, dlpack::DLManagedTensorVersioned** out, void* error_ctx,
                       void (*set_error)(void*, const char*, const char*)) {
  if (out) *out = nullptr;
  if (set_error) set_error(error_ctx, "NotImplementedError", "cucore does not allocate tensors for DLPack consumers");
  return -1;
}

nb::tuple to_tuple(const int64_t* p, int n) {
  nb::object t = nb::steal(PyTuple_New(n));
  for (int i = 0; i < n; ++i) PyTuple_SET_ITEM(t.ptr(), i, PyLong_FromLongLong(p[i]));
  return nb::borrow<nb::tuple>(t);
}

// View construction through the type call, bypassing __init__ dispatch.
// The (obj, stream_ptr) arguments of a fast call, positional or by keyword;
// false with a TypeError set (naming `fn`, a str) when they do not fit.
bool parse_obj_stream(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject* fn, PyObject*& obj,
                      PyObject*& stream) {
  obj = nargs > 0 ? args[0] : nullptr;
  stream = nargs > 1 ? args[1] : Py_None;
  if (nargs > 2) {
    PyErr_Format(PyExc_TypeError, "%U(obj, stream_ptr=None) takes at most 2 arguments", fn);
    return false;
  }
  if (kwnames) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      const bool is_obj = PyUnicode_CompareWithASCIIString(key, "obj") == 0;
      if (!is_obj && PyUnicode_CompareWithASCIIString(key, "stream_ptr") != 0) {
        PyErr_Format(PyExc_TypeError, "%U() got an unexpected keyword argument %R", fn, key);
        return false;
      }
      if (nargs > (is_obj ? 0 : 1)) {
        PyErr_Format(PyExc_TypeError, "%U() got multiple values for argument %R", fn, key);
        return false;
      }
      (is_obj ? obj : stream) = args[nargs + k];
    }
  }
  return true;
}

PyObject* view_vectorcall(PyObject* type, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyObject *obj, *stream;
  PyObject* name = reinterpret_cast<PyObject*>(reinterpret_cast<PyHeapTypeObject*>(type)->ht_name);
  if (!parse_obj_stream(args, PyVectorcall_NARGS(nargsf), kwnames, name, obj, stream)) return nullptr;
  // cuda.core deprecates the constructor for the from_* class methods (which
  // the fast paths and the benchmarks use).
  if (obj && obj != Py_None &&
      PyErr_WarnEx(PyExc_DeprecationWarning,
                   "StridedMemoryView(obj, stream_ptr) is deprecated; use StridedMemoryView.from_any_interface "
                   "(or from_dlpack, from_cuda_array_interface, from_array_interface)",
                   1) != 0)
    return nullptr;
  try {
    if (!obj || obj == Py_None) return new_view([](PyView&) {}).release().ptr();
    return new_view([&](PyView& v) { view_from_any(obj, stream, v); }).release().ptr();
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

// StridedMemoryView.from_dlpack and from_any_interface (obj, stream_ptr=None)
// as METH_FASTCALL functions: the hot interop calls skip the general binding
// dispatch.
template <void (*Describe)(nb::handle, nb::handle, PyView&)>
PyObject* view_fastcall(PyObject* name, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject *obj, *stream;
  if (!parse_obj_stream(args, nargs, kwnames, name, obj, stream)) return nullptr;
  if (!obj) {
    PyErr_Format(PyExc_TypeError, "%U() missing required argument 'obj'", name);
    return nullptr;
  }
  try {
    return new_view([&](PyView& v) { Describe(obj, stream, v); }).release().ptr();
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef g_view_fastcall_defs[] = {
    {"from_dlpack", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(view_fastcall<view_from_dlpack_any>)),
     METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(obj, stream_ptr=None)\n--\n\nA view of obj through DLPack (its C exchange API when its type has "
     "one). stream_ptr: the consumer stream (-1: no ordering)."},
    {"from_any_interface",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(view_fastcall<view_from_any>)),
     METH_FASTCALL | METH_KEYWORDS,
     "from_any_interface(obj, stream_ptr=None)\n--\n\nA view of obj through the first protocol it speaks: the DLPack "
     "C exchange API, DLPack, the CUDA Array Interface, the array interface. stream_ptr: the consumer stream (-1: no "
     "ordering)."},
};

template <typename Managed>
void capsule_destructor(PyObject* cap, const char* name) {
  if (PyCapsule_IsValid(cap, name)) {  // never consumed
    auto* t = static_cast<Managed*>(PyCapsule_GetPointer(cap, name));
    if (t && t->deleter) t->deleter(t);
  } else {
    PyErr_Clear();
  }
}

template <typename Managed>
nb::object capsule(Managed* t, const char* name, PyCapsule_Destructor destructor) {
  PyObject* cap = PyCapsule_New(t, name, destructor);
  if (!cap) {
    t->deleter(t);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

// ---- layouts and copies ---------------------------------------------------------------
std::size_t view_itemsize(const PyView& v) {
  if (v.dl.lanes) return itemsize(v);
  return nb::cast<std::size_t>(v.dtype_obj.attr("itemsize"));
}

nb::object layout_of(const PyView& v) {
  nb::object strides = nb::none();
  if (v.has_strides && !cucore::is_contiguous_c({v.shape(), std::size_t(v.ndim)}, {v.strides(), std::size_t(v.ndim)}))
    strides = to_tuple(v.strides(), v.ndim);
  return nb::module_::import_("cucore._layout").attr("_StridedLayout")(to_tuple(v.shape(), v.ndim), strides,
                                                                        view_itemsize(v));
}

// `out` takes the layout's shape and strides; its itemsize must be the view's.
void apply_layout(PyView& out, nb::handle layout) {
  nb::object cls = nb::module_::import_("cucore._layout").attr("_StridedLayout");
  if (!nb::isinstance(layout, cls))
    raise_type_error(std::string("StridedMemoryView.view: layout must be a _StridedLayout, got ") +
                     Py_TYPE(layout.ptr())->tp_name);
  const auto isz = static_cast<std::size_t>(uint64_arg(layout.attr("itemsize"), "layout.itemsize"));
  if (isz != view_itemsize(out))
    raise_value_error("StridedMemoryView.view: the layout's itemsize (" + std::to_string(isz) +
                      " bytes) must match the dtype's (" + std::to_string(view_itemsize(out)) + " bytes)");
  const std::vector<std::int64_t> shape = int64_tuple_arg(layout.attr("shape"), "layout.shape");
  nb::object st = layout.attr("strides");
  std::optional<std::vector<std::int64_t>> strides;
  if (!st.is_none()) strides = int64_tuple_arg(st, "layout.strides");
  const cucore::StridedMemoryView checked = checked_layout(out, shape, strides, isz, "StridedMemoryView.view");
  if (out.exporting_obj.is_valid() && PyObject_TypeCheck(out.exporting_obj.ptr(), g_types.buffer)) {
    const cucore::Buffer& b = *nb::inst_ptr<cucore::Buffer>(out.exporting_obj);
    const std::size_t need = checked.span_bytes();
    if (need > b.size())
      raise_value_error("StridedMemoryView.view: the layout reaches " + std::to_string(need) +
                        " bytes but the buffer has " + std::to_string(b.size()));
  }
}

// dst <- src on `stream`; blocking None blocks when either side is host-only memory (as cuda.core).
void copy_views(nb::handle src_obj, nb::handle dst_obj, nb::handle stream, nb::handle blocking, const char* what) {
  for (nb::handle o : {src_obj, dst_obj})
    if (!PyObject_TypeCheck(o.ptr(), g_types.view))
      raise_type_error(std::string("StridedMemoryView.") + what + ": other must be a StridedMemoryView, got " +
                       Py_TYPE(o.ptr())->tp_name);
  const PyView& src = *nb::inst_ptr<PyView>(src_obj);
  const PyView& dst = *nb::inst_ptr<PyView>(dst_obj);
  cucore::StreamRef s = stream_arg_or_default(stream, "StridedMemoryView copy: stream");
  const bool host = src.dl_device == dlpack::kDLCPU || dst.dl_device == dlpack::kDLCPU;
  const bool block = blocking.is_none() ? host : PyObject_IsTrue(blocking.ptr()) == 1;
  const cucore::StridedMemoryView from = cpp_view(src), to = cpp_view(dst);
  nb::gil_scoped_release unlocked;
  to.copy_from(from, s);
  if (block) s.sync();
}

dlpack::DLDevice view_dlpack_device(nb::handle self) {
  const PyView& v = *nb::inst_ptr<PyView>(self);
  return {v.dl_device, v.dl_device == dlpack::kDLCUDA ? v.device_id : 0};
}

nb::object view_dlpack(nb::handle self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                       nb::handle copy) {
  (void)stream;  // as Buffer.__dlpack__: no producer stream to order
  return dlpack_capsule_for(self, "StridedMemoryView", view_dlpack_device(self), max_version, dl_device, copy,
                            export_view<dlpack::DLManagedTensorVersioned>, export_view<dlpack::DLManagedTensor>);
}

}  // namespace

namespace {
[[noreturn]] void not_contiguous() { throw nb::value_error("cucore.compute: arrays must be C-contiguous"); }
}  // namespace

bool read_device_array(nb::handle obj, DeviceArrayInfo& out) {
  PyObject* o = obj.ptr();
  if (const auto* api = exchange_api(Py_TYPE(o)); api && api->dltensor_from_py_object_no_sync) {
    dlpack::DLTensor t{};
    if (api->dltensor_from_py_object_no_sync(o, &t) != 0) throw nb::python_error();
    check_dlpack_tensor(t);
    const auto type = t.device.device_type;
    if (type != dlpack::kDLCUDA && type != dlpack::kDLCUDAManaged && type != dlpack::kDLCUDAHost) return false;
    out.ptr = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
    out.dtype = t.dtype;
    out.itemsize = (static_cast<std::size_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
    out.count = 1;
    for (int i = 0; i < t.ndim; ++i) out.count *= static_cast<std::uint64_t>(t.shape[i]);
    if (t.strides && out.count > 1 &&
        !cucore::is_contiguous_c({t.shape, std::size_t(t.ndim)}, {t.strides, std::size_t(t.ndim)}))
      not_contiguous();
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

nb::object make_dlpack_capsule(dlpack::DLManagedTensor* t) {
  return capsule(t, "dltensor", [](PyObject* c) { capsule_destructor<dlpack::DLManagedTensor>(c, "dltensor"); });
}

nb::object make_dlpack_capsule(dlpack::DLManagedTensorVersioned* t) {
  return capsule(t, "dltensor_versioned", [](PyObject* c) {
    capsule_destructor<dlpack::DLManagedTensorVersioned>(c, "dltensor_versioned");
  });
}

nb::object dlpack_capsule_for(nb::handle self, const char* what, dlpack::DLDevice own, nb::handle max_version,
                              nb::handle dl_device, nb::handle copy,
                              dlpack::DLManagedTensorVersioned* (*versioned)(nb::handle),
                              dlpack::DLManagedTensor* (*legacy)(nb::handle)) {
  auto refuse = [&](const std::string& why) {
    throw nb::buffer_error((std::string(what) + ".__dlpack__: " + why).c_str());
  };
  if (!copy.is_none() && PyObject_IsTrue(copy.ptr()) == 1)
    refuse("copy=True is not supported (the export is zero-copy)");
  // Pinned and managed memory is the CPU's too: asked for the CPU, they are
  // described as CPU memory, still without a copy.
  bool as_cpu = false;
  if (!dl_device.is_none()) {
    if (!PyTuple_Check(dl_device.ptr()) || PyTuple_GET_SIZE(dl_device.ptr()) != 2)
      refuse("dl_device must be a (device_type, device_id) tuple");
    const int type = int_arg(PyTuple_GET_ITEM(dl_device.ptr(), 0), "dl_device[0]"),
              id = int_arg(PyTuple_GET_ITEM(dl_device.ptr(), 1), "dl_device[1]");
    as_cpu = type == dlpack::kDLCPU && id == 0 &&
             (own.device_type == dlpack::kDLCUDAHost || own.device_type == dlpack::kDLCUDAManaged);
    if (!as_cpu && (type != own.device_type || id != own.device_id))
      refuse("dl_device (" + std::to_string(type) + ", " + std::to_string(id) + ") is not where the memory is (" +
             std::to_string(static_cast<int>(own.device_type)) + ", " + std::to_string(own.device_id) +
             "), and the export is zero-copy");
  }
  auto place = [&](auto* t) {
    if (as_cpu) t->dl_tensor.device = {dlpack::kDLCPU, 0};
    return make_dlpack_capsule(t);
  };
  if (max_version.is_none()) return place(legacy(self));
  if (!PyTuple_Check(max_version.ptr()) || PyTuple_GET_SIZE(max_version.ptr()) != 2)
    refuse("max_version must be a (major, minor) tuple, got " + repr_text(max_version));
  const long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version.ptr(), 0));
  if (major == -1 && PyErr_Occurred()) throw nb::python_error();
  if (major >= 1) return place(versioned(self));
  return place(legacy(self));
}

bool parse_dlpack_kwargs(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject* out[4]) {
  static const char* const names[4] = {"stream", "max_version", "dl_device", "copy"};
  static PyObject* interned[4] = {};  // compared by identity first: callers' keywords are interned literals
  if (!interned[0])
    for (int i = 0; i < 4; ++i) interned[i] = PyUnicode_InternFromString(names[i]);  // kept for the process
  for (int i = 0; i < 4; ++i) out[i] = Py_None;
  if (nargs) {
    PyErr_Format(PyExc_TypeError, "__dlpack__() takes no positional arguments (%zd given): use stream=, "
                 "max_version=, dl_device=, copy=", nargs);
    return false;
  }
  const Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int i = 0;
    while (i < 4 && key != interned[i]) ++i;
    if (i == 4) {
      i = 0;
      while (i < 4 && PyUnicode_CompareWithASCIIString(key, names[i]) != 0) ++i;
    }
    if (i == 4) {
      PyErr_Format(PyExc_TypeError, "__dlpack__() got an unexpected keyword argument %R", key);
      return false;
    }
    out[i] = args[k];
  }
  return true;
}

PyObject* dlpack_device_tuple(const dlpack::DLDevice& d) {
  PyObject* t = PyTuple_New(2);
  if (!t) return nullptr;
  PyObject* type = PyLong_FromLong(static_cast<long>(d.device_type));
  PyObject* id = PyLong_FromLong(d.device_id);
  PyTuple_SET_ITEM(t, 0, type);
  PyTuple_SET_ITEM(t, 1, id);
  if (!type || !id) Py_CLEAR(t);  // the tuple drops whichever it holds
  return t;
}

cucore::StridedMemoryView cpp_view(const PyView& v) {
  if (v.dl.lanes == 0)
    throw nb::buffer_error("StridedMemoryView: its dtype has no DLPack equivalent, so it cannot be exported");
  const std::size_t n = static_cast<std::size_t>(v.ndim);
  return cucore::StridedMemoryView(reinterpret_cast<void*>(v.ptr), {v.shape(), n}, {v.strides(), n},
                                   cucore::DataType::from_dlpack(v.dl),
                                   {v.dl_device, v.dl_device == dlpack::kDLCUDA ? v.device_id : 0}, v.readonly);
}

void install_exchange_api(nb::handle type, dlpack::DLPackManagedTensorFromPyObjectNoSync from_object,
                          dlpack::DLPackDLTensorFromPyObjectNoSync dltensor) {
  auto* api = new dlpack::DLPackExchangeAPI{};  // for the process, as the protocol asks
  api->header.version = {dlpack::kMajor, dlpack::kMinor};
  api->header.prev_api = nullptr;
  api->managed_tensor_allocator = exchange_allocator;
  api->managed_tensor_from_py_object_no_sync = from_object;
  api->managed_tensor_to_py_object_no_sync = exchange_to_view;
  api->dltensor_from_py_object_no_sync = dltensor;
  api->current_work_stream = exchange_current_work_stream;
  nb::object cap = nb::steal(PyCapsule_New(api, dlpack::kExchangeApiCapsule, nullptr));
  if (!cap.is_valid()) throw nb::python_error();
  nb::setattr(type, dlpack::kExchangeApiAttr, cap);
  nb::setattr(type, dlpack::kExchangeApiOldAttr, cap);
}

void bind_view(nb::module_& m) {
  const char* doc =
      "A zero-copy view of a strided array from another library: the DLPack C exchange API (PyTorch), DLPack, "
      "the CUDA Array Interface or the NumPy array interface. stream_ptr is the consumer stream (-1: no stream "
      "ordering). strides are in elements; None means C-contiguous. Exports DLPack (and its C exchange API).";
#if NB_VERSION_MAJOR > 2 || (NB_VERSION_MAJOR == 2 && NB_VERSION_MINOR >= 13)
  // Views are made and dropped at a high rate (one per interop call): nanobind
  // (2.13+) recycles pooled instances without allocating or registering them.
  auto vc = nb::class_<PyView>(m, "StridedMemoryView", doc, nb::pooled());
#else
  auto vc = nb::class_<PyView>(m, "StridedMemoryView", doc);
#endif
  vc.def("__init__", [](PyView* self, nb::handle obj, nb::handle stream_ptr) {
        PyView v;
        if (!obj.is_none()) view_from_any(obj, stream_ptr, v);
        new (self) PyView(std::move(v));
      }, nb::arg("obj") = nb::none(), nb::arg("stream_ptr") = nb::none())
      // from_dlpack, from_any_interface: METH_FASTCALL static methods, installed below.
      .def_static("from_cuda_array_interface", [](nb::handle obj, nb::handle stream_ptr) {
        return new_view([&](PyView& v) {
          view_from_interface(obj, true, stream_ptr, v);
        });
      }, nb::arg("obj"), nb::arg("stream_ptr") = nb::none())
      .def_static("from_array_interface", [](nb::handle obj) {
        return new_view([&](PyView& v) {
          view_from_interface(obj, false, nb::none(), v);
        });
      }, nb::arg("obj"))
      .def_static("from_buffer", [](nb::handle buffer, nb::handle shape, nb::handle strides, nb::handle itemsize_arg,
                                    nb::handle dtype, bool is_readonly) {
        if (!PyObject_TypeCheck(buffer.ptr(), g_types.buffer)) throw nb::type_error("buffer must be a cucore.Buffer");
        const cucore::Buffer& b = *nb::inst_ptr<cucore::Buffer>(buffer);
        if (b.is_closed()) cucore::detail::throw_closed("Buffer", "StridedMemoryView.from_buffer");
        PyView v;
        v.ptr = b.handle();
        v.device_id = b.device_id();
        v.is_device_accessible = b.is_device_accessible();
        v.dl_device = cucore::dlpack_device_of(b).device_type;
        v.readonly = is_readonly;
        if (!dtype.is_none()) {
          nb::object dt = nb::module_::import_("numpy").attr("dtype")(dtype);
          if (!dl_from_numpy_dtype(dt, v.dl)) v.dtype_obj = dt;
        } else if (!itemsize_arg.is_none()) {
          const int isz = int_arg(itemsize_arg, "itemsize");
          if (isz <= 0 || (isz & (isz - 1)) != 0)
            raise_value_error("from_buffer: itemsize must be a power of two, got " + std::to_string(isz));
          if (isz <= 8) {
            v.dl = {dlpack::kDLUInt, static_cast<uint8_t>(isz * 8), 1};
          } else {  // no DLPack integer that wide: raw bytes
            v.dtype_obj = nb::module_::import_("numpy").attr("dtype")(nb::make_tuple("V", isz));
          }
        } else {
          throw nb::value_error("from_buffer: give dtype or itemsize");
        }
        const std::vector<std::int64_t> sh = int64_tuple_arg(shape, "shape");
        std::optional<std::vector<std::int64_t>> st;
        if (!strides.is_none()) st = int64_tuple_arg(strides, "strides");
        const std::size_t isz = view_itemsize(v);
        const cucore::StridedMemoryView checked = checked_layout(v, sh, st, isz, "StridedMemoryView.from_buffer");
        if (static_cast<std::uint64_t>(checked.size()) * isz > b.size())  // no overflow: checked_layout bounds it
          throw nb::value_error("from_buffer: the shape needs more bytes than the buffer has");
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
        // C-contiguous is None whichever protocol described it (as cuda.core).
        int64_t expect = 1;
        bool compact = true;
        for (int i = v.ndim - 1; i >= 0 && compact; --i) {
          if (v.shape()[i] != 1 && v.strides()[i] != expect) compact = false;
          expect *= v.shape()[i];
        }
        if (compact) return nb::none();
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
      .def("view", [](const PyView& v, nb::handle layout, nb::handle dtype) {
        // The same description (or the layout's shape and strides); the memory
        // stays alive through exporting_obj, as for any view (a consumed DLPack
        // tensor stays with `v`).
        PyView out;
        out.ptr = v.ptr;
        out.device_id = v.device_id;
        out.is_device_accessible = v.is_device_accessible;
        out.readonly = v.readonly;
        out.has_strides = v.has_strides;
        out.dl_device = v.dl_device;
        out.dl = v.dl;
        out.set_ndim(v.ndim);
        std::copy(v.shape(), v.shape() + v.ndim, out.shape());
        std::copy(v.strides(), v.strides() + v.ndim, out.strides());
        out.exporting_obj = v.exporting_obj;
        out.dtype_obj = v.dtype_obj;
        if (!dtype.is_none()) {
          nb::object dt = nb::module_::import_("numpy").attr("dtype")(dtype);
          nb::object current = v.dtype_obj.is_valid() ? v.dtype_obj : numpy_dtype(const_cast<PyView&>(v));
          const auto want = nb::cast<int64_t>(dt.attr("itemsize")), have = nb::cast<int64_t>(current.attr("itemsize"));
          if (want != have)
            raise_value_error("StridedMemoryView.view: the dtype's itemsize (" + std::to_string(want) +
                              " bytes) must match the view's (" + std::to_string(have) + " bytes)");
          out.dtype_obj = nb::object();
          if (!dl_from_numpy_dtype(dt, out.dl)) {
            out.dl = {0, 0, 0};
            out.dtype_obj = dt;
          }
        }
        if (!layout.is_none()) apply_layout(out, layout);
        return out;
      }, nb::arg("layout") = nb::none(), nb::arg("dtype") = nb::none(),
         "A new view of the same memory with another layout (a _StridedLayout: shape, strides, itemsize) "
         "and/or another dtype of the same itemsize. A view of a Buffer must stay inside it.")
      .def_prop_ro("_layout", &layout_of, "The view's _StridedLayout (shape, strides in elements, itemsize).")
      .def_prop_ro("layout", &layout_of, "The view's _StridedLayout (as _layout).")
      .def("copy_from", [](nb::handle self, nb::handle other, nb::handle stream, nb::handle /*allocator: no temporaries needed*/,
                           nb::handle blocking) { copy_views(other, self, stream, blocking, "copy_from"); },
           nb::arg("other"), nb::arg("stream").none(), nb::arg("allocator") = nb::none(), nb::arg("blocking") = nb::none(),
           "Copies `other` into this view on `stream` (views of the same shape and itemsize, both contiguous in "
           "the same order). blocking=None blocks for copies to or from host-only memory.")
      .def("copy_to", [](nb::handle self, nb::handle other, nb::handle stream, nb::handle /*allocator: no temporaries needed*/,
                         nb::handle blocking) {
        copy_views(self, other, stream, blocking, "copy_to");
      }, nb::arg("other"), nb::arg("stream") = nb::none(), nb::arg("allocator") = nb::none(),
         nb::arg("blocking") = nb::none(), "Copies this view into `other`; see copy_from.")
      .def("__repr__", [](const PyView& v) {
        std::string s = "StridedMemoryView(ptr=" + std::to_string(v.ptr) + ", shape=(";
        for (int i = 0; i < v.ndim; ++i) s += std::to_string(v.shape()[i]) + (v.ndim == 1 || i + 1 < v.ndim ? "," : "");
        s += "), device_id=" + std::to_string(v.device_id) + ", is_device_accessible=" +
             (v.is_device_accessible ? "True" : "False") + ", readonly=" + (v.readonly ? "True" : "False") + ")";
        return s;
      });
  m.def("_is_contiguous", [](std::vector<int64_t> shape, std::optional<std::vector<int64_t>> strides, char order) {
    const std::span<const int64_t> st = strides ? std::span<const int64_t>(*strides) : std::span<const int64_t>();
    if (strides && strides->size() != shape.size()) raise_value_error("_is_contiguous: strides and shape differ in rank");
    return order == 'F' ? cucore::is_contiguous_f(shape, st) : cucore::is_contiguous_c(shape, st);
  }, nb::arg("shape"), nb::arg("strides").none(), nb::arg("order"));
  g_types.view = reinterpret_cast<PyTypeObject*>(vc.ptr());
  g_types.view->tp_vectorcall = view_vectorcall;
  for (PyMethodDef& def : g_view_fastcall_defs) {
    nb::object name = nb::steal(PyUnicode_InternFromString(def.ml_name));  // the function's self: for messages
    nb::object fn = nb::steal(PyCFunction_New(&def, name.ptr()));
    if (!fn.is_valid()) throw nb::python_error();
    nb::object sm = nb::steal(PyStaticMethod_New(fn.ptr()));
    if (!sm.is_valid()) throw nb::python_error();
    vc.attr(def.ml_name) = sm;
  }
  install_dlpack_methods<view_dlpack, view_dlpack_device>(vc);
  install_exchange_api(vc, view_exchange_export, view_exchange_dltensor);
}

}  // namespace cucore::python
