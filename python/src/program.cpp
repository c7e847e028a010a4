// Program / ProgramOptions, Linker / LinkerOptions, ObjectCode, Kernel.
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/linker.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <algorithm>
#include <cstdint>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>
#include <string_view>

#include <nanobind/stl/array.h>
#include <nanobind/stl/map.h>

#include "common.hpp"
#include "program_support.hpp"
#include "option_fields.inc"

namespace cucore::python {
namespace {

std::string py_repr(nb::handle v) { return repr_text(v); }

// A str (or bytes) argument; TypeError naming `what` for anything else.
std::string str_arg(nb::handle v, const std::string& what) {
  if (PyBytes_Check(v.ptr())) return std::string(PyBytes_AsString(v.ptr()), PyBytes_Size(v.ptr()));
  return utf8_arg(v, what);
}

// A collections.abc.Sequence, as cuda.core's is_sequence tests one (str and
// bytes included: cuda.core checks str before asking).
bool is_abc_sequence(nb::handle v) {
  static PyObject* sequence_abc = [] {
    nb::object abc = nb::module_::import_("collections.abc").attr("Sequence");
    return abc.release().ptr();  // kept for the process
  }();
  int r = PyObject_IsInstance(v.ptr(), sequence_abc);
  if (r < 0) throw nb::python_error();
  return r != 0;
}

[[noreturn]] void raise_runtime_error(const std::string& msg) {
  PyErr_SetString(PyExc_RuntimeError, msg.c_str());
  throw nb::python_error();
}

// define_macro: "NAME", ("NAME", "VALUE"), or a sequence of those, read as
// cuda.core reads it: a tuple is one macro and must be two str (a 3-tuple is
// not three macros), and anything else is RuntimeError with cuda.core's text.
void parse_macros(nb::handle v, cucore::ProgramOptions& po) {
  if (v.is_none()) return;
  auto one = [&](nb::handle item) {
    if (PyUnicode_Check(item.ptr())) {
      po.define_macro.emplace_back(utf8_arg(item, "define_macro"));
      return true;
    }
    if (!PyTuple_Check(item.ptr())) return false;
    if (PyTuple_GET_SIZE(item.ptr()) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(item.ptr(), 0)) ||
        !PyUnicode_Check(PyTuple_GET_ITEM(item.ptr(), 1)))
      raise_runtime_error("Expected define_macro tuple[str, str], got " + nb::cast<std::string>(nb::str(item)));
    po.define_macro.emplace_back(std::pair<std::string, std::string>(
        utf8_arg(PyTuple_GET_ITEM(item.ptr(), 0), "define_macro"),
        utf8_arg(PyTuple_GET_ITEM(item.ptr(), 1), "define_macro")));
    return true;
  };
  static const std::string one_type = "Union[str, tuple[str, str]]";
  if (one(v)) return;
  // A sequence with at least one sequence in it (cuda.core's is_nested_sequence).
  bool nested = false;
  if (is_abc_sequence(v))
    for (nb::handle item : v)
      if (is_abc_sequence(item)) nested = true;
  if (!nested)
    raise_runtime_error("Expected define_macro " + one_type + ", list[" + one_type + "], got " +
                        nb::cast<std::string>(nb::str(v)));
  for (nb::handle item : v)
    if (!one(item))
      raise_runtime_error("Expected define_macro " + one_type + ", got " + nb::cast<std::string>(nb::str(item)));
}

nb::bytes to_bytes(std::span<const std::byte> s) { return nb::bytes(reinterpret_cast<const char*>(s.data()), s.size()); }

// bytes-like -> the code, copied; str / PathLike -> a path-backed object that
// reads the file on first use, as cuda.core's.
cucore::ObjectCode from_module(nb::handle module, cucore::CodeType type, const std::string& name,
                               std::map<std::string, std::string> mapping) {
  PyObject* o = module.ptr();
  const std::string what = "ObjectCode.from_" + std::string(to_string(type)) + ": module";
  if (PyUnicode_Check(o) || PyObject_HasAttrString(o, "__fspath__"))
    return cucore::ObjectCode::from_path(type, path_arg(module, what.c_str()), name, std::move(mapping));
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    raise_type_error(what + " must be bytes-like (the code) or a str / PathLike (a file), got " +
                     Py_TYPE(o)->tp_name);
  }
  struct Release { Py_buffer* v; ~Release() { PyBuffer_Release(v); } } rel{&view};
  const auto* b = static_cast<const std::byte*>(view.buf);
  return cucore::ObjectCode::from_bytes(std::vector<std::byte>(b, b + view.len), type, name, std::move(mapping));
}

std::map<std::string, std::string> mapping_arg(nb::handle h) {
  std::map<std::string, std::string> m;
  if (h.is_none()) return m;
  if (!PyDict_Check(h.ptr())) raise_type_error("symbol_mapping must be a dict, got " + py_repr(h));
  for (auto [k, v] : nb::borrow<nb::dict>(h)) m[str_arg(k, "symbol_mapping")] = str_arg(v, "symbol_mapping");
  return m;
}

std::string name_arg(nb::handle name) { return str_arg(name, "name"); }

// A linker's handle as cuda.core gives it: nvJitLink's an int (cuda.bindings has no class for it), the
// driver's a CUlinkState.
nb::object linker_handle(const std::string& backend, std::uintptr_t h) {
  return backend == "nvJitLink" ? nb::int_(h) : bindings_handle(HandleKind::link_state, h);
}

#define CUCORE_FROM(kind)                                                                            \
  def_static(                                                                                        \
      "from_" #kind,                                                                                 \
      [](nb::handle module, nb::handle name, nb::handle symbol_mapping) {                            \
        return from_module(module, cucore::CodeType::kind, name.is_none() ? "" : name_arg(name),    \
                           mapping_arg(symbol_mapping));                                            \
      },                                                                                             \
      nb::arg("module"), nb::kw_only(), nb::arg("name") = "", nb::arg("symbol_mapping") = nb::none(), \
      "From the " #kind " itself (bytes-like) or from a file (str or PathLike, read on first use).")

// A view of a kernel's attributes on one device (-1: the current device, at
// the time of each read); the setters take an explicit device too.
struct PyKernelAttributes {
  cucore::Kernel kernel;
  int device = -1;
};
struct PyKernelOccupancy {
  cucore::Kernel kernel;
};

// A sequence as cuda.core's option handling reads one (is_sequence): a list,
// a tuple, a range, ... but not a str or bytes.
bool is_sequence(nb::handle v) {
  return PySequence_Check(v.ptr()) && !PyUnicode_Check(v.ptr()) && !PyBytes_Check(v.ptr()) &&
         !PyByteArray_Check(v.ptr());
}

bool is_text(nb::handle v) {
  return PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()) || PyObject_HasAttrString(v.ptr(), "__fspath__");
}

// One text value: a str, bytes or os.PathLike as it is; anything else as
// cuda.core renders it into its flag (f"--flag={value}": True -> "True").
// A str UTF-8 cannot encode is UnicodeEncodeError naming `what`, as cuda.core's
// flag.encode() raises.
std::string text_value(nb::handle v, const std::string& what) {
  if (PyUnicode_Check(v.ptr())) return utf8_arg(v, what);
  if (PyBytes_Check(v.ptr())) return std::string(PyBytes_AsString(v.ptr()), PyBytes_Size(v.ptr()));
  if (PyObject_HasAttrString(v.ptr(), "__fspath__")) {
    nb::object p = nb::steal(PyOS_FSPath(v.ptr()));
    if (!p.is_valid()) throw nb::python_error();
    if (PyBytes_Check(p.ptr())) return std::string(PyBytes_AsString(p.ptr()), PyBytes_Size(p.ptr()));
    return utf8_arg(p, what);
  }
  nb::object text = nb::steal(PyObject_Str(v.ptr()));
  if (!text.is_valid()) throw nb::python_error();
  return utf8_arg(text, what);
}

// Reads the value `v` of the field `name` into `field`, by the field's C++
// type (so the binding follows the header's choice of types); None leaves the
// default.
std::optional<bool> truth(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  const int t = PyObject_IsTrue(v.ptr());
  if (t < 0) throw nb::python_error();
  return t != 0;
}
void read_field(std::optional<bool>& field, nb::handle v, const char*) { field = truth(v); }
void read_field(std::optional<int>& field, nb::handle v, const char* name) {
  if (v.is_none()) return;
  // A bool is an int to Python (cuda.core's tests pass split_compile=True).
  field = PyBool_Check(v.ptr()) ? (v.ptr() == Py_True ? 1 : 0) : int_arg(v, name);
}
void read_field(std::string& field, nb::handle v, const char* name) {
  if (!v.is_none()) field = text_value(v, name);
}
void read_field(bool& field, nb::handle v, const char*) {
  if (auto b = truth(v)) field = *b;
}
// A str, bytes or os.PathLike (one entry) or a sequence of them (each entry).
// False passes nothing, as in cuda.core (include_path=False is no include
// path); anything else (5, [None], ...) is TypeError naming the field and the
// entry, where cuda.core would drop it or render "--include-path=None".
void read_field(std::vector<std::string>& field, nb::handle v, const char* name) {
  field.clear();
  if (v.is_none() || v.ptr() == Py_False) return;
  if (is_text(v)) {
    field.push_back(text_value(v, name));
    return;
  }
  if (!is_sequence(v))
    raise_type_error(std::string(name) + " must be a str, bytes, an os.PathLike or a sequence of them, got " +
                     py_repr(v));
  std::size_t i = 0;
  for (nb::handle item : v) {
    const std::string what = std::string(name) + "[" + std::to_string(i++) + "]";
    if (!is_text(item)) raise_type_error(what + " must be a str, bytes or an os.PathLike, got " + py_repr(item));
    field.push_back(text_value(item, what));
  }
}
void read_field(std::vector<int>& field, nb::handle v, const char* name) {
  field.clear();
  if (v.is_none()) return;
  if (PyIndex_Check(v.ptr()) && !PyBool_Check(v.ptr())) {
    field.push_back(int_arg(v, name));
    return;
  }
  if (!is_sequence(v)) raise_type_error(std::string(name) + " must be an int or a sequence of ints, got " + py_repr(v));
  for (nb::handle item : v) field.push_back(int_arg(item, std::string(name) + " item"));
}
// define_macro: "NAME", ("NAME", "VALUE"), or a sequence of those.
void read_field(decltype(cucore::ProgramOptions::define_macro)& field, nb::handle v, const char*) {
  cucore::ProgramOptions po;
  parse_macros(v, po);
  field = std::move(po.define_macro);
}
// extra_sources: ((name, NVVM IR text or bitcode), ...), checked as cuda.core does.
void read_field(decltype(cucore::ProgramOptions::extra_sources)& field, nb::handle v, const char*) {
  field.clear();
  if (v.is_none()) return;
  if (!is_abc_sequence(v))
    raise_type_error("extra_sources must be a sequence of 2-tuples: ((name1, source1), (name2, source2), ...)");
  Py_ssize_t i = 0;
  for (nb::handle module : v) {
    if (!PyTuple_Check(module.ptr()) || PyTuple_GET_SIZE(module.ptr()) != 2)
      raise_type_error("Each extra module must be a 2-tuple (name, source), got " +
                       std::string(Py_TYPE(module.ptr())->tp_name) + " at index " + std::to_string(i));
    nb::handle mname = PyTuple_GET_ITEM(module.ptr(), 0), source = PyTuple_GET_ITEM(module.ptr(), 1);
    if (!PyUnicode_Check(mname.ptr()))
      raise_type_error("Module name at index " + std::to_string(i) + " must be a string, got " +
                       Py_TYPE(mname.ptr())->tp_name);
    const std::string where = "extra_sources[" + std::to_string(i) + "]";
    std::string text;
    if (PyUnicode_Check(source.ptr())) text = utf8_arg(source, where);
    else if (PyBytes_Check(source.ptr())) text.assign(PyBytes_AsString(source.ptr()), PyBytes_Size(source.ptr()));
    else if (PyByteArray_Check(source.ptr()))
      text.assign(PyByteArray_AsString(source.ptr()), PyByteArray_Size(source.ptr()));
    else
      raise_type_error("Module source at index " + std::to_string(i) +
                       " must be str (textual LLVM IR), bytes (textual LLVM IR or bitcode), or bytearray, got " +
                       Py_TYPE(source.ptr())->tp_name);
    const std::string n = utf8_arg(mname, where);
    if (text.empty())
      raise_value_error("Module source for '" + n + "' (index " + std::to_string(i) + ") cannot be empty");
    field.emplace_back(n, std::move(text));
    ++i;
  }
}

#define FIELD_NAME(field, ...) #field,
constexpr std::string_view kProgramFields[] = {CUCORE_PROGRAM_OPTION_FIELDS(FIELD_NAME)};
constexpr std::string_view kLinkerFields[] = {CUCORE_LINKER_OPTION_FIELDS(FIELD_NAME)};
#undef FIELD_NAME

// Where the fields are read from: a dict's items, read as they are (a dict
// is not made into the dataclass first), or an options object's attributes
// (the dataclass, or one options_arg copied a look-alike into).
class FieldSource {
 public:
  FieldSource(nb::handle options, const char* cls_name, std::span<const std::string_view> fields) {
    if (!PyDict_Check(options.ptr())) {
      object_ = options_arg(options, cls_name);
      return;
    }
    dict_ = options;
    // The keys dataclass(**dict) would take: the fields, by name.
    PyObject *key = nullptr, *value = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(options.ptr(), &pos, &key, &value)) {
      if (!PyUnicode_Check(key)) raise_type_error(std::string(cls_name) + ": keywords must be strings");
      Py_ssize_t n = 0;
      const char* k = PyUnicode_AsUTF8AndSize(key, &n);
      if (!k) throw nb::python_error();
      if (std::find(fields.begin(), fields.end(), std::string_view(k, static_cast<std::size_t>(n))) == fields.end())
        raise_type_error(std::string(cls_name) + ".__init__() got an unexpected keyword argument '" +
                         std::string(k, static_cast<std::size_t>(n)) + "'");
    }
  }
  // The field's value; None when absent.
  nb::object operator[](const char* name) const {
    if (dict_.is_valid()) {
      PyObject* v = PyDict_GetItemString(dict_.ptr(), name);  // borrowed
      return v ? nb::borrow(v) : nb::none();
    }
    return nb::getattr(object_, name, nb::none());
  }

 private:
  nb::handle dict_;
  nb::object object_;
};

}  // namespace

// Generated from the option table (options/option_fields.inc): every field,
// by its C++ type.
cucore::ProgramOptions program_options(nb::handle options) {
  cucore::ProgramOptions po;
  if (options.is_none()) return po;
  const FieldSource o(options, "ProgramOptions", kProgramFields);
#define X(field, nvrtc, nvrtc_flag, nvvm, nvvm_flag) read_field(po.field, o[#field], #field);
  CUCORE_PROGRAM_OPTION_FIELDS(X)
#undef X
  return po;
}

bool option_given(nb::handle options, const char* field) {
  if (options.is_none()) return false;
  const FieldSource o(options, "ProgramOptions", kProgramFields);
  return !o[field].is_none();
}

cucore::LinkerOptions linker_options(nb::handle options) {
  cucore::LinkerOptions lo;
  if (options.is_none()) return lo;
  const FieldSource o(options, "LinkerOptions", kLinkerFields);
#define X(field, kind, flag) read_field(lo.field, o[#field], #field);
  CUCORE_LINKER_OPTION_FIELDS(X)
#undef X
  return lo;
}

std::vector<std::string> name_expressions_arg(nb::handle names) {
  std::vector<std::string> out;
  if (names.is_none()) return out;
  if (PyUnicode_Check(names.ptr()) || PyBytes_Check(names.ptr())) {
    out.push_back(str_arg(names, "name_expressions"));
    return out;
  }
  for (nb::handle n : names) out.push_back(str_arg(n, "name_expressions[" + std::to_string(out.size()) + "]"));
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
  return std::filesystem::path(fs_path_arg(p, what));
}

cucore::CodeType code_type_arg(std::string name, const char* what) {
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (auto t = cucore::parse_code_type(name)) return *t;
  throw nb::value_error((std::string(what) + ": '" + name +
                         "' is not a code type (valid: cubin, ptx, ltoir, fatbin, object, library)")
                            .c_str());
}

namespace {

// A device argument (a Device or an ordinal); None: `fallback` (-1: the
// current device). An ordinal with no device is cuda.core's ValueError.
int device_arg(nb::handle device, int fallback) {
  if (device.is_none()) return fallback >= 0 ? fallback : cucore::Device::current().ordinal();
  int id;
  if (PyObject_TypeCheck(device.ptr(), g_types.device)) {
    id = nb::inst_ptr<PyDevice>(device)->dev.ordinal();
  } else {
    if (PyBool_Check(device.ptr()) || !PyIndex_Check(device.ptr()))
      raise_type_error("device_id must be a Device or an int, got " + py_repr(device));
    id = int_arg(device, "device_id");
  }
  (void)device_object(id);  // ValueError for an ordinal with no device
  return id;
}

// cuda.core's types, from cucore.typing (a str subclass: compares equal to the
// plain string).
nb::object typing_value(const char* enum_name, std::string_view value) {
  static nb::module_* typing = new nb::module_(nb::module_::import_("cucore.typing"));
  return typing->attr(enum_name)(nb::str(value.data(), value.size()));
}

std::string lower_str(nb::handle v, const char* what) {
  std::string s = utf8_arg(v, what);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Code a Program takes: str for C++ and PTX; str, bytes or bytearray for NVVM.
std::string program_code(nb::handle code, const std::string& code_type) {
  if (PyUnicode_Check(code.ptr())) return utf8_arg(code, "code");
  if (code_type == "nvvm") {
    if (PyBytes_Check(code.ptr())) return std::string(PyBytes_AsString(code.ptr()), PyBytes_Size(code.ptr()));
    if (PyByteArray_Check(code.ptr()))
      return std::string(PyByteArray_AsString(code.ptr()), PyByteArray_Size(code.ptr()));
    raise_type_error("NVVM IR code must be provided as str, bytes, or bytearray, got " +
                     std::string(Py_TYPE(code.ptr())->tp_name));
  }
  raise_type_error("code must be str for code_type '" + code_type + "', got " + Py_TYPE(code.ptr())->tp_name);
}

nb::list as_bytes_list(const std::vector<std::string>& flags) {
  nb::list out;
  for (const auto& f : flags) out.append(nb::bytes(f.data(), f.size()));
  return out;
}

// ProgramOptions.as_bytes(backend, target_type=None): the flags the backend
// gets, as cuda.core renders them (the arch resolved from the current device
// when unset; NVRTC's with the toolkit's header directories cucore adds).
nb::list program_options_as_bytes(nb::handle options, nb::handle backend, nb::handle target_type) {
  const std::string b = lower_str(backend, "backend");
  cucore::ProgramOptions po = program_options(options);
  if (b != "nvrtc" && b != "nvvm")
    raise_value_error("Unknown backend '" + b + "'. Must be one of: 'nvrtc', 'nvvm'");
  if (po.arch.empty()) po.arch = "sm_" + cucore::Device::current().arch();
  if (b == "nvrtc") return as_bytes_list(po.as_nvrtc_flags());
  if (auto bad = po.unsupported_by_nvvm(); !bad.empty()) {
    std::string list;
    for (const auto& f : bad) list += (list.empty() ? "" : ", ") + f;
    raise_cuda_error("The following options are not supported by NVVM backend: " + list);
  }
  std::optional<cucore::CodeType> target;
  if (!target_type.is_none()) target = code_type_arg(lower_str(target_type, "target_type"), "target_type");
  return as_bytes_list(po.as_nvvm_flags(target));
}

nb::list linker_options_as_bytes(nb::handle options, nb::handle backend) {
  const std::string b = lower_str(backend, "backend");
  if (b != "nvjitlink")
    raise_value_error("as_bytes() only supports 'nvjitlink' backend, got '" + b + "'");
  cucore::LinkerOptions lo = linker_options(options);
  if (lo.arch.empty()) lo.arch = "sm_" + cucore::Device::current().arch();
  return as_bytes_list(lo.as_nvjitlink_flags());
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
  return buf;
}

}  // namespace

void bind_program(nb::module_& m) {
  // ---- ObjectCode -----------------------------------------------------------------------
  auto oc = nb::class_<cucore::ObjectCode>(m, "ObjectCode",
      "Compiled code (cubin, PTX, LTO-IR, fatbin, object, library); loaded lazily, once, context-independently.",
      nb::is_weak_referenceable());
  oc.def("__init__", [](cucore::ObjectCode*, nb::args, nb::kwargs) {
        refuse_init("ObjectCode objects cannot be instantiated directly. Please use ObjectCode APIs (from_cubin, "
                    "from_ptx) or Program APIs (compile).");
      })
      .CUCORE_FROM(cubin)
      .CUCORE_FROM(ptx)
      .CUCORE_FROM(ltoir)
      .CUCORE_FROM(fatbin)
      .CUCORE_FROM(object)
      .CUCORE_FROM(library)
      .def_static("_init", [](nb::handle module, nb::handle code_type, nb::handle name, nb::handle symbol_mapping) {
        return from_module(module, code_type_arg(lower_str(code_type, "code_type"), "code_type"),
                           name.is_none() ? "" : name_arg(name), mapping_arg(symbol_mapping));
      }, nb::arg("module"), nb::arg("code_type"), nb::kw_only(), nb::arg("name") = "",
         nb::arg("symbol_mapping") = nb::none())
      .def_prop_ro("code", [](const cucore::ObjectCode& o) -> nb::object {
        if (!o.source_path().empty()) return nb::str(o.source_path().c_str());
        return to_bytes(o.code());
      }, "The code's bytes, or the path it was made from (as cuda.core).")
      .def_prop_ro("code_type", [](const cucore::ObjectCode& o) { return std::string(to_string(o.code_type())); })
      .def_prop_ro("name", &cucore::ObjectCode::name)
      .def_prop_ro("symbol_mapping", &cucore::ObjectCode::symbol_mapping)
      .def_prop_ro("compile_log", &cucore::ObjectCode::compile_log, "The compiler's warnings, if any (cucore extra).")
      .def_prop_ro("is_loaded", &cucore::ObjectCode::is_loaded)
      .def_prop_ro("handle", [](const cucore::ObjectCode& o) {
        return bindings_handle(HandleKind::library, o.exported_library_handle());
      }, "The CUlibrary (loads on first use), as cuda.core gives it: a cuda.bindings.driver.CUlibrary where "
         "cuda.bindings is installed, else an int. As cuda.core's, the library stays loaded from then on: its holder "
         "may unload it (numba-cuda does).")
      .def("get_module", [](const cucore::ObjectCode& o) {
        return bindings_handle(HandleKind::module, o.get_module());
      }, "The library's CUmodule for the current context (cuLibraryGetModule), for driver calls that take a module: "
         "a cuda.bindings.driver.CUmodule where cuda.bindings is installed, else an int. Loads on first use; the "
         "library stays loaded from then on, as for handle.")
      .def("get_kernel", [](const cucore::ObjectCode& o, nb::handle name) {
        const auto t = o.code_type();
        if (t != cucore::CodeType::cubin && t != cucore::CodeType::ptx && t != cucore::CodeType::fatbin) {
          const std::string msg = "Unsupported code type \"" + std::string(to_string(t)) +
                                  "\" (supported_code_types=('cubin', 'ptx', 'fatbin'))";
          PyErr_SetString(PyExc_RuntimeError, msg.c_str());
          throw nb::python_error();
        }
        return o.get_kernel(name_arg(name));
      }, nb::arg("name"), "Loads (once) and returns the kernel `name` (a symbol or a name expression).")
      .def("kernel_names", &cucore::ObjectCode::kernel_names)
      .def("__bytes__", [](const cucore::ObjectCode& o) { return to_bytes(o.code()); })
      .def("__eq__", [](const cucore::ObjectCode& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.object_code) &&
               a.state() == nb::inst_ptr<cucore::ObjectCode>(b)->state();
      })
      .def("__hash__", [](const cucore::ObjectCode& o) {
        return nb::hash(nb::make_tuple("ObjectCode", reinterpret_cast<std::uintptr_t>(o.state().get())));
      })
      .def("__reduce__", [](const cucore::ObjectCode& o) {
        nb::dict mapping;
        for (auto& [k, v] : o.symbol_mapping()) mapping[nb::str(k.c_str())] = nb::str(v.c_str());
        nb::object module = o.source_path().empty() ? nb::object(to_bytes(o.code()))
                                                    : nb::object(nb::str(o.source_path().c_str()));
        return nb::make_tuple(nb::module_::import_("cucore._options").attr("_object_code_from_bytes"),
                              nb::make_tuple(module, std::string(to_string(o.code_type())), o.name(), mapping));
      })
      .def("__repr__", [](const cucore::ObjectCode& o) {
        // The library only once loaded: repr never loads.
        return "<ObjectCode handle=" + hex(o.is_loaded() ? o.library_handle() : nullptr) + " code_type='" +
               std::string(to_string(o.code_type())) + "'>";
      });
  g_types.object_code = reinterpret_cast<PyTypeObject*>(oc.ptr());
  m.def("_object_code_from_bytes", [](nb::handle module, std::string code_type, nb::handle name, nb::handle mapping) {
    return from_module(module, code_type_arg(code_type, "code_type"), name.is_none() ? "" : name_arg(name),
                       mapping_arg(mapping));
  });

  // ---- Kernel ---------------------------------------------------------------------------
  auto ka = nb::class_<PyKernelAttributes>(m, "KernelAttributes",
      "A kernel's attributes, each a property (as cuda.core 1.x has them) read on the current device, or on the "
      "one attributes[device] (a Device or an ordinal) is bound to.", nb::is_weak_referenceable());
  ka.def("__init__", [](PyKernelAttributes*, nb::args, nb::kwargs) {
        refuse_init("KernelAttributes cannot be instantiated directly. Please use Kernel APIs.");
      })
      .def("__getitem__", [](const PyKernelAttributes& a, nb::handle device) {
        return PyKernelAttributes{a.kernel, device_arg(device, -1)};
      }, nb::arg("device"));
#define CUCORE_KERNEL_ATTRIBUTE(name, type)                                                                   \
  ka.def_prop_ro(#name, [](const PyKernelAttributes& a) {                                                   \
    return static_cast<type>(a.kernel.attributes(device_arg(nb::none(), a.device)).name());                   \
  });
  CUCORE_KERNEL_ATTRIBUTE(max_threads_per_block, int)
  CUCORE_KERNEL_ATTRIBUTE(shared_size_bytes, int)
  CUCORE_KERNEL_ATTRIBUTE(const_size_bytes, int)
  CUCORE_KERNEL_ATTRIBUTE(local_size_bytes, int)
  CUCORE_KERNEL_ATTRIBUTE(num_regs, int)
  CUCORE_KERNEL_ATTRIBUTE(ptx_version, int)
  CUCORE_KERNEL_ATTRIBUTE(binary_version, int)
  CUCORE_KERNEL_ATTRIBUTE(cache_mode_ca, bool)
  CUCORE_KERNEL_ATTRIBUTE(max_dynamic_shared_size_bytes, int)
  CUCORE_KERNEL_ATTRIBUTE(preferred_shared_memory_carveout, int)
  CUCORE_KERNEL_ATTRIBUTE(cluster_size_must_be_set, bool)
  CUCORE_KERNEL_ATTRIBUTE(required_cluster_width, int)
  CUCORE_KERNEL_ATTRIBUTE(required_cluster_height, int)
  CUCORE_KERNEL_ATTRIBUTE(required_cluster_depth, int)
  CUCORE_KERNEL_ATTRIBUTE(non_portable_cluster_size_allowed, bool)
  CUCORE_KERNEL_ATTRIBUTE(cluster_scheduling_policy_preference, int)
#undef CUCORE_KERNEL_ATTRIBUTE
  // cucore extras: the attributes the driver lets a program change.
#define CUCORE_KERNEL_SETTER(name, type)                                                                      \
  ka.def("set_" #name, [](const PyKernelAttributes& a, type value, nb::handle device_id) {                   \
    a.kernel.attributes(device_arg(device_id, a.device)).set_##name(value);                                  \
  }, nb::arg("value"), nb::arg("device_id") = nb::none());
  CUCORE_KERNEL_SETTER(max_dynamic_shared_size_bytes, int)
  CUCORE_KERNEL_SETTER(preferred_shared_memory_carveout, int)
  CUCORE_KERNEL_SETTER(non_portable_cluster_size_allowed, bool)
  CUCORE_KERNEL_SETTER(cluster_scheduling_policy_preference, int)
#undef CUCORE_KERNEL_SETTER

  auto ko = nb::class_<PyKernelOccupancy>(m, "KernelOccupancy", "Occupancy figures for a kernel on the current device.",
                                          nb::is_weak_referenceable());
  ko.def("__init__", [](PyKernelOccupancy*, nb::args, nb::kwargs) {
        refuse_init("KernelOccupancy cannot be instantiated directly. Please use Kernel APIs.");
      })
      .def("max_active_blocks_per_multiprocessor", [](const PyKernelOccupancy& o, int block_size, std::size_t smem) {
        return o.kernel.occupancy().max_active_blocks_per_multiprocessor(block_size, smem);
      }, nb::arg("block_size"), nb::arg("dynamic_shared_memory_size") = 0)
      .def("max_potential_block_size", [](const PyKernelOccupancy& o, nb::handle smem, int limit) {
        cucore::MaxPotentialBlockSize r;
        if (PyLong_Check(smem.ptr()) && !PyBool_Check(smem.ptr())) {
          r = o.kernel.occupancy().max_potential_block_size(
              static_cast<std::size_t>(uint64_arg(smem, "dynamic_shared_memory_needed")), limit);
        } else if (nb::hasattr(smem, "getPtr")) {  // cuda.bindings' CUoccupancyB2DSize: a C function pointer
          auto fn = reinterpret_cast<CUoccupancyB2DSize>(pointer_arg(smem.attr("getPtr")(), "getPtr()"));
          nb::gil_scoped_release nogil;  // the callable must not need the GIL (cuda.core's warning too)
          r = o.kernel.occupancy().max_potential_block_size(fn, limit);
        } else {
          raise_type_error("dynamic_shared_memory_needed expected to have type int, or CUoccupancyB2DSize, got " +
                           py_repr(smem.type()));
        }
        return options_module().attr("MaxPotentialBlockSizeOccupancyResult")(r.min_grid_size, r.max_block_size);
      }, nb::arg("dynamic_shared_memory_needed"), nb::arg("block_size_limit"))
      .def("available_dynamic_shared_memory_per_block", [](const PyKernelOccupancy& o, int blocks, int block_size) {
        return o.kernel.occupancy().available_dynamic_shared_memory_per_block(blocks, block_size);
      }, nb::arg("num_blocks_per_multiprocessor"), nb::arg("block_size"))
      .def("max_potential_cluster_size", [](const PyKernelOccupancy& o, const cucore::LaunchConfig& config,
                                            nb::handle stream) {
        if (stream.is_none()) return o.kernel.occupancy().max_potential_cluster_size(config);
        return o.kernel.occupancy().max_potential_cluster_size(config, stream_arg(stream));
      }, nb::arg("config"), nb::kw_only(), nb::arg("stream") = nb::none())
      .def("max_active_clusters", [](const PyKernelOccupancy& o, const cucore::LaunchConfig& config, nb::handle stream) {
        if (stream.is_none()) return o.kernel.occupancy().max_active_clusters(config);
        return o.kernel.occupancy().max_active_clusters(config, stream_arg(stream));
      }, nb::arg("config"), nb::kw_only(), nb::arg("stream") = nb::none());

  auto kc = nb::class_<cucore::Kernel>(m, "Kernel", "A kernel of a loaded ObjectCode (ObjectCode.get_kernel).",
                                       nb::is_weak_referenceable());
  kc.def("__init__", [](cucore::Kernel*, nb::args, nb::kwargs) {
        refuse_init("Kernel objects cannot be instantiated directly. Please use ObjectCode APIs.");
      })
      .def_prop_ro("attributes", [](const cucore::Kernel& k) { return PyKernelAttributes{k, -1}; })
      .def_prop_ro("occupancy", [](const cucore::Kernel& k) { return PyKernelOccupancy{k}; })
      .def_prop_ro("num_arguments", &cucore::Kernel::num_arguments)
      .def_prop_ro("arguments_info", [](const cucore::Kernel& k) {
        nb::object param_info = options_module().attr("ParamInfo");
        nb::list l;
        for (const auto& p : k.arguments_info()) l.append(param_info(p.offset, p.size));
        return l;
      }, "Each parameter's ParamInfo (offset, size) in bytes.")
      .def_prop_ro("handle", [](const cucore::Kernel& k) { return bindings_handle(HandleKind::kernel, k.handle()); },
                   "The CUkernel as cuda.core gives it: a cuda.bindings.driver.CUkernel where cuda.bindings is "
                   "installed, else an int.")
      .def_prop_ro("name", &cucore::Kernel::name)
      .def_prop_ro("mangled_name", &cucore::Kernel::mangled_name)
      .def_static("from_handle", [](nb::handle handle, nb::handle mod) {
        // cuda.core takes ints only; cucore also a cuda.bindings CUkernel (what Kernel.handle gives).
        if (!PyLong_Check(handle.ptr()) && !is_bindings_handle(handle, HandleKind::kernel))
          raise_type_error(std::string("handle must be an integer, got ") + Py_TYPE(handle.ptr())->tp_name);
        if (!mod.is_none() && !PyObject_TypeCheck(mod.ptr(), g_types.object_code))
          raise_type_error("mod must be an ObjectCode or None, got " + py_repr(mod));
        return cucore::Kernel::from_handle(
            reinterpret_cast<CUkernel>(handle_arg(handle, HandleKind::kernel, "handle")));
      }, nb::arg("handle"), nb::arg("mod") = nb::none())
      .def("__eq__", [](const cucore::Kernel& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.kernel) && a == *nb::inst_ptr<cucore::Kernel>(b);
      })
      .def("__hash__", [](const cucore::Kernel& k) {
        return nb::hash(nb::make_tuple("Kernel", reinterpret_cast<std::uintptr_t>(k.handle())));
      })
      .def("__repr__", [](const cucore::Kernel& k) { return "<Kernel handle=" + hex(k.handle()) + ">"; });
  g_types.kernel = reinterpret_cast<PyTypeObject*>(kc.ptr());

  // ---- Program --------------------------------------------------------------------------
  nb::class_<PyProgram>(m, "Program",
      "Compiles CUDA C++ (NVRTC), NVVM IR (libNVVM) or PTX (through the linker) at run time.",
      nb::is_weak_referenceable())
      .def("__init__", [](PyProgram* self, nb::handle code, nb::handle code_type, nb::handle options) {
        const std::string type = lower_str(code_type, "code_type");
        if (type != "c++" && type != "ptx" && type != "nvvm") {
          const std::string msg =
              "Unsupported code_type='" + type + "' (supported_code_types=('c++', 'ptx', 'nvvm'))";
          PyErr_SetString(PyExc_RuntimeError, msg.c_str());
          throw nb::python_error();
        }
        std::string src = program_code(code, type);
        if (type != "nvvm" && option_given(options, "extra_sources"))  // before its value is read, as cuda.core
          raise_value_error(type == "c++" ? "extra_sources is not supported by the NVRTC backend (C++ code_type)"
                                          : "extra_sources is not supported by the PTX backend.");
        cucore::ProgramOptions po = program_options(options);
        if (type == "nvvm") {
          try {
            (void)cucore::nvvm_version();  // cuda.core checks libNVVM at construction
          } catch (const cucore::LibraryNotFoundError& e) {
            const std::string msg = std::string("NVVM library (libnvvm) is not available: ") + e.what();
            PyErr_SetString(PyExc_RuntimeError, msg.c_str());
            throw nb::python_error();
          }
        }
        new (self) PyProgram{cucore::Program(std::move(src), type, std::move(po))};
      }, nb::arg("code"), nb::arg("code_type") = "c++", nb::arg("options") = nb::none())
      .def("compile", [](PyProgram& p, std::string target, nb::handle names, nb::handle logs, nb::handle cache) {
        // A cucore cache, or a mapping-like one read with get() and written by item.
        if (!cache.is_none() && !nb::isinstance<cucore::ProgramCache>(cache) &&
            !(PyObject_HasAttrString(cache.ptr(), "get") && PyObject_HasAttrString(cache.ptr(), "__setitem__")))
          raise_type_error("Program.compile: cache must be a program cache (a cucore cache, or a mapping with get() "
                           "and item assignment), got " + py_repr(cache));
        return program_compile(p, std::move(target), names, logs, cache);
      }, nb::arg("target_type"), nb::arg("name_expressions") = nb::tuple(),
           nb::arg("logs") = nb::none(), nb::kw_only(), nb::arg("cache") = nb::none(),
           "Compiles to 'ptx', 'cubin' or 'ltoir'. With cache= (a cucore cache, or any mapping-like program cache), "
           "a hit returns the stored code with no compiler call.")
      .def_prop_ro("backend", [](const PyProgram& p) { return typing_value("CompilerBackendType", p.program.backend()); })
      .def_prop_ro("code", [](const PyProgram& p) { return p.program.code(); })
      .def_prop_ro("code_type", [](const PyProgram& p) { return p.program.code_type(); })
      .def_prop_ro("arch", [](const PyProgram& p) { return p.program.options().arch; }, "The resolved arch (cucore extra).")
      .def_prop_ro("nvrtc_flags", [](const PyProgram& p) { return p.program.options().as_nvrtc_flags(); },
                   "The flags NVRTC receives (cucore extra).")
      .def_prop_ro("handle", [](const PyProgram& p) -> nb::object {
        const std::string& type = p.program.code_type();
        const auto h = reinterpret_cast<std::uintptr_t>(p.program.handle());
        // As cuda.core: an nvrtcProgram object for NVRTC, a plain int for NVVM (cuda.bindings has no class for
        // it), and for PTX its linker's handle.
        if (type == "c++") return bindings_handle(HandleKind::nvrtc_program, h);
        if (type == "ptx") return linker_handle(p.program.backend(), h);
        return nb::int_(h);
      }, "The compiler's program, made on first use, as cuda.core gives it: a cuda.bindings.nvrtc.nvrtcProgram "
         "(C++; an int without cuda.bindings), the nvvmProgram as an int (NVVM), or for PTX the handle of the "
         "program's linker (see Linker.handle); 0 once closed.")
      .def_prop_ro("is_closed", [](const PyProgram& p) { return p.program.is_closed(); })
      .def_prop_ro("pch_status", [](const PyProgram& p) -> nb::object {
        auto s = p.program.pch_status();
        if (!s) return nb::none();
        return typing_value("PCHStatusType", to_string(*s));
      }, "What became of the precompiled header the last compile was asked to create, or None.")
      .def("close", [](PyProgram& p) { p.program.close(); })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyProgram& p, nb::args) { p.program.close(); })
      .def_static("_can_load_generated_ptx", &cucore::can_load_generated_ptx)
      .def_static("from_handle", [](nb::handle handle, nb::handle backend) -> nb::object {
        (void)handle;
        const std::string b = PyUnicode_Check(backend.ptr()) ? utf8_arg(backend, "backend") : py_repr(backend);
        if (b != "NVRTC" && b != "NVVM" && b != "nvJitLink" && b != "driver")
          raise_value_error("Unsupported backend '" + b + "' (supported: 'NVRTC', 'NVVM', 'nvJitLink', 'driver')");
        throw nb::type_error("Program.from_handle: cucore compiles from source and cannot adopt a foreign compiler "
                             "program; make a Program from the code");
      }, nb::arg("handle"), nb::arg("backend"))
      .def("__repr__", [](const PyProgram& p) { return "<Program backend='" + p.program.backend() + "'>"; });

  m.def("_program_options_as_bytes", &program_options_as_bytes, nb::arg("options"), nb::arg("backend"),
        nb::arg("target_type") = nb::none());
  m.def("_linker_options_as_bytes", &linker_options_as_bytes, nb::arg("options"), nb::arg("backend"));
  m.def("nvvm_version", &cucore::nvvm_version, "libNVVM's version as (major, minor).");
  m.def("nvvm_ir_version", &cucore::nvvm_ir_version, "The NVVM IR version libNVVM reads (major, minor, dbg major, dbg minor).");

  // ---- Linker ---------------------------------------------------------------------------
  nb::class_<cucore::Linker>(m, "Linker",
                             "Links ObjectCodes into one cubin (or PTX) with nvJitLink, else the driver's linker.",
                             nb::is_weak_referenceable())
      .def("__init__", [](cucore::Linker* self, nb::args object_codes, nb::handle options) {
        std::vector<cucore::ObjectCode> codes;
        for (nb::handle h : object_codes) {
          if (!PyObject_TypeCheck(h.ptr(), g_types.object_code))
            raise_type_error("Linker: object_codes[" + std::to_string(codes.size()) + "] must be an ObjectCode, got " +
                             py_repr(h));
          codes.push_back(*nb::inst_ptr<cucore::ObjectCode>(h));
        }
        new (self) cucore::Linker(std::move(codes), linker_options(options));
      }, nb::arg("object_codes"), nb::kw_only(), nb::arg("options") = nb::none())
      .def("link", [](cucore::Linker& l, nb::handle target) {
        const cucore::CodeType t = code_type_arg(lower_str(target, "target_type"), "target_type");
        nb::gil_scoped_release nogil;
        return l.link(t);
      }, nb::arg("target_type"))
      .def("get_error_log", [](const cucore::Linker& l) { return l.error_log(); })
      .def("get_info_log", [](const cucore::Linker& l) { return l.info_log(); })
      .def_prop_ro("backend", [](const cucore::Linker& l) { return typing_value("CompilerBackendType", l.backend()); })
      .def_prop_ro("handle", [](cucore::Linker& l) {
        return linker_handle(l.backend(), reinterpret_cast<std::uintptr_t>(l.handle()));
      }, "The link state, as cuda.core gives it: the nvJitLinkHandle as an int (backend 'nvJitLink', as "
         "cuda.bindings.nvjitlink takes it) or a cuda.bindings.driver.CUlinkState ('driver'; an int without "
         "cuda.bindings); made on first use with every input added, completed by the next link(), kept until a "
         "later link() makes a new one, or close(); 0 once closed.")
      .def_prop_ro("is_closed", &cucore::Linker::is_closed)
      .def("close", &cucore::Linker::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](cucore::Linker& l, nb::args) { l.close(); })
      .def("__repr__", [](const cucore::Linker& l) { return "<Linker backend='" + l.backend() + "'>"; })
      .def_static("which_backend", []() {
        return typing_value("CompilerBackendType", cucore::detail::linker_backend(false));
      });
}

}  // namespace cucore::python
