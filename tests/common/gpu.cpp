#include "common/gpu.hpp"

#include <cucore/device.hpp>

#include <cstdlib>
#include <exception>

namespace cucore::test {

std::string gpu_unavailable_reason() {
  static const std::string reason = [] {
    try {
      if (Device::count() == 0) return std::string("the driver reports no CUDA device");
      return std::string();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  }();
  return reason;
}

bool gpu_required_by_environment() {
  const char* v = std::getenv("CUCORE_REQUIRE_GPU");
  return v && *v && std::string(v) != "0";
}

}  // namespace cucore::test
