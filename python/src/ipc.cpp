// Sharing memory and events between processes, with cuda.core's names:
// IPCAllocationHandle, IPCBufferDescriptor, IPCEventDescriptor, and the IPC
// members of DeviceMemoryResource / PinnedMemoryResource / Buffer / Event,
// added to those classes here. libcucore owns every lifetime (the mapped
// pools, the shared mappings, the registry, the one descriptor each Buffer
// and Event keeps, the allocation handle each pool caches); this layer
// converts arguments. Pickling and multiprocessing's reducers are in
// cucore/_ipc.py.
#include <nanobind/stl/shared_ptr.h>

#include <cucore/ipc.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>

#include "common.hpp"

namespace cucore::python {
namespace {

std::string type_name_of(nb::handle obj) { return nb::type_name(obj.type()).c_str(); }

nb::handle uuid_class() {
  static nb::object* cls = new nb::object(nb::module_::import_("uuid").attr("UUID"));
  return *cls;
}

nb::object to_py_uuid(const std::optional<cucore::Uuid>& u) {
  if (!u) return nb::none();
  return uuid_class()(nb::arg("bytes") = nb::bytes(reinterpret_cast<const char*>(u->data()), u->size()));
}

// A uuid.UUID, its string, or its 16 bytes.
cucore::Uuid uuid_arg(nb::handle obj, const char* what) {
  nb::object o = nb::borrow(obj);
  if (nb::isinstance(o, uuid_class())) o = o.attr("bytes");
  if (nb::isinstance<nb::str>(o)) return cucore::uuid_from_string(utf8_arg(o, what));
  if (nb::isinstance<nb::bytes>(o) && nb::len(o) == 16) {
    cucore::Uuid u;
    std::memcpy(u.data(), nb::cast<nb::bytes>(o).c_str(), 16);
    return u;
  }
  raise_type_error(std::string(what) + " must be a uuid.UUID, got " + type_name_of(obj));
}

std::optional<cucore::Uuid> optional_uuid(nb::handle obj, const char* what) {
  if (obj.is_none()) return std::nullopt;
  return uuid_arg(obj, what);
}

[[noreturn]] void refuse_direct(const char* cls, const char* apis) {
  throw std::runtime_error(std::string(cls) + " objects cannot be instantiated directly. Please use " + apis +
                           " APIs.");
}

// Members added to a class bound elsewhere (memory.cpp, stream.cpp).
template <typename F, typename... Extra>
void add_method(nb::handle cls, const char* name, F&& f, const Extra&... extra) {
  cls.attr(name) = nb::cpp_function(std::forward<F>(f), nb::is_method(), nb::name(name), nb::scope(cls), extra...);
}
template <typename F>
void add_property(nb::handle cls, const char* name, F&& f, const char* doc) {
  nb::object getter = nb::cpp_function(std::forward<F>(f), nb::is_method(), nb::name(name), nb::scope(cls));
  cls.attr(name) = nb::module_::import_("builtins").attr("property")(getter, nb::none(), nb::none(), doc);
}
template <typename F, typename... Extra>
void add_static(nb::handle cls, const char* name, F&& f, const Extra&... extra) {
  nb::object fn = nb::cpp_function(std::forward<F>(f), nb::name(name), nb::scope(cls), extra...);
  cls.attr(name) = nb::module_::import_("builtins").attr("staticmethod")(fn);
}

// The Python face of a resource the registry or a mapping gave: the object
// already showing that resource while it lives (so `from_registry(u) is mr`,
// as in cuda.core's registry), else a new one.
template <typename T>
nb::object face_of(const T& mr) {
  nb::object fresh = nb::cast(mr);
  register_memory_resource_face(fresh);  // a no-op when an older face lives
  return memory_resource_face(mr);
}

// Maps an allocation handle argument: an IPCAllocationHandle (registered
// under its UUID), or an int file descriptor that stays the caller's.
void check_alloc_handle(nb::handle alloc_handle) {
  if (nb::isinstance<cucore::AllocationHandle>(alloc_handle)) return;
  if (PyBool_Check(alloc_handle.ptr()) || !PyIndex_Check(alloc_handle.ptr()))
    raise_type_error("alloc_handle must be an IPCAllocationHandle or an int (a file descriptor), got " +
                     type_name_of(alloc_handle));
}

template <typename R, typename Map>
nb::object map_handle(nb::handle alloc_handle, Map&& map) {
  check_alloc_handle(alloc_handle);
  if (nb::isinstance<cucore::AllocationHandle>(alloc_handle))
    return face_of<R>(map(nb::cast<const cucore::AllocationHandle&>(alloc_handle)));
  return face_of<R>(map(int_arg(alloc_handle, "alloc_handle")));
}

int device_ordinal(nb::handle d) {
  if (PyObject_TypeCheck(d.ptr(), g_types.device)) return nb::inst_ptr<PyDevice>(d)->dev.ordinal();
  if (PyBool_Check(d.ptr()) || !PyIndex_Check(d.ptr()))
    raise_type_error("device_id must be a Device or an int, got " + type_name_of(d));
  return int_arg(d, "device_id");
}

// `self` as the libcucore object it holds (TypeError for anything else).
template <typename T>
const T& self_as(nb::handle self, PyTypeObject* type, const char* name) {
  if (!PyObject_TypeCheck(self.ptr(), type) || !nb::inst_ready(self))
    raise_type_error(std::string("get_ipc_descriptor needs a ") + name + ", got " + type_name_of(self));
  return *nb::inst_ptr<T>(self);
}

// The descriptor libcucore keeps for the object (made by its first call,
// checked on every call) as Python's: nanobind's instance registry finds the
// Python object already showing that C++ object while it lives, so every call
// gives one object, as cuda.core keeps it on the Buffer or Event. A new
// Python object (holding a share) is made only when none shows it.
template <typename D>
PyObject* to_py(const std::shared_ptr<const D>& d) noexcept {
  return nb::detail::make_caster<std::shared_ptr<const D>>::from_cpp(d, nb::rv_policy::reference, nullptr).ptr();
}

nb::object buffer_descriptor(nb::handle self) {
  PyObject* d = to_py(self_as<cucore::Buffer>(self, g_types.buffer, "Buffer").shared_ipc_descriptor());
  if (!d) throw nb::python_error();
  return nb::steal(d);
}

nb::object event_descriptor(nb::handle self) {
  PyObject* d = to_py(self_as<cucore::Event>(self, g_types.event, "Event").shared_ipc_descriptor());
  if (!d) throw nb::python_error();
  return nb::steal(d);
}

// The ipc_descriptor properties as CPython's own (cuda.core's are): getset
// descriptors whose getter makes the libcucore call and the cast itself, and
// leaves an error (to raise with nanobind's translation) and anything not a
// ready instance to get_ipc_descriptor, kept in these.
nb::object* g_buffer_descriptor_fn = nullptr;
nb::object* g_event_descriptor_fn = nullptr;

template <typename T, typename D>
PyObject* descriptor_get(PyObject* self, PyTypeObject* type, nb::object* fallback) {
  if (PyObject_TypeCheck(self, type) && nb::inst_ready(self)) [[likely]] {
    const std::shared_ptr<const D>* d = nullptr;
    try {
      d = &nb::inst_ptr<T>(self)->shared_ipc_descriptor();
    } catch (...) {
      // closed, not IPC-enabled, a closed pool: raised by the bound function
    }
    if (d) [[likely]]
      return to_py(*d);
  }
  return PyObject_CallOneArg(fallback->ptr(), self);
}

PyObject* buffer_descriptor_get(PyObject* self, void*) {
  return descriptor_get<cucore::Buffer, cucore::IPCBufferDescriptor>(self, g_types.buffer, g_buffer_descriptor_fn);
}

PyObject* event_descriptor_get(PyObject* self, void*) {
  return descriptor_get<cucore::Event, cucore::IPCEventDescriptor>(self, g_types.event, g_event_descriptor_fn);
}

// `def` (static: the descriptor refers to it) as the property `def->name` of `cls`.
void add_getset(nb::handle cls, PyGetSetDef* def) {
  nb::object d = nb::steal(PyDescr_NewGetSet(reinterpret_cast<PyTypeObject*>(cls.ptr()), def));
  if (!d.is_valid()) throw nb::python_error();
  cls.attr(def->name) = d;
}

// IPC members shared by the two pool resources.
template <typename R>
void add_pool_members(nb::handle cls) {
  // The handle is kept in the pool's state (a shared box): one Python object
  // for it while it lives, whichever face of the resource asks.
  add_method(cls, "get_allocation_handle", [](const R& r) { return r.get_allocation_handle(); },
             "Shareable handle for this memory pool (requires IPC).\n\nThe handle can be used to share the memory "
             "pool with other processes. It is cached in this memory resource and owned by it. A mapped resource "
             "gives the handle of the pool it maps.");
  add_property(cls, "allocation_handle", [](const R& r) { return r.get_allocation_handle(); },
               "Shareable handle for this memory pool (requires IPC), cached in this memory resource.");
  add_property(cls, "is_mapped", [](const R& r) { return r.is_mapped(); },
               "Whether this is a mapping of an IPC-enabled memory resource from another process. If True, "
               "allocation is not permitted.");
  add_property(cls, "uuid", [](const R& r) { return to_py_uuid(r.uuid()); },
               "A universally unique identifier for this memory resource (IPC-enabled resources; None otherwise).");
  add_method(cls, "register", [](const R& r, nb::handle uuid) { return face_of<R>(r.register_as(uuid_arg(uuid, "uuid"))); },
             nb::arg("uuid"),
             "Registers this mapped memory resource under `uuid`. Returns it, or the resource registered there "
             "already.");
  add_static(cls, "from_registry", [](nb::handle uuid) { return face_of<R>(R::from_registry(uuid_arg(uuid, "uuid"))); },
             nb::arg("uuid"), "The registered mapped memory resource (RuntimeError when none is registered).");
}

// (MappedResourceError, cuda.core's TypeError for allocating from a mapped
// resource, is errors.cpp's, as every libcucore error class is.)
void translate_ipc_errors() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const std::system_error& e) {
      // A closed or foreign descriptor (EBADF), a broken socket: OSError with its errno.
      PyErr_SetObject(PyExc_OSError, nb::make_tuple(e.code().value(), e.what()).ptr());
    }
  });
}

}  // namespace

void bind_ipc(nb::module_& m) {
  translate_ipc_errors();

  nb::class_<cucore::AllocationHandle>(m, "IPCAllocationHandle",
      "Shareable handle to an IPC-enabled memory pool: an owned file descriptor and the pool's UUID.")
      .def("__init__", [](cucore::AllocationHandle*, nb::args, nb::kwargs) {
        refuse_direct("IPCAllocationHandle", "MemoryResource");
      })
      .def_static("_init", [](long long handle, nb::handle uuid) {
        if (handle < 0 || handle > INT32_MAX)
          raise_value_error("Invalid allocation handle (file descriptor) " + std::to_string(handle));
        auto u = optional_uuid(uuid, "uuid");
        return cucore::AllocationHandle(static_cast<int>(handle), u);
      }, nb::arg("handle"), nb::arg("uuid").none(), "Adopts the file descriptor `handle` (closed with the object).")
      .def("close", &cucore::AllocationHandle::close, "Close the handle.")
      .def_prop_ro("is_closed", &cucore::AllocationHandle::is_closed, "Whether this allocation handle has been closed.")
      .def("__int__", [](nb::handle self) {
        const auto& h = nb::cast<const cucore::AllocationHandle&>(self);
        if (h.is_closed()) {
          char buf[128];
          std::snprintf(buf, sizeof buf, "Cannot convert IPCAllocationHandle to int: the handle (id=%llu) is closed.",
                        static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(self.ptr())));
          raise_value_error(buf);
        }
        return h.fd();
      })
      .def_prop_ro("handle", &cucore::AllocationHandle::fd, "The file descriptor (-1 once closed).")
      .def_prop_ro("uuid", [](const cucore::AllocationHandle& h) { return to_py_uuid(h.uuid()); })
      .def("__repr__", [](const cucore::AllocationHandle& h) {
        return "<IPCAllocationHandle fd=" + std::to_string(h.fd()) + (h.is_closed() ? " closed" : "") + ">";
      });

  nb::class_<cucore::IPCBufferDescriptor>(m, "IPCBufferDescriptor",
      "Serializable object describing a buffer that can be shared between processes. The payload and size come "
      "from the exporting peer: receivers treat them as untrusted and import only through "
      "Buffer.from_ipc_descriptor.")
      .def("__init__", [](cucore::IPCBufferDescriptor*, nb::args, nb::kwargs) {
        refuse_direct("IPCBufferDescriptor", "MemoryResource");
      })
      .def_static("_init", [](nb::bytes reserved, std::size_t size, nb::handle uuid) {
        cucore::IPCBufferDescriptor d;
        if (reserved.size() != d.payload.size())
          raise_value_error("IPCBufferDescriptor: the payload is " + std::to_string(reserved.size()) +
                            " bytes; a pool pointer's export data is " + std::to_string(d.payload.size()) +
                            " bytes");
        std::memcpy(d.payload.data(), reserved.c_str(), d.payload.size());
        d.size = size;
        d.pool_uuid = optional_uuid(uuid, "uuid");
        return d;
      }, nb::arg("reserved"), nb::arg("size"), nb::arg("uuid").none() = nb::none())
      .def_prop_ro("size", [](const cucore::IPCBufferDescriptor& d) { return d.size; })
      .def_prop_ro("_payload", [](const cucore::IPCBufferDescriptor& d) {
        return nb::bytes(reinterpret_cast<const char*>(d.payload.data()), d.payload.size());
      })
      .def_prop_ro("_uuid", [](const cucore::IPCBufferDescriptor& d) { return to_py_uuid(d.pool_uuid); })
      .def("__eq__", [](const cucore::IPCBufferDescriptor& a, nb::handle b) {
        if (!nb::isinstance<cucore::IPCBufferDescriptor>(b)) return false;
        const auto& o = nb::cast<const cucore::IPCBufferDescriptor&>(b);
        return a.payload == o.payload && a.size == o.size;
      })
      .def("__repr__", [](const cucore::IPCBufferDescriptor& d) {
        return "<IPCBufferDescriptor size=" + std::to_string(d.size) + ">";
      });

  nb::class_<cucore::IPCEventDescriptor>(m, "IPCEventDescriptor",
      "Serializable object describing an event that can be shared between processes.")
      .def("__init__", [](cucore::IPCEventDescriptor*, nb::args, nb::kwargs) {
        refuse_direct("IPCEventDescriptor", "Event");
      })
      .def_static("_init", [](nb::bytes reserved, bool uses_blocking_sync) {
        cucore::IPCEventDescriptor d;
        if (reserved.size() != d.handle.size())
          raise_value_error("IPCEventDescriptor: the payload is " + std::to_string(reserved.size()) +
                            " bytes; an event handle is " + std::to_string(d.handle.size()));
        std::memcpy(d.handle.data(), reserved.c_str(), d.handle.size());
        d.blocking_sync = uses_blocking_sync;
        return d;
      }, nb::arg("reserved"), nb::arg("uses_blocking_sync"))
      .def_prop_ro("_reserved", [](const cucore::IPCEventDescriptor& d) {
        return nb::bytes(reinterpret_cast<const char*>(d.handle.data()), d.handle.size());
      })
      .def_prop_ro("_uses_blocking_sync", [](const cucore::IPCEventDescriptor& d) { return d.blocking_sync; })
      .def("__eq__", [](const cucore::IPCEventDescriptor& a, nb::handle b) {
        return nb::isinstance<cucore::IPCEventDescriptor>(b) && a == nb::cast<const cucore::IPCEventDescriptor&>(b);
      });

  // ---- pools ----
  nb::handle dmr = nb::type<cucore::DeviceMemoryResource>();
  add_pool_members<cucore::DeviceMemoryResource>(dmr);
  add_static(dmr, "from_allocation_handle", [](nb::handle device_id, nb::handle alloc_handle) {
    int ordinal = device_ordinal(device_id);
    check_alloc_handle(alloc_handle);  // before the driver is needed
    cucore::Device dev(ordinal);
    return map_handle<cucore::DeviceMemoryResource>(alloc_handle, [&](const auto& h) {
      return cucore::DeviceMemoryResource::from_allocation_handle(dev, h);
    });
  }, nb::arg("device_id"), nb::arg("alloc_handle"),
     "Creates a mapped memory resource from another process's allocation handle (an IPCAllocationHandle, "
     "registered under its UUID, or an int file descriptor, which stays the caller's to close). It imports "
     "buffers and never allocates.");

  nb::handle pmr = nb::type<cucore::PinnedMemoryResource>();
  add_pool_members<cucore::PinnedMemoryResource>(pmr);
  add_static(pmr, "from_allocation_handle", [](nb::handle alloc_handle) {
    return map_handle<cucore::PinnedMemoryResource>(alloc_handle, [](const auto& h) {
      return cucore::PinnedMemoryResource::from_allocation_handle(h);
    });
  }, nb::arg("alloc_handle"), "Creates a mapped pinned memory resource from another process's allocation handle.");

  // ---- buffers ----
  nb::handle buffer = reinterpret_cast<PyObject*>(g_types.buffer);
  const char* buffer_descriptor_doc = "Descriptor for sharing this buffer with other processes.";
  add_method(buffer, "get_ipc_descriptor", &buffer_descriptor, buffer_descriptor_doc);
  g_buffer_descriptor_fn = new nb::object(buffer.attr("get_ipc_descriptor"));
  static PyGetSetDef buffer_getset{"ipc_descriptor", buffer_descriptor_get, nullptr, buffer_descriptor_doc, nullptr};
  add_getset(buffer, &buffer_getset);
  add_property(buffer, "is_mapped", [](const cucore::Buffer& b) { return b.is_mapped(); },
               "Return True if this buffer is mapped into the process via IPC.");
  add_static(buffer, "from_ipc_descriptor", [](nb::handle mr, nb::handle ipc_descriptor, nb::handle stream) {
    if (!nb::isinstance<cucore::DeviceMemoryResource>(mr) && !nb::isinstance<cucore::PinnedMemoryResource>(mr))
      raise_type_error("mr must be a DeviceMemoryResource or PinnedMemoryResource, got " + type_name_of(mr));
    if (!nb::isinstance<cucore::IPCBufferDescriptor>(ipc_descriptor))
      raise_type_error("ipc_descriptor must be an IPCBufferDescriptor, got " + type_name_of(ipc_descriptor));
    cucore::IPCBufferDescriptor d = nb::cast<const cucore::IPCBufferDescriptor&>(ipc_descriptor);
    StreamArg s(stream);
    const auto& r = nb::cast<const cucore::MemoryResource&>(mr);
    nb::gil_scoped_release release;
    return cucore::Buffer::from_ipc_descriptor(r, d, s.get());
  }, nb::arg("mr"), nb::arg("ipc_descriptor"), nb::arg("stream") = nb::none(),
     "Import a buffer that was exported from another process, through `mr` (the mapped memory resource of its "
     "pool); it is freed on `stream` (default: the default stream) once every import of the descriptor has "
     "closed. The descriptor is untrusted: its size is checked against the mapping.");

  // ---- events ----
  nb::handle event = reinterpret_cast<PyObject*>(g_types.event);
  const char* event_descriptor_doc = "Descriptor for sharing this IPC-enabled event with other processes.";
  add_method(event, "get_ipc_descriptor", &event_descriptor, event_descriptor_doc);
  g_event_descriptor_fn = new nb::object(event.attr("get_ipc_descriptor"));
  static PyGetSetDef event_getset{"ipc_descriptor", event_descriptor_get, nullptr, event_descriptor_doc, nullptr};
  add_getset(event, &event_getset);
  add_static(event, "from_ipc_descriptor", [](nb::handle ipc_descriptor) {
    if (!nb::isinstance<cucore::IPCEventDescriptor>(ipc_descriptor))
      raise_type_error("ipc_descriptor must be an IPCEventDescriptor, got " + type_name_of(ipc_descriptor));
    cucore::IPCEventDescriptor d = nb::cast<const cucore::IPCEventDescriptor&>(ipc_descriptor);
    nb::gil_scoped_release release;
    return cucore::Event::from_ipc_descriptor(d);
  }, nb::arg("ipc_descriptor"), "Import an event that was exported from another process (opened in the current context).");
}

}  // namespace cucore::python
