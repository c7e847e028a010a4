// cucore._core._compute: the C++ parallel algorithms (cucore::compute) for the
// Python package cucore.compute, which gives them cuda.compute's API. Builds
// and runs release the GIL.
#include <nanobind/stl/function.h>

#include <cucore/compute.hpp>

#include "common.hpp"
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
      .def("__call__",
           [](const cc::Reduce& r, Ptr temp, std::size_t bytes, const cc::Iterator& in, const cc::Iterator& out,
              std::uint64_t n, const cc::Value& init, std::optional<nb::handle> stream) {
             StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
             nb::gil_scoped_release release;
             return r(vp(temp), bytes, in, out, n, init, s);
           });

  nb::class_<cc::InclusiveScan>(m, "InclusiveScan")
      .def("__init__",
           [](cc::InclusiveScan* r, const cc::Iterator& in, const cc::Iterator& out, const cc::Op& op,
              std::optional<cc::Type> init, std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::InclusiveScan(in, out, op, std::move(init), build_options(arch));
           },
           nb::arg("d_in"), nb::arg("d_out"), nb::arg("op"), nb::arg("init_type").none(), nb::arg("arch") = nb::none())
      .def("__call__",
           [](const cc::InclusiveScan& r, Ptr temp, std::size_t bytes, const cc::Iterator& in, const cc::Iterator& out,
              std::uint64_t n, std::optional<cc::Value> init, std::optional<nb::handle> stream) {
             StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
             nb::gil_scoped_release release;
             return r(vp(temp), bytes, in, out, n, init, s);
           },
           nb::arg("temp"), nb::arg("bytes"), nb::arg("d_in"), nb::arg("d_out"), nb::arg("n"), nb::arg("init").none(),
           nb::arg("stream").none());

  nb::class_<cc::ExclusiveScan>(m, "ExclusiveScan")
      .def("__init__",
           [](cc::ExclusiveScan* r, const cc::Iterator& in, const cc::Iterator& out, const cc::Op& op,
              const cc::Type& init, std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::ExclusiveScan(in, out, op, init, build_options(arch));
           },
           nb::arg("d_in"), nb::arg("d_out"), nb::arg("op"), nb::arg("init_type"), nb::arg("arch") = nb::none())
      .def("__call__",
           [](const cc::ExclusiveScan& r, Ptr temp, std::size_t bytes, const cc::Iterator& in, const cc::Iterator& out,
              std::uint64_t n, const cc::Value& init, std::optional<nb::handle> stream) {
             StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
             nb::gil_scoped_release release;
             return r(vp(temp), bytes, in, out, n, init, s);
           });

  nb::class_<cc::UnaryTransform>(m, "UnaryTransform")
      .def("__init__",
           [](cc::UnaryTransform* r, const cc::Iterator& in, const cc::Iterator& out, const cc::Op& op,
              std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::UnaryTransform(in, out, op, build_options(arch));
           },
           nb::arg("d_in"), nb::arg("d_out"), nb::arg("op"), nb::arg("arch") = nb::none())
      .def("__call__", [](const cc::UnaryTransform& r, const cc::Iterator& in, const cc::Iterator& out,
                          std::uint64_t n, std::optional<nb::handle> stream) {
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
      .def("__call__", [](const cc::BinaryTransform& r, const cc::Iterator& in1, const cc::Iterator& in2,
                          const cc::Iterator& out, std::uint64_t n, std::optional<nb::handle> stream) {
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
           [](const cc::RadixSort& r, Ptr temp, std::size_t bytes, Ptr k0, Ptr k1, Ptr v0, Ptr v1, std::uint64_t n,
              int begin_bit, int end_bit, bool double_buffer, int selector, std::optional<nb::handle> stream) {
             StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
             nb::gil_scoped_release release;
             if (!double_buffer)
               return std::make_pair(r(vp(temp), bytes, k0, k1, v0, v1, n, begin_bit, end_bit, s), 0);
             cc::DoubleBuffer keys{{k0, k1}, selector}, values{{v0, v1}, selector};
             const std::size_t b = r(vp(temp), bytes, keys, v0 ? &values : nullptr, n, begin_bit, end_bit, s);
             return std::make_pair(b, keys.selector);
           })
      // The same with temporary storage from the device's pool; returns the selector.
      .def("run", [](const cc::RadixSort& r, Ptr k0, Ptr k1, Ptr v0, Ptr v1, std::uint64_t n, int begin_bit,
                     int end_bit, bool double_buffer, int selector, std::optional<nb::handle> stream) {
        StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
        nb::gil_scoped_release release;
        if (!double_buffer) {
          r(k0, k1, v0, v1, n, s, begin_bit, end_bit);
          return 0;
        }
        cc::DoubleBuffer keys{{k0, k1}, selector}, values{{v0, v1}, selector};
        r(keys, v0 ? &values : nullptr, n, s, begin_bit, end_bit);
        return keys.selector;
      });

  nb::class_<cc::HistogramEven>(m, "HistogramEven")
      .def("__init__",
           [](cc::HistogramEven* r, const cc::Iterator& samples, const cc::Type& counter, const cc::Type& level,
              int num_levels, std::optional<std::string> arch) {
             nb::gil_scoped_release release;
             new (r) cc::HistogramEven(samples, counter, level, num_levels, build_options(arch));
           },
           nb::arg("d_samples"), nb::arg("counter_type"), nb::arg("level_type"), nb::arg("num_levels"),
           nb::arg("arch") = nb::none())
      .def("__call__", [](const cc::HistogramEven& r, Ptr temp, std::size_t bytes, const cc::Iterator& samples,
                          Ptr histogram, int num_levels, const cc::Value& lower, const cc::Value& upper,
                          std::uint64_t n, std::optional<nb::handle> stream) {
        StreamRef s = stream_arg_or_default(stream.value_or(nb::handle()));
        nb::gil_scoped_release release;
        return r(vp(temp), bytes, samples, histogram, num_levels, lower, upper, n, s);
      });

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
