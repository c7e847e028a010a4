// cucore's exceptions as Python exception classes, and the translation of
// libcucore's C++ exceptions into them, both from the one list of error
// classes (src/errors/error_classes.inc):
//
//   cucore.Error(RuntimeError)                 cucore::RuntimeError
//     cucore.CudaError (alias CUDAError)       cucore::CudaError: .code .name .description .call
//       cucore.CompileError (alias NVRTCError) cucore::CompileError: .log (the whole compiler log)
//     cucore.LibraryNotFoundError              .component .searched
//     cucore.FeatureUnavailableError           .feature .requirement (also a NotImplementedError)
//     cucore.ClosedError (also a ValueError)   cucore::ClosedError: .object .operation
//   raised as an existing class: checkpoint::StateError -> CudaError, IpcError -> Error,
//   MappedResourceError -> TypeError, detail::FileError -> ValueError, NvmlError ->
//   cucore.system's class of its return code (and NVML's LibraryNotFoundError
//   cucore.system.LibraryNotFoundError)
//   std::invalid_argument -> ValueError, std::out_of_range -> IndexError,
//   std::overflow_error -> OverflowError (nanobind's defaults)
//   std::bad_cast (nanobind's cast error) -> TypeError, never RuntimeError
#include <cucore/checkpoint.hpp>
#include <cucore/ipc.hpp>
#include <cucore/system.hpp>

#include <array>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <typeinfo>
#include <type_traits>

#include "common.hpp"
#include "files/regular_file.hpp"
#include "loader/nvml_types.hpp"

namespace cucore::python {
namespace {

// ---- the table ---------------------------------------------------------------

struct ErrorRow {
  const char* cpp;         // "cucore::ClosedError"
  const char* cpp_base;    // "std::invalid_argument"
  const char* python;      // "cucore.ClosedError", or the class it is raised as
  const char* bases;       // made here when not empty: "Error ValueError"
  const char* aliases;     // "CUDAError"
  const char* attributes;  // "object operation"
  const char* doc;
};

constexpr ErrorRow kRows[] = {
#define CUCORE_ERROR_CLASS(type, base, python, bases, aliases, attributes, sample, doc) \
  {#type, #base, python, bases, aliases, attributes, doc},
#include "errors/error_classes.inc"
#undef CUCORE_ERROR_CLASS
};
constexpr std::size_t kRowCount = std::size(kRows);

// A class made here is cucore.<name> (name_in_cucore below).
constexpr bool made_classes_are_in_cucore() {
  for (const ErrorRow& r : kRows)
    if (*r.bases && std::string_view(r.python).substr(0, 7) != "cucore.") return false;
  return true;
}
static_assert(made_classes_are_in_cucore(), "error_classes.inc: a row with Python bases must name cucore.<class>");

#define CUCORE_ERROR_CLASS(type, base, python, bases, aliases, attributes, sample, doc) \
  static_assert(std::is_base_of_v<base, type>, #type " does not derive from " #base);
#include "errors/error_classes.inc"
#undef CUCORE_ERROR_CLASS

// The Python class of each row: made by bind_errors for rows with bases,
// looked up on first use for the others (a built-in, or a class of
// cucore.system, which is imported after _core).
std::array<PyObject*, kRowCount> g_class{};
PyObject* g_cuda_error = nullptr;  // raise_cuda_error's
PyObject* g_cuda_warning = nullptr;  // cucore.CUDAWarning, kept for the process

std::string_view name_in_cucore(const ErrorRow& row) { return std::string_view(row.python).substr(7); }

PyObject* made_class(std::string_view name) {
  for (std::size_t i = 0; i < kRowCount; ++i)
    if (*kRows[i].bases && name_in_cucore(kRows[i]) == name) return g_class[i];
  return nullptr;
}

PyObject* class_of(std::size_t i) {
  if (!g_class[i]) {
    std::string_view path = kRows[i].python;
    std::size_t dot = path.rfind('.');
    std::string module(path.substr(0, dot)), name(path.substr(dot + 1));
    if (module == "cucore") {
      g_class[i] = made_class(name);
    } else {
      try {
        nb::object cls = nb::module_::import_(module.c_str()).attr(name.c_str());
        g_class[i] = cls.release().ptr();  // kept for the process
      } catch (nb::python_error& e) {
        e.restore();  // raised in place of the C++ error
      }
    }
  }
  return g_class[i];
}

// ---- attributes: what each C++ class carries (the table names them) -----------

void set_attr(PyObject* inst, const char* name, nb::handle value) {
  if (PyObject_SetAttrString(inst, name, value.ptr()) != 0) PyErr_Clear();
}

void set_attributes(PyObject*, const std::exception&) {}
// A failed call of the driver or of NVML: its code, the code's name and text, and the call.
template <typename E>
void set_call_attributes(PyObject* inst, const E& e) {
  set_attr(inst, "code", nb::int_(static_cast<int>(e.code())));
  set_attr(inst, "name", nb::str(e.name().c_str()));
  set_attr(inst, "description", nb::str(e.description().c_str()));
  set_attr(inst, "call", nb::str(e.call().c_str()));
}
void set_attributes(PyObject* inst, const cucore::CudaError& e) { set_call_attributes(inst, e); }
void set_attributes(PyObject* inst, const cucore::NvmlError& e) { set_call_attributes(inst, e); }
void set_attributes(PyObject* inst, const cucore::CompileError& e) {
  set_attr(inst, "log", nb::str(e.log().data(), e.log().size()));
  for (const char* attr : {"code", "name", "description", "call"}) set_attr(inst, attr, nb::none());
}
void set_attributes(PyObject* inst, const cucore::LibraryNotFoundError& e) {
  set_attr(inst, "component", nb::str(e.component().c_str()));
  nb::list searched;
  for (const auto& s : e.searched()) searched.append(nb::str(s.c_str()));
  set_attr(inst, "searched", searched);
  if (e.component() == "nvml") set_attr(inst, "code", nb::int_(detail::nvml::ERROR_LIBRARY_NOT_FOUND));
}
void set_attributes(PyObject* inst, const cucore::FeatureUnavailableError& e) {
  set_attr(inst, "feature", nb::str(e.feature().c_str()));
  set_attr(inst, "requirement", nb::str(e.requirement().c_str()));
}
void set_attributes(PyObject* inst, const cucore::ClosedError& e) {
  set_attr(inst, "object", nb::str(e.object().c_str()));
  set_attr(inst, "operation", nb::str(e.operation().c_str()));
}

// Raises `type(message)` with attributes.
template <typename F>
void raise_with(PyObject* type, const char* message, F&& set_attrs) {
  PyObject* inst = PyObject_CallFunction(type, "s", message);
  if (!inst) return;  // the call's own error stands
  set_attrs(inst);
  PyErr_SetObject(type, inst);
  Py_DECREF(inst);
}

// The class raised for `e`, of row `i`: the row's, except where the value
// picks it. NVML's failures raise cucore.system.exceptions' class of their
// return code, and NVML's missing library cucore.system.LibraryNotFoundError
// (also a cucore.LibraryNotFoundError), as cuda.core.system does.
nb::object class_for(std::size_t i, const std::exception&) { return nb::borrow(class_of(i)); }
nb::object class_for(std::size_t, const cucore::NvmlError& e) {
  return system_exceptions_attr("_exception_for_code")(e.code());
}
nb::object class_for(std::size_t i, const cucore::LibraryNotFoundError& e) {
  return e.component() == "nvml" ? system_exceptions_attr("LibraryNotFoundError") : nb::borrow(class_of(i));
}

// Raises the class of row `i` for `e`, a `T`.
template <typename T>
void raise_row(std::size_t i, const T& e) {
  nb::object type;
  try {
    type = class_for(i, e);
  } catch (nb::python_error& err) {
    err.restore();  // raised in place of the C++ error
    return;
  }
  if (!type.is_valid()) return;  // the lookup's own error stands
  raise_with(type.ptr(), e.what(), [&](PyObject* inst) { set_attributes(inst, e); });
}

template <typename T>
bool raise_if_row(std::size_t i, const std::exception& e) {
  const auto* x = dynamic_cast<const T*>(&e);
  if (!x) return false;
  raise_row(i, *x);
  return true;
}

constexpr bool (*kRaiseIfRow[])(std::size_t, const std::exception&) = {
#define CUCORE_ERROR_CLASS(type, base, python, bases, aliases, attributes, sample, doc) &raise_if_row<type>,
#include "errors/error_classes.inc"
#undef CUCORE_ERROR_CLASS
};

// Raises the most derived row `e` is an instance of: rows come after the rows
// of their bases, so the last row that matches is the one.
bool translate_row(const std::exception& e) {
  for (std::size_t i = kRowCount; i-- > 0;)
    if (kRaiseIfRow[i](i, e)) return true;
  return false;
}

// Throws row `i`'s sample (the test of the table throws every row).
[[noreturn]] void throw_sample(std::size_t i) {
  std::size_t row = 0;
#define CUCORE_ERROR_CLASS(type, base, python, bases, aliases, attributes, sample, doc) \
  if (row++ == i) throw type sample;
#include "errors/error_classes.inc"
#undef CUCORE_ERROR_CLASS
  throw std::out_of_range("_throw_error_sample: no row " + std::to_string(i));
}

bool translate(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const std::bad_cast&) {
    // nanobind's cast error: a value of a type the binding did not expect that
    // reached a conversion without its own check (those name the argument).
    PyErr_SetString(PyExc_TypeError, "cucore: a value has a type (or a range) the call cannot take");
  } catch (const std::exception& e) {
    return translate_row(e);
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace

void set_error_from_current_exception() noexcept {
  std::exception_ptr p = std::current_exception();
  if (!p) {
    PyErr_SetString(PyExc_RuntimeError, "unknown error");
    return;
  }
  if (translate(p)) return;
  try {
    std::rethrow_exception(p);
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const nb::builtin_exception& e) {
    // nanobind's own exceptions (type_error, value_error, ...)
    PyObject* t = PyExc_RuntimeError;
    switch (e.type()) {
      case nb::exception_type::type_error: t = PyExc_TypeError; break;
      case nb::exception_type::value_error: t = PyExc_ValueError; break;
      case nb::exception_type::index_error: t = PyExc_IndexError; break;
      case nb::exception_type::key_error: t = PyExc_KeyError; break;
      case nb::exception_type::buffer_error: t = PyExc_BufferError; break;
      default: break;
    }
    PyErr_SetString(t, e.what());
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::out_of_range& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const std::overflow_error& e) {  // layout arithmetic beyond 64 bits (strided_layout.hpp)
    PyErr_SetString(PyExc_OverflowError, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

void raise_type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }
void refuse_init(const char* message) {
  PyErr_SetString(PyExc_RuntimeError, message);
  throw nb::python_error();
}
void raise_value_error(const std::string& msg) { throw nb::value_error(msg.c_str()); }
void raise_overflow_error(const std::string& msg) {
  PyErr_SetString(PyExc_OverflowError, msg.c_str());
  throw nb::python_error();
}
PyObject* cuda_warning_class() noexcept { return g_cuda_warning; }

void raise_cuda_error(const std::string& msg) {
  raise_with(g_cuda_error, msg.c_str(), [](PyObject* inst) {
    for (const char* attr : {"code", "name", "description", "call"}) set_attr(inst, attr, nb::none());
  });
  throw nb::python_error();
}

nb::object system_exceptions_attr(const char* name) {
  static nb::module_* exceptions = new nb::module_(nb::module_::import_("cucore.system.exceptions"));
  return exceptions->attr(name);
}

void bind_errors(nb::module_& m) {
  // Rows with bases, in order: each class's bases are built-ins or classes of earlier rows.
  nb::module_ builtins = nb::module_::import_("builtins");
  for (std::size_t i = 0; i < kRowCount; ++i) {
    const ErrorRow& row = kRows[i];
    if (!*row.bases) continue;
    nb::list bases;
    for (std::string_view rest = row.bases; !rest.empty();) {
      std::size_t space = rest.find(' ');
      std::string name(rest.substr(0, space));
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
      if (PyObject* made = made_class(name))
        bases.append(nb::handle(made));
      else
        bases.append(builtins.attr(name.c_str()));
    }
    nb::object bases_tuple = nb::tuple(bases);
    PyObject* cls = PyErr_NewExceptionWithDoc(row.python, *row.doc ? row.doc : nullptr, bases_tuple.ptr(), nullptr);
    if (!cls) throw nb::python_error();
    g_class[i] = cls;
    std::string name(name_in_cucore(row));
    m.attr(name.c_str()) = nb::borrow(cls);
    for (std::string_view rest = row.aliases; !rest.empty();) {  // cuda.core's names
      std::size_t space = rest.find(' ');
      m.attr(std::string(rest.substr(0, space)).c_str()) = nb::borrow(cls);
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
  }
  g_cuda_error = made_class("CudaError");

  // cuda.core 1.3's warning category for a CUDA error that cannot be raised.
  g_cuda_warning = PyErr_NewExceptionWithDoc(
      "cucore.CUDAWarning",
      "Warning issued when cucore hits an error it cannot raise: a release that failed in a destructor (a "
      "garbage-collected Stream's cuStreamDestroy, a dropped Buffer's free, ...); the resource may have leaked. "
      "CUDA_ERROR_DEINITIALIZED (the driver shutting down) is not reported. warnings.filterwarnings('error', "
      "category=cucore.CUDAWarning) makes it loud: raised from a destructor, it reaches sys.unraisablehook.",
      PyExc_RuntimeWarning, nullptr);
  if (!g_cuda_warning) throw nb::python_error();
  m.attr("CUDAWarning") = nb::borrow(g_cuda_warning);

  m.def("_error_classes", [] {
    nb::list rows;
    for (const ErrorRow& r : kRows)
      rows.append(nb::make_tuple(r.cpp, r.cpp_base, r.python, r.bases, r.aliases, r.attributes));
    return rows;
  }, "The rows of src/errors/error_classes.inc: (C++ class, C++ base, Python class, Python bases made here, "
     "aliases, attributes).");
  m.def("_throw_error_sample", &throw_sample, nb::arg("row"), "Throws the sample C++ exception of a row (tests).");

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    if (!translate(p)) std::rethrow_exception(p);
  });
}

}  // namespace cucore::python
