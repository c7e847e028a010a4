// cucore.texture: OpaqueArray, MipmappedArray, ResourceDescriptor, TextureObject,
// SurfaceObject (cuda.core.texture's names), and the Device factories. The
// option dataclasses and enums live in Python (cucore._options, cucore.typing).
#include <cucore/texture.hpp>

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "common.hpp"
#include "enums.hpp"

namespace cucore::python {

using namespace cucore::texture;

namespace {

// A Python buffer-protocol view, released on scope exit.
struct HostBytes {
  Py_buffer view{};
  explicit HostBytes(nb::handle obj, bool writable) {
    if (PyObject_GetBuffer(obj.ptr(), &view, writable ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE : PyBUF_C_CONTIGUOUS) != 0)
      throw nb::python_error();
  }
  ~HostBytes() { PyBuffer_Release(&view); }
  HostBytes(const HostBytes&) = delete;
  HostBytes& operator=(const HostBytes&) = delete;
  std::size_t size() const { return static_cast<std::size_t>(view.len); }
};

ArrayFormat format_arg(nb::handle v) {
  nb::object name = nb::module_::import_("cucore.typing").attr("_array_format_name")(v);
  try {
    return parse_array_format(utf8_arg(name, "format"));
  } catch (const std::invalid_argument& e) {
    throw nb::value_error(e.what());
  }
}

nb::object format_object(ArrayFormat f) { return nb::module_::import_("cucore.typing").attr("ArrayFormatType")(to_string(f)); }

std::vector<std::size_t> shape_arg(nb::handle o) {
  nb::object s = o.attr("shape");
  std::vector<std::size_t> shape;
  if (PyLong_Check(s.ptr())) {
    shape.push_back(static_cast<std::size_t>(uint64_arg(s, "shape")));
    return shape;
  }
  for (nb::handle e : s) {
    const std::int64_t v = int64_arg(e, "shape");
    if (v < 1) throw nb::value_error("shape extents must be >= 1");
    shape.push_back(static_cast<std::size_t>(v));
  }
  return shape;
}

nb::tuple shape_tuple(const std::vector<std::size_t>& shape) {
  nb::list l;
  for (std::size_t e : shape) l.append(e);
  return nb::tuple(l);
}

AddressMode address_mode(const std::string& s) {
  if (s == "wrap") return AddressMode::wrap;
  if (s == "clamp") return AddressMode::clamp;
  if (s == "mirror") return AddressMode::mirror;
  if (s == "border") return AddressMode::border;
  raise_value_error("invalid address_mode: " + s);
}
FilterMode filter_mode(const std::string& s, const char* field) {
  if (s == "point") return FilterMode::point;
  if (s == "linear") return FilterMode::linear;
  raise_value_error(std::string("invalid ") + field + ": " + s);
}

TextureObjectOptions texture_options(nb::handle options) {
  nb::object o = options_arg(options, "TextureObjectOptions");
  TextureObjectOptions t;
  nb::object am = o.attr("address_mode");
  if (nb::isinstance<nb::str>(am)) {
    t.address_mode.fill(address_mode(enum_value(am)));
  } else {
    std::size_t i = 0;
    for (nb::handle a : am) {
      if (i == 3) raise_value_error("address_mode takes 1 to 3 entries");
      t.address_mode[i++] = address_mode(enum_value(a));
    }
    if (i == 0) raise_value_error("address_mode takes 1 to 3 entries");
    for (; i < 3; ++i) t.address_mode[i] = t.address_mode[i - 1];
  }
  t.filter_mode = filter_mode(enum_value(o.attr("filter_mode")), "filter_mode");
  const std::string rm = enum_value(o.attr("read_mode"));
  if (rm == "element_type") t.read_mode = ReadMode::element_type;
  else if (rm == "normalized_float") t.read_mode = ReadMode::normalized_float;
  else raise_value_error("invalid read_mode: " + rm);
  t.normalized_coords = opt_bool(o, "normalized_coords").value_or(false);
  t.srgb = opt_bool(o, "srgb").value_or(false);
  t.disable_trilinear_optimization = opt_bool(o, "disable_trilinear_optimization").value_or(false);
  t.seamless_cubemap = opt_bool(o, "seamless_cubemap").value_or(false);
  long long aniso = opt_int(o, "max_anisotropy").value_or(0);
  if (aniso < 0) raise_value_error("max_anisotropy must be >= 0");
  t.max_anisotropy = static_cast<unsigned>(aniso);
  t.mipmap_filter_mode = filter_mode(enum_value(o.attr("mipmap_filter_mode")), "mipmap_filter_mode");
  t.mipmap_level_bias = nb::cast<float>(o.attr("mipmap_level_bias"));
  t.min_mipmap_level_clamp = nb::cast<float>(o.attr("min_mipmap_level_clamp"));
  t.max_mipmap_level_clamp = nb::cast<float>(o.attr("max_mipmap_level_clamp"));
  nb::object bc = o.attr("border_color");
  if (!bc.is_none()) {
    std::array<float, 4> c{};
    std::size_t i = 0;
    for (nb::handle v : bc) {
      if (i == 4) raise_value_error("border_color takes 4 floats");
      c[i++] = nb::cast<float>(v);
    }
    if (i != 4) raise_value_error("border_color takes 4 floats");
    t.border_color = c;
  }
  return t;
}

int ordinal_of(nb::handle device) { return nb::inst_ptr<PyDevice>(device)->dev.ordinal(); }

// The Python objects a descriptor was built from, kept alive by it (a Buffer
// for linear memory, an array wrapper).
struct PyResource {
  ResourceDescriptor desc;
  nb::object source;
};

void copy_in(OpaqueArray& a, nb::handle src, nb::handle stream) {
  cucore::StreamRef s = stream_arg(stream);
  if (PyObject_TypeCheck(src.ptr(), g_types.buffer)) {
    a.copy_from(*nb::inst_ptr<cucore::Buffer>(src), s);
    return;
  }
  HostBytes h(src, false);
  a.copy_from(std::span<const std::byte>(static_cast<const std::byte*>(h.view.buf), h.size()), s);
}

nb::object copy_out(const OpaqueArray& a, nb::handle dst, nb::handle stream) {
  cucore::StreamRef s = stream_arg(stream);
  if (PyObject_TypeCheck(dst.ptr(), g_types.buffer)) {
    a.copy_to(*nb::inst_ptr<cucore::Buffer>(dst), s);
    return nb::borrow(dst);
  }
  HostBytes h(dst, true);
  a.copy_to(std::span<std::byte>(static_cast<std::byte*>(h.view.buf), h.size()), s);
  return nb::borrow(dst);
}

template <typename T>
std::string closed_repr(const char* name, const T& obj) {
  return std::string("<") + name + (obj.is_closed() ? " closed>" : ">");
}

}  // namespace

// Device.create_* (bound on Device in device.cpp).
nb::object create_opaque_array(const cucore::Device& dev, nb::handle options) {
  nb::object o = options_arg(options, "OpaqueArrayOptions");
  return nb::cast(dev.create_opaque_array({.shape = shape_arg(o),
                                           .format = format_arg(o.attr("format")),
                                           .num_channels = static_cast<unsigned>(opt_int(o, "num_channels").value_or(1)),
                                           .is_surface_load_store = opt_bool(o, "is_surface_load_store").value_or(false)}));
}

nb::object create_mipmapped_array(const cucore::Device& dev, nb::handle options) {
  nb::object o = options_arg(options, "MipmappedArrayOptions");
  long long levels = opt_int(o, "num_levels").value_or(1);
  if (levels < 1) throw nb::value_error("num_levels must be >= 1");
  return nb::cast(dev.create_mipmapped_array(
      {.shape = shape_arg(o),
       .format = format_arg(o.attr("format")),
       .num_channels = static_cast<unsigned>(opt_int(o, "num_channels").value_or(1)),
       .num_levels = static_cast<unsigned>(levels),
       .is_surface_load_store = opt_bool(o, "is_surface_load_store").value_or(false)}));
}

namespace {
const PyResource& resource_arg(nb::handle r) {
  if (!nb::isinstance<PyResource>(r)) raise_type_error("resource must be a ResourceDescriptor");
  return *nb::inst_ptr<PyResource>(r);
}
}  // namespace

nb::object create_texture_object(const cucore::Device& dev, nb::handle resource, nb::handle options) {
  const PyResource& r = resource_arg(resource);
  TextureObject t = dev.create_texture_object(r.desc, texture_options(options));
  nb::object obj = nb::cast(std::move(t));
  nb::setattr(obj, "_resource", resource);  // the Python face stays what it was built from
  nb::setattr(obj, "_options", options_arg(options, "TextureObjectOptions"));
  return obj;
}

nb::object create_surface_object(const cucore::Device& dev, nb::handle resource) {
  const PyResource& r = resource_arg(resource);
  nb::object obj = nb::cast(dev.create_surface_object(r.desc));
  nb::setattr(obj, "_resource", resource);
  return obj;
}

void bind_texture(nb::module_& m) {
  nb::class_<OpaqueArray>(m, "OpaqueArray",
      "An opaque, driver-laid-out CUDA array, read by kernels through a TextureObject or SurfaceObject; data "
      "moves in and out by copy_from / copy_to.")
      .def("__init__", [](OpaqueArray*, nb::args, nb::kwargs) {
        refuse_init("OpaqueArray cannot be instantiated directly. Use Device.create_opaque_array().");
      })
      .def_prop_ro("handle", [](const OpaqueArray& a) { return reinterpret_cast<std::uintptr_t>(a.handle()); })
      .def_prop_ro("is_closed", &OpaqueArray::is_closed)
      .def_prop_ro("shape", [](const OpaqueArray& a) { return shape_tuple(a.shape()); })
      .def_prop_ro("format", [](const OpaqueArray& a) { return format_object(a.format()); })
      .def_prop_ro("num_channels", &OpaqueArray::num_channels)
      .def_prop_ro("element_bytes", &OpaqueArray::element_bytes)
      .def_prop_ro("size_bytes", &OpaqueArray::size_bytes)
      .def_prop_ro("device", [](const OpaqueArray& a) { return device_object(a.device_id()); })
      .def_prop_ro("is_surface_load_store", &OpaqueArray::is_surface_load_store)
      .def("copy_from", &copy_in, nb::arg("src"), nb::kw_only(), nb::arg("stream"),
           "Copies the whole array's bytes from `src` (a Buffer or a host buffer) on `stream`.")
      .def("copy_to", &copy_out, nb::arg("dst"), nb::kw_only(), nb::arg("stream"),
           "Copies the whole array into `dst` (a Buffer or a writable host buffer) on `stream`; returns dst.")
      .def("close", &OpaqueArray::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](OpaqueArray& a, nb::args) { a.close(); })
      .def("__repr__", [](const OpaqueArray& a) { return closed_repr("OpaqueArray", a); });

  nb::class_<MipmappedArray>(m, "MipmappedArray", "A mipmapped CUDA array (levels via get_level).")
      .def("__init__", [](MipmappedArray*, nb::args, nb::kwargs) {
        refuse_init("MipmappedArray cannot be instantiated directly. Use Device.create_mipmapped_array().");
      })
      .def_prop_ro("handle", [](const MipmappedArray& a) { return reinterpret_cast<std::uintptr_t>(a.handle()); })
      .def_prop_ro("is_closed", &MipmappedArray::is_closed)
      .def_prop_ro("shape", [](const MipmappedArray& a) { return shape_tuple(a.shape()); })
      .def_prop_ro("format", [](const MipmappedArray& a) { return format_object(a.format()); })
      .def_prop_ro("num_channels", &MipmappedArray::num_channels)
      .def_prop_ro("num_levels", &MipmappedArray::num_levels)
      .def_prop_ro("is_surface_load_store", &MipmappedArray::is_surface_load_store)
      .def_prop_ro("device", [](const MipmappedArray& a) { return device_object(a.device_id()); })
      .def("get_level", [](const MipmappedArray& a, long long level) {
        if (level < 0) throw nb::index_error("level must be >= 0");
        try {
          return a.get_level(static_cast<unsigned>(level));
        } catch (const std::out_of_range& e) {
          throw nb::index_error(e.what());
        }
      }, nb::arg("level"))
      .def("close", &MipmappedArray::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](MipmappedArray& a, nb::args) { a.close(); })
      .def("__repr__", [](const MipmappedArray& a) { return closed_repr("MipmappedArray", a); });

  nb::class_<PyResource>(m, "ResourceDescriptor", "What a texture or surface reads (built with the from_* methods).")
      .def("__init__", [](PyResource*, nb::args, nb::kwargs) {
        refuse_init("ResourceDescriptor cannot be instantiated directly. Use ResourceDescriptor.from_* factories.");
      })
      .def_static("from_opaque_array", [](nb::handle array) {
        if (!nb::isinstance<OpaqueArray>(array)) raise_type_error("array must be an OpaqueArray");
        return PyResource{ResourceDescriptor::from_opaque_array(*nb::inst_ptr<OpaqueArray>(array)), nb::borrow(array)};
      }, nb::arg("array"))
      .def_static("from_mipmapped_array", [](nb::handle array) {
        if (!nb::isinstance<MipmappedArray>(array)) raise_type_error("mipmapped_array must be a MipmappedArray");
        return PyResource{ResourceDescriptor::from_mipmapped_array(*nb::inst_ptr<MipmappedArray>(array)),
                          nb::borrow(array)};
      }, nb::arg("mipmapped_array"))
      .def_static("from_linear", [](nb::handle buffer, nb::handle format, unsigned num_channels, nb::handle size) {
        if (!PyObject_TypeCheck(buffer.ptr(), g_types.buffer)) raise_type_error("buffer must be a Buffer");
        std::size_t n = size.is_none() ? 0 : static_cast<std::size_t>(uint64_arg(size, "size"));
        return PyResource{ResourceDescriptor::from_linear(*nb::inst_ptr<cucore::Buffer>(buffer), format_arg(format),
                                                          num_channels, n, py_owner(buffer)),
                          nb::borrow(buffer)};
      }, nb::arg("buffer"), nb::kw_only(), nb::arg("format"), nb::arg("num_channels"), nb::arg("size_bytes") = nb::none())
      .def_static("from_pitch2d", [](nb::handle buffer, nb::handle format, unsigned num_channels, std::size_t width,
                                     std::size_t height, std::size_t pitch_bytes) {
        if (!PyObject_TypeCheck(buffer.ptr(), g_types.buffer)) raise_type_error("buffer must be a Buffer");
        return PyResource{ResourceDescriptor::from_pitch2d(*nb::inst_ptr<cucore::Buffer>(buffer), format_arg(format),
                                                           num_channels, width, height, pitch_bytes, py_owner(buffer)),
                          nb::borrow(buffer)};
      }, nb::arg("buffer"), nb::kw_only(), nb::arg("format"), nb::arg("num_channels"), nb::arg("width"),
         nb::arg("height"), nb::arg("pitch_bytes"))
      .def_prop_ro("kind", [](const PyResource& r) {
        static const char* names[] = {"opaque_array", "mipmapped_array", "linear", "pitch2d"};
        return std::string(names[static_cast<int>(r.desc.kind())]);
      })
      .def_prop_ro("source", [](const PyResource& r) { return r.source; })
      .def_prop_ro("format", [](const PyResource& r) -> nb::object {
        auto f = r.desc.format();
        return f ? format_object(*f) : nb::none();
      })
      .def_prop_ro("num_channels", [](const PyResource& r) -> nb::object {
        return r.desc.format() ? nb::cast(r.desc.num_channels()) : nb::none();
      })
      .def_prop_ro("size_bytes", [](const PyResource& r) -> nb::object {
        return r.desc.kind() == ResourceDescriptor::Kind::linear ? nb::cast(r.desc.size_bytes()) : nb::none();
      })
      .def_prop_ro("width", [](const PyResource& r) -> nb::object {
        return r.desc.kind() == ResourceDescriptor::Kind::pitch2d ? nb::cast(r.desc.width()) : nb::none();
      })
      .def_prop_ro("height", [](const PyResource& r) -> nb::object {
        return r.desc.kind() == ResourceDescriptor::Kind::pitch2d ? nb::cast(r.desc.height()) : nb::none();
      })
      .def_prop_ro("pitch_bytes", [](const PyResource& r) -> nb::object {
        return r.desc.kind() == ResourceDescriptor::Kind::pitch2d ? nb::cast(r.desc.pitch_bytes()) : nb::none();
      });

  nb::class_<TextureObject>(m, "TextureObject",
      "A bindless texture (cuTexObjectCreate); kernels take it as its 64-bit handle (launch passes it).",
      nb::dynamic_attr())
      .def("__init__", [](TextureObject*, nb::args, nb::kwargs) {
        refuse_init("TextureObject cannot be instantiated directly. Use Device.create_texture_object().");
      })
      .def_prop_ro("handle", &TextureObject::handle)
      .def_prop_ro("is_closed", &TextureObject::is_closed)
      .def_prop_ro("resource", [](nb::handle self) { return nb::getattr(self, "_resource", nb::none()); })
      .def_prop_ro("options", [](nb::handle self) { return nb::getattr(self, "_options", nb::none()); })
      .def_prop_ro("device", [](const TextureObject& t) { return device_object(t.device_id()); })
      .def("close", &TextureObject::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](TextureObject& t, nb::args) { t.close(); })
      .def("__int__", &TextureObject::kernel_argument)
      .def("__repr__", [](const TextureObject& t) { return closed_repr("TextureObject", t); });
  g_types.texture_object = reinterpret_cast<PyTypeObject*>(m.attr("TextureObject").ptr());

  nb::class_<SurfaceObject>(m, "SurfaceObject",
      "A bindless surface (cuSurfObjectCreate) for typed loads and stores; kernels take its 64-bit handle.",
      nb::dynamic_attr())
      .def("__init__", [](SurfaceObject*, nb::args, nb::kwargs) {
        refuse_init("SurfaceObject cannot be instantiated directly. Use Device.create_surface_object().");
      })
      .def_prop_ro("handle", &SurfaceObject::handle)
      .def_prop_ro("is_closed", &SurfaceObject::is_closed)
      .def_prop_ro("resource", [](nb::handle self) { return nb::getattr(self, "_resource", nb::none()); })
      .def_prop_ro("device", [](const SurfaceObject& s) { return device_object(s.device_id()); })
      .def("close", &SurfaceObject::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](SurfaceObject& s, nb::args) { s.close(); })
      .def("__int__", &SurfaceObject::kernel_argument)
      .def("__repr__", [](const SurfaceObject& s) { return closed_repr("SurfaceObject", s); });
  g_types.surface_object = reinterpret_cast<PyTypeObject*>(m.attr("SurfaceObject").ptr());
}

}  // namespace cucore::python
