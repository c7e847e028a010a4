#pragma once
// cucore.utils.StridedMemoryView: a zero-copy description of another
// library's array (DLPack, CUDA Array Interface, NumPy array interface, or a
// PyTorch tensor read through PyTorch's stable C ABI).
#include <cstdint>
#include <vector>

#include "common.hpp"
#include "dlpack.hpp"

namespace cucore::python {

struct PyView {
  std::uintptr_t ptr = 0;
  int device_id = -1;
  bool is_device_accessible = false;
  bool readonly = false;
  bool has_strides = false;  // false: C-contiguous (strides is None)
  int ndim = 0;
  // dtype as DLPack describes it (code, bits, lanes); lanes 0: unknown
  dlpack::DLDataType dl{0, 0, 0};
  int64_t inline_shape[6] = {};
  int64_t inline_strides[6] = {};
  std::vector<int64_t> big_shape, big_strides;  // ndim > 6
  nb::object exporting_obj;
  nb::object dtype_obj;  // numpy dtype, made on first access
  // A consumed DLPack capsule's tensor, released with the view.
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

}  // namespace cucore::python
