// cucore.pathfinder.doctor(): libcucore's doctor report (pathfinder.hpp), which
// `python -m cucore doctor` prints exactly as the `cucore doctor` CLI does.
#include <cucore/pathfinder.hpp>

#include "common.hpp"

namespace cucore::python {

void bind_doctor(nb::module_& m) {
  using cucore::pathfinder::DoctorDevice;
  using cucore::pathfinder::DoctorNvml;
  using cucore::pathfinder::DoctorReport;
  nb::module_ pf = nb::borrow<nb::module_>(m.attr("pathfinder"));

  nb::class_<DoctorDevice>(pf, "DoctorDevice", "A CUDA device in the doctor report.")
      .def_ro("ordinal", &DoctorDevice::ordinal)
      .def_ro("name", &DoctorDevice::name)
      .def_ro("arch", &DoctorDevice::arch)
      .def_ro("uuid", &DoctorDevice::uuid)
      .def_ro("pci_bus_id", &DoctorDevice::pci_bus_id)
      .def_ro("multiprocessor_count", &DoctorDevice::multiprocessor_count)
      .def_ro("total_memory", &DoctorDevice::total_memory);
  nb::class_<DoctorNvml>(pf, "DoctorNvml", "NVML in the doctor report.")
      .def_ro("available", &DoctorNvml::available)
      .def_ro("version", &DoctorNvml::version)
      .def_ro("driver_version", &DoctorNvml::driver_version)
      .def_ro("device_count", &DoctorNvml::device_count)
      .def_ro("error", &DoctorNvml::error);
  nb::class_<DoctorReport>(pf, "DoctorReport", "What this machine offers cucore (cucore.pathfinder.doctor()).")
      .def_ro("components", &DoctorReport::components)
      .def_ro("device_count", &DoctorReport::device_count)
      .def_ro("device_error", &DoctorReport::device_error)
      .def_ro("devices", &DoctorReport::devices)
      .def_ro("nvml", &DoctorReport::nvml)
      .def_ro("can_compile", &DoctorReport::can_compile)
      .def_ro("can_link", &DoctorReport::can_link)
      .def_ro("verdict", &DoctorReport::verdict)
      .def_ro("exit_status", &DoctorReport::exit_status)
      .def("text", &DoctorReport::text, "The report for people; the verdict is its last line.")
      .def("json", &DoctorReport::json, "The report as one JSON document.");
  pf.def("doctor", &cucore::pathfinder::doctor, nb::call_guard<nb::gil_scoped_release>(),
         "Components, devices, NVML and a verdict: what `cucore doctor` prints.");
}

}  // namespace cucore::python
