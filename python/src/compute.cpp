// cucore._core._compute: the C++ parallel algorithms (cucore::compute) for the
// Python package cucore.compute, which gives them cuda.compute's API. Builds
// and runs release the GIL.
#include <nanobind/stl/function.h>

#include <cucore/buffer.hpp>
#include <cucore/compute.hpp>
#include <cucore/errors.hpp>

#include "common.hpp"
#include "view.hpp"
#include <cstdint>

namespace cucore::python {

namespace {

namespace cc = cucore::compute;
using Ptr = std::uintptr_t;

std::vector<std::byte> bytes_of(nb::bytes b) {
  const auto* p = static_cast<const std::byte*>(static_cast<const void*>(b.c_str()));
  return std::vector<std::byte>(p, p + b.size());
}

cc::Type builtin_type(const std::string& name) {
  static const std::pair<const char*, cc::TypeKind> kinds[] = {
      {"int8", cc::TypeKind::int8},       {"int16", cc::TypeKind::int16},     {"int32", cc::TypeKind::int32},
      {"int64", cc::TypeKind::int64},     {"uint8", cc::TypeKind::uint8},     {"uint16", cc::TypeKind::uint16},
      {"uint32", cc::TypeKind::uint32},   {"uint64", cc::TypeKind::uint64},   {"float16", cc::TypeKind::float16},
      {"bfloat16", cc::TypeKind::bfloat16}, {"float32", cc::TypeKind::float32}, {"float64", cc::TypeKind::float64},
      {"bool", cc::TypeKind::boolean}};
  for (const auto& [n, k] : kinds)
    if (name == n) return cc::Type::of(k);
  raise_type_error("cucore.compute: no built-in type named '" + name + "'");
}

cc::BuildOptions build_options(const std::optional<std::string>& arch) {
  return cc::BuildOptions{.arch = arch.value_or(std::string())};
}

void* vp(Ptr p) { return reinterpret_cast<void*>(p); }

// ---- a call's arguments, read here: a built object's call is the hot path
// (called in loops, each microsecond before its first launch is the GPU's idle
// time), so arrays are read through the exchange API or the CUDA Array
// Interface in C++; anything else takes cucore.compute's Python conversion.

// The element type DLPack names, when it is one of cucore.compute's built-in types.
std::optional<cc::Type> type_of(const dlpack::DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  using K = cc::TypeKind;
  auto by_bits = [&](K k8, K k16, K k32, K k64) -> std::optional<cc::Type> {
    switch (t.bits) {
      case 8: return cc::Type::of(k8);
      case 16: return cc::Type::of(k16);
      case 32: return cc::Type::of(k32);
      case 64: return cc::Type::of(k64);
      default: return std::nullopt;
    }
  };
  switch (t.code) {
    case dlpack::kDLInt: return by_bits(K::int8, K::int16, K::int32, K::int64);
    case dlpack::kDLUInt: return by_bits(K::uint8, K::uint16, K::uint32, K::uint64);
    case dlpack::kDLFloat:
      if (t.bits == 16) return cc::Type::of(K::float16);
      if (t.bits == 32) return cc::Type::of(K::float32);
      if (t.bits == 64) return cc::Type::of(K::float64);
      return std::nullopt;
    case dlpack::kDLBfloat: return t.bits == 16 ? std::optional(cc::Type::of(K::bfloat16)) : std::nullopt;
    case dlpack::kDLBool: return t.bits == 8 ? std::optional(cc::Type::of(K::boolean)) : std::nullopt;
    default: return std::nullopt;
  }
}

nb::object python_conversion(const char* module, const char* name) { return nb::module_::import_(module).attr(name); }

// d_in, d_out, d_samples: an Iterator as it is; a device array of a built-in
// element type as a pointer iterator; anything else (cucore.compute's iterator
// objects, arrays of structs, DLPack-only producers) as Python converts it.
cc::Iterator iterator_arg(nb::handle obj) {
  if (nb::isinstance<cc::Iterator>(obj)) return nb::cast<const cc::Iterator&>(obj);
  DeviceArrayInfo a;
  if (read_device_array(obj, a))
    if (auto t = type_of(a.dtype)) return cc::Iterator::pointer(*t, static_cast<CUdeviceptr>(a.ptr));
  return nb::cast<cc::Iterator>(python_conversion("cucore.compute._iterators", "to_iterator")(obj));
}

// A device array's address (sort keys and values, histogram bins); None is 0.
Ptr pointer_arg(nb::handle obj) {
  if (obj.is_none()) return 0;
  DeviceArrayInfo a;
  if (read_device_array(obj, a)) return a.ptr;
  return nb::cast<Ptr>(python_conversion("cucore.compute._iterators", "array_info")(obj)[0]);
}

// temp_storage: None (the size query), a cucore Buffer, a device array (its
// bytes), or what cucore.compute's Python takes (a Buffer of another library).
std::pair<void*, std::size_t> temp_arg(nb::handle obj) {
  if (obj.is_none()) return {nullptr, 0};
  if (nb::isinstance<cucore::Buffer>(obj)) {
    const auto& b = nb::cast<const cucore::Buffer&>(obj);
    if (b.is_closed()) throw cucore::ClosedError("Buffer", "temp_storage");
    return {b.data(), b.size()};
  }
  DeviceArrayInfo a;
  if (read_device_array(obj, a)) return {vp(a.ptr), static_cast<std::size_t>(a.count * a.itemsize)};
  auto [ptr, bytes] =
      nb::cast<std::pair<Ptr, std::size_t>>(python_conversion("cucore.compute._algorithms", "_temp")(obj));
  return {vp(ptr), bytes};
}

// An initial value: a Value, or the bytes of a one-element buffer (a numpy
// array or scalar the caller has checked is of `type`).
cc::Value value_arg(nb::handle obj, const cc::Type& type) {
  if (nb::isinstance<cc::Value>(obj)) return nb::cast<const cc::Value&>(obj);
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
  struct Release {
    Py_buffer* v;
    ~Release() { PyBuffer_Release(v); }
  } release{&view};
  if (static_cast<std::size_t>(view.len) != type.size())
    raise_value_error("cucore.compute: an initial value of " + std::to_string(view.len) + " bytes for " +
                      type.describe() + " (" + std::to_string(type.size()) + " bytes)");
  return cc::Value(type, std::span(static_cast<const std::byte*>(view.buf), static_cast<std::size_t>(view.len)));
}

std::optional<cc::Value> optional_value_arg(nb::handle obj, const std::optional<cc::Type>& type) {
  if (obj.is_none()) return std::nullopt;
  if (!type) raise_value_error("cucore.compute: an initial value for an object built without one");
  return value_arg(obj, *type);
}

}  // namespace

void bind_compute(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_compute", "cucore::compute (use cucore.compute).");

  nb::class_<cc::Type>(m, "Type")
      .def_static("builtin", &builtin_type, nb::arg("name"))
      .def_static("user",
                  [](std::string name, std::string definition, std::size_t size, std::size_t alignment) {
                    return cc::Type::user(std::move(name), std::move(definition), size, alignment);
                  },
                  nb::arg("name"), nb::arg("definition"), nb::arg("size"), nb::arg("alignment"))
      .def_prop_ro("size", &cc::Type::size)
      .def_prop_ro("alignment", &cc::Type::alignment)
      .def_prop_ro("cpp_name", &cc::Type::cpp_name)
      .def("__eq__", [](const cc::Type& a, const cc::Type& b) { return a == b; })
      .def("__repr__", [](const cc::Type& t) { return "<cucore.compute type " + t.describe() + ">"; });

  nb::class_<cc::Value>(m, "Value").def("__init__", [](cc::Value* v, const cc::Type& t, nb::bytes b) {
    const auto bytes = bytes_of(b);
    new (v) cc::Value(t, bytes);
  });

  nb::class_<cc::Op>(m, "Op")
      .def_static("well_known", [](int kind) { return cc::Op(static_cast<cc::OpKind>(kind)); }, nb::arg("kind"))
      .def_static("source", &cc::Op::source, nb::arg("callable"), nb::arg("preamble") = "")
      .def_static("ltoir",
                  [](std::string symbol, nb::bytes ltoir, const std::string& abi, std::vector<nb::bytes> extra) {
                    if (abi != "pointers" && abi != "values")
                      raise_value_error("Op.ltoir: abi must be 'pointers' or 'values', got '" + abi + "'");
                    std::vector<std::vector<std::byte>> ex;
                    for (auto& e : extra) ex.push_back(bytes_of(e));
                    return cc::Op::ltoir(std::move(symbol), bytes_of(ltoir),
                                         abi == "values" ? cc::OpAbi::values : cc::OpAbi::pointers, std::move(ex));
                  },
                  nb::arg("symbol"), nb::arg("ltoir"), nb::arg("abi") = "pointers",
                  nb::arg("extra_ltoirs") = std::vector<nb::bytes>{})
      .def("__repr__", [](const cc::Op& o) { return "<cucore.compute op " + o.describe() + ">"; });

  nb::class_<cc::Iterator>(m, "Iterator")
      .def_static("pointer", [](const cc::Type& t, Ptr p) { return cc::Iterator::pointer(t, CUdeviceptr(p)); })
      .def_static("counting", &cc::Iterator::counting)
      .def_static("constant", &cc::Iterator::constant)
      .def_static("transform", &cc::Iterator::transform)
      .def_static("discard", &cc::Iterator::discard)
      .def_static("zip", &cc::Iterator::zip)
      .def_static("reverse", &cc::Iterator::reverse)
      .def("with_pointer", [](const cc::Iterator& it, Ptr p) { return it.with_pointer(CUdeviceptr(p)); })
      .def_prop_ro("signature", &cc::Iterator::signature)
      .def_prop_ro("value_type", &cc::Iterator::value_type)
      .def_prop_ro("is_pointer", &cc::Iterator::is_pointer);

  using Guard = nb::call_guard<nb::gil_scoped_release>;

  nb::class_<cc::Reduce>(m, "Reduce")
      .def("__init__",
           [](cc::Reduce* r, const cc::Iterator& in, const cc::Iterator& out, const cc::Op& op, const cc::Type& init,
              int determinism, std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::Reduce(in, out, op, init,
                                {.determinism = static_cast<cc::Determinism>(determinism), .build = build_options(arch)});
           },
           nb::arg("d_in"), nb::arg("d_out"), nb::arg("op"), nb::arg("init_type"), nb::arg("determinism") = 1,
           nb::arg("arch") = nb::none())
      // The call's Python arguments as cuda.compute takes them (init_type: the built initial value's).
      .def("__call__",
           [](const cc::Reduce& r, nb::handle temp_storage, nb::handle d_in, nb::handle d_out, std::uint64_t n,
              nb::handle init, const cc::Type& init_type, std::optional<nb::handle> stream) {
             const auto [temp, bytes] = temp_arg(temp_storage);
             const cc::Iterator in = iterator_arg(d_in), out = iterator_arg(d_out);
             const cc::Value value = value_arg(init, init_type);
             StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
             nb::gil_scoped_release release;
             return r(temp, bytes, in, out, n, value, s);
           },
           nb::arg("temp_storage").none(), nb::arg("d_in"), nb::arg("d_out"), nb::arg("n"), nb::arg("init"),
           nb::arg("init_type"), nb::arg("stream").none());

  nb::class_<cc::InclusiveScan>(m, "InclusiveScan")
      .def("__init__",
           [](cc::InclusiveScan* r, const cc::Iterator& in, const cc::Iterator& out, const cc::Op& op,
              std::optional<cc::Type> init, std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::InclusiveScan(in, out, op, std::move(init), build_options(arch));
           },
           nb::arg("d_in"), nb::arg("d_out"), nb::arg("op"), nb::arg("init_type").none(), nb::arg("arch") = nb::none())
      .def("__call__",
           [](const cc::InclusiveScan& r, nb::handle temp_storage, nb::handle d_in, nb::handle d_out, std::uint64_t n,
              nb::handle init, std::optional<cc::Type> init_type, std::optional<nb::handle> stream) {
             const auto [temp, bytes] = temp_arg(temp_storage);
             const cc::Iterator in = iterator_arg(d_in), out = iterator_arg(d_out);
             const std::optional<cc::Value> value = optional_value_arg(init, init_type);
             StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
             nb::gil_scoped_release release;
             return r(temp, bytes, in, out, n, value, s);
           },
           nb::arg("temp_storage").none(), nb::arg("d_in"), nb::arg("d_out"), nb::arg("n"), nb::arg("init").none(),
           nb::arg("init_type").none(), nb::arg("stream").none());

  nb::class_<cc::ExclusiveScan>(m, "ExclusiveScan")
      .def("__init__",
           [](cc::ExclusiveScan* r, const cc::Iterator& in, const cc::Iterator& out, const cc::Op& op,
              const cc::Type& init, std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::ExclusiveScan(in, out, op, init, build_options(arch));
           },
           nb::arg("d_in"), nb::arg("d_out"), nb::arg("op"), nb::arg("init_type"), nb::arg("arch") = nb::none())
      .def("__call__",
           [](const cc::ExclusiveScan& r, nb::handle temp_storage, nb::handle d_in, nb::handle d_out, std::uint64_t n,
              nb::handle init, const cc::Type& init_type, std::optional<nb::handle> stream) {
             const auto [temp, bytes] = temp_arg(temp_storage);
             const cc::Iterator in = iterator_arg(d_in), out = iterator_arg(d_out);
             const cc::Value value = value_arg(init, init_type);
             StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
             nb::gil_scoped_release release;
             return r(temp, bytes, in, out, n, value, s);
           },
           nb::arg("temp_storage").none(), nb::arg("d_in"), nb::arg("d_out"), nb::arg("n"), nb::arg("init"),
           nb::arg("init_type"), nb::arg("stream").none());

  nb::class_<cc::UnaryTransform>(m, "UnaryTransform")
      .def("__init__",
           [](cc::UnaryTransform* r, const cc::Iterator& in, const cc::Iterator& out, const cc::Op& op,
              std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::UnaryTransform(in, out, op, build_options(arch));
           },
           nb::arg("d_in"), nb::arg("d_out"), nb::arg("op"), nb::arg("arch") = nb::none())
      .def("__call__", [](const cc::UnaryTransform& r, nb::handle d_in, nb::handle d_out, std::uint64_t n,
                          std::optional<nb::handle> stream) {
        const cc::Iterator in = iterator_arg(d_in), out = iterator_arg(d_out);
        StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
        nb::gil_scoped_release release;
        r(in, out, n, s);
      });

  nb::class_<cc::BinaryTransform>(m, "BinaryTransform")
      .def("__init__",
           [](cc::BinaryTransform* r, const cc::Iterator& in1, const cc::Iterator& in2, const cc::Iterator& out,
              const cc::Op& op, std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::BinaryTransform(in1, in2, out, op, build_options(arch));
           },
           nb::arg("d_in1"), nb::arg("d_in2"), nb::arg("d_out"), nb::arg("op"), nb::arg("arch") = nb::none())
      .def("__call__", [](const cc::BinaryTransform& r, nb::handle d_in1, nb::handle d_in2, nb::handle d_out,
                          std::uint64_t n, std::optional<nb::handle> stream) {
        const cc::Iterator in1 = iterator_arg(d_in1), in2 = iterator_arg(d_in2), out = iterator_arg(d_out);
        StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
        nb::gil_scoped_release release;
        r(in1, in2, out, n, s);
      });

  nb::class_<cc::RadixSort>(m, "RadixSort")
      .def("__init__",
           [](cc::RadixSort* r, const cc::Type& key, std::optional<cc::Type> value, bool descending,
              std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::RadixSort(key, std::move(value), descending ? cc::SortOrder::descending : cc::SortOrder::ascending,
                                   build_options(arch));
           },
           nb::arg("key_type"), nb::arg("value_type").none(), nb::arg("descending"), nb::arg("arch") = nb::none())
      // Returns (temp bytes, selector): the selector is the double-buffer form's result buffer.
      .def("__call__",
           [](const cc::RadixSort& r, nb::handle temp_storage, nb::handle keys0, nb::handle keys1, nb::handle values0,
              nb::handle values1, std::uint64_t n, int begin_bit, int end_bit, bool double_buffer, int selector,
              std::optional<nb::handle> stream) {
             const auto [temp, bytes] = temp_arg(temp_storage);
             const Ptr k0 = pointer_arg(keys0), k1 = pointer_arg(keys1), v0 = pointer_arg(values0),
                       v1 = pointer_arg(values1);
             StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
             nb::gil_scoped_release release;
             if (!double_buffer)
               return std::make_pair(r(temp, bytes, k0, k1, v0, v1, n, begin_bit, end_bit, s), 0);
             cc::DoubleBuffer keys{{k0, k1}, selector}, values{{v0, v1}, selector};
             const std::size_t b = r(temp, bytes, keys, v0 ? &values : nullptr, n, begin_bit, end_bit, s);
             return std::make_pair(b, keys.selector);
           },
           nb::arg("temp_storage").none(), nb::arg("keys0"), nb::arg("keys1"), nb::arg("values0").none(),
           nb::arg("values1").none(), nb::arg("n"), nb::arg("begin_bit"), nb::arg("end_bit"), nb::arg("double_buffer"),
           nb::arg("selector"), nb::arg("stream").none())
      // The same with temporary storage from the device's pool; returns the selector.
      .def("run", [](const cc::RadixSort& r, nb::handle keys0, nb::handle keys1, nb::handle values0, nb::handle values1,
                     std::uint64_t n, int begin_bit, int end_bit, bool double_buffer, int selector,
                     std::optional<nb::handle> stream) {
        const Ptr k0 = pointer_arg(keys0), k1 = pointer_arg(keys1), v0 = pointer_arg(values0), v1 = pointer_arg(values1);
        StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
        nb::gil_scoped_release release;
        if (!double_buffer) {
          r(k0, k1, v0, v1, n, s, begin_bit, end_bit);
          return 0;
        }
        cc::DoubleBuffer keys{{k0, k1}, selector}, values{{v0, v1}, selector};
        r(keys, v0 ? &values : nullptr, n, s, begin_bit, end_bit);
        return keys.selector;
      },
      nb::arg("keys0"), nb::arg("keys1"), nb::arg("values0").none(), nb::arg("values1").none(), nb::arg("n"),
      nb::arg("begin_bit"), nb::arg("end_bit"), nb::arg("double_buffer"), nb::arg("selector"), nb::arg("stream").none());

  nb::class_<cc::HistogramEven>(m, "HistogramEven")
      .def("__init__",
           [](cc::HistogramEven* r, const cc::Iterator& samples, const cc::Type& counter, const cc::Type& level,
              int num_levels, std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::HistogramEven(samples, counter, level, num_levels, build_options(arch));
           },
           nb::arg("d_samples"), nb::arg("counter_type"), nb::arg("level_type"), nb::arg("num_levels"),
           nb::arg("arch") = nb::none())
      .def("__call__", [](const cc::HistogramEven& r, nb::handle temp_storage, nb::handle d_samples,
                          nb::handle d_histogram, int num_levels, const cc::Value& lower, const cc::Value& upper,
                          std::uint64_t n, std::optional<nb::handle> stream) {
        const auto [temp, bytes] = temp_arg(temp_storage);
        const cc::Iterator samples = iterator_arg(d_samples);
        const Ptr histogram = pointer_arg(d_histogram);
        StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
        nb::gil_scoped_release release;
        return r(temp, bytes, samples, histogram, num_levels, lower, upper, n, s);
      },
      nb::arg("temp_storage").none(), nb::arg("d_samples"), nb::arg("d_histogram"), nb::arg("num_levels"),
      nb::arg("lower"), nb::arg("upper"), nb::arg("n"), nb::arg("stream").none());

  // One-shot forms: the per-process cache of built objects (single flight) and
  // temporary storage from the device's pool on the stream.
  m.def("reduce", [](const cc::Iterator& in, const cc::Iterator& out, std::uint64_t n, const cc::Op& op,
                     const cc::Value& init, int determinism, std::optional<nb::handle> stream) {
    StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
    nb::gil_scoped_release release;
    cc::reduce(s, in, out, n, op, init, {}, static_cast<cc::Determinism>(determinism));
  });
  m.def("inclusive_scan",
        [](const cc::Iterator& in, const cc::Iterator& out, std::uint64_t n, const cc::Op& op,
           std::optional<cc::Value> init, std::optional<nb::handle> stream) {
          StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
          nb::gil_scoped_release release;
          cc::inclusive_scan(s, in, out, n, op, init);
        },
        nb::arg("d_in"), nb::arg("d_out"), nb::arg("n"), nb::arg("op"), nb::arg("init").none(),
        nb::arg("stream").none());
  m.def("exclusive_scan", [](const cc::Iterator& in, const cc::Iterator& out, std::uint64_t n, const cc::Op& op,
                             const cc::Value& init, std::optional<nb::handle> stream) {
    StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
    nb::gil_scoped_release release;
    cc::exclusive_scan(s, in, out, n, op, init);
  });
  m.def("unary_transform", [](const cc::Iterator& in, const cc::Iterator& out, std::uint64_t n, const cc::Op& op,
                              std::optional<nb::handle> stream) {
    StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
    nb::gil_scoped_release release;
    cc::unary_transform(s, in, out, n, op);
  });
  m.def("binary_transform", [](const cc::Iterator& in1, const cc::Iterator& in2, const cc::Iterator& out,
                               std::uint64_t n, const cc::Op& op, std::optional<nb::handle> stream) {
    StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
    nb::gil_scoped_release release;
    cc::binary_transform(s, in1, in2, out, n, op);
  });
  m.def("histogram_even", [](const cc::Iterator& samples, const cc::Type& counter, Ptr histogram, int num_levels,
                             const cc::Value& lower, const cc::Value& upper, std::uint64_t n, std::optional<nb::handle> stream) {
    StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
    nb::gil_scoped_release release;
    cc::histogram_even(s, samples, counter, histogram, num_levels, lower, upper, n);
  });

  m.def("build_cache_stats", [] {
    const auto s = cc::build_cache_stats();
    nb::dict d;
    d["hits"] = s.hits;
    d["builds"] = s.builds;
    d["waits"] = s.waits;
    d["entries"] = s.entries;
    return d;
  });
  m.def("clear_build_cache", &cc::clear_build_cache);
  m.def("cccl_version", &cc::cccl_version);
}

}  // namespace cucore::python
