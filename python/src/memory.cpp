// Memory resources and cucore.Buffer (with DLPack export).
#include <cucore/adaptors.hpp>
#include <cucore/managed.hpp>
#include <cucore/strided_memory_view.hpp>

#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "common.hpp"
#include "view.hpp"
#include "option_fields.inc"

namespace cucore::python {
namespace {

using cucore::MemoryResource;

// A Python buffer-protocol view, released on scope exit.
struct HostView {
  Py_buffer view{};
  bool ok = false;
  HostView(nb::handle obj, bool writable) {
    ok = PyObject_GetBuffer(obj.ptr(), &view, writable ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE : PyBUF_C_CONTIGUOUS) == 0;
  }
  ~HostView() {
    if (ok) PyBuffer_Release(&view);
  }
  HostView(const HostView&) = delete;
  HostView& operator=(const HostView&) = delete;
};

bool is_buffer(nb::handle h) { return PyObject_TypeCheck(h.ptr(), g_types.buffer); }
cucore::Buffer& as_buffer(nb::handle h) { return *nb::inst_ptr<cucore::Buffer>(h); }

// ---- Python faces of memory resources ------------------------------------------------
// buffer.memory_resource is the object the buffer was allocated from, while
// that object lives: the resource's state keeps the address of its face's
// MemoryResource (MemoryResource::Impl::face), and nanobind's instance table
// says whether a Python object still lives there (no table of our own, no
// weak references); once it is gone, a new face of the base class.
PyObject* live_face(const MemoryResource& mr) {  // new reference, or null
  const void* at = mr.impl()->face();
  if (!at) return nullptr;
  // rv_policy::none: an existing instance or nothing (nb::find, by address).
  PyObject* o = nb::detail::make_caster<MemoryResource>::from_cpp(static_cast<const MemoryResource*>(at),
                                                                  nb::rv_policy::none, nullptr)
                    .ptr();
  // Another resource's face may live at an address a dead face had.
  if (o && nb::inst_ptr<MemoryResource>(o)->impl() != mr.impl()) Py_CLEAR(o);
  return o;
}

// ---- memory resources implemented in Python ------------------------------------------
// A MemoryResource subclass with its own deallocate (or any object with one,
// as Buffer.from_handle's mr): the buffers it owns are freed by calling it.
class PyResourceImpl final : public MemoryResource::Impl {
 public:
  explicit PyResourceImpl(nb::handle obj) : owner_(py_owner(obj)) {}
  PyObject* object() const noexcept { return py_owner_object(owner_); }

  CUdeviceptr allocate(std::size_t, cucore::StreamRef) override {
    throw std::logic_error("a memory resource implemented in Python allocates through its own allocate()");
  }
  void deallocate(CUdeviceptr ptr, std::size_t size, cucore::StreamRef stream) override {
    if (!python_alive()) return;  // at interpreter exit the memory goes with the process
    nb::gil_scoped_acquire gil;
    // A Buffer may die while an exception propagates: keep that one pending.
    nb::error_scope pending;
    nb::handle(object()).attr("deallocate")(static_cast<std::uintptr_t>(ptr), size,
                                            nb::arg("stream") = stream_face(stream));
  }
  bool is_device_accessible() const noexcept override { return flag("is_device_accessible", true); }
  bool is_host_accessible() const noexcept override { return flag("is_host_accessible", false); }
  bool is_managed() const noexcept override { return flag("is_managed", false); }
  // Its memory may be managed whatever it says: a Buffer's DLPack device asks the driver.
  bool reports_memory_kind() const noexcept override { return false; }
  int device_id() const noexcept override {
    if (!python_alive()) return -1;
    nb::gil_scoped_acquire gil;
    nb::error_scope pending;
    try {
      return nb::cast<int>(nb::handle(object()).attr("device_id"));
    } catch (...) {
      PyErr_Clear();
      return -1;
    }
  }

 private:
  static nb::object stream_face(cucore::StreamRef s) {
    if (s.handle() == CU_STREAM_LEGACY || s.handle() == CU_STREAM_PER_THREAD) {
      nb::object d = default_stream_object();
      if (as_stream_ref(d) == s) return d;
    }
    return nb::cast(cucore::Stream::from_handle(s.handle(), {}));
  }
  static cucore::StreamRef as_stream_ref(nb::handle o) { return *nb::inst_ptr<cucore::Stream>(o); }
  bool flag(const char* name, bool fallback) const noexcept {
    if (!python_alive()) return fallback;
    nb::gil_scoped_acquire gil;
    nb::error_scope pending;
    try {
      return nb::cast<bool>(nb::handle(object()).attr(name));
    } catch (...) {
      PyErr_Clear();
      return fallback;
    }
  }
  std::shared_ptr<const void> owner_;
};

// cucore's own resource classes: an exact instance allocates and frees in
// C++; a Python subclass goes through its (possibly overridden) methods.
std::vector<PyTypeObject*> g_native_resource_types;

// Whether `mr`'s deallocate is cucore's own (not overridden in Python).
bool native_deallocate(nb::handle mr) {
  nb::object mine = nb::getattr(nb::handle((PyObject*)Py_TYPE(mr.ptr())), "deallocate", nb::none());
  nb::object base = nb::getattr(nb::handle((PyObject*)g_types.memory_resource), "deallocate");
  return mine.is(base);
}

// The C++ resource that frees memory handed to Buffer.from_handle(mr=...):
// cucore's own (C++ state, deallocate not overridden), else the object's
// deallocate, called from C++.
MemoryResource resource_arg(nb::handle mr) {
  if (mr.is_none()) return {};
  if (PyObject_TypeCheck(mr.ptr(), g_types.memory_resource) && *nb::inst_ptr<MemoryResource>(mr) &&
      native_deallocate(mr))
    return *nb::inst_ptr<MemoryResource>(mr);
  if (!nb::hasattr(mr, "deallocate")) throw nb::type_error("mr must be a MemoryResource (it has no deallocate)");
  return MemoryResource(std::make_shared<PyResourceImpl>(mr));
}

// ---- DLPack export: a 1-D int8 tensor over the buffer's bytes (cuda.core's) -------
// libcucore's export (buffer_to_dlpack), holding a strong reference to the
// Buffer (dropped under the GIL on whichever thread the consumer frees the
// tensor): one allocation per export, as torch.from_dlpack makes one per call.
// A resource may say its memory is reachable from neither side (cuda.core's
// refusal, in its words); without one, the driver places the memory.
bool unreachable(const cucore::Buffer& b) {
  return b.resource_impl() && !b.is_device_accessible() && !b.is_host_accessible();
}

dlpack::DLDevice buffer_dlpack_device(nb::handle self) {
  const cucore::Buffer& b = as_buffer(self);
  if (b.is_closed()) cucore::detail::throw_closed("Buffer", "__dlpack_device__");
  if (unreachable(b)) throw nb::buffer_error("buffer is neither device-accessible nor host-accessible");
  return cucore::dlpack_device_of(b);
}

// __dlpack__ as cuda.core's: the stream is ignored (the buffer has no producer
// stream: ordering is the caller's), copy=True is refused (the export is
// zero-copy), max_version picks the tensor's form. A dl_device equal to the
// buffer's own is taken, as the DLPack spec has it; another is BufferError.
nb::object buffer_dlpack(nb::handle self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                         nb::handle copy) {
  const cucore::Buffer& b = as_buffer(self);
  if (b.is_closed()) cucore::detail::throw_closed("Buffer", "__dlpack__");
  (void)stream;
  if (unreachable(b)) throw nb::buffer_error("invalid buffer: neither device-accessible nor host-accessible");
  const DlpackRequest r = dlpack_request("Buffer", cucore::dlpack_device_of(b), max_version, dl_device, copy);
  if (r.versioned) return make_dlpack_capsule(cucore::buffer_to_dlpack(b, r.device, py_ref(self)));
  return make_dlpack_capsule(cucore::buffer_to_dlpack_unversioned(b, r.device, py_ref(self)));
}

// The exchange API's export (managed_tensor_from_py_object_no_sync) for Buffers.
int buffer_exchange_export(void* py_object, dlpack::DLManagedTensorVersioned** out) {
  try {
    if (!out) throw nb::value_error("out is null");
    *out = nullptr;
    nb::handle obj(static_cast<PyObject*>(py_object));
    if (!is_buffer(obj)) throw nb::type_error("py_object is not a cucore.Buffer");
    const cucore::Buffer& b = as_buffer(obj);
    if (b.is_closed()) cucore::detail::throw_closed("Buffer", "__dlpack__");
    *out = cucore::buffer_to_dlpack(b, cucore::dlpack_device_of(b), py_ref(obj));
    return 0;
  } catch (...) {
    set_error_from_current_exception();
    return -1;
  }
}

nb::object allocate_from(nb::handle self, std::size_t size, nb::handle stream) {
  auto* r = nb::inst_ptr<MemoryResource>(self);
  if (!*r) throw nb::type_error("this MemoryResource has no implementation: a subclass must override allocate()");
  const StreamArg s(stream);
  // cuda.core's pools refuse a capturing stream (graph allocations are GraphMemoryResource's), though the
  // driver would record an allocation node.
  if ((nb::isinstance<cucore::DeviceMemoryResource>(self) || nb::isinstance<cucore::PinnedMemoryResource>(self)) &&
      !s.get().is_closed() && s.get().capture_status() != CU_STREAM_CAPTURE_STATUS_NONE) {
    PyErr_SetString(PyExc_RuntimeError, "_MemPool cannot perform memory operations on a capturing stream "
                                         "(consider using GraphMemoryResource).");
    throw nb::python_error();
  }
  return nb::cast(r->allocate(size, s.get()));
}

// DeviceMemoryResource.attributes / PinnedMemoryResource.attributes: a view
// whose properties read the driver at each access, as cuda.core's
// _MemPoolAttributes does; it holds a share of the pool, so it keeps reading
// after the resource it came from is closed.
struct PoolAttributesView {
  std::variant<cucore::DeviceMemoryResource, cucore::PinnedMemoryResource> mr;
  cucore::MemoryPoolAttributes read() const {
    return std::visit([](const auto& r) { return r.attributes(); }, mr);
  }
};

template <class R>
PoolAttributesView pool_attributes(const R& r, const char* type_name) {
  if (!r) cucore::detail::throw_closed(type_name, "attributes");
  return PoolAttributesView{r};
}

int device_id_arg(nb::handle h) {
  if (PyObject_TypeCheck(h.ptr(), g_types.device)) return nb::inst_ptr<PyDevice>(h)->dev.ordinal();
  if (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr()))
    raise_type_error("device_id must be a Device or an int, got " + repr_text(h));
  const int id = int_arg(h, "device_id");
  (void)device_object(id);  // cuda.core's ValueError for an ordinal with no device
  return id;
}

// Buffer.fill's value as cuda.core reads it: an int is one byte in [0, 256)
// (OverflowError otherwise); a buffer-protocol object gives its 1, 2 or 4 bytes
// as they are (numpy.int8(-1) is 0xff; ValueError for another length);
// anything else is TypeError.
struct FillValue {
  std::uint32_t bits = 0;
  std::size_t width = 1;
};
FillValue fill_value(nb::handle value) {
  if (PyLong_Check(value.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow || v < 0 || v > 255) {
      PyErr_Format(PyExc_OverflowError, "fill value must be in range [0, 256), got %R", value.ptr());
      throw nb::python_error();
    }
    return {static_cast<std::uint32_t>(v), 1};
  }
  if (!PyObject_CheckBuffer(value.ptr()))
    raise_type_error(std::string("fill value must be an int or support the buffer protocol, got ") +
                     Py_TYPE(value.ptr())->tp_name);
  HostView v(value, false);
  if (!v.ok) throw nb::python_error();
  const auto len = static_cast<std::size_t>(v.view.len);
  if (len != 1 && len != 2 && len != 4)
    raise_value_error("fill value must be 1, 2, or 4 bytes, got " + std::to_string(len));
  FillValue f{0, len};
  std::memcpy(&f.bits, v.view.buf, len);  // little-endian: the pattern's bytes as given
  return f;
}

}  // namespace

void register_native_resource_type(nb::handle type) {
  g_native_resource_types.push_back(reinterpret_cast<PyTypeObject*>(type.ptr()));
}

bool is_native_resource(nb::handle h) {
  for (PyTypeObject* t : g_native_resource_types)
    if (Py_TYPE(h.ptr()) == t) return static_cast<bool>(*nb::inst_ptr<MemoryResource>(h));
  return false;
}

void register_memory_resource_face(nb::handle face) {
  const MemoryResource& mr = *nb::inst_ptr<MemoryResource>(face);
  if (!mr) return;  // implemented in Python: no C++ state to find it by
  if (PyObject* live = live_face(mr)) {  // the first face stays the face
    Py_DECREF(live);
    return;
  }
  mr.impl()->set_face(&mr);
}

nb::object memory_resource_face(const MemoryResource& mr) {
  if (!mr) return nb::none();
  if (auto* py = dynamic_cast<const PyResourceImpl*>(mr.impl())) return nb::borrow(py->object());
  if (PyObject* live = live_face(mr)) return nb::steal(live);
  // The object it came from is gone: a plain MemoryResource over the same state.
  nb::object face = nb::cast(MemoryResource(mr));
  register_memory_resource_face(face);
  return face;
}

namespace {
// Registers the Python object being initialized as its resource's face.
template <typename T>
void register_self(T* self) {
  register_memory_resource_face(nb::find(self));
}

template <typename T>
nb::class_<T, MemoryResource> resource_class(nb::module_& m, const char* name, const char* doc) {
  nb::class_<T, MemoryResource> c(m, name, doc, nb::is_weak_referenceable());
  g_native_resource_types.push_back(reinterpret_cast<PyTypeObject*>(c.ptr()));
  return c;
}
}  // namespace

void bind_memory(nb::module_& m) {
  // ---- resources ------------------------------------------------------------------
  auto mrc = nb::class_<MemoryResource>(m, "MemoryResource",
      "Base of memory resources. Subclass it in Python and override allocate/deallocate (and the "
      "is_*_accessible / device_id properties) for a custom allocator.", nb::is_weak_referenceable());
  mrc.def(nb::init<>())
      .def("allocate", &allocate_from, nb::arg("size"), nb::kw_only(), nb::arg("stream") = nb::none(),
           "Allocates `size` bytes, ordered on `stream` (default: the default stream).")
      .def("deallocate", [](const MemoryResource& r, nb::handle ptr, std::size_t size, nb::handle stream) {
        r.deallocate(static_cast<CUdeviceptr>(pointer_arg(ptr, "ptr")), size, stream_arg_or_default(stream));
      }, nb::arg("ptr"), nb::arg("size"), nb::kw_only(), nb::arg("stream") = nb::none())
      .def_prop_ro("is_device_accessible", &MemoryResource::is_device_accessible)
      .def_prop_ro("is_host_accessible", &MemoryResource::is_host_accessible)
      .def_prop_ro("is_managed", &MemoryResource::is_managed)
      .def_prop_ro("device_id", &MemoryResource::device_id)
      .def("__eq__", [](const MemoryResource& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.memory_resource) && a == *nb::inst_ptr<MemoryResource>(b);
      })
      .def("__hash__", [](const MemoryResource& r) {
        return nb::hash(nb::make_tuple("MemoryResource", reinterpret_cast<std::uintptr_t>(r.impl())));
      });
  g_types.memory_resource = reinterpret_cast<PyTypeObject*>(mrc.ptr());
  g_native_resource_types.push_back(g_types.memory_resource);

  // The names attrs[name] takes (cuda.core's properties).
  static constexpr const char* kPoolAttributeNames[] = {
      "release_threshold", "reserved_mem_current", "reserved_mem_high", "reuse_allow_internal_dependencies",
      "reuse_allow_opportunistic", "reuse_follow_event_dependencies", "used_mem_current", "used_mem_high"};
  nb::class_<PoolAttributesView>(m, "MemPoolAttributes",
      "A memory pool's attributes (cuda.core's pool attributes object): each a property read from the driver at "
      "each access; item access (attrs[\"used_mem_current\"]) works too.", nb::is_weak_referenceable())
      .def("__init__", [](PoolAttributesView*, nb::args, nb::kwargs) {
        PyErr_SetString(PyExc_RuntimeError,
                        "MemPoolAttributes cannot be instantiated directly. Please use MemoryResource APIs.");
        throw nb::python_error();
      })
      .def_prop_ro("reuse_follow_event_dependencies",
                   [](const PoolAttributesView& v) { return v.read().reuse_follow_event_dependencies; },
                   "Allow memory to be reused when there are event dependencies between streams.")
      .def_prop_ro("reuse_allow_opportunistic",
                   [](const PoolAttributesView& v) { return v.read().reuse_allow_opportunistic; },
                   "Allow reuse of completed frees without dependencies.")
      .def_prop_ro("reuse_allow_internal_dependencies",
                   [](const PoolAttributesView& v) { return v.read().reuse_allow_internal_dependencies; },
                   "Allow insertion of new stream dependencies for memory reuse.")
      .def_prop_ro("release_threshold", [](const PoolAttributesView& v) { return v.read().release_threshold; },
                   "Amount of reserved memory to hold before OS release.")
      .def_prop_ro("reserved_mem_current", [](const PoolAttributesView& v) { return v.read().reserved_mem_current; },
                   "Current amount of backing memory allocated.")
      .def_prop_ro("reserved_mem_high", [](const PoolAttributesView& v) { return v.read().reserved_mem_high; },
                   "High watermark of backing memory allocated.")
      .def_prop_ro("used_mem_current", [](const PoolAttributesView& v) { return v.read().used_mem_current; },
                   "Current amount of memory in use.")
      .def_prop_ro("used_mem_high", [](const PoolAttributesView& v) { return v.read().used_mem_high; },
                   "High watermark of memory in use.")
      .def("__getitem__", [](nb::handle self, nb::handle name) {
        for (const char* n : kPoolAttributeNames)
          if (PyUnicode_Check(name.ptr()) && PyUnicode_CompareWithASCIIString(name.ptr(), n) == 0) return self.attr(n);
        PyErr_SetObject(PyExc_KeyError, name.ptr());
        throw nb::python_error();
      }, nb::arg("name"), "attrs[name]: the attribute of that name (KeyError for another name).")
      .def("__repr__", [](const PoolAttributesView& v) {
        const cucore::MemoryPoolAttributes a = v.read();  // one read for the whole line
        auto flag = [](bool b) { return std::string(b ? "True" : "False"); };
        return "MemPoolAttributes(release_threshold=" + std::to_string(a.release_threshold) +
               ", reserved_mem_current=" + std::to_string(a.reserved_mem_current) +
               ", reserved_mem_high=" + std::to_string(a.reserved_mem_high) +
               ", reuse_allow_internal_dependencies=" + flag(a.reuse_allow_internal_dependencies) +
               ", reuse_allow_opportunistic=" + flag(a.reuse_allow_opportunistic) +
               ", reuse_follow_event_dependencies=" + flag(a.reuse_follow_event_dependencies) +
               ", used_mem_current=" + std::to_string(a.used_mem_current) +
               ", used_mem_high=" + std::to_string(a.used_mem_high) + ")";
      });

  resource_class<cucore::DeviceMemoryResource>(m, "DeviceMemoryResource",
      "Stream-ordered device memory from a CUDA memory pool: the device's current pool when options is None, "
      "else a new pool made with DeviceMemoryResourceOptions.")
      .def("__init__", [](cucore::DeviceMemoryResource* self, nb::handle device_id, nb::handle options) {
        int id = device_id_arg(device_id);
        if (options.is_none()) {
          new (self) cucore::DeviceMemoryResource(id);
        } else {
          nb::object o = options_arg(options, "DeviceMemoryResourceOptions");
          cucore::DeviceMemoryResourceOptions opts;
#define X(py, cpp) read_option(opts.cpp, o, #py);
          CUCORE_DEVICE_MEMORY_RESOURCE_OPTION_FIELDS(X)
#undef X
          new (self) cucore::DeviceMemoryResource(id, opts);
        }
        register_self(self);
      }, nb::arg("device_id"), nb::arg("options") = nb::none())
      .def_static("from_handle", [](nb::handle pool, int device_id) {
        nb::object face = nb::cast(cucore::DeviceMemoryResource::from_handle(
            reinterpret_cast<CUmemoryPool>(handle_arg(pool, HandleKind::memory_pool, "pool")), device_id));
        register_memory_resource_face(face);
        return face;
      }, nb::arg("pool"), nb::arg("device_id"), "Adopts an existing CUmemoryPool (not destroyed by cucore).")
      .def_prop_ro("handle", [](const cucore::DeviceMemoryResource& r) {
        return bindings_handle(HandleKind::memory_pool, r.handle());
      }, "The CUmemoryPool as cuda.core gives it (a cuda.bindings.driver.CUmemoryPool, else an int).")
      .def_prop_ro("attributes", [](const cucore::DeviceMemoryResource& r) { return pool_attributes(r, "DeviceMemoryResource"); })
      .def_prop_ro("is_ipc_enabled", &cucore::DeviceMemoryResource::is_ipc_enabled)
      .def_prop_ro("is_handle_owned", &cucore::DeviceMemoryResource::owns_pool,
                   "Whether the pool is this resource's own (else close() has no effect).")
      .def_prop_ro("owns_pool", &cucore::DeviceMemoryResource::owns_pool)  // IPC members: ipc.cpp
      .def_prop_ro("is_closed", &cucore::DeviceMemoryResource::is_closed)
      .def("close", &cucore::DeviceMemoryResource::close,
           "Drops this resource's share of a pool it owns (the pool goes once its Buffers are freed); no effect on "
           "a pool it does not own.")
      .def("trim_to", &cucore::DeviceMemoryResource::trim_to, nb::arg("min_bytes_to_keep"))
      .def_prop_rw("peer_accessible_by",
                   [](nb::handle self) {
                     return nb::module_::import_("cucore._memory_views").attr("PeerAccessibleBySetProxy")(self);
                   },
                   [](nb::handle self, nb::handle devices) {
                     nb::module_::import_("cucore._memory_views").attr("replace_peer_accessible_by")(self, devices);
                   },
                   "The other devices that may access this pool's allocations: a live set, read from and written "
                   "to the driver (one cuMemPoolSetAccess per update).");

  resource_class<cucore::PinnedMemoryResource>(m, "PinnedMemoryResource",
      "Stream-ordered page-locked host memory from a host memory pool (device- and host-accessible).")
      .def("__init__", [](cucore::PinnedMemoryResource* self, nb::handle options) {
        cucore::PinnedMemoryResourceOptions opts;
        if (!options.is_none()) {
          nb::object o = options_arg(options, "PinnedMemoryResourceOptions");
#define X(py, cpp) read_option(opts.cpp, o, #py);
          CUCORE_PINNED_MEMORY_RESOURCE_OPTION_FIELDS(X)
#undef X
        }
        new (self) cucore::PinnedMemoryResource(opts);
        register_self(self);
      }, nb::arg("options") = nb::none())
      .def_prop_ro("handle", [](const cucore::PinnedMemoryResource& r) {
        return bindings_handle(HandleKind::memory_pool, r.handle());
      }, "The CUmemoryPool as cuda.core gives it (a cuda.bindings.driver.CUmemoryPool, else an int).")
      .def_prop_ro("attributes", [](const cucore::PinnedMemoryResource& r) { return pool_attributes(r, "PinnedMemoryResource"); })
      .def_prop_ro("is_ipc_enabled", &cucore::PinnedMemoryResource::is_ipc_enabled)
      .def_prop_ro("is_handle_owned", [](const cucore::PinnedMemoryResource& r) { return static_cast<bool>(r); })
      .def_prop_ro("numa_id", &cucore::PinnedMemoryResource::numa_id,
                   "The host NUMA node the pool's memory lives on, or -1 where the OS places it.")
      .def_prop_ro("is_closed", &cucore::PinnedMemoryResource::is_closed)
      .def("close", &cucore::PinnedMemoryResource::close);

  resource_class<cucore::ManagedMemoryResource>(m, "ManagedMemoryResource",
      "Unified (managed) memory, migrated on demand between host and device.")
      .def("__init__", [](cucore::ManagedMemoryResource* self, nb::handle options) {
        cucore::ManagedMemoryResourceOptions opts;
        if (!options.is_none()) {
          nb::object o = options_arg(options, "ManagedMemoryResourceOptions");
#define X(py, cpp) read_option(opts.cpp, o, #py);
          CUCORE_MANAGED_MEMORY_RESOURCE_OPTION_FIELDS(X)
#undef X
        }
        new (self) cucore::ManagedMemoryResource(opts);
        register_self(self);
      }, nb::arg("options") = nb::none())
      .def_prop_ro("preferred_location", [](const cucore::ManagedMemoryResource& r) -> nb::object {
        auto loc = r.preferred_location();
        if (!loc) return nb::none();
        nb::object type = nb::module_::import_("cucore.typing").attr("ManagedMemoryLocationType")(loc->type);
        return nb::make_tuple(type, loc->id ? nb::object(nb::int_(*loc->id)) : nb::none());
      }, "None (the driver decides), or (type, id): (\"device\", ordinal), (\"host\", None), (\"host_numa\", node).")
      .def_prop_ro("is_ipc_enabled", [](const cucore::ManagedMemoryResource&) { return false; })
      .def_prop_ro("is_handle_owned", [](const cucore::ManagedMemoryResource&) { return false; },
                   "False: cucore's managed memory comes from cuMemAllocManaged, not a pool of its own.")
      .def_prop_ro("is_mapped", [](const cucore::ManagedMemoryResource&) { return false; })
      .def_prop_ro("handle", [](const cucore::ManagedMemoryResource&) { return nb::none(); })
      .def_prop_ro("uuid", [](const cucore::ManagedMemoryResource&) { return nb::none(); })
      .def("allocate", [](const cucore::ManagedMemoryResource& r, std::size_t size, nb::handle stream) {
        return cucore::ManagedBuffer(r.allocate(size, StreamArg(stream).get()));
      }, nb::arg("size"), nb::kw_only(), nb::arg("stream") = nb::none(),
         "Allocates a ManagedBuffer of `size` bytes.");

  resource_class<cucore::LegacyPinnedMemoryResource>(m, "LegacyPinnedMemoryResource",
      "Page-locked host memory from cuMemAllocHost (synchronous).")
      .def("__init__", [](cucore::LegacyPinnedMemoryResource* self) {
        new (self) cucore::LegacyPinnedMemoryResource();
        register_self(self);
      });

  resource_class<cucore::StatisticsResourceAdaptor>(m, "StatisticsResourceAdaptor",
      "cucore extra: counts what passes through to `upstream`.")
      .def("__init__", [](cucore::StatisticsResourceAdaptor* self, const MemoryResource& upstream) {
        new (self) cucore::StatisticsResourceAdaptor(upstream);
        register_self(self);
      }, nb::arg("upstream"))
      .def_prop_ro("counts", [](const cucore::StatisticsResourceAdaptor& a) {
        cucore::AllocationCounts c = a.counts();
        nb::dict d;
        d["current_bytes"] = c.current_bytes; d["peak_bytes"] = c.peak_bytes; d["total_bytes"] = c.total_bytes;
        d["current_count"] = c.current_count; d["peak_count"] = c.peak_count; d["total_count"] = c.total_count;
        return d;
      });

  resource_class<cucore::LimitingResourceAdaptor>(m, "LimitingResourceAdaptor",
      "cucore extra: refuses allocations past `limit_bytes` outstanding through it.")
      .def("__init__", [](cucore::LimitingResourceAdaptor* self, const MemoryResource& upstream, std::size_t limit) {
        new (self) cucore::LimitingResourceAdaptor(upstream, limit);
        register_self(self);
      }, nb::arg("upstream"), nb::arg("limit_bytes"))
      .def_prop_ro("allocated_bytes", &cucore::LimitingResourceAdaptor::allocated_bytes)
      .def_prop_ro("limit_bytes", &cucore::LimitingResourceAdaptor::limit_bytes);

  // ---- Buffer -----------------------------------------------------------------------
  auto bc = nb::class_<cucore::Buffer>(m, "Buffer",
      "An allocation: owns its memory (freed on close() or when collected, on its stream), keeps its memory "
      "resource and that stream alive, and speaks DLPack. Using it after close() raises ClosedError.",
      nb::is_weak_referenceable());
  bc.def("__init__", [](cucore::Buffer*, nb::args, nb::kwargs) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Buffer objects cannot be instantiated directly. Please use MemoryResource APIs.");
        throw nb::python_error();
      })
      .def_static("from_handle", [](nb::handle ptr, std::size_t size, nb::handle mr, nb::handle owner, nb::handle stream) {
        CUdeviceptr p = static_cast<CUdeviceptr>(pointer_arg(ptr, "ptr"));
        if (!mr.is_none() && !owner.is_none())
          throw nb::value_error("owner and memory resource cannot be both specified together");
        if (!stream.is_none() && mr.is_none())
          throw nb::value_error("stream requires a memory resource (mr)");
        if (!stream.is_none()) return cucore::Buffer::from_handle(p, size, resource_arg(mr), StreamArg(stream).get());
        return cucore::Buffer::from_handle(p, size, resource_arg(mr), py_owner(owner));
      }, nb::arg("ptr"), nb::arg("size"), nb::arg("mr") = nb::none(), nb::arg("owner") = nb::none(), nb::kw_only(),
         nb::arg("stream") = nb::none(),
         "A Buffer over memory cucore did not allocate: freed through `mr` when given (on `stream`), else never "
         "(`owner`, if given, is kept alive as long).")
      .def_prop_ro("handle", [](const cucore::Buffer& b) { return static_cast<std::uintptr_t>(b.handle()); },
                   "The pointer as an int (0 once closed).")
      .def_prop_ro("size", &cucore::Buffer::size)
      .def_prop_ro("device_id", &cucore::Buffer::device_id)
      .def_prop_ro("memory_resource", [](const cucore::Buffer& b) { return memory_resource_face(b.memory_resource()); })
      .def_prop_ro("owner", [](const cucore::Buffer& b) -> nb::object {
        PyObject* o = py_owner_object(b.owner());
        return o ? nb::borrow(o) : nb::none();
      })
      .def_prop_ro("is_device_accessible", &cucore::Buffer::is_device_accessible)
      .def_prop_ro("is_host_accessible", &cucore::Buffer::is_host_accessible)
      .def_prop_ro("is_managed", &cucore::Buffer::is_managed)
      .def_prop_ro("is_closed", &cucore::Buffer::is_closed)
      .def("close", [](cucore::Buffer& b, nb::handle stream) {
        if (stream.is_none()) b.close();
        else b.close(stream_arg(stream));
      }, nb::arg("stream") = nb::none(),
         "Frees the memory on `stream` (default: the stream it was allocated on). Idempotent.")
      .def("set_deallocation_stream", [](cucore::Buffer& b, nb::handle stream) {
        b.set_deallocation_stream(StreamArg(stream).get());
      }, nb::arg("stream"),
         "The stream a later close() without one, or the garbage collection of the buffer, frees it on. The buffer "
         "stays open; no ordering is made (what uses the memory must be ordered before it by the caller).")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](cucore::Buffer& b, nb::args) { b.close(); })
      .def("copy_to", [](nb::handle self, nb::handle dst, nb::handle stream) -> nb::object {
        cucore::Buffer& b = as_buffer(self);
        if (dst.is_none()) return nb::cast(b.copy_to(StreamArg(stream).get()));
        cucore::StreamRef s = stream_arg_or_default(stream);
        if (is_buffer(dst)) {
          b.copy_to(as_buffer(dst), s);
          return nb::borrow(dst);
        }
        HostView v(dst, true);
        if (!v.ok) throw nb::python_error();
        {
          // A copy to pageable memory returns once it is done, after all the
          // stream's earlier work, which may be a Python host callback that
          // needs the GIL.
          nb::gil_scoped_release nogil;
          b.copy_to(std::span<std::byte>(static_cast<std::byte*>(v.view.buf), static_cast<std::size_t>(v.view.len)), s);
        }
        return nb::borrow(dst);
      }, nb::arg("dst") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
         "Copies into `dst` (a Buffer, a writable host buffer such as a numpy array, or None for a new Buffer from "
         "the same resource), asynchronously on `stream`; returns dst.")
      .def("copy_from", [](cucore::Buffer& b, nb::handle src, nb::handle stream) {
        cucore::StreamRef s = stream_arg_or_default(stream);
        if (is_buffer(src)) {
          b.copy_from(as_buffer(src), s);
          return;
        }
        HostView v(src, false);
        if (!v.ok) throw nb::python_error();
        nb::gil_scoped_release nogil;  // as copy_to: a pageable copy may wait for a Python callback
        b.copy_from(std::span<const std::byte>(static_cast<const std::byte*>(v.view.buf),
                                               static_cast<std::size_t>(v.view.len)), s);
      }, nb::arg("src"), nb::kw_only(), nb::arg("stream") = nb::none(),
         "Copies from `src` (a Buffer or a host buffer such as a numpy array), asynchronously on `stream`.")
      .def("fill", [](cucore::Buffer& b, nb::handle value, nb::handle stream) {
        const FillValue f = fill_value(value);
        if (b.size() % f.width)
          raise_value_error("buffer size (" + std::to_string(b.size()) + ") must be divisible by " +
                            std::to_string(f.width));
        cucore::StreamRef s = stream_arg_or_default(stream);
        if (f.width == 1) b.fill(static_cast<std::uint8_t>(f.bits), s);
        else if (f.width == 2) b.fill(static_cast<std::uint16_t>(f.bits), s);
        else b.fill(f.bits, s);
      }, nb::arg("value"), nb::kw_only(), nb::arg("stream") = nb::none(),
         "Fills with a byte (an int in [0, 256)) or a 1-, 2- or 4-byte pattern (a buffer-protocol value such as "
         "numpy.uint32(x), its bytes as they are).")
      .def("__eq__", [](const cucore::Buffer& a, nb::handle b) {
        return is_buffer(b) && as_buffer(b).handle() == a.handle() && as_buffer(b).size() == a.size();
      })
      .def("__hash__", [](const cucore::Buffer& b) {
        return nb::hash(nb::make_tuple("Buffer", static_cast<std::uintptr_t>(b.handle()), b.size()));
      })
      .def("__repr__", [](const cucore::Buffer& b) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "<Buffer ptr=0x%llx size=%zu%s>", (unsigned long long)b.handle(), b.size(),
                      b.is_closed() ? " closed" : "");
        return std::string(buf);
      });
  g_types.buffer = reinterpret_cast<PyTypeObject*>(bc.ptr());
  install_dlpack_methods<buffer_dlpack, buffer_dlpack_device>(bc);  // __dlpack__, __dlpack_device__
  install_exchange_api(bc, &buffer_exchange_export, nullptr);
}

}  // namespace cucore::python
