// DLPack exports: StridedMemoryView's, and what Buffer's (python/src/memory.cpp)
// share with them: __dlpack__'s keyword arguments and request, the capsules,
// and the DLPack C exchange API's producer side (view.hpp puts __dlpack__ and
// __dlpack_device__ on both as plain C methods). The tensors themselves are
// libcucore's (StridedMemoryView::to_dlpack, dltensor; a Buffer's,
// buffer_to_dlpack); this file wraps them for Python and holds the exporting
// object while a consumer uses one.
#include <cstdint>
#include <string>

#include "view.hpp"

namespace cucore::python {
namespace {

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

// ---- the DLPack C exchange API: producing ------------------------------------------
// A StridedMemoryView owning `tensor` (libcucore's checks; BufferError).
int exchange_to_view(dlpack::DLManagedTensorVersioned* tensor, void** out_py_object) {
  try {
    if (!out_py_object || !tensor) throw nb::value_error("tensor and out_py_object must not be null");
    *out_py_object = nullptr;
    nb::object view = new_view([tensor](PyView& v) { adopt_dlpack_tensor(v, tensor); });
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

}  // namespace

nb::object make_dlpack_capsule(dlpack::DLManagedTensor* t) {
  return capsule(t, "dltensor", [](PyObject* c) { capsule_destructor<dlpack::DLManagedTensor>(c, "dltensor"); });
}

nb::object make_dlpack_capsule(dlpack::DLManagedTensorVersioned* t) {
  return capsule(t, "dltensor_versioned", [](PyObject* c) {
    capsule_destructor<dlpack::DLManagedTensorVersioned>(c, "dltensor_versioned");
  });
}

DlpackRequest dlpack_request(const char* what, dlpack::DLDevice own, nb::handle max_version, nb::handle dl_device,
                             nb::handle copy) {
  auto refuse = [&](const std::string& why) {
    throw nb::buffer_error((std::string(what) + ".__dlpack__: " + why).c_str());
  };
  if (!copy.is_none() && PyObject_IsTrue(copy.ptr()) == 1)
    throw nb::buffer_error("Sorry, not supported: copy=True");  // cuda.core's words: the export is zero-copy
  DlpackRequest r{false, own};
  // Pinned and managed memory is the CPU's too: asked for the CPU, they are
  // described as CPU memory, still without a copy.
  if (!dl_device.is_none()) {
    if (!PyTuple_Check(dl_device.ptr()) || PyTuple_GET_SIZE(dl_device.ptr()) != 2)
      throw nb::buffer_error("Sorry, not supported: dl_device other than None");  // cuda.core's words
    const int type = int_arg(PyTuple_GET_ITEM(dl_device.ptr(), 0), "dl_device[0]"),
              id = int_arg(PyTuple_GET_ITEM(dl_device.ptr(), 1), "dl_device[1]");
    const bool as_cpu = type == dlpack::kDLCPU && id == 0 &&
                        (own.device_type == dlpack::kDLCUDAHost || own.device_type == dlpack::kDLCUDAManaged);
    if (!as_cpu && (type != own.device_type || id != own.device_id))
      refuse("dl_device (" + std::to_string(type) + ", " + std::to_string(id) + ") is not where the memory is (" +
             std::to_string(static_cast<int>(own.device_type)) + ", " + std::to_string(own.device_id) +
             "), and the export is zero-copy");
    if (as_cpu) r.device = {dlpack::kDLCPU, 0};
  }
  if (max_version.is_none()) return r;
  if (!PyTuple_Check(max_version.ptr()) || PyTuple_GET_SIZE(max_version.ptr()) != 2)
    throw nb::buffer_error(("Expected max_version tuple[int, int], got " + repr_text(max_version)).c_str());
  const long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version.ptr(), 0));
  if (major == -1 && PyErr_Occurred()) throw nb::python_error();
  r.versioned = major >= 1;
  return r;
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

const cucore::StridedMemoryView& cpp_view(const PyView& v) {
  if (!v.dtype_known)
    throw nb::buffer_error("StridedMemoryView: its dtype has no DLPack equivalent, so it cannot be exported");
  return v.view;
}

dlpack::DLDevice view_dlpack_device(nb::handle self) { return nb::inst_ptr<PyView>(self)->view.device(); }

nb::object view_dlpack(nb::handle self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                       nb::handle copy) {
  (void)stream;  // as Buffer.__dlpack__: no producer stream to order
  const cucore::StridedMemoryView& v = cpp_view(*nb::inst_ptr<PyView>(self));
  const DlpackRequest r = dlpack_request("StridedMemoryView", v.device(), max_version, dl_device, copy);
  auto placed = [&](auto* t) {
    t->dl_tensor.device = r.device;
    return make_dlpack_capsule(t);
  };
  return r.versioned ? placed(v.to_dlpack(py_ref(self))) : placed(v.to_dlpack_unversioned(py_ref(self)));
}

// An exported tensor holds the view (which holds the memory's exporter).
int view_exchange_export(void* py_object, dlpack::DLManagedTensorVersioned** out) {
  try {
    if (!out) throw nb::value_error("out is null");
    *out = nullptr;
    nb::handle obj(static_cast<PyObject*>(py_object));
    if (!PyObject_TypeCheck(obj.ptr(), g_types.view)) throw nb::type_error("py_object is not a StridedMemoryView");
    *out = cpp_view(*nb::inst_ptr<PyView>(obj)).to_dlpack(py_ref(obj));
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
    cpp_view(*nb::inst_ptr<PyView>(obj)).describe(*out);  // the view's own arrays: valid while it lives
    return 0;
  } catch (...) {
    set_error_from_current_exception();
    return -1;
  }
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

}  // namespace cucore::python
