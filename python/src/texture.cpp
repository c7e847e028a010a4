// cucore.texture: OpaqueArray, MipmappedArray, ResourceDescriptor, TextureObject,
// SurfaceObject (cuda.core.texture's names), and the Device factories. The
// option dataclasses and enums live in Python (cucore._options, cucore.typing).
#include <cucore/texture.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <optional>
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
  std::vector<std::size_t> shape;
  for (nb::handle e : o.attr("shape")) shape.push_back(static_cast<std::size_t>(uint64_arg(e, "shape")));
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
  return AddressMode::border;  // the dataclass's normalizers admit nothing else
}
FilterMode filter_mode(nb::handle v, const char* field) {
  nb::object m = options_module().attr("_normalize_enum")(field, v, nb::module_::import_("cucore.typing").attr("FilterModeType"));
  return enum_value(m) == "linear" ? FilterMode::linear : FilterMode::point;
}

// The sampling state, checked as cuda.core checks it when it makes a texture
// (the dataclass checks the enum fields when it is made; address_mode,
// max_anisotropy and border_color are checked here).
TextureObjectOptions texture_options(nb::handle o) {
  TextureObjectOptions t;
  nb::object modes = options_module().attr("_normalize_address_modes")(o.attr("address_mode"));
  for (std::size_t i = 0; i < 3; ++i) t.address_mode[i] = address_mode(enum_value(modes[i]));
  t.filter_mode = filter_mode(o.attr("filter_mode"), "filter_mode");
  nb::object rm = options_module().attr("_normalize_enum")("read_mode", o.attr("read_mode"),
                                                            nb::module_::import_("cucore.typing").attr("ReadModeType"));
  t.read_mode = enum_value(rm) == "normalized_float" ? ReadMode::normalized_float : ReadMode::element_type;
  t.normalized_coords = opt_bool(o, "normalized_coords").value_or(false);
  t.srgb = opt_bool(o, "srgb").value_or(false);
  t.disable_trilinear_optimization = opt_bool(o, "disable_trilinear_optimization").value_or(false);
  t.seamless_cubemap = opt_bool(o, "seamless_cubemap").value_or(false);
  long long aniso = opt_int(o, "max_anisotropy").value_or(0);
  if (aniso < 0) raise_value_error("max_anisotropy must be >= 0");
  t.max_anisotropy = static_cast<unsigned>(std::min<long long>(aniso, UINT32_MAX));
  t.mipmap_filter_mode = filter_mode(o.attr("mipmap_filter_mode"), "mipmap_filter_mode");
  t.mipmap_level_bias = nb::cast<float>(o.attr("mipmap_level_bias"));
  t.min_mipmap_level_clamp = nb::cast<float>(o.attr("min_mipmap_level_clamp"));
  t.max_mipmap_level_clamp = nb::cast<float>(o.attr("max_mipmap_level_clamp"));
  if (!o.attr("border_color").is_none()) {
    nb::object bc = options_module().attr("_border_color")(o.attr("border_color"));
    std::array<float, 4> c{};
    for (std::size_t i = 0; i < 4; ++i) c[i] = nb::cast<float>(bc[i]);
    t.border_color = c;
  }
  return t;
}

const char* tp_name_of(nb::handle o) { return Py_TYPE(o.ptr())->tp_name; }

// cuda.core's reprs: ArrayFormatType's member names (FLOAT32) and the shape tuple.
std::string format_name(ArrayFormat f) {
  std::string n = to_string(f);
  for (char& c : n) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return n;
}
std::string shape_repr(const std::vector<std::size_t>& shape) {
  std::string r = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + (shape.size() == 1 ? ",)" : ")");
}
std::string handle_repr(const char* name, unsigned long long h) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s(handle=0x%llx)", name, h);
  return buf;
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
  if (levels < 1) throw nb::value_error(("num_levels must be >= 1, got " + std::to_string(levels)).c_str());
  return nb::cast(dev.create_mipmapped_array(
      {.shape = shape_arg(o),
       .format = format_arg(o.attr("format")),
       .num_channels = static_cast<unsigned>(opt_int(o, "num_channels").value_or(1)),
       .num_levels = static_cast<unsigned>(levels),
       .is_surface_load_store = opt_bool(o, "is_surface_load_store").value_or(false)}));
}

namespace {
const PyResource& resource_arg(nb::handle r) {
  if (!nb::isinstance<PyResource>(r))
    raise_type_error(std::string("resource must be a ResourceDescriptor, got ") + tp_name_of(r));
  return *nb::inst_ptr<PyResource>(r);
}
}  // namespace

nb::object create_texture_object(const cucore::Device& dev, nb::handle resource, nb::handle options) {
  const PyResource& r = resource_arg(resource);
  nb::object o = options_arg(options, "TextureObjectOptions");
  TextureObject t = dev.create_texture_object(r.desc, texture_options(o));
  nb::object obj = nb::cast(std::move(t));
  nb::setattr(obj, "_resource", resource);  // the Python face stays what it was built from
  nb::setattr(obj, "_options", o);
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
      .def("__repr__", [](const OpaqueArray& a) -> std::string {
        if (a.is_closed()) return "OpaqueArray(closed)";
        return "OpaqueArray(shape=" + shape_repr(a.shape()) + ", format=" + format_name(a.format()) +
               ", num_channels=" + std::to_string(a.num_channels()) + ")";
      });

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
        // cuda.core raises ValueError for a level out of range.
        if (level < 0) throw nb::value_error(("level must be >= 0, got " + std::to_string(level)).c_str());
        try {
          return a.get_level(static_cast<unsigned>(level));
        } catch (const std::out_of_range& e) {
          throw nb::value_error(e.what());
        }
      }, nb::arg("level"))
      .def("close", &MipmappedArray::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](MipmappedArray& a, nb::args) { a.close(); })
      .def("__repr__", [](const MipmappedArray& a) -> std::string {
        if (a.is_closed()) return "MipmappedArray(closed)";
        return "MipmappedArray(shape=" + shape_repr(a.shape()) + ", format=" + format_name(a.format()) +
               ", num_channels=" + std::to_string(a.num_channels()) + ", num_levels=" + std::to_string(a.num_levels()) +
               ")";
      });

  nb::class_<PyResource>(m, "ResourceDescriptor", "What a texture or surface reads (built with the from_* methods).")
      .def("__init__", [](PyResource*, nb::args, nb::kwargs) {
        refuse_init("ResourceDescriptor cannot be instantiated directly. Use ResourceDescriptor.from_* factories.");
      })
      .def_static("from_opaque_array", [](nb::handle array) {
        if (!nb::isinstance<OpaqueArray>(array))
          raise_type_error(std::string("array must be an OpaqueArray, got ") + tp_name_of(array));
        return PyResource{ResourceDescriptor::from_opaque_array(*nb::inst_ptr<OpaqueArray>(array)), nb::borrow(array)};
      }, nb::arg("array").none())
      .def_static("from_mipmapped_array", [](nb::handle array) {
        if (!nb::isinstance<MipmappedArray>(array))
          raise_type_error(std::string("mipmapped_array must be a MipmappedArray, got ") + tp_name_of(array));
        return PyResource{ResourceDescriptor::from_mipmapped_array(*nb::inst_ptr<MipmappedArray>(array)),
                          nb::borrow(array)};
      }, nb::arg("mipmapped_array").none())
      .def_static("from_linear", [](nb::handle buffer, nb::handle format, unsigned num_channels, nb::handle size) {
        if (!PyObject_TypeCheck(buffer.ptr(), g_types.buffer))
          raise_type_error(std::string("buffer must be a Buffer, got ") + tp_name_of(buffer));
        const ArrayFormat f = format_arg(format);
        std::optional<std::size_t> n;
        if (!size.is_none()) n = static_cast<std::size_t>(uint64_arg(size, "size_bytes"));
        return PyResource{ResourceDescriptor::from_linear(*nb::inst_ptr<cucore::Buffer>(buffer), f, num_channels, n,
                                                          py_owner(buffer)),
                          nb::borrow(buffer)};
      }, nb::arg("buffer"), nb::kw_only(), nb::arg("format"), nb::arg("num_channels"), nb::arg("size_bytes") = nb::none())
      .def_static("from_pitch2d", [](nb::handle buffer, nb::handle format, unsigned num_channels, std::size_t width,
                                     std::size_t height, std::size_t pitch_bytes) {
        if (!PyObject_TypeCheck(buffer.ptr(), g_types.buffer))
          raise_type_error(std::string("buffer must be a Buffer, got ") + tp_name_of(buffer));
        const ArrayFormat f = format_arg(format);
        return PyResource{ResourceDescriptor::from_pitch2d(*nb::inst_ptr<cucore::Buffer>(buffer), f, num_channels,
                                                           width, height, pitch_bytes, py_owner(buffer)),
                          nb::borrow(buffer)};
      }, nb::arg("buffer"), nb::kw_only(), nb::arg("format"), nb::arg("num_channels"), nb::arg("width"),
         nb::arg("height"), nb::arg("pitch_bytes"))
      .def_prop_ro("kind", [](const PyResource& r) { return std::string(to_string(r.desc.kind())); })
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
      })
      .def("__repr__", [](const PyResource& r) {
        const auto& d = r.desc;
        const std::string head = std::string("ResourceDescriptor(kind='") + to_string(d.kind()) + "'";
        if (d.kind() == ResourceDescriptor::Kind::linear)
          return head + ", format=" + format_name(d.element_format()) + ", num_channels=" +
                 std::to_string(d.num_channels()) + ", size_bytes=" + std::to_string(d.size_bytes()) + ")";
        if (d.kind() == ResourceDescriptor::Kind::pitch2d)
          return head + ", format=" + format_name(d.element_format()) + ", num_channels=" +
                 std::to_string(d.num_channels()) + ", width=" + std::to_string(d.width()) + ", height=" +
                 std::to_string(d.height()) + ", pitch_bytes=" + std::to_string(d.pitch_bytes()) + ")";
        return head + ")";
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
      .def("__repr__", [](const TextureObject& t) { return handle_repr("TextureObject", t.handle()); });
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
      .def("__repr__", [](const SurfaceObject& s) { return handle_repr("SurfaceObject", s.handle()); });
  g_types.surface_object = reinterpret_cast<PyTypeObject*>(m.attr("SurfaceObject").ptr());
}

}  // namespace cucore::python
