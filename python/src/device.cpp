// cucore.Device (a per-thread singleton per GPU), DeviceProperties, Context.
//
// Device(n) is the hot constructor (goal: <= 100 ns). The class's type-call
// slot (tp_vectorcall) is replaced by device_vectorcall, which looks the
// ordinal up in a thread_local table of this thread's Device objects and
// returns it with no allocation, no __new__/__init__ dispatch and no driver
// call. The table's references are owned by a capsule in the thread state's
// dict, so they are released when the Python thread ends.
#include <cucore/resources.hpp>

#include <cstdint>
#include <array>
#include <cstdio>

#include "common.hpp"

namespace cucore::python {

cucore::ContextOptions context_options(nb::handle options);  // green.cpp

namespace {

constexpr int kMaxDevices = 64;

struct ThreadDevices {
  PyObject* devs[kMaxDevices] = {};
  bool registered = false;
};
thread_local ThreadDevices t_devices;

void release_thread_devices(PyObject* capsule) {
  auto* td = static_cast<ThreadDevices*>(PyCapsule_GetPointer(capsule, "cucore.thread_devices"));
  if (!td) {
    PyErr_Clear();
    return;
  }
  for (PyObject*& p : td->devs) Py_CLEAR(p);
  td->registered = false;
}

void register_thread_devices() {
  PyObject* dict = PyThreadState_GetDict();  // borrowed
  if (!dict) return;                         // leak rather than fail
  PyObject* cap = PyCapsule_New(&t_devices, "cucore.thread_devices", release_thread_devices);
  if (!cap) {
    PyErr_Clear();
    return;
  }
  if (PyDict_SetItemString(dict, "cucore.thread_devices", cap) == 0) t_devices.registered = true;
  else PyErr_Clear();
  Py_DECREF(cap);
}

PyObject* lookup_or_create(int ordinal) {
  if (ordinal >= 0 && ordinal < kMaxDevices) {
    if (PyObject* o = t_devices.devs[ordinal]) [[likely]] {
      Py_INCREF(o);
      return o;
    }
  }
  try {
    cucore::Device dev(ordinal);  // throws std::out_of_range naming the count
    nb::object o = nb::cast(PyDevice{dev, {}, {}, {}});
    if (ordinal < kMaxDevices) {
      if (!t_devices.registered) register_thread_devices();
      t_devices.devs[ordinal] = o.inc_ref().ptr();
    }
    return o.release().ptr();
  } catch (const std::out_of_range& e) {
    PyErr_SetString(PyExc_ValueError, e.what());  // cuda.core raises ValueError here
    return nullptr;
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

int ordinal_from(PyObject* arg) {  // -2 on error (Python error set)
  if (PyLong_CheckExact(arg)) {
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(arg, &overflow);
    if (overflow || v < -1 || v > 1 << 20) {
      PyErr_Format(PyExc_ValueError, "device_id must be a device ordinal, got %R", arg);
      return -2;
    }
    if (v == -1) {
      if (PyErr_Occurred()) return -2;
      PyErr_SetString(PyExc_ValueError, "device_id must be >= 0, got -1");
      return -2;
    }
    return static_cast<int>(v);
  }
  if (PyObject_TypeCheck(arg, g_types.device)) return nb::inst_ptr<PyDevice>(arg)->dev.ordinal();
  if (PyBool_Check(arg) || !PyIndex_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "device_id must be an int or a Device, got %.200s", Py_TYPE(arg)->tp_name);
    return -2;
  }
  PyObject* i = PyNumber_Index(arg);
  if (!i) return -2;
  int r = ordinal_from(i);
  Py_DECREF(i);
  return r;
}

PyObject* device_vectorcall(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* arg = nullptr;
  if (nargs == 1 && !kwnames) [[likely]] {
    arg = args[0];
    if (PyLong_CheckExact(arg)) {  // the hot path: Device(0)
      long v = PyLong_AsLong(arg);
      if (v >= 0 && v < kMaxDevices) {
        if (PyObject* o = t_devices.devs[v]) {
          Py_INCREF(o);
          return o;
        }
      }
    }
  } else {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw > 1) {
      PyErr_SetString(PyExc_TypeError, "Device() takes at most one argument (device_id)");
      return nullptr;
    }
    if (nargs == 1) arg = args[0];
    if (nkw == 1) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, 0);
      if (PyUnicode_CompareWithASCIIString(key, "device_id") != 0) {
        PyErr_Format(PyExc_TypeError, "Device() got an unexpected keyword argument %R", key);
        return nullptr;
      }
      arg = args[0];
    }
  }
  int ordinal;
  if (!arg || arg == Py_None) {
    try {
      ordinal = cucore::Device::current().ordinal();
    } catch (...) {
      set_error_from_current_exception();
      return nullptr;
    }
  } else {
    ordinal = ordinal_from(arg);
    if (ordinal == -2) return nullptr;
  }
  return lookup_or_create(ordinal);
}

std::string uuid_string(const std::array<unsigned char, 16>& u) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return buf;
}

nb::object memory_resource_of(PyDevice& d) {
  if (!d.mr.is_valid() || d.mr.is_none()) {
    d.mr = nb::cast(d.dev.memory_resource());
    register_memory_resource_face(d.mr);
  }
  return d.mr;
}

}  // namespace

nb::object device_object(int ordinal) {
  PyObject* o = lookup_or_create(ordinal);
  if (!o) throw nb::python_error();
  return nb::steal(o);
}

nb::object wrap_context(const cucore::Context& ctx) {
  if (!ctx) return nb::none();
  return nb::cast(ctx);
}

void bind_device(nb::module_& m) {
  // ---- DeviceProperties: cuda.core's attribute names, cached in libcucore ----
  auto props = nb::class_<cucore::DeviceProperties>(
      m, "DeviceProperties", "A device's attributes, with cuda.core's names; read once, then cached.");
#define CUCORE_DEVICE_PROPERTY(pyname, suffix, is_bool)                                                   \
  props.def_prop_ro(#pyname, [](const cucore::DeviceProperties& p) -> nb::object {                        \
    int v = p.attribute(CU_DEVICE_ATTRIBUTE_##suffix);                                                    \
    if (is_bool) return nb::bool_(v != 0);                                                                \
    return nb::int_(v);                                                                                   \
  });
#include "device_properties.inc"
#undef CUCORE_DEVICE_PROPERTY
  // cucore extras, named privately: the public names are exactly cuda.core's.
  props.def("_attribute", [](const cucore::DeviceProperties& p, int attr) {
    return p.attribute(static_cast<CUdevice_attribute>(attr));
  }, nb::arg("attribute"), "Any attribute by its CUdevice_attribute number (cucore extra).");
  props.def_prop_ro("_total_memory", &cucore::DeviceProperties::total_memory, "Total memory in bytes (cucore extra).");
  props.def("__init__", [](cucore::DeviceProperties*, nb::args, nb::kwargs) {
    PyErr_SetString(PyExc_RuntimeError, "DeviceProperties cannot be instantiated directly. Please use Device APIs.");
    throw nb::python_error();
  });

  // ---- Context -----------------------------------------------------------------
  nb::class_<cucore::Context>(m, "Context",
                              "A CUDA context: a device's primary context, a green context (Device.create_context), "
                              "or one adopted with from_handle.",
                              nb::is_weak_referenceable())
      .def("__init__", [](cucore::Context*, nb::args, nb::kwargs) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Context objects cannot be instantiated directly. Please use Device or Stream APIs.");
        throw nb::python_error();
      })
      .def_prop_ro("handle", [](const cucore::Context& c) -> nb::object {
        if (!c.handle()) return nb::none();
        return bindings_handle(HandleKind::context, c.handle());
      }, "The CUcontext, as cuda.core gives it: a cuda.bindings.driver.CUcontext where cuda.bindings is installed, "
         "else an int; None once closed.")
      .def_prop_ro("is_green", &cucore::Context::is_green)
      .def_prop_ro("is_primary", &cucore::Context::is_primary)
      .def_prop_ro("is_closed", &cucore::Context::is_closed)
      .def_prop_ro("resources", &cucore::Context::resources,
                   "The resources a green context was made with; the whole device's for any other context.")
      .def_prop_ro("device_id", &cucore::Context::device_id)
      .def_prop_ro("device", [](const cucore::Context& c) { return device_object(c.device_id()); })
      .def("create_stream", [](const cucore::Context& c, nb::handle options) {
        // cuda.core makes streams only in green contexts (a closed one is ClosedError, a RuntimeError, first).
        if (!c.is_closed() && !c.is_green()) {
          PyErr_SetString(PyExc_RuntimeError, "Context.create_stream() is only supported on green contexts. "
                                               "Use Device.create_stream() for primary contexts.");
          throw nb::python_error();
        }
        return c.create_stream(stream_options(options));
      }, nb::arg("options") = nb::none())
      .def("create_event", [](const cucore::Context& c, nb::handle options) {
        return c.create_event(event_options(options));
      }, nb::arg("options") = nb::none())
      .def("sync", &cucore::Context::sync, nb::call_guard<nb::gil_scoped_release>())
      .def("set_current", &cucore::Context::set_current)
      .def("close", &cucore::Context::close,
           "Releases this object's share of the context: a green context is destroyed once no Context, Stream or "
           "Event shares it (primary and adopted contexts never are). RuntimeError while it is current.")
      .def_static("from_handle", [](nb::handle h) {
        return cucore::Context::from_handle(reinterpret_cast<CUcontext>(handle_arg(h, HandleKind::context, "handle")));
      }, nb::arg("handle"))
      .def_static("current", &cucore::Context::current)
      .def("__eq__", [](const cucore::Context& a, nb::handle b) {
        if (!nb::isinstance<cucore::Context>(b)) return false;
        return a == nb::cast<const cucore::Context&>(b);
      })
      .def("__hash__", [](const cucore::Context& c) {
        return nb::hash(nb::make_tuple("Context", reinterpret_cast<std::uintptr_t>(c.handle())));
      })
      .def("__repr__", [](const cucore::Context& c) {
        int device = -1;
        try {
          if (c) device = c.device_id();
        } catch (const std::exception&) {  // an adopted context the driver no longer knows
        }
        char buf[96];
        std::snprintf(buf, sizeof buf, "<Context handle=0x%llx device=%d>",
                      static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(c.handle())), device);
        return std::string(buf);
      });

  // ---- Device --------------------------------------------------------------------
  auto cls = nb::class_<PyDevice>(m, "Device",
      "A GPU; Device(n) is a per-thread singleton (Device(0) is Device(0) in one thread); "
      "Device() is the current device, else device 0. Works in the device's primary context.",
      nb::is_weak_referenceable());
  // Device(...) goes through device_vectorcall (below); this __init__ only
  // serves Device.__new__(Device) + __init__ and gives the stubs a signature.
  cls.def("__init__", [](PyDevice* self, nb::handle device_id) {
        int ordinal = device_id.is_none() ? cucore::Device::current().ordinal() : ordinal_from(device_id.ptr());
        if (ordinal == -2) throw nb::python_error();
        new (self) PyDevice{cucore::Device(ordinal), {}, {}, {}};
      }, nb::arg("device_id") = nb::none())
      .def_prop_ro("device_id", [](const PyDevice& d) { return d.dev.ordinal(); })
      .def("__int__", [](const PyDevice& d) { return d.dev.ordinal(); })
      .def("__index__", [](const PyDevice& d) { return d.dev.ordinal(); })
      .def("__repr__", [](const PyDevice& d) {
        std::string name;
        try { name = d.dev.name(); } catch (...) { name = "?"; }
        return "<Device " + std::to_string(d.dev.ordinal()) + " (" + name + ")>";
      })
      .def("__hash__", [](const PyDevice& d) { return nb::hash(nb::make_tuple("Device", d.dev.ordinal())); })
      .def("__eq__", [](const PyDevice& a, nb::handle b) {
        if (!PyObject_TypeCheck(b.ptr(), g_types.device)) return false;
        return a.dev.ordinal() == nb::inst_ptr<PyDevice>(b)->dev.ordinal();
      })
      .def("__reduce__", [](nb::handle self) {
        return nb::make_tuple(self.type(), nb::make_tuple(nb::inst_ptr<PyDevice>(self)->dev.ordinal()));
      })
      .def("to_system_device", [](const PyDevice& d) {
        // The same GPU as NVML sees it (cucore.system.Device), found by its UUID.
        return nb::module_::import_("cucore.system").attr("Device")(nb::arg("uuid") = uuid_string(d.dev.uuid()));
      })
      .def_prop_ro("pci_bus_id", [](const PyDevice& d) { return d.dev.pci_bus_id(); })
      .def_prop_ro("uuid", [](const PyDevice& d) { return uuid_string(d.dev.uuid()); },
                   "The device's UUID as 'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'.")
      .def_prop_ro("name", [](const PyDevice& d) { return d.dev.name(); })
      .def_prop_ro("properties", [](PyDevice& d) {
        if (!d.props.is_valid()) d.props = nb::cast(d.dev.properties());
        return d.props;
      })
      .def_prop_ro("compute_capability", [](PyDevice& d) {
        if (!d.cc.is_valid()) {
          cucore::ComputeCapability c = d.dev.compute_capability();
          d.cc = options_module().attr("ComputeCapability")(c.major, c.minor);
        }
        return d.cc;
      }, "A named tuple (major, minor).")
      .def_prop_ro("arch", [](const PyDevice& d) { return d.dev.arch(); }, "Compute capability as a string, e.g. '90'.")
      .def_prop_ro("context", [](const PyDevice& d) { return d.dev.context(); })
      .def_prop_rw("memory_resource", [](PyDevice& d) { return memory_resource_of(d); },
                   [](PyDevice& d, nb::handle mr) {
                     if (!PyObject_TypeCheck(mr.ptr(), g_types.memory_resource) && !nb::hasattr(mr, "allocate"))
                       raise_type_error("memory_resource must be a MemoryResource");
                     d.mr = nb::borrow(mr);
                   },
                   "The resource Device.allocate uses (by default the device's memory pool).")
      .def_prop_ro("default_stream", [](const PyDevice&) { return default_stream_object(); })
      .def("set_current", [](PyDevice& d, nb::handle ctx) -> nb::object {
        if (ctx.is_none()) {
          d.dev.set_current();
          return nb::none();
        }
        cucore::Context prev = cucore::Context::current();
        nb::cast<const cucore::Context&>(ctx).set_current();
        return wrap_context(prev);
      }, nb::arg("ctx") = nb::none(),
         "Makes the device's primary context (or `ctx`) current on this thread; with `ctx`, returns the previous one.")
      .def("create_stream", [](PyDevice& d, nb::handle obj, nb::handle options) {
        if (!obj.is_none()) return wrap_foreign_stream(obj);
        return nb::cast(d.dev.create_stream(stream_options(options)));
      }, nb::arg("obj") = nb::none(), nb::arg("options") = nb::none(),
         "A new stream on this device, or (with `obj`) a Stream over any object with __cuda_stream__.")
      .def("create_event", [](PyDevice& d, nb::handle options) {
        return d.dev.create_event(event_options(options));
      }, nb::arg("options") = nb::none())
      .def_prop_ro("resources", [](const PyDevice& d) { return d.dev.resources(); },
                   "The device's resources (resources.sm: its SMs, to split for green contexts).")
      .def("create_context", [](PyDevice& d, nb::handle options) {
        return d.dev.create_context(context_options(options));
      }, nb::arg("options") = nb::none(), "A green context on SM groups of this device (not made current).")
      .def("allocate", [](PyDevice& d, std::size_t size, nb::handle stream) -> nb::object {
        nb::object mr = memory_resource_of(d);
        if (is_native_resource(mr))
          return nb::cast(nb::inst_ptr<cucore::MemoryResource>(mr)->allocate(size, StreamArg(stream).get()));
        return mr.attr("allocate")(size, nb::arg("stream") = stream);
      }, nb::arg("size"), nb::arg("stream") = nb::none(),
         "Allocates `size` bytes from memory_resource, ordered on `stream` (default: the default stream).")
      .def("sync", [](PyDevice& d) { d.dev.sync(); }, nb::call_guard<nb::gil_scoped_release>())
      .def("can_access_peer", [](PyDevice& d, nb::handle peer) {
        int p = ordinal_from(peer.ptr());
        if (p == -2) throw nb::python_error();
        return d.dev.can_access_peer(cucore::Device(p));
      }, nb::arg("peer"))
      .def("create_opaque_array", [](PyDevice& d, nb::handle options) { return create_opaque_array(d.dev, options); },
           nb::arg("options"), "An OpaqueArray (cucore.texture) on this device.")
      .def("create_mipmapped_array", [](PyDevice& d, nb::handle options) {
        return create_mipmapped_array(d.dev, options);
      }, nb::arg("options"), "A MipmappedArray (cucore.texture) on this device.")
      .def("create_texture_object", [](PyDevice& d, nb::handle resource, nb::handle options) {
        return create_texture_object(d.dev, resource, options);
      }, nb::kw_only(), nb::arg("resource").none(), nb::arg("options") = nb::none(),
         "A TextureObject over `resource` (a ResourceDescriptor) with TextureObjectOptions.")
      .def("create_surface_object", [](PyDevice& d, nb::handle resource) {
        return create_surface_object(d.dev, resource);
      }, nb::kw_only(), nb::arg("resource").none(), "A SurfaceObject over an OpaqueArray made with is_surface_load_store.")
      .def_static("get_all_devices", []() {
        int n = cucore::Device::count();
        nb::list l;
        for (int i = 0; i < n; ++i) l.append(device_object(i));
        return nb::tuple(l);
      })
      .def_static("count", &cucore::Device::count);

  g_types.device = reinterpret_cast<PyTypeObject*>(cls.ptr());
  g_types.device->tp_vectorcall = device_vectorcall;
}

}  // namespace cucore::python
