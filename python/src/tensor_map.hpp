#pragma once
// cucore.TensorMapDescriptor: a TMA tensor map (libcucore's
// TensorMapDescriptor) made by StridedMemoryView.as_tensor_map, passed to
// launch by value (its 128 bytes).
#include <cucore/tensor_map.hpp>

#include <memory>

#include "common.hpp"

namespace cucore::python {

struct PyTensorMap {
  std::unique_ptr<cucore::TensorMapDescriptor> map;  // over-aligned (CUtensorMap): on the heap
  int device_id = -1;
  nb::object source;  // what the map describes, kept alive with it
};

void bind_tensor_map(nb::module_& m);

}  // namespace cucore::python
