// libFuzzer entry point for cucore::fuzz::array_interface (tests/fuzz/targets.hpp).
#include "targets.hpp"
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return cucore::fuzz::array_interface(data, size);
}
