// `cucore doctor`: what this machine offers cucore, on any machine. libcucore
// builds the report (pathfinder::doctor); this prints it, as text or --json.
#include <cucore/pathfinder.hpp>

#include <cstdio>

#include "command.hpp"

namespace cucore::cli {
namespace {

const RegisterCommand doctor{[](CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("doctor", "Report the CUDA components, driver, devices and NVML cucore finds");
  static bool json = false;  // one doctor subcommand per process
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->callback([&exit_code] {
    pathfinder::DoctorReport r = pathfinder::doctor();
    std::fputs((json ? r.json() : r.text()).c_str(), stdout);
    exit_code = r.exit_status;
  });
}};

}  // namespace
}  // namespace cucore::cli
