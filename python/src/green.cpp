// Green contexts for Python, with cuda.core 1.2's names: DeviceResources,
// SMResource (split), WorkqueueResource (configure), and the conversion of
// SMResourceOptions / WorkqueueResourceOptions / ContextOptions (the
// dataclasses in cucore/_resources.py) into libcucore's options.
// Device.resources, Device.create_context, Context.resources and
// Stream.resources are bound with their classes (device.cpp, stream.cpp).
#include <cucore/resources.hpp>

#include <cstdint>
#include <climits>
#include <string>

#include "common.hpp"

namespace cucore::python {
namespace {

std::string py_type_name(nb::handle o) {
  return nb::cast<std::string>(nb::str(nb::handle((PyObject*)Py_TYPE(o.ptr())).attr("__name__")));
}

// A Sequence as cuda.core means it: not a str or bytes.
bool is_sequence(nb::handle o) {
  return PySequence_Check(o.ptr()) && !PyUnicode_Check(o.ptr()) && !PyBytes_Check(o.ptr()) &&
         !PyByteArray_Check(o.ptr());
}

int int_value(nb::handle v, const std::string& field) {
  if (v.is_none()) return 0;
  if (!PyLong_Check(v.ptr())) raise_type_error(field + " must be an int or None, got " + py_type_name(v));
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  // Past an unsigned int: cuda.core's conversion fails with OverflowError.
  if (overflow > 0 || x > static_cast<long long>(UINT_MAX))
    raise_overflow_error(field + " = " + nb::cast<std::string>(nb::repr(v)) + " does not fit in an unsigned int");
  if (x > INT_MAX) raise_value_error(field + " = " + nb::cast<std::string>(nb::repr(v)) + " is too large");
  if (overflow < 0 || x < 0) raise_value_error(field + " must be non-negative, got " + nb::cast<std::string>(nb::repr(v)));
  return static_cast<int>(x);
}

PerGroup<int> int_field(nb::handle options, const char* name) {
  nb::object v = nb::getattr(options, name, nb::none());
  if (v.is_none()) return {};
  if (PyLong_Check(v.ptr())) return PerGroup<int>(int_value(v, name));
  if (!is_sequence(v)) raise_type_error(std::string(name) + " must be int, Sequence, or None, got " + py_type_name(v));
  std::vector<int> values;
  for (nb::handle item : v) values.push_back(int_value(item, name));
  return PerGroup<int>(std::move(values));
}

PerGroup<bool> bool_field(nb::handle options, const char* name) {
  nb::object v = nb::getattr(options, name, nb::none());
  auto truth = [](nb::handle item) {
    int t = PyObject_IsTrue(item.ptr());
    if (t < 0) throw nb::python_error();
    return t != 0;
  };
  if (v.is_none()) return {};
  if (!is_sequence(v)) return PerGroup<bool>(truth(v));
  std::vector<bool> values;
  for (nb::handle item : v) values.push_back(truth(item));
  return PerGroup<bool>(std::move(values));
}

// A dict of the fields is made into the dataclass, as cuda.core's
// check_or_create_options does (a wrong key is its TypeError).
nb::object dict_as(nb::handle options, const char* cls) {
  if (!PyDict_Check(options.ptr())) return nb::borrow(options);
  nb::object type = nb::module_::import_("cucore._resources").attr(cls);
  nb::tuple none;
  PyObject* made = PyObject_Call(type.ptr(), none.ptr(), options.ptr());
  if (!made) throw nb::python_error();
  return nb::steal(made);
}

cucore::SMResourceOptions sm_options(nb::handle given) {
  nb::object options = dict_as(given, "SMResourceOptions");
  if (!nb::hasattr(options, "count"))
    raise_type_error("options must be SMResourceOptions, got " + py_type_name(options));
  return {int_field(options, "count"), int_field(options, "coscheduled_sm_count"),
          int_field(options, "preferred_coscheduled_sm_count"), bool_field(options, "backfill")};
}

cucore::WorkqueueResourceOptions workqueue_options(nb::handle given) {
  nb::object options = dict_as(given, "WorkqueueResourceOptions");
  if (!nb::hasattr(options, "sharing_scope"))
    raise_type_error("options must be WorkqueueResourceOptions, got " + py_type_name(options));
  cucore::WorkqueueResourceOptions o;
  nb::object scope = options.attr("sharing_scope");
  if (!scope.is_none()) {
    std::string s = PyUnicode_Check(scope.ptr()) ? utf8_arg(scope, "sharing_scope") : std::string();
    if (s == "device_ctx") o.sharing_scope = cucore::WorkqueueSharingScope::device_ctx;
    else if (s == "green_ctx_balanced") o.sharing_scope = cucore::WorkqueueSharingScope::green_ctx_balanced;
    else
      raise_value_error("sharing_scope " + nb::cast<std::string>(nb::repr(scope)) +
                        " is not a valid sharing scope; must be 'device_ctx' or 'green_ctx_balanced'");
  }
  nb::object limit = nb::getattr(options, "concurrency_limit", nb::none());
  if (!limit.is_none()) {
    if (PyBool_Check(limit.ptr()) || !PyLong_Check(limit.ptr()))
      raise_type_error("concurrency_limit must be an int or None, got " + py_type_name(limit));
    long long v = PyLong_AsLongLong(limit.ptr());
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    if (v > INT_MAX) raise_value_error("concurrency_limit is too large");
    o.concurrency_limit = static_cast<int>(v);
  }
  return o;
}

const char* scope_name(cucore::WorkqueueSharingScope s) {
  return s == cucore::WorkqueueSharingScope::green_ctx_balanced ? "green_ctx_balanced" : "device_ctx";
}

[[noreturn]] void not_constructible(const char* cls, const char* how) {
  // cuda.core's text
  throw std::runtime_error(std::string(cls) + " cannot be instantiated directly. Use " + how + ".");
}

}  // namespace

cucore::ContextOptions context_options(nb::handle options) {
  if (options.is_none() || !nb::hasattr(options, "resources"))
    raise_type_error("options must be ContextOptions(resources=[...]), got " + py_type_name(options));
  nb::object resources = options.attr("resources");
  if (!is_sequence(resources))
    raise_type_error("ContextOptions.resources must be a sequence of SMResource / WorkqueueResource, got " +
                     py_type_name(resources));
  cucore::ContextOptions o;
  for (nb::handle r : resources) {
    if (nb::isinstance<cucore::SMResource>(r)) o.resources.emplace_back(nb::cast<cucore::SMResource>(r));
    else if (nb::isinstance<cucore::WorkqueueResource>(r)) o.resources.emplace_back(nb::cast<cucore::WorkqueueResource>(r));
    else raise_type_error("ContextOptions.resources holds a " + py_type_name(r) + "; expected SMResource or WorkqueueResource");
  }
  return o;
}

void bind_green(nb::module_& m) {
  nb::class_<cucore::SMResource>(m, "SMResource",
                                 "A set of SMs: a device's, a green context's, or a group (or the remainder) of a split.",
                                 nb::is_weak_referenceable())
      .def("__init__", [](cucore::SMResource*, nb::args, nb::kwargs) {
        not_constructible("SMResource", "dev.resources.sm or SMResource.split()");
      })
      .def_prop_ro("handle", [](const cucore::SMResource& r) { return reinterpret_cast<std::uintptr_t>(r.handle()); },
                   "The address of the driver's CUdevResource (the first unit's, for a group of several).")
      .def_prop_ro("sm_count", &cucore::SMResource::sm_count, "SMs in this resource.")
      .def_prop_ro("min_partition_size", &cucore::SMResource::min_partition_size,
                   "The fewest SMs a partition of this resource can have.")
      .def_prop_ro("coscheduled_alignment", &cucore::SMResource::coscheduled_alignment,
                   "SMs guaranteed to be co-scheduled (the driver's smCoscheduledAlignment).")
      .def_prop_ro("flags", &cucore::SMResource::flags, "The driver's raw flags (0 before CUDA 13.1).")
      .def_prop_ro("device_id", &cucore::SMResource::device_id)
      .def_prop_ro("requested_sm_count", &cucore::SMResource::requested_sm_count,
                   "The count the split asked for this group (sm_count unless rounded down); cucore extra.")
      .def_prop_ro("is_usable", &cucore::SMResource::is_usable, "False for dry-run results; cucore extra.")
      .def("split", [](const cucore::SMResource& r, nb::handle options, bool dry_run) {
        if (options.is_none()) raise_type_error("options must be SMResourceOptions, got NoneType");
        auto [groups, rest] = r.split(sm_options(options), dry_run);
        nb::list out;
        for (auto& g : groups) out.append(nb::cast(std::move(g)));
        return nb::make_tuple(out, nb::cast(std::move(rest)));
      }, nb::arg("options"), nb::kw_only(), nb::arg("dry_run") = false,
         "Splits into (groups, remainder): one group per count, each rounded down to the GPU's granularity "
         "(a UserWarning says so); never fewer groups than asked. ValueError names a split that would work when "
         "the request cannot be met. dry_run: the same answer, but the results cannot make a context.")
      .def("__repr__", [](const cucore::SMResource& r) {
        if (!r) return std::string("<SMResource empty>");
        return "<SMResource sm_count=" + std::to_string(r.sm_count()) + " device=" + std::to_string(r.device_id()) +
               (r.is_usable() ? "" : " dry-run") + ">";
      });

  nb::class_<cucore::WorkqueueResource>(m, "WorkqueueResource",
                                        "A workqueue configuration for a green context (CUDA 13.1 drivers).",
                                        nb::is_weak_referenceable())
      .def("__init__", [](cucore::WorkqueueResource*, nb::args, nb::kwargs) {
        not_constructible("WorkqueueResource", "dev.resources.workqueue");
      })
      .def_prop_ro("handle", [](const cucore::WorkqueueResource& w) {
        return reinterpret_cast<std::uintptr_t>(w.handle());
      }, "The address of the driver's CUdevResource.")
      .def_prop_ro("sharing_scope", [](const cucore::WorkqueueResource& w) { return scope_name(w.sharing_scope()); })
      .def_prop_ro("concurrency_limit", &cucore::WorkqueueResource::concurrency_limit)
      .def_prop_ro("device", [](const cucore::WorkqueueResource& w) { return device_object(w.device_id()); })
      .def("configure", [](cucore::WorkqueueResource& w, nb::handle options) {
        w.configure(workqueue_options(options));
      }, nb::arg("options"), "Changes this configuration in place.");

  nb::class_<cucore::DeviceResources>(m, "DeviceResources",
                                      "A device's resources (Device.resources), or a context's (Context.resources, "
                                      "Stream.resources).", nb::is_weak_referenceable())
      .def("__init__", [](cucore::DeviceResources*, nb::args, nb::kwargs) {
        not_constructible("DeviceResources", "dev.resources");
      })
      .def_prop_ro("sm", &cucore::DeviceResources::sm, "The SMResource of this device or context.")
      .def_prop_ro("workqueue", &cucore::DeviceResources::workqueue,
                   "The WorkqueueResource of this device or context (FeatureUnavailableError before CUDA 13.1).");
}

}  // namespace cucore::python
