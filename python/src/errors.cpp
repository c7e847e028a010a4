// cucore's exceptions as Python exception classes, and the translation of
// libcucore's C++ exceptions into them.
//
//   cucore.Error(RuntimeError)                 cucore::Error
//     cucore.CudaError (alias CUDAError)       cucore::CudaError: .code .name .description .call
//       cucore.CompileError (alias NVRTCError) cucore::CompileError: .log (the whole compiler log)
//     cucore.LibraryNotFoundError              .component .searched
//     cucore.FeatureUnavailableError           .feature .requirement (also a NotImplementedError)
//     cucore.ClosedError (also a ValueError)   cucore::ClosedError: .object .operation
//   std::invalid_argument -> ValueError, std::out_of_range -> IndexError (nanobind's defaults)
//   std::bad_cast (nanobind's cast error) -> TypeError, never RuntimeError
#include <exception>
#include <stdexcept>
#include <typeinfo>

#include "common.hpp"

namespace cucore::python {
namespace {

PyObject* g_error = nullptr;
PyObject* g_cuda_error = nullptr;
PyObject* g_compile_error = nullptr;
PyObject* g_library_not_found = nullptr;
PyObject* g_feature_unavailable = nullptr;
PyObject* g_closed = nullptr;

PyObject* new_exception(nb::module_& m, const char* name, PyObject* base, const char* doc) {
  std::string full = std::string("cucore.") + name;
  PyObject* t = PyErr_NewExceptionWithDoc(full.c_str(), doc, base, nullptr);
  if (!t) throw nb::python_error();
  m.attr(name) = nb::borrow(t);
  return t;
}

void set_attr(PyObject* inst, const char* name, nb::handle value) {
  if (PyObject_SetAttrString(inst, name, value.ptr()) != 0) PyErr_Clear();
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

bool translate(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const cucore::CompileError& e) {
    raise_with(g_compile_error, e.what(), [&](PyObject* inst) {
      set_attr(inst, "log", nb::str(e.log().data(), e.log().size()));
      set_attr(inst, "code", nb::none());
      set_attr(inst, "name", nb::none());
      set_attr(inst, "description", nb::none());
      set_attr(inst, "call", nb::none());
    });
  } catch (const cucore::CudaError& e) {
    raise_with(g_cuda_error, e.what(), [&](PyObject* inst) {
      set_attr(inst, "code", nb::int_(static_cast<int>(e.code())));
      set_attr(inst, "name", nb::str(e.name().c_str()));
      set_attr(inst, "description", nb::str(e.description().c_str()));
      set_attr(inst, "call", nb::str(e.call().c_str()));
    });
  } catch (const cucore::LibraryNotFoundError& e) {
    raise_with(g_library_not_found, e.what(), [&](PyObject* inst) {
      set_attr(inst, "component", nb::str(e.component().c_str()));
      nb::list searched;
      for (const auto& s : e.searched()) searched.append(nb::str(s.c_str()));
      set_attr(inst, "searched", searched);
    });
  } catch (const cucore::FeatureUnavailableError& e) {
    raise_with(g_feature_unavailable, e.what(), [&](PyObject* inst) {
      set_attr(inst, "feature", nb::str(e.feature().c_str()));
      set_attr(inst, "requirement", nb::str(e.requirement().c_str()));
    });
  } catch (const cucore::ClosedError& e) {
    raise_with(g_closed, e.what(), [&](PyObject* inst) {
      set_attr(inst, "object", nb::str(e.object().c_str()));
      set_attr(inst, "operation", nb::str(e.operation().c_str()));
    });
  } catch (const cucore::Error& e) {
    PyErr_SetString(g_error, e.what());
  } catch (const std::bad_cast&) {
    // nanobind's cast error: a value of a type the binding did not expect that
    // reached a conversion without its own check (those name the argument).
    PyErr_SetString(PyExc_TypeError, "cucore: a value has a type (or a range) the call cannot take");
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
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

void raise_type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }
void raise_value_error(const std::string& msg) { throw nb::value_error(msg.c_str()); }
void raise_overflow_error(const std::string& msg) {
  PyErr_SetString(PyExc_OverflowError, msg.c_str());
  throw nb::python_error();
}
void raise_cuda_error(const std::string& msg) {
  raise_with(g_cuda_error, msg.c_str(), [](PyObject* inst) {
    for (const char* attr : {"code", "name", "description", "call"}) set_attr(inst, attr, nb::none());
  });
  throw nb::python_error();
}

void bind_errors(nb::module_& m) {
  g_error = new_exception(m, "Error", PyExc_RuntimeError, "Base class of every error cucore raises.");
  g_cuda_error = new_exception(m, "CudaError", g_error,
                               "A CUDA driver call failed. Attributes: code (the CUresult as int), name "
                               "('CUDA_ERROR_OUT_OF_MEMORY'), description, call (the driver function).");
  g_compile_error = new_exception(m, "CompileError", g_cuda_error,
                                  "NVRTC or the linker rejected the input. Attribute log: the whole compiler log.");
  g_library_not_found = new_exception(m, "LibraryNotFoundError", g_error,
                                      "A library cucore needs (libcuda, NVRTC, nvJitLink, NVML) could not be loaded. "
                                      "Attributes: component, searched (every place looked at).");
  // cuda.core raises NotImplementedError where the driver is too old: this is one too.
  nb::object feature_bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_NotImplementedError));
  g_feature_unavailable =
      new_exception(m, "FeatureUnavailableError", feature_bases.ptr(),
                    "The driver or device lacks a feature (also a NotImplementedError, as cuda.core raises). "
                    "Attributes: feature, requirement.");
  // cuda.core raises RuntimeError for a closed object; cucore's C++ error is a
  // std::invalid_argument, so it is a ValueError too.
  nb::object closed_bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_closed = PyErr_NewExceptionWithDoc("cucore.ClosedError",
                                       "An object was used after close() (or was never open). Attributes: object "
                                       "('Stream', 'Event', 'Buffer'), operation.",
                                       closed_bases.ptr(), nullptr);
  if (!g_closed) throw nb::python_error();
  m.attr("ClosedError") = nb::borrow(g_closed);
  m.attr("CUDAError") = nb::borrow(g_cuda_error);     // cuda.core's name
  m.attr("NVRTCError") = nb::borrow(g_compile_error);  // cuda.core's name

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    if (!translate(p)) std::rethrow_exception(p);
  });
}

}  // namespace cucore::python
