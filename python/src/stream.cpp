// cucore.Stream (speaks __cuda_stream__ both ways), cucore.Event, and the
// default streams. Both classes are libcucore's values (cucore::Stream,
// cucore::Event): closing, sharing and a foreign owner's lifetime are theirs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common.hpp"
#include "option_fields.inc"

namespace cucore::python {
namespace {

// Borrowed from the module's attributes.
nb::handle g_legacy_default;
nb::handle g_per_thread_default;
bool g_use_per_thread = false;

// The stream handle an object's __cuda_stream__ gives (cuda.core's protocol:
// a method returning (version 0, handle int); an attribute is accepted too).
// Per launch on a foreign stream: no string made, items read in place.
CUstream foreign_handle(nb::handle obj, const char* what) {
  static PyObject* name = PyUnicode_InternFromString("__cuda_stream__");  // kept for the process
  PyObject* attr = name ? PyObject_GetAttr(obj.ptr(), name) : nullptr;
  if (!attr) {
    PyErr_Clear();
    raise_type_error(std::string(what) + ": expected a cucore.Stream or an object with __cuda_stream__, got " +
                     Py_TYPE(obj.ptr())->tp_name);
  }
  nb::object info = nb::steal(attr);
  if (PyCallable_Check(attr)) {
    info = nb::steal(PyObject_CallNoArgs(attr));
    if (!info.is_valid()) throw nb::python_error();
  }
  PyObject* t = info.ptr();
  const bool sequence = PyTuple_Check(t) || PyList_Check(t);
  if (!sequence || PySequence_Fast_GET_SIZE(t) != 2)
    throw nb::type_error("obj.__cuda_stream__ must return a sequence with 2 elements");
  PyObject* version = PySequence_Fast_GET_ITEM(t, 0);
  if (!PyLong_Check(version) || PyLong_AsLong(version) != 0) {
    PyErr_Clear();  // a version too large for a C long is not 0 either
    throw nb::type_error("the first element of __cuda_stream__() (the protocol version) must be 0");
  }
  return reinterpret_cast<CUstream>(pointer_arg(PySequence_Fast_GET_ITEM(t, 1), "__cuda_stream__()[1]"));
}

// A foreign object's stream, kept alive by the Stream through the object.
cucore::Stream adopt(nb::handle obj, const char* what) {
  return cucore::Stream::from_handle(foreign_handle(obj, what), py_owner(obj));
}

bool is_stream(nb::handle obj) { return PyObject_TypeCheck(obj.ptr(), g_types.stream); }
const cucore::Stream& as_stream(nb::handle obj) { return *nb::inst_ptr<cucore::Stream>(obj); }

// The CUstream as Python sees it: 0 once closed (inspection never raises).
std::uintptr_t handle_int(const cucore::Stream& s) {
  return s.is_closed() ? 0 : reinterpret_cast<std::uintptr_t>(s.handle());
}

// end - start, with cuda.core's errors: RuntimeError saying what is missing
// (timing, a record, completion).
nb::object event_sub(const cucore::Event& end, nb::handle other) {
  if (!PyObject_TypeCheck(other.ptr(), g_types.event)) return nb::borrow(Py_NotImplemented);
  const cucore::Event& start = *nb::inst_ptr<cucore::Event>(other);
  auto runtime_error = [](const char* msg) {
    PyErr_SetString(PyExc_RuntimeError, msg);
    throw nb::python_error();
  };
  if (!start.is_closed() && !end.is_closed() && (!start.is_timing_enabled() || !end.is_timing_enabled()))
    runtime_error("Both Events must be created with timing enabled in order to subtract them; use "
                  "EventOptions(timing_enabled=True) when creating both events.");
  try {
    return nb::float_(cucore::elapsed_time_ms(start, end));
  } catch (const cucore::CudaError& e) {
    if (e.code() == CUDA_ERROR_INVALID_HANDLE)
      runtime_error("Both Events must be recorded before they can be subtracted; use Stream.record() to record both "
                    "events to a stream.");
    if (e.code() == CUDA_ERROR_NOT_READY)
      runtime_error("One or both events have not completed; use Event.sync(), Stream.sync(), or Device.sync() to wait "
                    "for the events to complete before subtracting them.");
    throw;
  }
}

}  // namespace

cucore::StreamRef stream_arg(nb::handle obj, const char* what) {
  if (is_stream(obj)) [[likely]]
    return as_stream(obj);
  return cucore::StreamRef(foreign_handle(obj, what));
}

cucore::StreamRef stream_arg_or_default(nb::handle obj, const char* what) {
  if (!obj.is_valid() || obj.is_none()) return as_stream(default_stream_object());
  return stream_arg(obj, what);
}

StreamArg::StreamArg(nb::handle obj, const char* what) {
  if (!obj.is_valid() || obj.is_none()) {
    stream_ = &as_stream(default_stream_object());
  } else if (is_stream(obj)) [[likely]] {
    stream_ = &as_stream(obj);
  } else {
    adopted_.emplace(adopt(obj, what));
    stream_ = &*adopted_;
  }
}

cucore::StreamRef default_stream_ref() noexcept {
  return g_use_per_thread ? cucore::Stream::per_thread_default() : cucore::Stream::legacy_default();
}

nb::object default_stream_object() { return nb::borrow(g_use_per_thread ? g_per_thread_default : g_legacy_default); }

nb::object wrap_foreign_stream(nb::handle obj) {
  if (is_stream(obj)) return nb::borrow(obj);
  return nb::cast(adopt(obj, "obj"));
}

// Both generated from the option table (option_fields.inc).
cucore::StreamOptions stream_options(nb::handle options) {
  cucore::StreamOptions so;
  if (options.is_none()) return so;
  nb::object o = options_arg(options, "StreamOptions");
#define X(py, cpp) read_option(so.cpp, o, #py);
  CUCORE_STREAM_OPTION_FIELDS(X)
#undef X
  return so;
}

cucore::EventOptions event_options(nb::handle options) {
  cucore::EventOptions eo;
  if (options.is_none()) return eo;
  nb::object o = options_arg(options, "EventOptions");
#define X(py, cpp) read_option(eo.cpp, o, #py);  // blocking_sync is CU_EVENT_BLOCKING_SYNC
  CUCORE_EVENT_OPTION_FIELDS(X)
#undef X
  return eo;
}

void bind_stream(nb::module_& m) {
  const char* env = std::getenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM");
  g_use_per_thread = env && *env && std::strcmp(env, "0") != 0;

  // ---- Event ----------------------------------------------------------------------
  auto ev = nb::class_<cucore::Event>(m, "Event",
      "A marker recorded on a stream (Stream.record / Device.create_event); end - start gives milliseconds. "
      "close() releases it; using it after raises ClosedError.", nb::is_weak_referenceable());
  ev.def("__init__", [](cucore::Event*, nb::args, nb::kwargs) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Event objects cannot be instantiated directly. Please use Stream APIs (record).");
        throw nb::python_error();
      })
      .def_prop_ro("handle", [](const cucore::Event& e) { return bindings_handle(HandleKind::event, e.handle()); },
                 "The CUevent as cuda.core gives it: a cuda.bindings.driver.CUevent where cuda.bindings is installed, "
                 "else an int; 0 once closed.")
      .def_prop_ro("is_timing_enabled", &cucore::Event::is_timing_enabled)
      .def_prop_ro("is_blocking_sync", &cucore::Event::is_sync_busy_waited)
      .def_prop_ro("is_ipc_enabled", &cucore::Event::is_ipc_enabled)
      .def_prop_ro("is_closed", &cucore::Event::is_closed)
      .def_prop_ro("is_done", &cucore::Event::is_done, "All work before the event's record has completed.")
      .def_prop_ro("context", [](const cucore::Event& e) { return wrap_context(e.context()); })
      .def_prop_ro("device", [](const cucore::Event& e) { return device_object(e.context().device_id()); })
      .def("sync", &cucore::Event::sync, nb::call_guard<nb::gil_scoped_release>())
      .def("close", &cucore::Event::close)
      .def("__sub__", &event_sub, nb::arg("other").none(), "Milliseconds from `other` (the start) to this event (the end).")
      // cuda.core: neither `x - event` nor `event -= x` is defined.
      .def("__rsub__", [](const cucore::Event&, nb::handle) { return nb::borrow(Py_NotImplemented); }, nb::arg("other").none())
      .def("__isub__", [](const cucore::Event&, nb::handle) { return nb::borrow(Py_NotImplemented); }, nb::arg("other").none())
      .def("__eq__", [](const cucore::Event& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.event) && nb::inst_ptr<cucore::Event>(b)->handle() == a.handle();
      })
      .def("__hash__", [](const cucore::Event& e) {
        return nb::hash(nb::make_tuple("Event", reinterpret_cast<std::uintptr_t>(e.handle())));
      })
      .def("__repr__", [](const cucore::Event& e) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "<Event handle=0x%llx%s>",
                      static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(e.handle())),
                      e.is_closed() ? " closed" : "");
        return std::string(buf);
      });
  g_types.event = reinterpret_cast<PyTypeObject*>(ev.ptr());

  // ---- Stream -----------------------------------------------------------------------
  auto st = nb::class_<cucore::Stream>(m, "Stream",
      "A CUDA stream: one cucore made (Device.create_stream), or a view of any object with __cuda_stream__ "
      "(PyTorch, CuPy, cuda.core), which the Stream keeps alive. close() releases it (a Buffer freed on the "
      "stream keeps it until then); using it after raises ClosedError.", nb::is_weak_referenceable());
  st.def("__init__", [](cucore::Stream* self, nb::handle obj) {
        if (obj.is_none()) {
          PyErr_SetString(PyExc_RuntimeError,
                          "Stream objects cannot be instantiated directly. Please use Device APIs (create_stream) or "
                          "other Stream APIs (from_handle).");
          throw nb::python_error();
        }
        new (self) cucore::Stream(adopt(obj, "obj"));  // cucore extra: a view of a __cuda_stream__ object
      }, nb::arg("obj") = nb::none())
      .def("__cuda_stream__", [](const cucore::Stream& s) {
        if (s.is_closed()) cucore::detail::throw_closed("Stream", "__cuda_stream__");
        return nb::make_tuple(0, reinterpret_cast<std::uintptr_t>(s.handle()));
      }, "The CUDA stream protocol: (0, the CUstream as an int).")
      .def_prop_ro("handle", [](const cucore::Stream& s) { return bindings_handle(HandleKind::stream, handle_int(s)); },
                   "The CUstream as cuda.core gives it: a cuda.bindings.driver.CUstream where cuda.bindings is "
                   "installed, else an int; 0 once closed.")
      .def_prop_ro("is_closed", &cucore::Stream::is_closed)
      .def_prop_ro("is_nonblocking", &cucore::Stream::is_nonblocking)
      .def_prop_ro("priority", &cucore::Stream::priority)
      .def_prop_ro("device", [](const cucore::Stream& s) { return device_object(s.device().ordinal()); })
      .def_prop_ro("context", [](const cucore::Stream& s) { return wrap_context(s.context()); })
      .def_prop_ro("resources", &cucore::Stream::resources,
                   "Its context's resources: a green context's SMs, else the whole device's.")
      .def_prop_ro("owner", [](const cucore::Stream& s) -> nb::object {
        PyObject* o = py_owner_object(s.owner());
        return o ? nb::borrow(o) : nb::none();
      }, "The object whose __cuda_stream__ this Stream views (None for streams cucore made).")
      .def("sync", &cucore::Stream::sync, nb::call_guard<nb::gil_scoped_release>())
      .def("is_done", &cucore::Stream::is_done)
      .def("record", [](const cucore::Stream& s, nb::handle event, nb::handle options) -> nb::object {
        if (!event.is_none()) {
          if (!PyObject_TypeCheck(event.ptr(), g_types.event)) throw nb::type_error("event must be a cucore.Event");
          s.record(*nb::inst_ptr<cucore::Event>(event));
          return nb::borrow(event);
        }
        return nb::cast(s.record(event_options(options)));
      }, nb::arg("event") = nb::none(), nb::arg("options") = nb::none(),
         "Records `event` (or a new Event made with `options`) here and returns it.")
      .def("wait", [](const cucore::Stream& s, nb::handle event_or_stream) {
        if (PyObject_TypeCheck(event_or_stream.ptr(), g_types.event)) {
          s.wait(*nb::inst_ptr<cucore::Event>(event_or_stream));
          return;
        }
        if (!is_stream(event_or_stream) && !PyObject_HasAttrString(event_or_stream.ptr(), "__cuda_stream__"))
          throw nb::value_error(("only an Event, Stream, or object supporting __cuda_stream__ can be waited, got <class '" +
                                 std::string(Py_TYPE(event_or_stream.ptr())->tp_name) + "'>")
                                    .c_str());
        s.wait(stream_arg(event_or_stream, "event_or_stream"));
      }, nb::arg("event_or_stream"), "Later work here waits for the event (or for all work queued on the stream so far).")
      .def("close", &cucore::Stream::close,
           "Releases the stream (idempotent; the default streams stay open). Work already queued completes.")
      .def_static("from_handle", [](nb::handle handle) {
        // A foreign library's 0 is its NULL stream: taken, as cuda.core does.
        return cucore::Stream::from_handle(reinterpret_cast<CUstream>(handle_arg(handle, HandleKind::stream, "handle")),
                                           {});
      }, nb::arg("handle"),
         "A Stream over a foreign CUstream (an int or a cuda.bindings CUstream); its owner must keep it alive.")
      .def("__eq__", [](const cucore::Stream& a, nb::handle b) {
        return is_stream(b) && handle_int(as_stream(b)) == handle_int(a);
      })
      .def("__hash__", [](const cucore::Stream& s) { return nb::hash(nb::make_tuple("Stream", handle_int(s))); })
      .def("__repr__", [](const cucore::Stream& s) {
        std::uintptr_t ctx = 0;
        if (!s.is_closed()) {
          try {
            ctx = reinterpret_cast<std::uintptr_t>(s.context().handle());
          } catch (const std::exception&) {  // no driver, or a default stream with no context yet
          }
        }
        char buf[96];
        std::snprintf(buf, sizeof buf, "<Stream handle=0x%llx context=0x%llx%s>", (unsigned long long)handle_int(s),
                      (unsigned long long)ctx, s.is_closed() ? " closed" : "");
        return std::string(buf);
      });
  g_types.stream = reinterpret_cast<PyTypeObject*>(st.ptr());

  // Owned by the module's dict; the globals borrow them.
  nb::object legacy = nb::cast(cucore::Stream::from_handle(CU_STREAM_LEGACY));
  nb::object per_thread = nb::cast(cucore::Stream::from_handle(CU_STREAM_PER_THREAD));
  m.attr("LEGACY_DEFAULT_STREAM") = legacy;
  m.attr("PER_THREAD_DEFAULT_STREAM") = per_thread;
  g_legacy_default = legacy;
  g_per_thread_default = per_thread;
  m.def("default_stream", []() { return default_stream_object(); },
        "The default stream: legacy, or per-thread when CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM is set.");
  m.def("elapsed_time_ms", [](const cucore::Event& start, const cucore::Event& end) {
    return cucore::elapsed_time_ms(start, end);
  }, nb::arg("start"), nb::arg("end"));
}

}  // namespace cucore::python
