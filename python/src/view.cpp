// cucore.utils.StridedMemoryView, the class: its construction (through the
// protocols of view_import.cpp, with fast calls for the hot interop entry
// points), its properties, views of the same memory with another layout or
// dtype, and copies. Its state is libcucore's StridedMemoryView and the
// exporting object (PyView); its DLPack exports are dlpack_export.cpp's.
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "view.hpp"

namespace cucore::python {
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
  if (!v.dtype_known) return nb::none();
  std::string ts = typestr_from_dl(v.view.dtype().to_dlpack());
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

nb::tuple to_tuple(std::span<const std::int64_t> p) {
  nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(p.size())));
  for (std::size_t i = 0; i < p.size(); ++i) PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), PyLong_FromLongLong(p[i]));
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

// ---- layouts -------------------------------------------------------------------------
// The bytes of an element DLPack has no type for: `itemsize` of them
// (ValueError naming `what` for a size libcucore cannot describe).
cucore::DataType bytes_type(std::size_t itemsize, const std::string& what) {
  if (itemsize == 0 || itemsize > 0xffff)
    raise_value_error(what + ": an itemsize of " + std::to_string(itemsize) + " bytes is out of range");
  return {dlpack::kDLUInt, 8, static_cast<std::uint16_t>(itemsize)};
}

// `v` again with this shape and these strides (in elements; none:
// C-contiguous) and element type, checked by libcucore (no negative extent,
// at most kMaxNdim dimensions, nothing that overflows or wraps): ValueError
// naming `what` otherwise.
cucore::StridedMemoryView relaid_at(const cucore::StridedMemoryView& v, void* data, std::span<const std::int64_t> shape,
                                    const std::optional<std::vector<std::int64_t>>& strides, cucore::DataType dtype,
                                    const std::string& what) {
  try {
    return cucore::StridedMemoryView(data, shape,
                                     strides ? std::span<const std::int64_t>(*strides) : std::span<const std::int64_t>(),
                                     dtype, v.device(), v.readonly(), v.owner());
  } catch (const std::invalid_argument& e) {
    raise_value_error(what + ": " + e.what());
  }
}
cucore::StridedMemoryView relaid(const cucore::StridedMemoryView& v, std::span<const std::int64_t> shape,
                                 const std::optional<std::vector<std::int64_t>>& strides, cucore::DataType dtype,
                                 const std::string& what) {
  return relaid_at(v, v.data(), shape, strides, dtype, what);
}

// The view's strides as cuda.core reports them: None for the C-contiguous
// ones, whichever protocol described them (exactly those strides, an extent
// of 1 aside: an empty array keeps strides of its own).
nb::object reported_strides(const PyView& v) {
  if (!v.has_strides || cucore::has_dense_c_strides(v.view.shape(), v.view.strides())) return nb::none();
  return to_tuple(v.view.strides());
}

nb::object layout_of(const PyView& v) {
  nb::object cls = nb::module_::import_("cucore._layout").attr("_StridedLayout");
  if (v.slice_offset != 0)
    return cls.attr("_at")(to_tuple(v.view.shape()), reported_strides(v), v.view.itemsize(), v.slice_offset);
  return cls(to_tuple(v.view.shape()), reported_strides(v), v.view.itemsize());
}

// `out` takes the layout's shape, strides and slice offset; its itemsize must
// be the view's. The data moves to the layout's slice offset, counted (as
// cuda.core counts it, from the Buffer's start) from where the memory of
// `out` starts: its data less its own slice offset.
std::size_t layout_itemsize(nb::handle layout) {
  nb::object cls = nb::module_::import_("cucore._layout").attr("_StridedLayout");
  if (!nb::isinstance(layout, cls))
    raise_type_error(std::string("StridedMemoryView.view: layout must be a _StridedLayout, got ") +
                     Py_TYPE(layout.ptr())->tp_name);
  return static_cast<std::size_t>(uint64_arg(layout.attr("itemsize"), "layout.itemsize"));
}

// `type`: the new view's element type, whose size must be the layout's (a
// repacked layout goes with a dtype of its itemsize).
void apply_layout(PyView& out, nb::handle layout, cucore::DataType type) {
  const std::size_t isz = layout_itemsize(layout);
  if (isz != type.itemsize())
    raise_value_error("StridedMemoryView.view: the layout's itemsize (" + std::to_string(isz) +
                      " bytes) must match the dtype's (" + std::to_string(type.itemsize()) + " bytes)");
  const std::vector<std::int64_t> shape = int64_tuple_arg(layout.attr("shape"), "layout.shape");
  nb::object st = layout.attr("strides");
  std::optional<std::vector<std::int64_t>> strides;
  if (!st.is_none()) strides = int64_tuple_arg(st, "layout.strides");
  const std::int64_t offset = int64_arg(layout.attr("slice_offset"), "layout.slice_offset");
  const auto sisz = static_cast<std::int64_t>(isz);
  std::int64_t old_bytes = 0, new_bytes = 0;
  try {
    // The old offset in the old items: the memory's start stays put.
    old_bytes = cucore::offset_in_bytes(out.slice_offset, static_cast<std::int64_t>(out.view.itemsize()));
    new_bytes = cucore::offset_in_bytes(offset, sisz);
  } catch (const std::overflow_error& e) {
    raise_value_error(std::string("StridedMemoryView.view: ") + e.what());
  }
  // Unsigned: the address arithmetic wraps as the pointers do; the view's
  // constructor refuses a layout whose reach wraps.
  const std::uintptr_t start = out.view.ptr() - static_cast<std::uintptr_t>(old_bytes);
  void* data = reinterpret_cast<void*>(start + static_cast<std::uintptr_t>(new_bytes));
  if (out.exporting_obj.is_valid() && PyObject_TypeCheck(out.exporting_obj.ptr(), g_types.buffer)) {
    // Every element inside the buffer, as cuda.core's required_size_in_bytes
    // check (negative offsets refused, naming them).
    const cucore::Buffer& b = *nb::inst_ptr<cucore::Buffer>(out.exporting_obj);
    std::int64_t need = 0;
    try {
      need = cucore::required_size_in_bytes(shape, strides ? std::span<const std::int64_t>(*strides)
                                                           : std::span<const std::int64_t>(),
                                            sisz, offset);
    } catch (const std::exception& e) {
      raise_value_error(std::string("StridedMemoryView.view: ") + e.what());
    }
    if (static_cast<std::uint64_t>(need) > b.size())
      raise_value_error("StridedMemoryView.view: the layout reaches " + std::to_string(need) +
                        " bytes but the buffer has " + std::to_string(b.size()));
  }
  out.view = relaid_at(out.view, data, shape, strides, type, "StridedMemoryView.view");
  out.has_strides = strides.has_value();
  out.slice_offset = offset;
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
  const bool host = src.view.device().device_type == dlpack::kDLCPU || dst.view.device().device_type == dlpack::kDLCPU;
  const bool block = blocking.is_none() ? host : PyObject_IsTrue(blocking.ptr()) == 1;
  const cucore::StridedMemoryView &from = cpp_view(src), &to = cpp_view(dst);
  nb::gil_scoped_release unlocked;
  to.copy_from(from, s);
  if (block) s.sync();
}

}  // namespace

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
        const std::string what = "StridedMemoryView.from_buffer";
        PyView v;
        cucore::DataType type;
        if (!dtype.is_none()) {
          nb::object dt = nb::module_::import_("numpy").attr("dtype")(dtype);
          dlpack::DLDataType dl{};
          if (dl_from_numpy_dtype(dt, dl)) {
            type = cucore::DataType::from_dlpack(dl);
          } else {
            v.dtype_known = false;
            v.dtype_obj = dt;
            type = bytes_type(nb::cast<std::size_t>(dt.attr("itemsize")), what);
          }
        } else if (!itemsize_arg.is_none()) {
          const int isz = int_arg(itemsize_arg, "itemsize");
          try {
            cucore::check_itemsize(isz);
          } catch (const std::invalid_argument& e) {
            raise_value_error(std::string("from_buffer: ") + e.what());
          }
          if (isz <= 8) {
            type = {dlpack::kDLUInt, static_cast<uint8_t>(isz * 8), 1};
          } else {  // no DLPack integer that wide: raw bytes
            v.dtype_known = false;
            v.dtype_obj = nb::module_::import_("numpy").attr("dtype")(nb::make_tuple("V", isz));
            type = bytes_type(static_cast<std::size_t>(isz), what);
          }
        } else {
          throw nb::value_error("from_buffer: give dtype or itemsize");
        }
        const std::vector<std::int64_t> sh = int64_tuple_arg(shape, "shape");
        std::optional<std::vector<std::int64_t>> st;
        if (!strides.is_none()) st = int64_tuple_arg(strides, "strides");
        // The buffer's memory with no layout yet, then this layout: libcucore's checks.
        const cucore::StridedMemoryView memory(reinterpret_cast<void*>(b.handle()), {}, {}, type,
                                               cucore::dlpack_device_of(b), is_readonly);
        v.view = relaid(memory, sh, st, type, what);
        v.has_strides = st.has_value();
        if (static_cast<std::uint64_t>(cucore::size_in_bytes(v.view.shape(), static_cast<std::int64_t>(v.view.itemsize()))) >
            b.size())  // fits: the view checked it
          throw nb::value_error("from_buffer: the shape needs more bytes than the buffer has");
        v.device_id = b.device_id();
        v.exporting_obj = nb::borrow(buffer);
        return v;
      }, nb::arg("buffer"), nb::arg("shape"), nb::arg("strides") = nb::none(), nb::kw_only(),
         nb::arg("itemsize") = nb::none(), nb::arg("dtype") = nb::none(), nb::arg("is_readonly") = false)
      .def_prop_ro("ptr", [](const PyView& v) { return v.view.ptr(); })
      .def_prop_ro("device_id", [](const PyView& v) { return v.device_id; })
      .def_prop_ro("is_device_accessible", [](const PyView& v) { return v.view.is_device_accessible(); })
      .def_prop_ro("readonly", [](const PyView& v) { return v.view.readonly(); })
      .def_prop_ro("exporting_obj", [](const PyView& v) { return v.exporting_obj.is_valid() ? v.exporting_obj : nb::none(); })
      .def_prop_ro("shape", [](const PyView& v) { return to_tuple(v.view.shape()); })
      .def_prop_ro("strides", &reported_strides)
      .def_prop_ro("ndim", [](const PyView& v) { return v.view.ndim(); })
      .def_prop_ro("size", [](const PyView& v) { return v.view.size(); })
      .def_prop_ro("dtype", [](PyView& v) -> nb::object {
        if (!v.dtype_obj.is_valid()) v.dtype_obj = numpy_dtype(v);
        return v.dtype_obj;
      })
      .def("view", [](nb::handle self, nb::handle layout, nb::handle dtype) -> nb::object {
        // Nothing to change: this very view, as cuda.core returns it.
        if (layout.is_none() && dtype.is_none()) return nb::borrow(self);
        const PyView& v = *nb::inst_ptr<PyView>(self);
        // The same description (or the layout's shape and strides); the memory
        // stays alive through exporting_obj, as for any view, and a consumed
        // DLPack tensor with every copy of libcucore's view.
        PyView out;
        out.view = v.view;
        out.device_id = v.device_id;
        out.has_strides = v.has_strides;
        out.slice_offset = v.slice_offset;
        out.dtype_known = v.dtype_known;
        out.exporting_obj = v.exporting_obj;
        out.dtype_obj = v.dtype_obj;
        cucore::DataType type = v.view.dtype();
        if (!dtype.is_none()) {
          // The dtype's itemsize is the layout's, or with no layout the view's.
          nb::object dt = nb::module_::import_("numpy").attr("dtype")(dtype);
          const auto want = nb::cast<int64_t>(dt.attr("itemsize"));
          const auto have = static_cast<int64_t>(layout.is_none() ? v.view.itemsize() : layout_itemsize(layout));
          if (want != have)
            raise_value_error("StridedMemoryView.view: the dtype's itemsize (" + std::to_string(want) +
                              " bytes) must match the " + (layout.is_none() ? "view's" : "layout's") + " (" +
                              std::to_string(have) + " bytes)");
          out.dtype_obj = nb::object();
          dlpack::DLDataType dl{};
          out.dtype_known = dl_from_numpy_dtype(dt, dl);
          type = cucore::DataType::from_dlpack(dl);
          if (!out.dtype_known) {
            out.dtype_obj = dt;
            type = bytes_type(static_cast<std::size_t>(want), "StridedMemoryView.view");
          }
          if (layout.is_none()) {
            const std::optional<std::vector<std::int64_t>> strides(
                std::in_place, v.view.strides().begin(), v.view.strides().end());
            out.view = relaid(v.view, v.view.shape(), strides, type, "StridedMemoryView.view");
          }
        }
        if (!layout.is_none()) apply_layout(out, layout, type);
        return nb::cast(std::move(out));
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
        const int n = v.view.ndim();
        std::string s = "StridedMemoryView(ptr=" + std::to_string(v.view.ptr()) + ", shape=(";
        for (int i = 0; i < n; ++i) s += std::to_string(v.view.shape()[i]) + (n == 1 || i + 1 < n ? "," : "");
        s += "), device_id=" + std::to_string(v.device_id) + ", is_device_accessible=" +
             (v.view.is_device_accessible() ? "True" : "False") + ", readonly=" + (v.view.readonly() ? "True" : "False") +
             ")";
        return s;
      });
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
