// The arithmetic of cucore._layout._StridedLayout (cuda.core's name): the
// Python class holds its shape, strides and itemsize as Python ints and asks
// libcucore's strided layout (cucore/strided_layout.hpp) for everything else,
// one call per property. A layout holds what it was given, so one with an int
// beyond 64 bits can be made (its view refuses it, naming the field); the
// properties that compute on it raise OverflowError naming it.
#include <cucore/strided_layout.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"

namespace cucore::python {
namespace {

using Ints = std::vector<std::int64_t>;

// libcucore's refusals as Python's: ValueError for a bad value, OverflowError
// for arithmetic beyond 64 bits, each naming `what`.
template <typename F>
auto layout_call(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    raise_value_error(what + ": " + e.what());
  } catch (const std::overflow_error& e) {
    raise_overflow_error(what + ": " + e.what());
  }
}

// Any iterable of ints as a tuple of Python ints (through __index__; TypeError
// naming `what` for anything else).
nb::tuple int_tuple(nb::handle seq, const std::string& what) {
  nb::object items = nb::steal(PySequence_Tuple(seq.ptr()));
  if (!items.is_valid()) {
    PyErr_Clear();
    raise_type_error(what + " must be a tuple of ints, got " + repr_text(seq));
  }
  const Py_ssize_t n = PyTuple_GET_SIZE(items.ptr());
  nb::object out = nb::steal(PyTuple_New(n));
  if (!out.is_valid()) throw nb::python_error();
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = PyTuple_GET_ITEM(items.ptr(), i);
    if (PyBool_Check(v) || !PyIndex_Check(v))
      raise_type_error(what + "[" + std::to_string(i) + "] must be an int, got " + repr_text(v));
    PyObject* index = PyNumber_Index(v);
    if (!index) throw nb::python_error();
    PyTuple_SET_ITEM(out.ptr(), i, index);
  }
  return nb::borrow<nb::tuple>(out);
}

// A layout's tuple (of Python ints, as _layout_init made it) as int64s.
Ints ints(nb::handle tuple, const std::string& what) {
  const Py_ssize_t n = PyTuple_GET_SIZE(tuple.ptr());
  Ints out(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] =
        int64_arg(PyTuple_GET_ITEM(tuple.ptr(), i), what + "[" + std::to_string(i) + "]");
  return out;
}
// None (C-contiguous) as no strides.
Ints strides_of(nb::handle strides, const std::string& what) {
  return strides.is_none() ? Ints{} : ints(strides, what + ".strides");
}

nb::tuple to_tuple(const Ints& v) {
  nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(v.size())));
  if (!t.is_valid()) throw nb::python_error();
  for (std::size_t i = 0; i < v.size(); ++i) {
    PyObject* x = PyLong_FromLongLong(v[i]);
    if (!x) throw nb::python_error();
    PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), x);
  }
  return nb::borrow<nb::tuple>(t);
}

// A stride order: 'C', 'F' or a permutation of the axes (a tuple or list);
// 'K' (keep the layout's order) only where `keep` allows it; ValueError naming
// `what` for anything else.
enum class Order { c, f, perm, keep };
Order order_arg(nb::handle order, bool keep, Ints& perm, const std::string& what) {
  if (PyUnicode_Check(order.ptr())) {
    const std::string s = utf8_arg(order, what + ": stride_order");
    if (s == "C") return Order::c;
    if (s == "F") return Order::f;
    if (s == "K" && keep) return Order::keep;
  } else if (PyTuple_Check(order.ptr()) || PyList_Check(order.ptr())) {
    perm = ints(int_tuple(order, what + ": stride_order"), what + ": stride_order");
    return Order::perm;
  }
  raise_value_error(what + ": stride_order must be " + (keep ? "'K', " : "") +
                    "'C', 'F' or a permutation of the axes, got " + repr_text(order));
}

Ints dense(const Ints& shape, Order order, const Ints& perm) {
  if (order == Order::perm) return cucore::dense_strides(shape, perm);
  return cucore::dense_strides(shape, order == Order::f ? LayoutOrder::f : LayoutOrder::c);
}

// A transformed layout as (shape, strides) tuples.
nb::tuple pair(const cucore::Strided& l) { return nb::make_tuple(to_tuple(l.shape), to_tuple(l.strides)); }

}  // namespace

void bind_layout(nb::module_& m) {
  // (shape, strides, itemsize) as the layout keeps them, checked: extents not
  // negative, strides one per axis, an itemsize that is a power of two, and
  // with divide_strides byte strides that are whole items (divided here).
  m.def(
      "_layout_init",
      [](nb::handle shape, nb::handle strides, nb::handle itemsize, bool divide_strides) {
        const std::string what = "_StridedLayout";
        nb::tuple sh = int_tuple(shape, what + ": shape");
        // Only the signs are read here: an extent beyond 64 bits is kept for the
        // view that refuses it; one below is refused now.
        Ints signs(sh.size());
        for (std::size_t i = 0; i < sh.size(); ++i) {
          int overflow = 0;
          PyObject* e = PyTuple_GET_ITEM(sh.ptr(), static_cast<Py_ssize_t>(i));
          signs[i] = PyLong_AsLongLongAndOverflow(e, &overflow);
          if (overflow < 0)
            raise_overflow_error(what + ": shape[" + std::to_string(i) + "] = " + repr_text(e) +
                                 " does not fit in a signed 64-bit integer");
          if (overflow > 0) signs[i] = 0;
        }
        const std::int64_t isz = int64_arg(itemsize, what + ": itemsize");
        nb::object st = nb::none();
        layout_call(what, [&] {
          cucore::check_extents(signs);
          cucore::check_itemsize(isz);
          if (strides.is_none()) return 0;
          nb::tuple given = int_tuple(strides, what + ": strides");
          cucore::check_strides_rank(sh.size(), given.size());
          if (!divide_strides) {
            st = given;
            return 0;
          }
          const Ints bytes = ints(given, what + ": strides");
          Ints elements(bytes.size());
          cucore::strides_from_bytes(bytes, isz, elements);
          st = to_tuple(elements);
          return 0;
        });
        return nb::make_tuple(sh, st, isz);
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("itemsize"), nb::arg("divide_strides"));

  m.def(
      "_layout_dense_strides",
      [](nb::handle shape, nb::handle stride_order) {
        const std::string what = "_StridedLayout.dense";
        const Ints sh = ints(int_tuple(shape, what + ": shape"), what + ": shape");
        Ints perm;
        const Order order = order_arg(stride_order, false, perm, what);
        return to_tuple(layout_call(what, [&] { return dense(sh, order, perm); }));
      },
      nb::arg("shape"), nb::arg("stride_order").none());

  // The dense strides of the layout in `stride_order` ('K': the layout's own
  // order), or None when the layout is already dense in it and keep_if_dense
  // (it has no slice offset: cuda.core's dense_like then returns it itself).
  m.def(
      "_layout_dense_like",
      [](nb::handle shape, nb::handle strides, nb::handle stride_order, bool keep_if_dense) -> nb::object {
        const std::string what = "_StridedLayout.dense_like";
        const Ints sh = ints(shape, what + ".shape"), st = strides_of(strides, what);
        Ints perm;
        Order order = order_arg(stride_order, true, perm, what);
        return layout_call(what, [&]() -> nb::object {
          if (order == Order::keep) {
            if (keep_if_dense && cucore::is_contiguous_any(sh, st)) return nb::none();
            perm.resize(sh.size());
            cucore::stride_order(sh, st, perm);
            order = Order::perm;
          } else if (keep_if_dense && ((order == Order::c && cucore::is_contiguous_c(sh, st)) ||
                                       (order == Order::f && cucore::is_contiguous_f(sh, st)))) {
            return nb::none();
          }
          return to_tuple(dense(sh, order, perm));
        });
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("stride_order").none(), nb::arg("keep_if_dense"));

  m.def(
      "_layout_volume",
      [](nb::handle shape) {
        const Ints sh = ints(shape, "_StridedLayout.shape");
        return layout_call("_StridedLayout.volume", [&] { return cucore::volume(sh); });
      },
      nb::arg("shape"));

  m.def(
      "_layout_strides_in_bytes",
      [](nb::handle strides, nb::handle itemsize) -> nb::object {
        if (strides.is_none()) return nb::none();
        const Ints st = ints(strides, "_StridedLayout.strides");
        const std::int64_t isz = int64_arg(itemsize, "_StridedLayout.itemsize");
        Ints bytes(st.size());
        layout_call("_StridedLayout.strides_in_bytes", [&] {
          cucore::strides_to_bytes(st, isz, bytes);
          return 0;
        });
        return to_tuple(bytes);
      },
      nb::arg("strides").none(), nb::arg("itemsize"));

  m.def(
      "_layout_stride_order",
      [](nb::handle shape, nb::handle strides) {
        const Ints sh = ints(shape, "_StridedLayout.shape"), st = strides_of(strides, "_StridedLayout");
        Ints order(sh.size());
        layout_call("_StridedLayout.stride_order", [&] {
          cucore::stride_order(sh, st, order);
          return 0;
        });
        return to_tuple(order);
      },
      nb::arg("shape"), nb::arg("strides").none());

  // which: "C", "F" or "any".
  m.def(
      "_layout_is_contiguous",
      [](nb::handle shape, nb::handle strides, const std::string& which) {
        const Ints sh = ints(shape, "_StridedLayout.shape"), st = strides_of(strides, "_StridedLayout");
        return layout_call("_StridedLayout.is_contiguous_" + which, [&] {
          if (which == "C") return cucore::is_contiguous_c(sh, st);
          if (which == "F") return cucore::is_contiguous_f(sh, st);
          if (which == "any") return cucore::is_contiguous_any(sh, st);
          throw std::invalid_argument("which must be 'C', 'F' or 'any'");
        });
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("which"));

  m.def(
      "_layout_offset_bounds",
      [](nb::handle shape, nb::handle strides, std::int64_t slice_offset) {
        const Ints sh = ints(shape, "_StridedLayout.shape"), st = strides_of(strides, "_StridedLayout");
        const cucore::OffsetBounds b =
            layout_call("_StridedLayout.offset_bounds", [&] { return cucore::offset_bounds(sh, st, slice_offset); });
        return nb::make_tuple(b.min, b.max);
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("slice_offset"));

  m.def(
      "_layout_required_size_in_bytes",
      [](nb::handle shape, nb::handle strides, nb::handle itemsize, std::int64_t slice_offset) {
        const Ints sh = ints(shape, "_StridedLayout.shape"), st = strides_of(strides, "_StridedLayout");
        const std::int64_t isz = int64_arg(itemsize, "_StridedLayout.itemsize");
        return layout_call("_StridedLayout.required_size_in_bytes",
                           [&] { return cucore::required_size_in_bytes(sh, st, isz, slice_offset); });
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("itemsize"), nb::arg("slice_offset"));

  m.def(
      "_layout_slice_offset_in_bytes",
      [](std::int64_t slice_offset, nb::handle itemsize) {
        const std::int64_t isz = int64_arg(itemsize, "_StridedLayout.itemsize");
        return layout_call("_StridedLayout.slice_offset_in_bytes",
                           [&] { return cucore::offset_in_bytes(slice_offset, isz); });
      },
      nb::arg("slice_offset"), nb::arg("itemsize"));

  // What layouts compare and hash by: (shape, itemsize, the strides in full:
  // None as the dense C strides), so a C-contiguous layout equals its dense()
  // form whether or not it spells its strides.
  m.def(
      "_layout_key",
      [](nb::handle shape, nb::handle strides, nb::handle itemsize) {
        const Ints sh = ints(shape, "_StridedLayout.shape");
        nb::object full =
            strides.is_none()
                ? nb::object(to_tuple(layout_call("_StridedLayout", [&] { return cucore::dense_strides(sh); })))
                : nb::borrow(strides);
        return nb::make_tuple(shape, itemsize, full);
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("itemsize"));
  // The transformations (cuda.core's permuted, squeezed, ...): each returns
  // the new (shape, strides); ValueError naming the method for a bad argument.
  m.def(
      "_layout_permuted",
      [](nb::handle shape, nb::handle strides, nb::handle axis_order) {
        const std::string what = "_StridedLayout.permuted";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        const Ints perm = ints(int_tuple(axis_order, what + ": axis_order"), what + ": axis_order");
        return pair(layout_call(what, [&] { return cucore::permuted(sh, st, perm); }));
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("axis_order"));

  m.def(
      "_layout_squeezed",
      [](nb::handle shape, nb::handle strides) {
        const std::string what = "_StridedLayout.squeezed";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        return pair(layout_call(what, [&] { return cucore::squeezed(sh, st); }));
      },
      nb::arg("shape"), nb::arg("strides").none());

  m.def(
      "_layout_unsqueezed",
      [](nb::handle shape, nb::handle strides, nb::handle axes) {
        const std::string what = "_StridedLayout.unsqueezed";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        const Ints ax = ints(int_tuple(axes, what + ": axis"), what + ": axis");
        return pair(layout_call(what, [&] { return cucore::unsqueezed(sh, st, ax); }));
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("axes"));

  m.def(
      "_layout_flattened_axis_mask",
      [](nb::handle shape, nb::handle strides) {
        const std::string what = "_StridedLayout.flattened_axis_mask";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        return layout_call(what, [&] { return cucore::flattened_axis_mask(sh, st); });
      },
      nb::arg("shape"), nb::arg("strides").none());

  // mask None: the axes in [start_axis, end_axis].
  m.def(
      "_layout_flattened",
      [](nb::handle shape, nb::handle strides, std::int64_t start_axis, std::int64_t end_axis,
         std::optional<std::uint64_t> mask) {
        const std::string what = "_StridedLayout.flattened";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        return pair(layout_call(what, [&] {
          const std::uint64_t m = mask ? *mask : cucore::axis_range_mask(sh.size(), start_axis, end_axis);
          return cucore::flattened(sh, st, m);
        }));
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("start_axis"), nb::arg("end_axis"),
      nb::arg("mask").none());

  m.def(
      "_layout_reshaped",
      [](nb::handle shape, nb::handle strides, nb::handle new_shape) {
        const std::string what = "_StridedLayout.reshaped";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        const Ints ns = ints(int_tuple(new_shape, what + ": shape"), what + ": shape");
        return pair(layout_call(what, [&] { return cucore::reshaped(sh, st, ns); }));
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("new_shape"));

  m.def(
      "_layout_broadcast_to",
      [](nb::handle shape, nb::handle strides, nb::handle new_shape) {
        const std::string what = "_StridedLayout.broadcast_to";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        const Ints ns = ints(int_tuple(new_shape, what + ": shape"), what + ": shape");
        return pair(layout_call(what, [&] { return cucore::broadcast_to(sh, st, ns); }));
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("new_shape"));

  // layout[slices]: an int, a slice or a tuple of them (cuda.core's sliced),
  // as (shape, strides, slice_offset).
  m.def(
      "_layout_sliced",
      [](nb::handle shape, nb::handle strides, std::int64_t slice_offset, nb::handle slices) {
        const std::string what = "_StridedLayout.sliced";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        nb::tuple items = PyTuple_Check(slices.ptr()) ? nb::borrow<nb::tuple>(slices) : nb::make_tuple(slices);
        std::vector<cucore::AxisSlice> specs;
        specs.reserve(items.size());
        for (nb::handle item : items) {
          if (PyLong_Check(item.ptr())) {
            int overflow = 0;
            const long long i = PyLong_AsLongLongAndOverflow(item.ptr(), &overflow);
            if (overflow != 0)  // beyond every extent
              raise_value_error("Invalid index: " + repr_text(item) + " out of range for axis " +
                                std::to_string(specs.size()));
            specs.push_back(cucore::AxisSlice::index(i));
          } else if (PySlice_Check(item.ptr())) {
            // Python's own reading of the slice: None ends, indices through
            // __index__, a step of 0 refused (ValueError).
            Py_ssize_t start = 0, stop = 0, step = 0;
            if (PySlice_Unpack(item.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
            specs.push_back(cucore::AxisSlice::range(start, stop, step));
          } else {
            nb::object text = nb::steal(PyObject_Str(item.ptr()));
            if (!text.is_valid()) throw nb::python_error();
            raise_type_error("Invalid slice: " + std::string(nb::borrow<nb::str>(text).c_str()) +
                             ". Expected slice instance or integer.");
          }
        }
        const cucore::OffsetStrided out =
            layout_call(what, [&] { return cucore::sliced(sh, st, slice_offset, specs); });
        return nb::make_tuple(to_tuple(out.layout.shape), to_tuple(out.layout.strides), out.offset);
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("slice_offset"), nb::arg("slices").none());

  // (shape, strides, slice_offset, itemsize) repacked to `new_itemsize`.
  m.def(
      "_layout_repacked",
      [](nb::handle shape, nb::handle strides, std::int64_t slice_offset, std::int64_t itemsize,
         nb::handle new_itemsize, nb::handle data_ptr, nb::handle axis, bool keep_dim) {
        const std::string what = "_StridedLayout.repacked";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        const std::int64_t isz = int64_arg(new_itemsize, what + ": itemsize");
        const std::int64_t ptr = int64_arg(data_ptr, what + ": data_ptr");
        const std::int64_t ax = int64_arg(axis, what + ": axis");
        const cucore::Repacked out = layout_call(
            what, [&] { return cucore::repacked(sh, st, slice_offset, itemsize, isz, ptr, ax, keep_dim); });
        return nb::make_tuple(to_tuple(out.layout.layout.shape), to_tuple(out.layout.layout.strides),
                              out.layout.offset, out.itemsize);
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("slice_offset"), nb::arg("itemsize"),
      nb::arg("new_itemsize"), nb::arg("data_ptr"), nb::arg("axis"), nb::arg("keep_dim"));

  m.def(
      "_layout_max_compatible_itemsize",
      [](nb::handle shape, nb::handle strides, std::int64_t slice_offset, std::int64_t itemsize,
         nb::handle max_itemsize, nb::handle data_ptr, nb::handle axis) {
        const std::string what = "_StridedLayout.max_compatible_itemsize";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        const std::int64_t most = int64_arg(max_itemsize, what + ": max_itemsize");
        const std::int64_t ptr = int64_arg(data_ptr, what + ": data_ptr");
        const std::int64_t ax = int64_arg(axis, what + ": axis");
        return layout_call(
            what, [&] { return cucore::max_compatible_itemsize(sh, st, slice_offset, itemsize, most, ptr, ax); });
      },
      nb::arg("shape"), nb::arg("strides").none(), nb::arg("slice_offset"), nb::arg("itemsize"),
      nb::arg("max_itemsize"), nb::arg("data_ptr"), nb::arg("axis"));

  m.def(
      "_layout_is_unique",
      [](nb::handle shape, nb::handle strides) {
        const std::string what = "_StridedLayout.is_unique";
        const Ints sh = ints(shape, what + ": shape"), st = strides_of(strides, what);
        return layout_call(what, [&] { return cucore::is_unique(sh, st); });
      },
      nb::arg("shape"), nb::arg("strides").none());
}

}  // namespace cucore::python
