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
  int64_t inline_shape[6] = {};
  int64_t inline_strides[6] = {};
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
