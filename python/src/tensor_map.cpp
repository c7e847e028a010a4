// cucore.TensorMapDescriptor over libcucore's TensorMapDescriptor. The
// Python-facing options (enums, TensorMapDescriptorOptions, dtype names) are
// normalized in cucore/_tensor_map.py; this binds the descriptor itself.
#include "tensor_map.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include "view.hpp"
#include <cstdint>

namespace cucore::python {
namespace {

const PyView& view_arg(nb::handle obj, nb::object& holder) {
  if (PyObject_TypeCheck(obj.ptr(), g_types.view)) {
    holder = nb::borrow(obj);
  } else {
    holder = nb::borrow(reinterpret_cast<PyObject*>(g_types.view)).attr("from_any_interface")(obj, -1);
  }
  return *nb::inst_ptr<PyView>(holder);
}

}  // namespace

void bind_tensor_map(nb::module_& m) {
  auto tm = nb::class_<PyTensorMap>(m, "TensorMapDescriptor",
      "A TMA tensor map (the driver's 128-byte CUtensorMap) for Hopper and later GPUs, made by "
      "StridedMemoryView.as_tensor_map and passed to launch by value (a `const __grid_constant__ CUtensorMap` "
      "parameter). It keeps the object it describes alive.");
  tm.def("__init__", [](PyTensorMap*, nb::args, nb::kwargs) {
    refuse_init("TensorMapDescriptor cannot be instantiated directly. Use StridedMemoryView.as_tensor_map() instead.");
  });
  tm.def_static("_from_tiled", [](nb::handle view, std::vector<std::uint32_t> box_dim,
                                  std::vector<std::uint32_t> element_strides, std::optional<int> data_type,
                                  int interleave, int swizzle, int l2_promotion, int oob_fill) {
        nb::object holder;
        const PyView& v = view_arg(view, holder);
        cucore::TensorMapOptions o{.box_dim = std::move(box_dim), .element_strides = std::move(element_strides)};
        if (data_type) o.data_type = static_cast<cucore::TensorMapDataType>(*data_type);
        o.interleave = static_cast<cucore::TensorMapInterleave>(interleave);
        o.swizzle = static_cast<cucore::TensorMapSwizzle>(swizzle);
        o.l2_promotion = static_cast<cucore::TensorMapL2Promotion>(l2_promotion);
        o.oob_fill = static_cast<cucore::TensorMapOOBFill>(oob_fill);
        const cucore::StridedMemoryView& cv = cpp_view(v);
        PyTensorMap out;
        out.map = std::make_unique<cucore::TensorMapDescriptor>(cucore::TensorMapDescriptor::tiled(cv, o));
        out.device_id = cv.device().device_type == dlpack::kDLCUDA ? v.device_id : -1;
        out.source = v.exporting_obj.is_valid() ? v.exporting_obj : holder;
        return out;
      }, nb::arg("view"), nb::arg("box_dim"), nb::arg("element_strides"), nb::arg("data_type").none(),
         nb::arg("interleave"), nb::arg("swizzle"), nb::arg("l2_promotion"), nb::arg("oob_fill"))
      .def_prop_ro("device", [](const PyTensorMap& t) -> nb::object {
        return t.device_id >= 0 ? device_object(t.device_id) : nb::none();
      }, "The Device of the described memory (None for pinned or managed memory).")
      .def("replace_address", [](PyTensorMap& t, nb::handle tensor) {
        nb::object holder;
        const PyView& v = view_arg(tensor, holder);
        t.map->replace_address(cpp_view(v));
        t.source = v.exporting_obj.is_valid() ? v.exporting_obj : holder;
      }, nb::arg("tensor"),
         "Points the map at `tensor` (a StridedMemoryView or any DLPack / CUDA Array Interface object) of the same "
         "shape and strides: device-accessible, 16-byte aligned.")
      .def("__repr__", [](const PyTensorMap& t) {
        return "<TensorMapDescriptor device=" + std::to_string(t.device_id) + ">";
      });
  g_types.tensor_map = reinterpret_cast<PyTypeObject*>(tm.ptr());
}

}  // namespace cucore::python
