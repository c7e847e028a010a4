#pragma once
// cucore.utils.StridedMemoryView: a zero-copy description of another
// library's array, read through public protocols only: the DLPack C exchange
// API (PyTorch's tensors), __dlpack__, the CUDA Array Interface and NumPy's
// array interface. Also the exchange API's producer side, which Buffer and
// StridedMemoryView export.
#include <cstdint>
#include <vector>

#include <cucore/dlpack.hpp>
#include <cucore/strided_memory_view.hpp>

#include "common.hpp"

namespace cucore::python {

struct PyView {
  std::uintptr_t ptr = 0;
  int device_id = -1;
  bool is_device_accessible = false;
  bool readonly = false;
  bool has_strides = false;  // false: C-contiguous, reported as strides None (strides() is filled anyway)
  int ndim = 0;
  dlpack::DLDeviceType dl_device = dlpack::kDLCPU;  // as DLPack says where the memory is
  // dtype as DLPack describes it (code, bits, lanes); lanes 0: unknown
  dlpack::DLDataType dl{0, 0, 0};
  int64_t inline_shape[6];  // the first ndim entries are set (no zeroing: a view is made per interop call)
  int64_t inline_strides[6];
  std::vector<int64_t> big_shape, big_strides;  // ndim > 6
  nb::object exporting_obj;
  nb::object dtype_obj;  // numpy dtype, made on first access
  // A consumed DLPack tensor, released with the view.
  void* managed = nullptr;
  bool managed_versioned = false;

  PyView() = default;
  PyView(PyView&& o) noexcept;
  PyView& operator=(PyView&&) = delete;
  PyView(const PyView&) = delete;
  ~PyView();

  int64_t* shape() { return ndim <= 6 ? inline_shape : big_shape.data(); }
  int64_t* strides() { return ndim <= 6 ? inline_strides : big_strides.data(); }
  const int64_t* shape() const { return ndim <= 6 ? inline_shape : big_shape.data(); }
  const int64_t* strides() const { return ndim <= 6 ? inline_strides : big_strides.data(); }
  void set_ndim(int n) {
    ndim = n;
    if (n > 6) {
      big_shape.assign(n, 0);
      big_strides.assign(n, 0);
    }
  }
};

// DLPack capsules ("dltensor" / "dltensor_versioned") owning `t`: an
// unconsumed capsule calls the tensor's deleter when it goes.
nb::object make_dlpack_capsule(dlpack::DLManagedTensor* t);
nb::object make_dlpack_capsule(dlpack::DLManagedTensorVersioned* t);

// __dlpack__ for Buffer and StridedMemoryView (`what`), whose memory is at
// `own`: the DLPack spec's arguments as cuda.core takes them. copy=True is
// BufferError (the export is zero-copy), as is a dl_device other than `own`
// (but the CPU for pinned or managed memory, which the CPU reads as it is);
// max_version None or below 1.0 gives a 0.x tensor, else a versioned one.
nb::object dlpack_capsule_for(nb::handle self, const char* what, dlpack::DLDevice own, nb::handle max_version,
                              nb::handle dl_device, nb::handle copy,
                              dlpack::DLManagedTensorVersioned* (*versioned)(nb::handle),
                              dlpack::DLManagedTensor* (*legacy)(nb::handle));

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

// The view as libcucore's StridedMemoryView (BufferError for a dtype DLPack
// cannot describe).
cucore::StridedMemoryView cpp_view(const PyView& v);

// Puts the DLPack C exchange API on `type` (as __dlpack_c_exchange_api__ and
// the older __c_dlpack_exchange_api__): `from_object` makes an owning tensor
// of an instance, `dltensor` (may be null) a non-owning one. The table lives
// for the process, as the protocol asks.
void install_exchange_api(nb::handle type, dlpack::DLPackManagedTensorFromPyObjectNoSync from_object,
                          dlpack::DLPackDLTensorFromPyObjectNoSync dltensor);

}  // namespace cucore::python
