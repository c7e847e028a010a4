// libFuzzer entry point for cucore::fuzz::dlpack (tests/fuzz/targets.hpp).
#include "targets.hpp"
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return cucore::fuzz::dlpack(data, size);
}
