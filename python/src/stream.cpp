// cucore.Stream (speaks __cuda_stream__ both ways), cucore.Event, and the
// default streams.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common.hpp"

namespace cucore::python {
namespace {

// Borrowed from the module's attributes.
nb::handle g_legacy_default;
nb::handle g_per_thread_default;
bool g_use_per_thread = false;

// The stream handle an object's __cuda_stream__ gives (cuda.core's protocol:
// a method returning (version 0, handle int); an attribute is accepted too).
CUstream foreign_handle(nb::handle obj, const char* what) {
  PyObject* attr = PyObject_GetAttrString(obj.ptr(), "__cuda_stream__");
  if (!attr) {
    PyErr_Clear();
    raise_type_error(std::string(what) + ": expected a cucore.Stream or an object with __cuda_stream__, got " +
                     Py_TYPE(obj.ptr())->tp_name);
  }
  nb::object info = nb::steal(attr);
  if (PyCallable_Check(attr)) info = info();
  if (!PyTuple_Check(info.ptr()) && !PyList_Check(info.ptr()))
    throw nb::type_error("obj.__cuda_stream__ must return a sequence with 2 elements");
  if (nb::len(info) != 2) throw nb::type_error("obj.__cuda_stream__ must return a sequence with 2 elements");
  nb::object version = info[0];
  if (!PyLong_Check(version.ptr()) || PyLong_AsLong(version.ptr()) != 0)
    throw nb::type_error("the first element of __cuda_stream__() (the protocol version) must be 0");
  return reinterpret_cast<CUstream>(pointer_arg(info[1], "__cuda_stream__()[1]"));
}

nb::object make_builtin(CUstream h) {
  PyStream s;
  s.handle = h;
  s.builtin = true;
  return nb::cast(std::move(s));
}

}  // namespace

cucore::StreamRef PyStream::ref() const {
  if (closed) [[unlikely]]
    throw nb::value_error("the stream is closed");
  return cucore::StreamRef(handle);
}

cucore::StreamRef stream_arg(nb::handle obj, const char* what) {
  if (PyObject_TypeCheck(obj.ptr(), g_types.stream)) [[likely]]
    return nb::inst_ptr<PyStream>(obj)->ref();
  return cucore::StreamRef(foreign_handle(obj, what));
}

cucore::StreamRef default_stream_ref() noexcept {
  return g_use_per_thread ? cucore::Stream::per_thread_default() : cucore::Stream::legacy_default();
}

cucore::StreamRef stream_arg_or_default(nb::handle obj, const char* what) {
  if (!obj.is_valid() || obj.is_none()) return default_stream_ref();
  return stream_arg(obj, what);
}

nb::object default_stream_object() { return nb::borrow(g_use_per_thread ? g_per_thread_default : g_legacy_default); }

nb::object wrap_stream(cucore::Stream&& s, int device_id) {
  PyStream p;
  p.handle = s.handle();
  p.owned.emplace(std::move(s));
  p.device_id = device_id;
  return nb::cast(std::move(p));
}

nb::object wrap_foreign_stream(nb::handle obj) {
  if (PyObject_TypeCheck(obj.ptr(), g_types.stream)) return nb::borrow(obj);
  PyStream p;
  p.handle = foreign_handle(obj, "obj");
  p.owner = nb::borrow(obj);
  return nb::cast(std::move(p));
}

nb::object wrap_event(cucore::Event&& e) { return nb::cast(std::move(e)); }

cucore::StreamOptions stream_options(nb::handle options) {
  cucore::StreamOptions so;
  if (options.is_none()) return so;
  nb::object o = options_arg(options, "StreamOptions");
  if (auto nbk = opt_bool(o, "nonblocking")) so.nonblocking = *nbk;
  if (auto pr = opt_int(o, "priority")) so.priority = static_cast<int>(*pr);
  return so;
}

cucore::EventOptions event_options(nb::handle options) {
  cucore::EventOptions eo;
  if (options.is_none()) return eo;
  nb::object o = options_arg(options, "EventOptions");
  eo.timing_enabled = opt_bool(o, "timing_enabled").value_or(false);
  eo.busy_waited_sync = opt_bool(o, "blocking_sync").value_or(false);  // CU_EVENT_BLOCKING_SYNC
  eo.ipc_enabled = opt_bool(o, "ipc_enabled").value_or(false);
  return eo;
}

void bind_stream(nb::module_& m) {
  const char* env = std::getenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM");
  g_use_per_thread = env && *env && std::strcmp(env, "0") != 0;

  // ---- Event ----------------------------------------------------------------------
  auto ev = nb::class_<cucore::Event>(m, "Event",
      "A marker recorded on a stream (Stream.record / Device.create_event); end - start gives milliseconds.");
  ev.def_prop_ro("handle", [](const cucore::Event& e) { return reinterpret_cast<std::uintptr_t>(e.handle()); })
      .def_prop_ro("is_timing_enabled", &cucore::Event::is_timing_enabled)
      .def_prop_ro("is_blocking_sync", &cucore::Event::is_sync_busy_waited)
      .def_prop_ro("is_ipc_enabled", &cucore::Event::is_ipc_enabled)
      .def_prop_ro("is_closed", [](const cucore::Event& e) { return e.handle() == nullptr; })
      .def_prop_ro("is_done", &cucore::Event::is_done, "All work before the event's record has completed.")
      .def_prop_ro("context", [](const cucore::Event& e) { return wrap_context(e.context()); })
      .def_prop_ro("device", [](const cucore::Event& e) { return device_object(e.context().device_id()); })
      .def("sync", &cucore::Event::sync, nb::call_guard<nb::gil_scoped_release>())
      .def("close", &cucore::Event::close)
      .def("__sub__", [](const cucore::Event& end, nb::handle other) -> nb::object {
        if (!PyObject_TypeCheck(other.ptr(), g_types.event)) return nb::borrow(Py_NotImplemented);
        float ms = cucore::elapsed_time_ms(*nb::inst_ptr<cucore::Event>(other), end);
        return nb::float_(ms);
      }, nb::arg("other").none(), "Milliseconds from `other` (the start) to this event (the end).")
      .def("__eq__", [](const cucore::Event& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.event) && nb::inst_ptr<cucore::Event>(b)->handle() == a.handle();
      })
      .def("__hash__", [](const cucore::Event& e) { return std::hash<void*>()(e.handle()); })
      .def("__repr__", [](const cucore::Event& e) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "<Event handle=%p>", (void*)e.handle());
        return std::string(buf);
      });
  g_types.event = reinterpret_cast<PyTypeObject*>(ev.ptr());

  // ---- Stream -----------------------------------------------------------------------
  auto st = nb::class_<PyStream>(m, "Stream",
      "A CUDA stream: one cucore made (Device.create_stream), or a view of any object with __cuda_stream__ "
      "(PyTorch, CuPy, cuda.core), kept alive by the view.");
  st.def("__init__", [](PyStream* self, nb::handle obj) {
        if (obj.is_none())
          throw nb::type_error("Stream objects are made by Device.create_stream(), Stream.from_handle() or Stream(obj) "
                               "with an object that has __cuda_stream__");
        PyStream p;
        p.handle = foreign_handle(obj, "obj");
        p.owner = nb::borrow(obj);
        new (self) PyStream(std::move(p));
      }, nb::arg("obj") = nb::none())
      .def("__cuda_stream__", [](const PyStream& s) {
        return nb::make_tuple(0, reinterpret_cast<std::uintptr_t>(s.ref().handle()));
      }, "The CUDA stream protocol: (0, the CUstream as an int).")
      .def_prop_ro("handle", [](const PyStream& s) { return reinterpret_cast<std::uintptr_t>(s.ref().handle()); },
                   "The CUstream as an int.")
      .def_prop_ro("is_closed", [](const PyStream& s) { return s.closed; })
      .def_prop_ro("is_nonblocking", [](const PyStream& s) { return s.ref().is_nonblocking(); })
      .def_prop_ro("priority", [](const PyStream& s) { return s.ref().priority(); })
      .def_prop_ro("device", [](const PyStream& s) {
        int id = s.device_id >= 0 ? s.device_id : s.ref().device().ordinal();
        return device_object(id);
      })
      .def_prop_ro("context", [](const PyStream& s) { return wrap_context(s.ref().context()); })
      .def_prop_ro("owner", [](const PyStream& s) { return s.owner; })
      .def("sync", [](const PyStream& s) {
        cucore::StreamRef r = s.ref();
        nb::gil_scoped_release nogil;
        r.sync();
      })
      .def("is_done", [](const PyStream& s) { return s.ref().is_done(); })
      .def("record", [](const PyStream& s, nb::handle event, nb::handle options) -> nb::object {
        cucore::StreamRef r = s.ref();
        if (!event.is_none()) {
          if (!PyObject_TypeCheck(event.ptr(), g_types.event)) throw nb::type_error("event must be a cucore.Event");
          r.record(*nb::inst_ptr<cucore::Event>(event));
          return nb::borrow(event);
        }
        return wrap_event(r.record(event_options(options)));
      }, nb::arg("event") = nb::none(), nb::arg("options") = nb::none(),
         "Records `event` (or a new Event made with `options`) here and returns it.")
      .def("wait", [](const PyStream& s, nb::handle event_or_stream) {
        cucore::StreamRef r = s.ref();
        if (PyObject_TypeCheck(event_or_stream.ptr(), g_types.event)) {
          r.wait(*nb::inst_ptr<cucore::Event>(event_or_stream));
          return;
        }
        r.wait(stream_arg(event_or_stream, "event_or_stream"));
      }, nb::arg("event_or_stream"), "Later work here waits for the event (or for all work queued on the stream so far).")
      .def("close", [](PyStream& s) {
        if (s.builtin) return;
        if (s.owned) s.owned->close();
        s.owned.reset();
        s.owner = nb::object();
        s.closed = true;
      })
      .def_static("from_handle", [](nb::handle handle) {
        PyStream p;
        p.handle = reinterpret_cast<CUstream>(pointer_arg(handle, "handle"));
        return p;
      }, nb::arg("handle"), "A Stream over a foreign CUstream (an int); its owner must keep it alive.")
      .def("__eq__", [](const PyStream& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.stream) && nb::inst_ptr<PyStream>(b)->handle == a.handle;
      })
      .def("__hash__", [](const PyStream& s) { return std::hash<void*>()(s.handle); })
      .def("__repr__", [](const PyStream& s) {
        char buf[80];
        std::snprintf(buf, sizeof buf, "<Stream handle=%p%s>", (void*)s.handle, s.closed ? " closed" : "");
        return std::string(buf);
      });
  g_types.stream = reinterpret_cast<PyTypeObject*>(st.ptr());

  // Owned by the module's dict; the globals borrow them.
  nb::object legacy = make_builtin(CU_STREAM_LEGACY), per_thread = make_builtin(CU_STREAM_PER_THREAD);
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
