// libFuzzer entry point for cucore::fuzz::entry_record (tests/fuzz/targets.hpp).
#include "targets.hpp"
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return cucore::fuzz::entry_record(data, size);
}
