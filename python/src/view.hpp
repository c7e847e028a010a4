#pragma once
// cucore.utils.StridedMemoryView: a zero-copy description of another
// library's array, read through public protocols only (view_import.cpp: the
// DLPack C exchange API, __dlpack__, the CUDA Array Interface and NumPy's
// array interface), and the DLPack exports of it and of Buffer
// (dlpack_export.cpp: capsules and the exchange API's producer side). The
// class itself is bound in view.cpp. The layout, the DLPack checks and the
// exported tensors are libcucore's (cucore::StridedMemoryView).
#include <cstdint>

#include <cucore/dlpack.hpp>
#include <cucore/strided_memory_view.hpp>

#include "common.hpp"

namespace cucore::python {

// A StridedMemoryView as Python sees it: libcucore's view (the layout, the
// element type, the device, read-only; a consumed DLPack tensor rides in its
// owner, released with its last copy) and the object whose memory it is.
struct PyView {
  cucore::StridedMemoryView view;
  int device_id = -1;  // as cuda.core reports it (the Buffer's for from_buffer, else the view's)
  bool has_strides = false;  // false: C-contiguous, reported as strides None
  // The slice offset (in elements) of the layout the view was made with: its
  // data lies that far into the memory it views (cuda.core's view keeps the
  // layout, and a later view(layout) counts from the same start).
  std::int64_t slice_offset = 0;
  // false: an element type DLPack has no code for (a struct, ...): the view's
  // dtype is its bytes (kDLUInt, 8, itemsize) and dtype_obj NumPy's.
  bool dtype_known = true;
  nb::object exporting_obj;
  nb::object dtype_obj;  // numpy dtype, made on first access

  PyView() = default;
  PyView(PyView&&) noexcept = default;
  PyView& operator=(PyView&&) noexcept = default;
  PyView(const PyView&) = delete;
};

// A new StridedMemoryView instance, its PyView default-constructed in place
// (no temporary to move): `fill` describes the memory. On an error the
// instance goes, and what `fill` took with it.
template <typename Fill>
nb::object new_view(Fill&& fill) {
  nb::object o = nb::inst_alloc(nb::handle(reinterpret_cast<PyObject*>(g_types.view)));
  PyView* v = new (nb::inst_ptr<PyView>(o)) PyView;
  nb::inst_mark_ready(o);
  fill(*v);
  return o;
}

// ---- import (view_import.cpp): the protocols that describe another library's array --------
// Through the first protocol `obj` speaks: the DLPack C exchange API, __dlpack__,
// the CUDA Array Interface, NumPy's array interface (BufferError for none).
void view_from_any(nb::handle obj, nb::handle stream_ptr, PyView& v);
// DLPack: through the exchange API when the type has one, else __dlpack__.
void view_from_dlpack_any(nb::handle obj, nb::handle stream_ptr, PyView& v);
// obj.__cuda_array_interface__ (cuda) or obj.__array_interface__.
void view_from_interface(nb::handle obj, bool cuda, nb::handle stream_ptr, PyView& v);
// A shape or strides: a tuple or list of at most kMaxNdim ints, each error
// naming `what` (TypeError, OverflowError, ValueError for too many).
std::vector<std::int64_t> int64_tuple_arg(nb::handle seq, const std::string& what);
// The view takes `tensor` (owned from the call: released at once when
// libcucore's checks refuse it, as BufferError).
void adopt_dlpack_tensor(PyView& v, dlpack::DLManagedTensorVersioned* tensor);

// DLPack capsules ("dltensor" / "dltensor_versioned") owning `t`: an
// unconsumed capsule calls the tensor's deleter when it goes.
nb::object make_dlpack_capsule(dlpack::DLManagedTensor* t);
nb::object make_dlpack_capsule(dlpack::DLManagedTensorVersioned* t);

// ---- export (dlpack_export.cpp) ---------------------------------------------------------
// What a __dlpack__ call asks of memory at `own`, with the DLPack spec's
// arguments as cuda.core takes them (`what` names the exporter in errors):
// copy=True is BufferError (the export is zero-copy), as is a dl_device other
// than `own` (but the CPU for pinned or managed memory, which the CPU reads as
// it is: then `device` is the CPU); max_version None or below 1.0 asks for a
// 0.x tensor, else a versioned one.
struct DlpackRequest {
  bool versioned;
  dlpack::DLDevice device;  // where the tensor says the memory is
};
DlpackRequest dlpack_request(const char* what, dlpack::DLDevice own, nb::handle max_version, nb::handle dl_device,
                             nb::handle copy);

// __dlpack__ and __dlpack_device__ as plain C methods of a bound type
// (installed by install_dlpack_methods): torch.from_dlpack and NumPy call both
// for every conversion, and the general binding dispatch of keyword arguments
// costs more than the export itself.
using DlpackExport = nb::object (*)(nb::handle self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                                    nb::handle copy);
using DlpackDevice = dlpack::DLDevice (*)(nb::handle self);

// __dlpack__'s arguments, keyword-only as the DLPack spec has them, each None
// when not given (out: stream, max_version, dl_device, copy); false with a
// TypeError set when they do not fit.
bool parse_dlpack_kwargs(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject* out[4]);
PyObject* dlpack_device_tuple(const dlpack::DLDevice& d);

template <DlpackExport Export>
PyObject* dlpack_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* kw[4];
  if (!parse_dlpack_kwargs(args, nargs, kwnames, kw)) return nullptr;
  try {
    return Export(self, kw[0], kw[1], kw[2], kw[3]).release().ptr();
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

template <DlpackDevice Device>
PyObject* dlpack_device_method(PyObject* self, PyObject*) {
  try {
    return dlpack_device_tuple(Device(self));
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

// Puts Export and Device on `type` as __dlpack__ and __dlpack_device__.
template <DlpackExport Export, DlpackDevice Device>
void install_dlpack_methods(nb::handle type) {
  static PyMethodDef defs[] = {
      {"__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(dlpack_method<Export>)),
       METH_FASTCALL | METH_KEYWORDS,
       "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
       "A DLPack capsule of this memory (zero-copy): versioned when max_version >= (1, 0)."},
      {"__dlpack_device__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(dlpack_device_method<Device>)),
       METH_NOARGS, "__dlpack_device__($self, /)\n--\n\n(DLPack device type, device id) of this memory."},
  };
  for (PyMethodDef& def : defs) {
    nb::object descr = nb::steal(PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type.ptr()), &def));
    if (!descr.is_valid()) throw nb::python_error();
    nb::setattr(type, def.ml_name, descr);
  }
}

// ---- compute's array reader (view_import.cpp) ------------------------------------------
// A device array as calls that take arrays by the dozen read it
// (cucore.compute's): its address, element type and count, through the DLPack
// C exchange API's non-owning form (PyTorch) or the CUDA Array Interface
// (CuPy, Numba), with no stream ordering and no device lookup. False when the
// object offers neither, or is not in device memory (the caller takes the
// general path); ValueError when the array is not C-contiguous.
struct DeviceArrayInfo {
  std::uintptr_t ptr = 0;
  dlpack::DLDataType dtype{0, 0, 0};  // lanes 0: no DLPack type (a struct)
  std::size_t itemsize = 0;
  std::uint64_t count = 0;
};
bool read_device_array(nb::handle obj, DeviceArrayInfo& out);

// The view as libcucore's StridedMemoryView, for an export or a copy
// (BufferError for a dtype DLPack cannot describe).
const cucore::StridedMemoryView& cpp_view(const PyView& v);

// Puts the DLPack C exchange API on `type` (as __dlpack_c_exchange_api__ and
// the older __c_dlpack_exchange_api__): `from_object` makes an owning tensor
// of an instance, `dltensor` (may be null) a non-owning one. The table lives
// for the process, as the protocol asks.
void install_exchange_api(nb::handle type, dlpack::DLPackManagedTensorFromPyObjectNoSync from_object,
                          dlpack::DLPackDLTensorFromPyObjectNoSync dltensor);
// StridedMemoryView's own exports: __dlpack__, __dlpack_device__, and the
// exchange API's owning and non-owning forms.
nb::object view_dlpack(nb::handle self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                       nb::handle copy);
dlpack::DLDevice view_dlpack_device(nb::handle self);
int view_exchange_export(void* py_object, dlpack::DLManagedTensorVersioned** out);
int view_exchange_dltensor(void* py_object, dlpack::DLTensor* out);

}  // namespace cucore::python
