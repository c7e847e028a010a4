// ManagedBuffer (advice, prefetch, discard), the batched managed-memory and
// copy functions, VirtualMemoryResource and pool peer access, under cuda.core's
// names. The set-like views (accessed_by, peer_accessible_by) are Python
// classes (cucore._memory_views) over the primitives bound here.
#include <cucore/copy_batch.hpp>
#include <cucore/managed.hpp>
#include <cucore/virtual_memory.hpp>

#include <string>
#include <vector>

#include "common.hpp"
#include "enums.hpp"

namespace cucore::python {
namespace {

nb::object host_class() { return nb::module_::import_("cucore._host").attr("Host"); }

// Device -> a device; Host(), Host(numa_id=n), Host.numa_current() -> the host kinds.
cucore::Location location_arg(nb::handle obj, const char* what = "location") {
  if (PyObject_TypeCheck(obj.ptr(), g_types.device)) return cucore::Location::device(nb::inst_ptr<PyDevice>(obj)->dev);
  if (!obj.is_none() && nb::isinstance(obj, host_class())) {
    if (nb::cast<bool>(obj.attr("is_numa_current"))) return cucore::Location::host_numa_current();
    nb::object numa = obj.attr("numa_id");
    if (!numa.is_none()) return cucore::Location::host_numa(int_arg(numa, std::string(what) + ".numa_id"));
    return cucore::Location::host();
  }
  raise_type_error(std::string(what) + " must be a Device or a Host, got " +
                   nb::cast<std::string>(nb::str(nb::handle((PyObject*)Py_TYPE(obj.ptr())).attr("__name__"))));
}

nb::object location_object(const cucore::Location& l) {
  switch (l.kind) {
    case cucore::Location::Kind::device: return device_object(l.id);
    case cucore::Location::Kind::host: return host_class()();
    case cucore::Location::Kind::host_numa: return host_class()(l.id);
    default: return host_class().attr("numa_current")();
  }
}

std::vector<cucore::Location> locations_arg(nb::handle obj) {
  std::vector<cucore::Location> out;
  if (PyObject_TypeCheck(obj.ptr(), g_types.device) || nb::isinstance(obj, host_class())) {
    out.push_back(location_arg(obj));
    return out;
  }
  for (nb::handle item : obj) out.push_back(location_arg(item, "locations[i]"));
  return out;
}

// A sequence of Buffers (a single Buffer is refused, as cuda.core does).
std::vector<const cucore::Buffer*> buffers_arg(nb::handle obj, const char* what) {
  if (PyObject_TypeCheck(obj.ptr(), g_types.buffer))
    raise_type_error(std::string(what) + " must be a sequence of Buffers, not a single Buffer");
  std::vector<const cucore::Buffer*> out;
  for (nb::handle item : obj) {
    if (!PyObject_TypeCheck(item.ptr(), g_types.buffer))
      raise_type_error(std::string(what) + " must hold Buffers, got " +
                       nb::cast<std::string>(nb::str(nb::handle((PyObject*)Py_TYPE(item.ptr())).attr("__name__"))));
    out.push_back(nb::inst_ptr<cucore::Buffer>(item));
  }
  return out;
}

// The batched calls take neither the legacy default stream nor a GraphBuilder.
cucore::StreamRef batch_stream(nb::handle stream, const char* what) {
  if (g_types.graph_builder && PyObject_TypeCheck(stream.ptr(), g_types.graph_builder))
    raise_type_error(std::string(what) + ": the driver has no graph node for it; pass a Stream");
  cucore::StreamRef s = stream_arg(stream, what);
  if (s.handle() == CU_STREAM_LEGACY || s.handle() == nullptr)
    raise_type_error(std::string(what) + ": LEGACY_DEFAULT_STREAM is refused by the driver's batched calls; use a "
                     "Stream or PER_THREAD_DEFAULT_STREAM");
  return s;
}

cucore::CopyOptions copy_options_arg(nb::handle o) {
  cucore::CopyOptions c;
  const std::string order = enum_value(o.attr("src_access_order"));
  if (order == "stream") c.src_access_order = cucore::MemcpySrcAccessOrder::stream;
  else if (order == "during_api_call") c.src_access_order = cucore::MemcpySrcAccessOrder::during_api_call;
  else if (order == "any") c.src_access_order = cucore::MemcpySrcAccessOrder::any;
  else raise_value_error("invalid src_access_order: " + order);
  const std::string overlap = enum_value(o.attr("overlap_mode"));
  if (overlap == "default") c.overlap_mode = cucore::MemcpyOverlapMode::default_mode;
  else if (overlap == "prefer_overlap_with_compute") c.overlap_mode = cucore::MemcpyOverlapMode::prefer_overlap_with_compute;
  else raise_value_error("invalid overlap_mode: " + overlap);
  nb::object src = o.attr("src_location_hint"), dst = o.attr("dst_location_hint");
  if (!src.is_none()) c.src_location_hint = location_arg(src, "src_location_hint");
  if (!dst.is_none()) c.dst_location_hint = location_arg(dst, "dst_location_hint");
  return c;
}

cucore::ManagedBuffer& as_managed(nb::handle h) { return *nb::inst_ptr<cucore::ManagedBuffer>(h); }

cucore::VirtualMemoryResourceOptions vmm_options(nb::handle options) {
  nb::object o = options_arg(options, "VirtualMemoryResourceOptions");
  cucore::VirtualMemoryResourceOptions v;
  const std::string alloc = enum_value(o.attr("allocation_type"));
  if (alloc == "pinned") v.allocation_type = cucore::VirtualMemoryAllocationType::pinned;
  else if (alloc == "managed") v.allocation_type = cucore::VirtualMemoryAllocationType::managed;
  else raise_value_error("Unsupported allocation_type: " + alloc);
  const std::string loc = enum_value(o.attr("location_type"));
  if (loc == "device") v.location_type = cucore::VirtualMemoryLocationType::device;
  else if (loc == "host") v.location_type = cucore::VirtualMemoryLocationType::host;
  else if (loc == "host_numa") v.location_type = cucore::VirtualMemoryLocationType::host_numa;
  else if (loc == "host_numa_current") v.location_type = cucore::VirtualMemoryLocationType::host_numa_current;
  else raise_value_error("Unsupported location_type: " + loc);
  nb::object ht = o.attr("handle_type");
  const std::string handle = ht.is_none() ? "" : enum_value(ht);
  if (handle.empty()) v.handle_type = cucore::VirtualMemoryHandleType::none;
  else if (handle == "posix_fd") v.handle_type = cucore::VirtualMemoryHandleType::posix_fd;
  else if (handle == "fabric") v.handle_type = cucore::VirtualMemoryHandleType::fabric;
  else if (handle == "win32_kmt" || handle == "win32")
    throw nb::type_error("handle_type win32 is not supported on this platform");
  else raise_value_error("Unsupported handle_type: " + handle);
  const std::string gran = enum_value(o.attr("granularity"));
  if (gran == "recommended") v.granularity = cucore::VirtualMemoryGranularity::recommended;
  else if (gran == "minimum") v.granularity = cucore::VirtualMemoryGranularity::minimum;
  else raise_value_error("Unsupported granularity: " + gran);
  v.gpu_direct_rdma = opt_bool(o, "gpu_direct_rdma").value_or(false);
  v.addr_hint = static_cast<CUdeviceptr>(opt_int(o, "addr_hint").value_or(0));
  v.addr_align = static_cast<std::size_t>(opt_int(o, "addr_align").value_or(0));
  for (nb::handle p : nb::getattr(o, "peers", nb::tuple()))
    v.peers.push_back(PyObject_TypeCheck(p.ptr(), g_types.device) ? nb::inst_ptr<PyDevice>(p)->dev.ordinal()
                                                                   : int_arg(p, "peers"));
  auto access = [](nb::handle a, const char* field) {
    if (a.is_none()) return cucore::VirtualMemoryAccess::none;
    const std::string s = enum_value(a);
    if (s == "rw") return cucore::VirtualMemoryAccess::read_write;
    if (s == "r") return cucore::VirtualMemoryAccess::read;
    raise_value_error(std::string("Unknown access spec for ") + field + ": " + s);
  };
  v.self_access = access(o.attr("self_access"), "self_access");
  v.peer_access = access(o.attr("peer_access"), "peer_access");
  return v;
}

}  // namespace

void bind_memory_ops(nb::module_& m) {
  nb::class_<cucore::ManagedBuffer, cucore::Buffer>(m, "ManagedBuffer",
      "Managed (unified) memory with cuda.core's advice API: read_mostly, preferred_location, accessed_by "
      "(read back from the driver each time), prefetch, discard and discard_prefetch.")
      .def_static("from_handle", [](nb::handle ptr, std::size_t size, nb::handle mr, nb::handle owner,
                                    nb::handle stream) {
        nb::object b = nb::module_::import_("cucore").attr("Buffer").attr("from_handle")(
            ptr, size, mr, owner, nb::arg("stream") = stream);
        return cucore::ManagedBuffer(std::move(*nb::inst_ptr<cucore::Buffer>(b)));
      }, nb::arg("ptr"), nb::arg("size"), nb::arg("mr") = nb::none(), nb::arg("owner") = nb::none(), nb::kw_only(),
         nb::arg("stream") = nb::none())
      .def_prop_rw("read_mostly", [](nb::handle self) { return as_managed(self).read_mostly(); },
                   [](nb::handle self, bool v) { as_managed(self).set_read_mostly(v); })
      .def_prop_rw("preferred_location",
                   [](nb::handle self) -> nb::object {
                     auto l = as_managed(self).preferred_location();
                     return l ? location_object(*l) : nb::none();
                   },
                   [](nb::handle self, nb::handle v) {
                     if (v.is_none()) as_managed(self).set_preferred_location(std::nullopt);
                     else as_managed(self).set_preferred_location(location_arg(v));
                   }, nb::arg("value").none())
      .def_prop_ro("last_prefetch_location", [](nb::handle self) -> nb::object {
        // The target of the last explicit prefetch over every page (cuda.core 1.3), else None.
        auto l = as_managed(self).last_prefetch_location();
        return l ? location_object(*l) : nb::none();
      })
      .def_prop_rw("accessed_by",
                   [](nb::handle self) {
                     if (as_managed(self).is_closed()) cucore::detail::throw_closed("ManagedBuffer", "accessed_by");
                     return nb::module_::import_("cucore._memory_views").attr("AccessedBySetProxy")(self);
                   },
                   [](nb::handle self, nb::handle locations) {
                     nb::module_::import_("cucore._memory_views").attr("replace_accessed_by")(self, locations);
                   })
      .def("_accessed_by", [](nb::handle self) {
        nb::list l;
        for (const auto& loc : as_managed(self).accessed_by()) l.append(location_object(loc));
        return l;
      })
      .def("_advise_accessed_by", [](nb::handle self, nb::handle location, bool set) {
        if (set) as_managed(self).add_accessed_by(location_arg(location));
        else as_managed(self).remove_accessed_by(location_arg(location));
      })
      .def("prefetch", [](nb::handle self, nb::handle location, nb::handle stream) {
        as_managed(self).prefetch(location_arg(location), stream_arg(stream));
      }, nb::arg("location"), nb::kw_only(), nb::arg("stream"), "Prefetches this range to `location` on `stream`.")
      .def("discard", [](nb::handle self, nb::handle stream) {
        as_managed(self).discard(batch_stream(stream, "ManagedBuffer.discard"));
      }, nb::kw_only(), nb::arg("stream"), "Discards this range's resident pages on `stream` (CUDA 13+).")
      .def("discard_prefetch", [](nb::handle self, nb::handle location, nb::handle stream) {
        as_managed(self).discard_prefetch(location_arg(location), batch_stream(stream, "ManagedBuffer.discard_prefetch"));
      }, nb::arg("location"), nb::kw_only(), nb::arg("stream"),
         "Discards this range and prefetches it to `location` on `stream` (CUDA 13+).");

  m.def("prefetch_batch", [](nb::handle stream, nb::handle buffers, nb::handle locations) {
    cucore::StreamRef s = batch_stream(stream, "prefetch_batch");
    auto b = buffers_arg(buffers, "buffers");
    auto l = locations_arg(locations);
    cucore::prefetch_batch(s, b, l);
  }, nb::arg("stream"), nb::arg("buffers"), nb::arg("locations"),
     "Prefetches managed buffers to one location, or one location each, in one driver call (CUDA 13+).");
  m.def("discard_batch", [](nb::handle stream, nb::handle buffers) {
    cucore::StreamRef s = batch_stream(stream, "discard_batch");
    cucore::discard_batch(s, buffers_arg(buffers, "buffers"));
  }, nb::arg("stream"), nb::arg("buffers"), "Discards managed buffers in one driver call (CUDA 13+).");
  m.def("discard_prefetch_batch", [](nb::handle stream, nb::handle buffers, nb::handle locations) {
    cucore::StreamRef s = batch_stream(stream, "discard_prefetch_batch");
    auto b = buffers_arg(buffers, "buffers");
    auto l = locations_arg(locations);
    cucore::discard_prefetch_batch(s, b, l);
  }, nb::arg("stream"), nb::arg("buffers"), nb::arg("locations"),
     "Discards managed buffers and prefetches them in one driver call (CUDA 13+).");
  m.def("copy_batch", [](nb::handle stream, nb::handle srcs, nb::handle dsts, nb::handle options) {
    cucore::StreamRef s = batch_stream(stream, "copy_batch");
    auto src = buffers_arg(srcs, "srcs");
    auto dst_const = buffers_arg(dsts, "dsts");
    std::vector<cucore::Buffer*> dst;
    for (const cucore::Buffer* b : dst_const) dst.push_back(const_cast<cucore::Buffer*>(b));
    std::vector<cucore::CopyOptions> opts;
    if (!options.is_none()) {
      nb::object cls = nb::module_::import_("cucore._options").attr("CopyOptions");
      if (nb::isinstance(options, cls)) opts.push_back(copy_options_arg(options));
      else
        for (nb::handle o : options) opts.push_back(copy_options_arg(o));
    }
    cucore::copy_batch(s, src, dst, opts);
  }, nb::arg("stream"), nb::arg("srcs"), nb::arg("dsts"), nb::kw_only(), nb::arg("options") = nb::none(),
     "Copies srcs[i] into dsts[i] (equal sizes) in one cuMemcpyBatchAsync.");

  // ---- VirtualMemoryResource ----
  nb::class_<cucore::VirtualMemoryResource, cucore::MemoryResource> vmr(m, "VirtualMemoryResource",
      "Device memory from the CUDA virtual memory management calls; modify_allocation grows a buffer, in place "
      "when the addresses after it are free.", nb::is_weak_referenceable());
  register_native_resource_type(vmr);
  vmr.def("__init__", [](cucore::VirtualMemoryResource* self, nb::handle device_id, nb::handle config) {
        int id = PyObject_TypeCheck(device_id.ptr(), g_types.device) ? nb::inst_ptr<PyDevice>(device_id)->dev.ordinal()
                                                                     : int_arg(device_id, "device_id");
        new (self) cucore::VirtualMemoryResource(id, vmm_options(config));
        register_memory_resource_face(nb::find(self));
      }, nb::arg("device_id"), nb::arg("config") = nb::none())
      .def_prop_ro("device", [](const cucore::VirtualMemoryResource& r) -> nb::object {
        return r.device_id() >= 0 ? device_object(r.device_id()) : nb::none();
      })
      .def_prop_ro("granularity", [](const cucore::VirtualMemoryResource& r) { return r.granularity(); },
                   "The allocation granularity in bytes (the configured kind).")
      .def("modify_allocation", [](nb::handle self, nb::handle buf, std::size_t new_size, nb::handle config) {
        auto& r = *nb::inst_ptr<cucore::VirtualMemoryResource>(self);
        if (!config.is_none()) throw nb::value_error("modify_allocation: config is fixed at construction in cucore");
        if (!PyObject_TypeCheck(buf.ptr(), g_types.buffer)) raise_type_error("buf must be a Buffer");
        cucore::Buffer& b = *nb::inst_ptr<cucore::Buffer>(buf);
        const CUdeviceptr before = b.handle();
        r.modify_allocation(b, new_size);
        if (b.handle() == before) return nb::borrow(buf);
        // Moved: as cuda.core, a new Buffer for the new address; the old one is closed.
        return nb::cast(std::move(b));
      }, nb::arg("buf"), nb::arg("new_size"), nb::arg("config") = nb::none(),
         "Grows `buf` to `new_size` bytes keeping its contents; returns it (same address) or, when it had to "
         "move, a new Buffer (the old one is closed).");

  m.def("_pool_peer_ids", [](const cucore::DeviceMemoryResource& r) { return r.peer_accessible_by(); });
  m.def("_pool_update_peer_access", [](const cucore::DeviceMemoryResource& r, const std::vector<int>& add,
                                       const std::vector<int>& remove) { r.update_peer_access(add, remove); });
}

}  // namespace cucore::python
