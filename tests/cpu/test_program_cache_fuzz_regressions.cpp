// Replays every committed fuzz input (tests/fuzz/corpus) and every crash the
// fuzzers found (tests/fuzz/regressions) through the same target bodies, under
// the normal test run (and its ASan+UBSan build): a fixed crash stays fixed.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#define CUCORE_FUZZ_FAIL(what) throw std::runtime_error(std::string("fuzz property broken: ") + (what))
#include "fuzz/targets.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = fs::path(CUCORE_TEST_DATA_DIR).parent_path() / "fuzz";

// Every input of `target`: its seeds and its regressions.
std::vector<fs::path> inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (const char* kind : {"corpus", "regressions"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(kFuzzDir / kind / target, ec))
      if (e.is_regular_file()) out.push_back(e.path());
  }
  return out;
}

void replay(const std::string& target, int (*body)(const std::uint8_t*, std::size_t)) {
  const auto files = inputs(target);
  ASSERT_FALSE(files.empty()) << "no inputs under " << (kFuzzDir / "corpus" / target);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NO_THROW(body(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())) << f;
  }
}

TEST(FuzzRegressions, EntryRecords) { replay("entry_record", &cucore::fuzz::entry_record); }
TEST(FuzzRegressions, IncludeScans) { replay("include_scan", &cucore::fuzz::include_scan); }
TEST(FuzzRegressions, ManifestsAndMemos) { replay("manifests", &cucore::fuzz::manifests); }
TEST(FuzzRegressions, DLPackTensors) { replay("dlpack", &cucore::fuzz::dlpack); }
TEST(FuzzRegressions, ArrayInterfaces) { replay("array_interface", &cucore::fuzz::array_interface); }

}  // namespace
