// Memory resources and cucore.Buffer (with DLPack export).
#include <cucore/adaptors.hpp>

#include <cstdio>
#include <cstring>

#include "common.hpp"
#include "dlpack.hpp"

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
PyBuffer& as_buffer(nb::handle h) { return *nb::inst_ptr<PyBuffer>(h); }

int dlpack_device_type(const PyBuffer& b) {
  bool dev = b.buf.is_device_accessible(), host = b.buf.is_host_accessible();
  bool managed = b.mr.is_valid() && nb::isinstance<cucore::ManagedMemoryResource>(b.mr);
  if (managed) return dlpack::kDLCUDAManaged;
  if (dev && host) return dlpack::kDLCUDAHost;
  if (dev) return dlpack::kDLCUDA;
  return dlpack::kDLCPU;
}

// ---- DLPack export: a 1-D uint8 tensor over the buffer's bytes --------------
struct ExportCtx {
  PyObject* owner;  // the Buffer (a strong reference)
  int64_t shape[1];
};

template <typename Managed>
void release_export(Managed* t) {
  auto* ctx = static_cast<ExportCtx*>(t->manager_ctx);
  PyGILState_STATE g = PyGILState_Ensure();
  Py_XDECREF(ctx->owner);
  PyGILState_Release(g);
  delete ctx;
  delete t;
}

template <typename Managed>
void capsule_destructor(PyObject* cap, const char* name) {
  if (PyCapsule_IsValid(cap, name)) {  // never consumed
    auto* t = static_cast<Managed*>(PyCapsule_GetPointer(cap, name));
    if (t && t->deleter) t->deleter(t);
  } else {
    PyErr_Clear();
  }
}

template <typename Managed>
void fill_tensor(Managed* t, ExportCtx* ctx, const PyBuffer& b) {
  dlpack::DLTensor& d = t->dl_tensor;
  d.data = b.buf.data();
  d.device = {dlpack_device_type(b), 0};
  int dev_id = b.buf.device_id();
  d.device.device_id = d.device.device_type == dlpack::kDLCPU ? 0 : (dev_id < 0 ? 0 : dev_id);
  d.ndim = 1;
  d.dtype = {dlpack::kDLUInt, 8, 1};
  ctx->shape[0] = static_cast<int64_t>(b.buf.size());
  d.shape = ctx->shape;
  d.strides = nullptr;
  d.byte_offset = 0;
}

nb::object buffer_dlpack(nb::handle self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                         nb::handle copy) {
  PyBuffer& b = as_buffer(self);
  if (b.buf.is_closed()) throw nb::buffer_error("the buffer is closed");
  if (!copy.is_none() && PyObject_IsTrue(copy.ptr()) == 1)
    throw nb::buffer_error("Buffer.__dlpack__: copy=True is not supported (the export is zero-copy)");
  if (!dl_device.is_none()) {
    auto dev = nb::cast<std::pair<int, int>>(dl_device);
    if (dev.first != dlpack_device_type(b)) throw nb::buffer_error("Buffer.__dlpack__: dl_device differs from the buffer's");
  }
  (void)stream;  // the buffer has no producer stream of its own: nothing to order
  bool versioned = false;
  if (!max_version.is_none()) versioned = nb::cast<int>(max_version[0]) >= 1;
  auto* ctx = new ExportCtx{self.inc_ref().ptr(), {0}};
  if (versioned) {
    auto* t = new dlpack::DLManagedTensorVersioned{};
    t->version = {dlpack::kMajor, dlpack::kMinor};
    t->manager_ctx = ctx;
    t->deleter = release_export<dlpack::DLManagedTensorVersioned>;
    t->flags = 0;
    fill_tensor(t, ctx, b);
    PyObject* cap = PyCapsule_New(t, "dltensor_versioned", [](PyObject* c) {
      capsule_destructor<dlpack::DLManagedTensorVersioned>(c, "dltensor_versioned");
    });
    if (!cap) {
      t->deleter(t);
      throw nb::python_error();
    }
    return nb::steal(cap);
  }
  auto* t = new dlpack::DLManagedTensor{};
  t->manager_ctx = ctx;
  t->deleter = release_export<dlpack::DLManagedTensor>;
  fill_tensor(t, ctx, b);
  PyObject* cap = PyCapsule_New(t, "dltensor", [](PyObject* c) { capsule_destructor<dlpack::DLManagedTensor>(c, "dltensor"); });
  if (!cap) {
    t->deleter(t);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

nb::object allocate_from(nb::handle self, std::size_t size, nb::handle stream) {
  auto* r = nb::inst_ptr<MemoryResource>(self);
  if (!*r) throw nb::type_error("this MemoryResource has no implementation: a subclass must override allocate()");
  return wrap_buffer(r->allocate(size, stream_arg_or_default(stream)), self, nb::none(), stream);
}

nb::dict pool_attributes(const cucore::MemoryPoolAttributes& a) {
  nb::dict d;
  d["reserved_mem_current"] = a.reserved_mem_current;
  d["reserved_mem_high"] = a.reserved_mem_high;
  d["used_mem_current"] = a.used_mem_current;
  d["used_mem_high"] = a.used_mem_high;
  d["release_threshold"] = a.release_threshold;
  return d;
}

int device_id_arg(nb::handle h) {
  if (PyObject_TypeCheck(h.ptr(), g_types.device)) return nb::inst_ptr<PyDevice>(h)->dev.ordinal();
  return nb::cast<int>(h);
}

}  // namespace

nb::object wrap_buffer(cucore::Buffer&& b, nb::handle mr, nb::handle owner, nb::handle stream) {
  PyBuffer p;
  p.stream = nb::borrow(stream.is_valid() ? stream : nb::none());
  p.buf = std::move(b);
  p.mr = nb::borrow(mr.is_valid() ? mr : nb::none());
  p.owner = nb::borrow(owner.is_valid() ? owner : nb::none());
  return nb::cast(std::move(p));
}

void bind_memory(nb::module_& m) {
  // ---- resources ------------------------------------------------------------------
  auto mrc = nb::class_<MemoryResource>(m, "MemoryResource",
      "Base of memory resources. Subclass it in Python and override allocate/deallocate (and the "
      "is_*_accessible / device_id properties) for a custom allocator.");
  mrc.def(nb::init<>())
      .def("allocate", &allocate_from, nb::arg("size"), nb::kw_only(), nb::arg("stream") = nb::none(),
           "Allocates `size` bytes, ordered on `stream` (default: the default stream).")
      .def("deallocate", [](const MemoryResource& r, nb::handle ptr, std::size_t size, nb::handle stream) {
        r.deallocate(static_cast<CUdeviceptr>(pointer_arg(ptr, "ptr")), size, stream_arg_or_default(stream));
      }, nb::arg("ptr"), nb::arg("size"), nb::kw_only(), nb::arg("stream") = nb::none())
      .def_prop_ro("is_device_accessible", &MemoryResource::is_device_accessible)
      .def_prop_ro("is_host_accessible", &MemoryResource::is_host_accessible)
      .def_prop_ro("is_managed", [](nb::handle self) { return nb::isinstance<cucore::ManagedMemoryResource>(self); })
      .def_prop_ro("device_id", &MemoryResource::device_id)
      .def("__eq__", [](const MemoryResource& a, nb::handle b) {
        return PyObject_TypeCheck(b.ptr(), g_types.memory_resource) && a == *nb::inst_ptr<MemoryResource>(b);
      })
      .def("__hash__", [](const MemoryResource& r) { return std::hash<void*>()(r.impl()); });
  g_types.memory_resource = reinterpret_cast<PyTypeObject*>(mrc.ptr());

  nb::class_<cucore::DeviceMemoryResource, MemoryResource>(m, "DeviceMemoryResource",
      "Stream-ordered device memory from a CUDA memory pool: the device's current pool when options is None, "
      "else a new pool made with DeviceMemoryResourceOptions.")
      .def("__init__", [](cucore::DeviceMemoryResource* self, nb::handle device_id, nb::handle options) {
        int id = device_id_arg(device_id);
        if (options.is_none()) {
          new (self) cucore::DeviceMemoryResource(id);
          return;
        }
        nb::object o = options_arg(options, "DeviceMemoryResourceOptions");
        cucore::DeviceMemoryResourceOptions opts;
        opts.max_size = static_cast<std::size_t>(opt_int(o, "max_size").value_or(0));
        opts.ipc_enabled = opt_bool(o, "ipc_enabled").value_or(false);
        new (self) cucore::DeviceMemoryResource(id, opts);
      }, nb::arg("device_id"), nb::arg("options") = nb::none())
      .def_static("from_handle", [](nb::handle pool, int device_id) {
        return cucore::DeviceMemoryResource::from_handle(reinterpret_cast<CUmemoryPool>(pointer_arg(pool, "pool")),
                                                         device_id);
      }, nb::arg("pool"), nb::arg("device_id"), "Adopts an existing CUmemoryPool (not destroyed by cucore).")
      .def_prop_ro("handle", [](const cucore::DeviceMemoryResource& r) { return reinterpret_cast<std::uintptr_t>(r.handle()); })
      .def_prop_ro("attributes", [](const cucore::DeviceMemoryResource& r) { return pool_attributes(r.attributes()); })
      .def_prop_ro("is_ipc_enabled", &cucore::DeviceMemoryResource::is_ipc_enabled)
      .def_prop_ro("owns_pool", &cucore::DeviceMemoryResource::owns_pool)
      .def("trim_to", &cucore::DeviceMemoryResource::trim_to, nb::arg("min_bytes_to_keep"));

  nb::class_<cucore::PinnedMemoryResource, MemoryResource>(m, "PinnedMemoryResource",
      "Stream-ordered page-locked host memory from a host memory pool (device- and host-accessible).")
      .def("__init__", [](cucore::PinnedMemoryResource* self, nb::handle options) {
        cucore::PinnedMemoryResourceOptions opts;
        if (!options.is_none()) {
          nb::object o = options_arg(options, "PinnedMemoryResourceOptions");
          opts.max_size = static_cast<std::size_t>(opt_int(o, "max_size").value_or(0));
          opts.ipc_enabled = opt_bool(o, "ipc_enabled").value_or(false);
        }
        new (self) cucore::PinnedMemoryResource(opts);
      }, nb::arg("options") = nb::none())
      .def_prop_ro("handle", [](const cucore::PinnedMemoryResource& r) { return reinterpret_cast<std::uintptr_t>(r.handle()); })
      .def_prop_ro("attributes", [](const cucore::PinnedMemoryResource& r) { return pool_attributes(r.attributes()); });

  nb::class_<cucore::ManagedMemoryResource, MemoryResource>(m, "ManagedMemoryResource",
      "Unified (managed) memory, migrated on demand between host and device.")
      .def("__init__", [](cucore::ManagedMemoryResource* self, nb::handle options) {
        cucore::ManagedMemoryResourceOptions opts;
        if (!options.is_none()) {
          nb::object o = options_arg(options, "ManagedMemoryResourceOptions");
          if (auto g = opt_bool(o, "attach_global")) opts.attach_global = *g;
        }
        new (self) cucore::ManagedMemoryResource(opts);
      }, nb::arg("options") = nb::none());

  nb::class_<cucore::LegacyPinnedMemoryResource, MemoryResource>(m, "LegacyPinnedMemoryResource",
      "Page-locked host memory from cuMemAllocHost (synchronous).")
      .def(nb::init<>());

  nb::class_<cucore::StatisticsResourceAdaptor, MemoryResource>(m, "StatisticsResourceAdaptor",
      "cucore extra: counts what passes through to `upstream`.")
      .def("__init__", [](cucore::StatisticsResourceAdaptor* self, const MemoryResource& upstream) {
        new (self) cucore::StatisticsResourceAdaptor(upstream);
      }, nb::arg("upstream"))
      .def_prop_ro("counts", [](const cucore::StatisticsResourceAdaptor& a) {
        cucore::AllocationCounts c = a.counts();
        nb::dict d;
        d["current_bytes"] = c.current_bytes; d["peak_bytes"] = c.peak_bytes; d["total_bytes"] = c.total_bytes;
        d["current_count"] = c.current_count; d["peak_count"] = c.peak_count; d["total_count"] = c.total_count;
        return d;
      });

  nb::class_<cucore::LimitingResourceAdaptor, MemoryResource>(m, "LimitingResourceAdaptor",
      "cucore extra: refuses allocations past `limit_bytes` outstanding through it.")
      .def("__init__", [](cucore::LimitingResourceAdaptor* self, const MemoryResource& upstream, std::size_t limit) {
        new (self) cucore::LimitingResourceAdaptor(upstream, limit);
      }, nb::arg("upstream"), nb::arg("limit_bytes"))
      .def_prop_ro("allocated_bytes", &cucore::LimitingResourceAdaptor::allocated_bytes)
      .def_prop_ro("limit_bytes", &cucore::LimitingResourceAdaptor::limit_bytes);

  // ---- Buffer -----------------------------------------------------------------------
  auto bc = nb::class_<PyBuffer>(m, "Buffer",
      "An allocation: owns its memory (freed on close() or when collected, on its stream) and keeps its memory "
      "resource alive. Speaks DLPack.");
  bc.def_static("from_handle", [](nb::handle ptr, std::size_t size, nb::handle mr, nb::handle owner, nb::handle stream) {
        (void)stream;
        CUdeviceptr p = static_cast<CUdeviceptr>(pointer_arg(ptr, "ptr"));
        cucore::MemoryResource r;
        if (!mr.is_none()) {
          if (!PyObject_TypeCheck(mr.ptr(), g_types.memory_resource)) throw nb::type_error("mr must be a MemoryResource");
          r = *nb::inst_ptr<MemoryResource>(mr);
        }
        return wrap_buffer(cucore::Buffer::from_handle(p, size, r), mr, owner);
      }, nb::arg("ptr"), nb::arg("size"), nb::arg("mr") = nb::none(), nb::arg("owner") = nb::none(), nb::kw_only(),
         nb::arg("stream") = nb::none(),
         "A Buffer over memory cucore did not allocate: never freed unless `mr` is given (then freed through it).")
      .def_prop_ro("handle", [](const PyBuffer& b) { return static_cast<std::uintptr_t>(b.buf.handle()); },
                   "The pointer as an int (0 once closed).")
      .def_prop_ro("size", [](const PyBuffer& b) { return b.buf.size(); })
      .def_prop_ro("device_id", [](const PyBuffer& b) { return b.buf.device_id(); })
      .def_prop_ro("memory_resource", [](const PyBuffer& b) { return b.mr; })
      .def_prop_ro("owner", [](const PyBuffer& b) { return b.owner; })
      .def_prop_ro("is_device_accessible", [](const PyBuffer& b) { return b.buf.is_device_accessible(); })
      .def_prop_ro("is_host_accessible", [](const PyBuffer& b) { return b.buf.is_host_accessible(); })
      .def_prop_ro("is_managed", [](const PyBuffer& b) {
        return b.mr.is_valid() && nb::isinstance<cucore::ManagedMemoryResource>(b.mr);
      })
      .def_prop_ro("is_closed", [](const PyBuffer& b) { return b.buf.is_closed(); })
      .def("close", [](PyBuffer& b, nb::handle stream) {
        if (stream.is_none()) b.buf.close();
        else b.buf.close(stream_arg(stream));
        b.stream = nb::none();
      }, nb::arg("stream") = nb::none(),
         "Frees the memory on `stream` (default: the stream it was allocated on). Idempotent.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyBuffer& b, nb::args) {
        b.buf.close();
        b.stream = nb::none();
      })
      .def("copy_to", [](nb::handle self, nb::handle dst, nb::handle stream) -> nb::object {
        PyBuffer& b = as_buffer(self);
        cucore::StreamRef s = stream_arg_or_default(stream);
        if (dst.is_none()) return wrap_buffer(b.buf.copy_to(s), b.mr, nb::none(), stream);
        if (is_buffer(dst)) {
          b.buf.copy_to(as_buffer(dst).buf, s);
          return nb::borrow(dst);
        }
        HostView v(dst, true);
        if (!v.ok) throw nb::python_error();
        b.buf.copy_to(std::span<std::byte>(static_cast<std::byte*>(v.view.buf), static_cast<std::size_t>(v.view.len)), s);
        return nb::borrow(dst);
      }, nb::arg("dst") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
         "Copies into `dst` (a Buffer, a writable host buffer such as a numpy array, or None for a new Buffer from "
         "the same resource), asynchronously on `stream`; returns dst.")
      .def("copy_from", [](PyBuffer& b, nb::handle src, nb::handle stream) {
        cucore::StreamRef s = stream_arg_or_default(stream);
        if (is_buffer(src)) {
          b.buf.copy_from(as_buffer(src).buf, s);
          return;
        }
        HostView v(src, false);
        if (!v.ok) throw nb::python_error();
        b.buf.copy_from(std::span<const std::byte>(static_cast<const std::byte*>(v.view.buf),
                                                   static_cast<std::size_t>(v.view.len)), s);
      }, nb::arg("src"), nb::kw_only(), nb::arg("stream") = nb::none(),
         "Copies from `src` (a Buffer or a host buffer such as a numpy array), asynchronously on `stream`.")
      .def("fill", [](PyBuffer& b, nb::handle value, nb::handle stream) {
        cucore::StreamRef s = stream_arg_or_default(stream);
        if (PyLong_Check(value.ptr())) {
          long v = PyLong_AsLong(value.ptr());
          if (v < 0 || v > 255) throw nb::value_error("fill value must be in [0, 255] (one byte); pass a 2- or 4-byte "
                                                      "buffer (e.g. numpy.uint32(x)) for a wider pattern");
          b.buf.fill(static_cast<std::uint8_t>(v), s);
          return;
        }
        HostView v(value, false);
        if (!v.ok) throw nb::python_error();
        switch (v.view.len) {
          case 1: b.buf.fill(*static_cast<const std::uint8_t*>(v.view.buf), s); break;
          case 2: { std::uint16_t x; std::memcpy(&x, v.view.buf, 2); b.buf.fill(x, s); break; }
          case 4: { std::uint32_t x; std::memcpy(&x, v.view.buf, 4); b.buf.fill(x, s); break; }
          default: throw nb::value_error("fill value must be 1, 2 or 4 bytes");
        }
      }, nb::arg("value"), nb::kw_only(), nb::arg("stream") = nb::none(),
         "Fills with a byte (int) or a 1-, 2- or 4-byte pattern (a bytes-like value such as numpy.uint32(x)).")
      .def("__dlpack__", &buffer_dlpack, nb::kw_only(), nb::arg("stream") = nb::none(),
           nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none())
      .def("__dlpack_device__", [](const PyBuffer& b) {
        int t = dlpack_device_type(b);
        int id = b.buf.device_id();
        return nb::make_tuple(t, t == dlpack::kDLCPU || id < 0 ? 0 : id);
      })
      .def("__repr__", [](const PyBuffer& b) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "<Buffer ptr=0x%llx size=%zu%s>", (unsigned long long)b.buf.handle(),
                      b.buf.size(), b.buf.is_closed() ? " closed" : "");
        return std::string(buf);
      });
  g_types.buffer = reinterpret_cast<PyTypeObject*>(bc.ptr());
}

}  // namespace cucore::python
