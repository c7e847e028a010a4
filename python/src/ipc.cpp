// Sharing memory and events between processes, with cuda.core's names:
// IPCAllocationHandle, IPCBufferDescriptor, IPCEventDescriptor, and the IPC
// members of DeviceMemoryResource / PinnedMemoryResource / Buffer / Event,
// added to those classes here. libcucore owns every lifetime (the mapped
// pools, the shared mappings, the registry); this layer converts arguments.
// Pickling and multiprocessing's reducers are in cucore/_ipc.py.
#include <cucore/ipc.hpp>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "common.hpp"

namespace cucore::python {
namespace {

// A buffer descriptor as Python holds it: the payload as the peer sent it
// (untrusted; checked when imported, as cuda.core does).
struct PyBufferDescriptor {
  std::string payload;
  std::size_t size = 0;
  std::optional<cucore::Uuid> uuid;
};

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

// One descriptor object per live Buffer or Event, as cuda.core keeps it on the
// object: the first get_ipc_descriptor makes it, later calls give the same one
// (a lookup). An entry goes with its object (a weak reference's callback), so
// an object made later at the same address never finds it; it is also made
// anew when the object's handle changed. The lookup, on every call, is an
// open-addressing table keyed by the object's address (a multiplicative hash
// and linear probing: no division, no node to chase); the weak references
// find their entry through a map used only when an entry comes or goes. Used
// under the GIL only; never destroyed (objects may go at interpreter exit).
class DescriptorCache {
 public:
  // The descriptor made for `owner` while it had `handle` (borrowed), else null.
  PyObject* peek(PyObject* owner, std::uintptr_t handle) noexcept {
    const Slot* s = find(owner);
    return s && s->handle == handle ? s->descriptor.ptr() : nullptr;
  }
  // The descriptor made for the Event `owner` while it is open (borrowed),
  // else null. A Python Event holds one event from its making to its close
  // (nothing replaces it), so an open one's entry is its own; its libcucore
  // object, kept in the entry, says whether it is open without a call through
  // nanobind (the entry goes before the object does: a weak reference's
  // callback runs first in its deallocation).
  PyObject* peek_open_event(PyObject* owner) noexcept {
    const Slot* s = find(owner);
    if (!s || !s->object || static_cast<const cucore::Event*>(s->object)->is_closed()) return nullptr;
    return s->descriptor.ptr();
  }

  template <typename Make>
  nb::object get(nb::handle owner, std::uintptr_t handle, Make&& make, const void* object = nullptr) {
    if (const Slot* s = find(owner.ptr()); s && s->handle == handle) [[likely]]
      return s->descriptor;
    nb::object made = make();  // may collect garbage, whose callbacks change the table: look again after
    Slot* s = find(owner.ptr());
    if (!s) {
      if (!forget_.is_valid()) forget_ = nb::cpp_function([this](nb::handle ref) { forget(ref); });
      nb::object ref = nb::steal(PyWeakref_NewRef(owner.ptr(), forget_.ptr()));
      if (!ref.is_valid()) throw nb::python_error();
      owner_of_ref_.emplace(ref.ptr(), owner.ptr());
      s = insert(owner.ptr());
      s->ref = std::move(ref);
    }
    s->descriptor = made;
    s->handle = handle;
    s->object = object;
    return made;
  }

 private:
  struct Slot {
    PyObject* owner = nullptr;  // null: empty
    std::uintptr_t handle = 0;
    const void* object = nullptr;  // an Event's libcucore object (peek_open_event)
    nb::object descriptor, ref;
  };

  std::size_t home(PyObject* owner) const noexcept {
    return static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(owner) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::size_t mask() const noexcept { return slots_.size() - 1; }

  Slot* find(PyObject* owner) noexcept {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = home(owner);; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (s.owner == owner) return &s;
      if (!s.owner) return nullptr;
    }
  }

  // A new, empty entry for `owner` (not in the table); the table is at most half full.
  Slot* insert(PyObject* owner) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    std::size_t i = home(owner);
    while (slots_[i].owner) i = (i + 1) & mask();
    ++used_;
    slots_[i].owner = owner;
    return &slots_[i];
  }

  void grow() {
    std::vector<Slot> old(slots_.empty() ? 16 : 2 * slots_.size());
    old.swap(slots_);
    shift_ = 64 - std::countr_zero(slots_.size());
    for (Slot& s : old) {
      if (!s.owner) continue;
      std::size_t i = home(s.owner);
      while (slots_[i].owner) i = (i + 1) & mask();
      slots_[i] = std::move(s);
    }
  }

  void forget(nb::handle ref) {
    auto o = owner_of_ref_.find(ref.ptr());
    if (o == owner_of_ref_.end()) return;
    PyObject* owner = o->second;
    owner_of_ref_.erase(o);
    std::size_t i = home(owner);
    while (slots_[i].owner != owner) i = (i + 1) & mask();
    Slot gone = std::move(slots_[i]);  // dropped after the table is consistent
    // Backward-shift deletion: entries after the hole that would no longer be
    // found past it move into it.
    for (std::size_t j = (i + 1) & mask(); slots_[j].owner; j = (j + 1) & mask()) {
      std::size_t k = home(slots_[j].owner);
      if (((j - k) & mask()) >= ((j - i) & mask())) {
        slots_[i] = std::move(slots_[j]);
        i = j;
      }
    }
    slots_[i] = Slot{};
    --used_;
  }

  std::vector<Slot> slots_;  // a power of two in size, at most half used
  std::size_t used_ = 0;
  int shift_ = 64;
  std::unordered_map<PyObject*, PyObject*> owner_of_ref_;
  nb::object forget_;  // the weak references' callback
};

DescriptorCache& descriptor_cache() {
  static auto* c = new DescriptorCache;
  return *c;
}

// `self` as the libcucore object it holds (TypeError for anything else).
template <typename T>
const T& self_as(nb::handle self, PyTypeObject* type, const char* name) {
  if (!PyObject_TypeCheck(self.ptr(), type) || !nb::inst_ready(self))
    raise_type_error(std::string("get_ipc_descriptor needs a ") + name + ", got " + type_name_of(self));
  return *nb::inst_ptr<T>(self);
}

// A buffer's descriptor: libcucore's checks every time (closed, not
// IPC-enabled, a closed pool), then the object made once.
nb::object buffer_descriptor(nb::handle self) {
  const auto& b = self_as<cucore::Buffer>(self, g_types.buffer, "Buffer");
  cucore::IPCBufferDescriptor d = b.ipc_descriptor();
  return descriptor_cache().get(self, static_cast<std::uintptr_t>(b.handle()), [&] {
    return nb::cast(PyBufferDescriptor{
        std::string(reinterpret_cast<const char*>(d.payload.data()), d.payload.size()), d.size, d.pool_uuid});
  });
}

// An event's descriptor, once made, stays valid while its handle does (a
// closed Event has none, which no entry matches): a hit needs no other check.
nb::object event_descriptor(nb::handle self) {
  const auto& e = self_as<cucore::Event>(self, g_types.event, "Event");
  return descriptor_cache().get(self, reinterpret_cast<std::uintptr_t>(e.handle()),
                                [&] { return nb::cast(e.ipc_descriptor()); }, &e);
}

// The ipc_descriptor properties as CPython's own (cuda.core's are): getset
// descriptors whose getter answers a cache hit itself, with libcucore's checks
// for a buffer, and leaves everything else (the first call, an error to raise
// with nanobind's translation) to get_ipc_descriptor, kept in these.
nb::object* g_buffer_descriptor_fn = nullptr;
nb::object* g_event_descriptor_fn = nullptr;

PyObject* buffer_descriptor_get(PyObject* self, void*) {
  if (PyObject_TypeCheck(self, g_types.buffer) && nb::inst_ready(self)) [[likely]] {
    const auto& b = *nb::inst_ptr<cucore::Buffer>(self);
    try {
      (void)b.ipc_descriptor();  // closed, not IPC-enabled, a closed pool: raised by the bound function
      if (PyObject* hit = descriptor_cache().peek(self, static_cast<std::uintptr_t>(b.handle()))) {
        Py_INCREF(hit);
        return hit;
      }
    } catch (...) {
    }
  }
  return PyObject_CallOneArg(g_buffer_descriptor_fn->ptr(), self);
}

// (The getset descriptor has checked that `self` is an Event.)
PyObject* event_descriptor_get(PyObject* self, void*) {
  if (PyObject* hit = descriptor_cache().peek_open_event(self)) [[likely]] {
    Py_INCREF(hit);
    return hit;
  }
  return PyObject_CallOneArg(g_event_descriptor_fn->ptr(), self);
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
  add_method(cls, "_export_allocation_handle", [](const R& r) { return r.allocation_handle(); },
             "A new IPCAllocationHandle (get_allocation_handle caches one).");
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

void translate_ipc_errors() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const cucore::MappedResourceError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());  // cuda.core's type for allocating from a mapping
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

  nb::class_<PyBufferDescriptor>(m, "IPCBufferDescriptor",
      "Serializable object describing a buffer that can be shared between processes. The payload and size come "
      "from the exporting peer: receivers treat them as untrusted and import only through "
      "Buffer.from_ipc_descriptor.")
      .def("__init__", [](PyBufferDescriptor*, nb::args, nb::kwargs) {
        refuse_direct("IPCBufferDescriptor", "MemoryResource");
      })
      .def_static("_init", [](nb::bytes reserved, std::size_t size, nb::handle uuid) {
        return PyBufferDescriptor{std::string(reserved.c_str(), reserved.size()), size, optional_uuid(uuid, "uuid")};
      }, nb::arg("reserved"), nb::arg("size"), nb::arg("uuid").none() = nb::none())
      .def_prop_ro("size", [](const PyBufferDescriptor& d) { return d.size; })
      .def_prop_ro("_payload", [](const PyBufferDescriptor& d) { return nb::bytes(d.payload.data(), d.payload.size()); })
      .def_prop_ro("_uuid", [](const PyBufferDescriptor& d) { return to_py_uuid(d.uuid); })
      .def("__eq__", [](const PyBufferDescriptor& a, nb::handle b) {
        if (!nb::isinstance<PyBufferDescriptor>(b)) return false;
        const auto& o = nb::cast<const PyBufferDescriptor&>(b);
        return a.payload == o.payload && a.size == o.size;
      })
      .def("__repr__", [](const PyBufferDescriptor& d) { return "<IPCBufferDescriptor size=" + std::to_string(d.size) + ">"; });

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
    if (!nb::isinstance<PyBufferDescriptor>(ipc_descriptor))
      raise_type_error("ipc_descriptor must be an IPCBufferDescriptor, got " + type_name_of(ipc_descriptor));
    const auto& pd = nb::cast<const PyBufferDescriptor&>(ipc_descriptor);
    cucore::IPCBufferDescriptor d;
    if (pd.payload.size() != d.payload.size())
      raise_value_error("IPCBufferDescriptor: the payload is " + std::to_string(pd.payload.size()) +
                        " bytes; a pool pointer's export data is " + std::to_string(d.payload.size()));
    std::memcpy(d.payload.data(), pd.payload.data(), d.payload.size());
    d.size = pd.size;
    d.pool_uuid = pd.uuid;
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
