// Program / ProgramOptions, Linker / LinkerOptions, ObjectCode, Kernel.
#include <cucore/kernel.hpp>
#include <cucore/linker.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>

#include <nanobind/stl/map.h>

#include "common.hpp"
#include "program_support.hpp"

namespace cucore::python {
namespace {

std::string py_repr(nb::handle v) { return nb::cast<std::string>(nb::repr(v)); }

// A str (or bytes) argument; TypeError naming `what` for anything else.
std::string str_arg(nb::handle v, const std::string& what) {
  if (PyBytes_Check(v.ptr())) return std::string(PyBytes_AsString(v.ptr()), PyBytes_Size(v.ptr()));
  if (!PyUnicode_Check(v.ptr())) raise_type_error(what + " must be a str, got " + py_repr(v));
  return nb::cast<std::string>(v);
}

// A C int: TypeError for a non-int, OverflowError naming `what` when it does not
// fit (a truncated value would be another option than the one given).
int c_int_arg(nb::handle v, const std::string& what) {
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr())) raise_type_error(what + " must be an int, got " + py_repr(v));
  nb::object i = nb::steal(PyNumber_Index(v.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long r = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (r == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow || r < INT_MIN || r > INT_MAX) {
    PyErr_SetString(PyExc_OverflowError, (what + " = " + py_repr(v) + " does not fit in a C int").c_str());
    throw nb::python_error();
  }
  return static_cast<int>(r);
}

// define_macro: "NAME", ("NAME", "VALUE"), or a list of those.
void parse_macros(nb::handle v, cucore::ProgramOptions& po) {
  if (v.is_none()) return;
  auto one = [&](nb::handle item) {
    if (PyUnicode_Check(item.ptr())) {
      po.define_macro.emplace_back(nb::cast<std::string>(item));
    } else if (PyTuple_Check(item.ptr()) && PyTuple_GET_SIZE(item.ptr()) == 2) {
      po.define_macro.emplace_back(
          std::pair<std::string, std::string>(str_arg(item[0], "define_macro"), str_arg(item[1], "define_macro")));
    } else {
      throw nb::type_error("define_macro: expected 'NAME', ('NAME', 'VALUE') or a list of those");
    }
  };
  if (PyUnicode_Check(v.ptr())) return one(v);
  if (PyTuple_Check(v.ptr()) && PyTuple_GET_SIZE(v.ptr()) == 2 && PyUnicode_Check(PyTuple_GET_ITEM(v.ptr(), 0)) &&
      PyUnicode_Check(PyTuple_GET_ITEM(v.ptr(), 1))) {
    // ("NAME", "VALUE"): one macro with a value (cuda.core's reading of a 2-tuple of str)
    return one(v);
  }
  for (nb::handle item : v) one(item);
}

nb::bytes to_bytes(std::span<const std::byte> s) { return nb::bytes(reinterpret_cast<const char*>(s.data()), s.size()); }

// bytes-like -> span (kept alive by the caller's object); str / PathLike -> path.
template <typename F>
cucore::ObjectCode from_module(nb::handle module, const char* kind, F&& make) {
  PyObject* o = module.ptr();
  if (PyUnicode_Check(o) || PyObject_HasAttrString(o, "__fspath__")) {
    return make(path_arg(module, (std::string("ObjectCode.from_") + kind + ": module").c_str()));
  }
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    throw nb::type_error((std::string("ObjectCode.from_") + kind +
                          ": module must be bytes-like (the code) or a str / PathLike (a file)").c_str());
  }
  struct Release { Py_buffer* v; ~Release() { PyBuffer_Release(v); } } rel{&view};
  return make(std::span<const std::byte>(static_cast<const std::byte*>(view.buf), static_cast<std::size_t>(view.len)));
}

std::map<std::string, std::string> mapping_arg(nb::handle h) {
  std::map<std::string, std::string> m;
  if (h.is_none()) return m;
  if (!PyDict_Check(h.ptr())) raise_type_error("symbol_mapping must be a dict, got " + py_repr(h));
  for (auto [k, v] : nb::borrow<nb::dict>(h)) m[str_arg(k, "symbol_mapping")] = str_arg(v, "symbol_mapping");
  return m;
}

std::string name_arg(nb::handle name) { return str_arg(name, "name"); }

#define CUCORE_FROM(kind)                                                                                   \
  def_static(                                                                                               \
      "from_" #kind,                                                                                        \
      [](nb::handle module, std::string name, nb::handle symbol_mapping) {                                  \
        auto mapping = mapping_arg(symbol_mapping);                                                         \
        return from_module(module, #kind, [&](auto&& src) {                                                 \
          return cucore::ObjectCode::from_##kind(src, name, mapping);                                       \
        });                                                                                                 \
      },                                                                                                    \
      nb::arg("module"), nb::kw_only(), nb::arg("name") = "", nb::arg("symbol_mapping") = nb::none(),     \
      "From the " #kind " itself (bytes-like) or from a file (str or PathLike).")

struct PyKernelAttributes {
  cucore::Kernel kernel;
  int device = -1;  // -1: the current device
  cucore::KernelAttributes get() const { return device < 0 ? kernel.attributes() : kernel.attributes(device); }
};
struct PyKernelOccupancy {
  cucore::Kernel kernel;
  cucore::KernelOccupancy get() const { return kernel.occupancy(); }
};


// Reads the attribute `name` of `o` into `field`, by the field's C++ type (so
// the binding follows the header's choice of types).
void read_field(std::optional<bool>& field, nb::handle o, const char* name) { field = opt_bool(o, name); }
void read_field(std::optional<int>& field, nb::handle o, const char* name) {
  nb::object v = nb::getattr(o, name, nb::none());
  if (!v.is_none()) field = c_int_arg(v, name);
}
void read_field(std::string& field, nb::handle o, const char* name) {
  nb::object v = nb::getattr(o, name, nb::none());
  if (v.is_none()) return;
  if (PyBool_Check(v.ptr())) {  // a switch given where cucore takes a file name: keep the default
    if (v.ptr() == Py_True) throw nb::value_error((std::string(name) + " takes a file name here").c_str());
    return;
  }
  field = opt_str(o, name);
}
void read_field(bool& field, nb::handle o, const char* name) {
  if (auto v = opt_bool(o, name)) field = *v;
}
void read_field(std::vector<std::string>& field, nb::handle o, const char* name) { field = opt_str_list(o, name); }
void read_field(std::vector<int>& field, nb::handle o, const char* name) {
  nb::object v = nb::getattr(o, name, nb::none());
  field.clear();
  if (v.is_none()) return;
  if (PyIndex_Check(v.ptr()) && !PyBool_Check(v.ptr())) {
    field.push_back(c_int_arg(v, name));
    return;
  }
  nb::object items = nb::steal(PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()) ? nullptr : PyObject_GetIter(v.ptr()));
  if (!items.is_valid()) {
    PyErr_Clear();
    raise_type_error(std::string(name) + " must be an int or a sequence of ints, got " + py_repr(v));
  }
  for (nb::handle item : v) field.push_back(c_int_arg(item, std::string(name) + " item"));
}

}  // namespace

cucore::ProgramOptions program_options(nb::handle options) {
  cucore::ProgramOptions po;
  if (options.is_none()) return po;
  nb::object o = options_arg(options, "ProgramOptions");
  nb::object name = nb::getattr(o, "name", nb::none());
  if (!name.is_none()) po.name = opt_str(o, "name");
  read_field(po.arch, o, "arch");
  read_field(po.relocatable_device_code, o, "relocatable_device_code");
  read_field(po.extensible_whole_program, o, "extensible_whole_program");
  read_field(po.debug, o, "debug");
  read_field(po.lineinfo, o, "lineinfo");
  read_field(po.device_code_optimize, o, "device_code_optimize");
  read_field(po.ptxas_options, o, "ptxas_options");
  read_field(po.max_register_count, o, "max_register_count");
  read_field(po.ftz, o, "ftz");
  read_field(po.prec_sqrt, o, "prec_sqrt");
  read_field(po.prec_div, o, "prec_div");
  read_field(po.fma, o, "fma");
  read_field(po.use_fast_math, o, "use_fast_math");
  read_field(po.extra_device_vectorization, o, "extra_device_vectorization");
  read_field(po.link_time_optimization, o, "link_time_optimization");
  read_field(po.gen_opt_lto, o, "gen_opt_lto");
  parse_macros(nb::getattr(o, "define_macro", nb::none()), po);
  read_field(po.undefine_macro, o, "undefine_macro");
  read_field(po.include_path, o, "include_path");
  read_field(po.pre_include, o, "pre_include");
  read_field(po.no_source_include, o, "no_source_include");
  read_field(po.std, o, "std");
  read_field(po.builtin_move_forward, o, "builtin_move_forward");
  read_field(po.builtin_initializer_list, o, "builtin_initializer_list");
  read_field(po.disable_warnings, o, "disable_warnings");
  read_field(po.restrict, o, "restrict");
  read_field(po.device_as_default_execution_space, o, "device_as_default_execution_space");
  read_field(po.device_int128, o, "device_int128");
  read_field(po.device_float128, o, "device_float128");
  read_field(po.optimization_info, o, "optimization_info");
  read_field(po.no_display_error_number, o, "no_display_error_number");
  read_field(po.diag_error, o, "diag_error");
  read_field(po.diag_suppress, o, "diag_suppress");
  read_field(po.diag_warn, o, "diag_warn");
  read_field(po.brief_diagnostics, o, "brief_diagnostics");
  read_field(po.time, o, "time");
  read_field(po.split_compile, o, "split_compile");
  read_field(po.fdevice_syntax_only, o, "fdevice_syntax_only");
  read_field(po.minimal, o, "minimal");
  read_field(po.no_cache, o, "no_cache");
  read_field(po.fdevice_time_trace, o, "fdevice_time_trace");
  read_field(po.frandom_seed, o, "frandom_seed");
  read_field(po.ofast_compile, o, "ofast_compile");
  read_field(po.pch, o, "pch");
  read_field(po.create_pch, o, "create_pch");
  read_field(po.use_pch, o, "use_pch");
  read_field(po.pch_dir, o, "pch_dir");
  read_field(po.pch_verbose, o, "pch_verbose");
  read_field(po.pch_messages, o, "pch_messages");
  read_field(po.instantiate_templates_in_pch, o, "instantiate_templates_in_pch");
  read_field(po.use_toolkit_headers, o, "use_toolkit_headers");
  for (const char* unsupported : {"extra_sources", "use_libdevice", "numba_debug"}) {
    nb::object v = nb::getattr(o, unsupported, nb::none());
    if (!v.is_none() && PyObject_IsTrue(v.ptr()) == 1)
      throw nb::value_error((std::string("ProgramOptions.") + unsupported + " is not supported by cucore").c_str());
  }
  return po;
}

cucore::LinkerOptions linker_options(nb::handle options) {
  cucore::LinkerOptions lo;
  if (options.is_none()) return lo;
  nb::object o = options_arg(options, "LinkerOptions");
  nb::object name = nb::getattr(o, "name", nb::none());
  if (!name.is_none()) lo.name = opt_str(o, "name");
  read_field(lo.arch, o, "arch");
  read_field(lo.max_register_count, o, "max_register_count");
  read_field(lo.time, o, "time");
  read_field(lo.verbose, o, "verbose");
  read_field(lo.link_time_optimization, o, "link_time_optimization");
  read_field(lo.ptx, o, "ptx");
  read_field(lo.optimization_level, o, "optimization_level");
  read_field(lo.debug, o, "debug");
  read_field(lo.lineinfo, o, "lineinfo");
  read_field(lo.ftz, o, "ftz");
  read_field(lo.prec_div, o, "prec_div");
  read_field(lo.prec_sqrt, o, "prec_sqrt");
  read_field(lo.fma, o, "fma");
  read_field(lo.kernels_used, o, "kernels_used");
  read_field(lo.variables_used, o, "variables_used");
  read_field(lo.optimize_unused_variables, o, "optimize_unused_variables");
  read_field(lo.ptxas_options, o, "ptxas_options");
  read_field(lo.split_compile, o, "split_compile");
  read_field(lo.split_compile_extended, o, "split_compile_extended");
  read_field(lo.no_cache, o, "no_cache");
  return lo;
}

std::vector<std::string> name_expressions_arg(nb::handle names) {
  std::vector<std::string> out;
  if (names.is_none()) return out;
  if (PyUnicode_Check(names.ptr()) || PyBytes_Check(names.ptr())) {
    out.push_back(name_arg(names));
    return out;
  }
  for (nb::handle n : names) out.push_back(name_arg(n));
  return out;
}

nb::object object_code_bytes(const cucore::ObjectCode& oc) { return to_bytes(oc.code()); }

std::filesystem::path path_arg(nb::handle v, const char* what) {
  if (!PyUnicode_Check(v.ptr()) && !PyObject_HasAttrString(v.ptr(), "__fspath__"))
    raise_type_error(std::string(what) + " must be a str or os.PathLike, got " + py_repr(v));
  nb::object p = nb::steal(PyOS_FSPath(v.ptr()));
  if (!p.is_valid()) throw nb::python_error();
  if (!PyUnicode_Check(p.ptr()))
    raise_type_error(std::string(what) + " must be a str or os.PathLike giving a str, got " + py_repr(v));
  return std::filesystem::path(nb::cast<std::string>(p));
}

cucore::CodeType code_type_arg(std::string name, const char* what) {
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (auto t = cucore::parse_code_type(name)) return *t;
  throw nb::value_error((std::string(what) + ": '" + name +
                         "' is not a code type (valid: cubin, ptx, ltoir, fatbin, object, library)")
                            .c_str());
}

void bind_program(nb::module_& m) {
  // ---- ObjectCode -----------------------------------------------------------------------
  auto oc = nb::class_<cucore::ObjectCode>(m, "ObjectCode",
      "Compiled code (cubin, PTX, LTO-IR, fatbin, object, library); loaded lazily, once, context-independently.");
  oc.CUCORE_FROM(cubin)
      .CUCORE_FROM(ptx)
      .CUCORE_FROM(ltoir)
      .CUCORE_FROM(fatbin)
      .CUCORE_FROM(object)
      .CUCORE_FROM(library)
      .def_prop_ro("code", [](const cucore::ObjectCode& o) { return to_bytes(o.code()); }, "The code's bytes.")
      .def_prop_ro("code_type", [](const cucore::ObjectCode& o) { return std::string(to_string(o.code_type())); })
      .def_prop_ro("name", &cucore::ObjectCode::name)
      .def_prop_ro("symbol_mapping", &cucore::ObjectCode::symbol_mapping)
      .def_prop_ro("compile_log", &cucore::ObjectCode::compile_log, "The compiler's warnings, if any (cucore extra).")
      .def_prop_ro("is_loaded", &cucore::ObjectCode::is_loaded)
      .def_prop_ro("handle", [](const cucore::ObjectCode& o) {
        return reinterpret_cast<std::uintptr_t>(o.library_handle());
      }, "The CUlibrary as an int (loads on first use).")
      .def("get_kernel", [](const cucore::ObjectCode& o, nb::handle name) { return o.get_kernel(name_arg(name)); },
           nb::arg("name"), "Loads (once) and returns the kernel `name` (a symbol or a name expression).")
      .def("kernel_names", &cucore::ObjectCode::kernel_names)
      .def("__bytes__", [](const cucore::ObjectCode& o) { return to_bytes(o.code()); })
      .def("__eq__", [](const cucore::ObjectCode& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.object_code) &&
               a.state() == nb::inst_ptr<cucore::ObjectCode>(b)->state();
      })
      .def("__hash__", [](const cucore::ObjectCode& o) { return std::hash<void*>()(o.state().get()); })
      .def("__reduce__", [](const cucore::ObjectCode& o) {
        nb::dict mapping;
        for (auto& [k, v] : o.symbol_mapping()) mapping[nb::str(k.c_str())] = nb::str(v.c_str());
        return nb::make_tuple(nb::module_::import_("cucore._options").attr("_object_code_from_bytes"),
                              nb::make_tuple(to_bytes(o.code()), std::string(to_string(o.code_type())), o.name(), mapping));
      })
      .def("__repr__", [](const cucore::ObjectCode& o) {
        return "<ObjectCode " + std::string(to_string(o.code_type())) + " '" + o.name() + "' " + std::to_string(o.code().size()) + " bytes>";
      });
  g_types.object_code = reinterpret_cast<PyTypeObject*>(oc.ptr());
  m.def("_object_code_from_bytes", [](nb::bytes code, std::string code_type, std::string name, nb::handle mapping) {
    const auto* p = reinterpret_cast<const std::byte*>(code.c_str());
    return cucore::ObjectCode::from_bytes(std::vector<std::byte>(p, p + code.size()),
                                          code_type_arg(code_type, "code_type"), name,
                                          mapping_arg(mapping));
  });

  // ---- Kernel ---------------------------------------------------------------------------
  auto ka = nb::class_<PyKernelAttributes>(m, "KernelAttributes",
      "A kernel's attributes on the current device; attributes[device] for another one.");
  ka.def("__getitem__", [](const PyKernelAttributes& a, nb::handle device) {
        int id = PyObject_TypeCheck(device.ptr(), g_types.device) ? nb::inst_ptr<PyDevice>(device)->dev.ordinal()
                                                                   : nb::cast<int>(device);
        return PyKernelAttributes{a.kernel, id};
      })
      .def_prop_ro("max_threads_per_block", [](const PyKernelAttributes& a) { return a.get().max_threads_per_block(); })
      .def_prop_ro("shared_size_bytes", [](const PyKernelAttributes& a) { return a.get().shared_size_bytes(); })
      .def_prop_ro("const_size_bytes", [](const PyKernelAttributes& a) { return a.get().const_size_bytes(); })
      .def_prop_ro("local_size_bytes", [](const PyKernelAttributes& a) { return a.get().local_size_bytes(); })
      .def_prop_ro("num_regs", [](const PyKernelAttributes& a) { return a.get().num_regs(); })
      .def_prop_ro("ptx_version", [](const PyKernelAttributes& a) { return a.get().ptx_version(); })
      .def_prop_ro("binary_version", [](const PyKernelAttributes& a) { return a.get().binary_version(); })
      .def_prop_ro("cache_mode_ca", [](const PyKernelAttributes& a) { return a.get().cache_mode_ca(); })
      .def_prop_rw("max_dynamic_shared_size_bytes",
                   [](const PyKernelAttributes& a) { return a.get().max_dynamic_shared_size_bytes(); },
                   [](const PyKernelAttributes& a, int v) { a.get().set_max_dynamic_shared_size_bytes(v); })
      .def_prop_rw("preferred_shared_memory_carveout",
                   [](const PyKernelAttributes& a) { return a.get().preferred_shared_memory_carveout(); },
                   [](const PyKernelAttributes& a, int v) { a.get().set_preferred_shared_memory_carveout(v); })
      .def_prop_ro("cluster_size_must_be_set", [](const PyKernelAttributes& a) { return a.get().cluster_size_must_be_set(); })
      .def_prop_ro("required_cluster_width", [](const PyKernelAttributes& a) { return a.get().required_cluster_width(); })
      .def_prop_ro("required_cluster_height", [](const PyKernelAttributes& a) { return a.get().required_cluster_height(); })
      .def_prop_ro("required_cluster_depth", [](const PyKernelAttributes& a) { return a.get().required_cluster_depth(); })
      .def_prop_rw("non_portable_cluster_size_allowed",
                   [](const PyKernelAttributes& a) { return a.get().non_portable_cluster_size_allowed(); },
                   [](const PyKernelAttributes& a, bool v) { a.get().set_non_portable_cluster_size_allowed(v); })
      .def_prop_rw("cluster_scheduling_policy_preference",
                   [](const PyKernelAttributes& a) { return a.get().cluster_scheduling_policy_preference(); },
                   [](const PyKernelAttributes& a, int v) { a.get().set_cluster_scheduling_policy_preference(v); });

  auto ko = nb::class_<PyKernelOccupancy>(m, "KernelOccupancy", "Occupancy figures for a kernel on the current device.");
  ko.def("max_active_blocks_per_multiprocessor", [](const PyKernelOccupancy& o, int block_size, std::size_t smem) {
        return o.get().max_active_blocks_per_multiprocessor(block_size, smem);
      }, nb::arg("block_size"), nb::arg("dynamic_shared_memory_size") = 0)
      .def("max_potential_block_size", [](const PyKernelOccupancy& o, nb::handle smem, int limit) {
        cucore::MaxPotentialBlockSize r;
        if (PyCallable_Check(smem.ptr()) && !PyLong_Check(smem.ptr()))
          throw nb::type_error("dynamic_shared_memory_needed: a callable (CUoccupancyB2DSize) is not supported from "
                               "Python; pass an int");
        r = o.get().max_potential_block_size(nb::cast<std::size_t>(smem), limit);
        return options_module().attr("MaxPotentialBlockSizeOccupancyResult")(r.min_grid_size, r.max_block_size);
      }, nb::arg("dynamic_shared_memory_needed") = 0, nb::arg("block_size_limit") = 0)
      .def("available_dynamic_shared_memory_per_block", [](const PyKernelOccupancy& o, int blocks, int block_size) {
        return o.get().available_dynamic_shared_memory_per_block(blocks, block_size);
      }, nb::arg("num_blocks_per_multiprocessor"), nb::arg("block_size"));

  auto kc = nb::class_<cucore::Kernel>(m, "Kernel", "A kernel of a loaded ObjectCode (ObjectCode.get_kernel).");
  kc.def_prop_ro("attributes", [](const cucore::Kernel& k) { return PyKernelAttributes{k, -1}; })
      .def_prop_ro("occupancy", [](const cucore::Kernel& k) { return PyKernelOccupancy{k}; })
      .def_prop_ro("num_arguments", &cucore::Kernel::num_arguments)
      .def_prop_ro("arguments_info", [](const cucore::Kernel& k) {
        nb::object param_info = options_module().attr("ParamInfo");
        nb::list l;
        for (const auto& p : k.arguments_info()) l.append(param_info(p.offset, p.size));
        return l;
      }, "Each parameter's (offset, size) in bytes.")
      .def_prop_ro("handle", [](const cucore::Kernel& k) { return reinterpret_cast<std::uintptr_t>(k.handle()); })
      .def_prop_ro("name", &cucore::Kernel::name)
      .def_prop_ro("mangled_name", &cucore::Kernel::mangled_name)
      .def_static("from_handle", [](nb::handle handle, nb::handle mod) {
        (void)mod;
        return cucore::Kernel::from_handle(reinterpret_cast<CUkernel>(pointer_arg(handle, "handle")));
      }, nb::arg("handle"), nb::arg("mod") = nb::none())
      .def("__eq__", [](const cucore::Kernel& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.kernel) && a == *nb::inst_ptr<cucore::Kernel>(b);
      })
      .def("__hash__", [](const cucore::Kernel& k) { return std::hash<void*>()(k.handle()); })
      .def("__repr__", [](const cucore::Kernel& k) { return "<Kernel " + (k ? k.name() : std::string("(empty)")) + ">"; });
  g_types.kernel = reinterpret_cast<PyTypeObject*>(kc.ptr());

  // ---- Program --------------------------------------------------------------------------
  nb::class_<PyProgram>(m, "Program", "CUDA C++ (NVRTC) or PTX (through the linker) compiled at run time.")
      .def("__init__", [](PyProgram* self, nb::handle code, std::string code_type, nb::handle options) {
        std::string src;
        if (PyUnicode_Check(code.ptr())) src = nb::cast<std::string>(code);
        else if (PyBytes_Check(code.ptr())) src.assign(PyBytes_AsString(code.ptr()), PyBytes_Size(code.ptr()));
        else if (PyByteArray_Check(code.ptr())) src.assign(PyByteArray_AsString(code.ptr()), PyByteArray_Size(code.ptr()));
        else throw nb::type_error("code must be str, bytes or bytearray");
        for (auto& c : code_type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        cucore::ProgramOptions po = program_options(options);
        new (self) PyProgram{cucore::Program(std::move(src), code_type, std::move(po)), false};
      }, nb::arg("code"), nb::arg("code_type") = "c++", nb::arg("options") = nb::none())
      .def("compile", &program_compile, nb::arg("target_type"), nb::arg("name_expressions") = nb::tuple(),
           nb::arg("logs") = nb::none(), nb::kw_only(), nb::arg("cache") = nb::none(),
           "Compiles to 'ptx', 'cubin' or 'ltoir'. With cache= (a cucore cache, or any mapping-like program cache), "
           "a hit returns the stored code with no compiler call.")
      .def_prop_ro("backend", [](const PyProgram& p) { return p.program.backend(); })
      .def_prop_ro("code", [](const PyProgram& p) { return p.program.code(); })
      .def_prop_ro("code_type", [](const PyProgram& p) { return p.program.code_type(); })
      .def_prop_ro("arch", [](const PyProgram& p) { return p.program.options().arch; }, "The resolved arch (cucore extra).")
      .def_prop_ro("nvrtc_flags", [](const PyProgram& p) { return p.program.options().as_nvrtc_flags(); },
                   "The flags NVRTC receives (cucore extra).")
      .def_prop_ro("handle", [](const PyProgram&) { return nb::none(); },
                   "None: cucore creates the NVRTC program per compile() call.")
      .def_prop_ro("is_closed", [](const PyProgram& p) { return p.closed; })
      .def_prop_ro("pch_status", [](const PyProgram&) { return nb::none(); })
      .def("close", [](PyProgram& p) { p.closed = true; })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyProgram& p, nb::args) { p.closed = true; })
      .def("__repr__", [](const PyProgram& p) {
        return "<Program " + p.program.code_type() + " arch=" + p.program.options().arch + ">";
      });

  // ---- Linker ---------------------------------------------------------------------------
  nb::class_<PyLinker>(m, "Linker", "Links ObjectCodes into one cubin (or PTX) with nvJitLink, else the driver's linker.")
      .def("__init__", [](PyLinker* self, nb::args object_codes, nb::handle options) {
        std::vector<cucore::ObjectCode> codes;
        for (nb::handle h : object_codes) {
          if (!PyObject_TypeCheck(h.ptr(), g_types.object_code))
            raise_type_error("Linker: object_codes[" + std::to_string(codes.size()) + "] must be an ObjectCode, got " +
                             py_repr(h));
          codes.push_back(*nb::inst_ptr<cucore::ObjectCode>(h));
        }
        new (self) PyLinker{cucore::Linker(std::move(codes), linker_options(options)), false};
      }, nb::arg("object_codes"), nb::kw_only(), nb::arg("options") = nb::none())
      .def("link", [](PyLinker& l, std::string target) {
        if (l.closed) throw nb::value_error("the linker is closed");
        nb::gil_scoped_release nogil;
        return l.linker.link(code_type_arg(target, "target_type"));
      }, nb::arg("target_type"))
      .def("get_error_log", [](const PyLinker& l) { return l.linker.error_log(); })
      .def("get_info_log", [](const PyLinker& l) { return l.linker.info_log(); })
      .def_prop_ro("backend", [](const PyLinker& l) { return l.linker.backend(); })
      .def_prop_ro("handle", [](const PyLinker&) { return nb::none(); })
      .def_prop_ro("is_closed", [](const PyLinker& l) { return l.closed; })
      .def("close", [](PyLinker& l) { l.closed = true; })
      .def_static("which_backend", []() { return cucore::detail::linker_backend(false); });
}

}  // namespace cucore::python
