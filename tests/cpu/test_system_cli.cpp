// `cucore smi` on any machine: with NVML it shows what cucore::system reads;
// without it, a clear message (or JSON document) naming what was searched and a
// non-zero exit. Each machine runs the branch it truly is.
#include <cucore/errors.hpp>
#include <cucore/system.hpp>

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/run_command.hpp"

namespace {

cucore::test::CommandResult run(const std::string& args) {
  return cucore::test::run_command(std::string(CUCORE_CLI_PATH) + " " + args + " 2>&1");
}

// Whether NVML loads here; the reason when it does not.
std::string nvml_unavailable_reason() {
  try {
    (void)cucore::system::get_num_devices();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

TEST(CliSmi, TableShowsEveryDeviceOrSaysWhatIsMissing) {
  auto r = run("smi");
  std::string why = nvml_unavailable_reason();
  if (why.empty()) {
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("driver " + cucore::system::driver_version()), std::string::npos) << r.out;
    for (const auto& d : cucore::system::Device::get_all_devices())
      EXPECT_NE(r.out.find(d.name().substr(0, 26)), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Processes"), std::string::npos);
  } else {
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_EQ(r.out.rfind("cucore smi: NVML is not usable here: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("libnvidia-ml.so.1"), std::string::npos) << r.out;  // what was searched
    EXPECT_NE(r.out.find(why.substr(0, why.find('\n'))), std::string::npos) << r.out;
  }
}

TEST(CliSmi, JsonIsOneDocumentEvenForTheError) {
  auto r = run("smi --json");
  nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails) when not one JSON document
  if (nvml_unavailable_reason().empty()) {
    ASSERT_EQ(r.status, 0) << r.out;
    ASSERT_EQ(j["devices"].size(), static_cast<size_t>(cucore::system::get_num_devices()));
    EXPECT_EQ(j["driver_version"], cucore::system::driver_version());
    for (size_t i = 0; i < j["devices"].size(); ++i) {
      cucore::system::Device d(static_cast<unsigned>(i));
      const auto& jd = j["devices"][i];
      EXPECT_EQ(jd["index"], i);
      EXPECT_EQ(jd["name"], d.name());
      EXPECT_EQ(jd["uuid"], d.uuid());
      EXPECT_EQ(jd["pci_bus_id"], d.pci_bus_id());
      ASSERT_TRUE(jd["memory"].is_object()) << jd.dump();
      EXPECT_EQ(jd["memory"]["total"], d.memory_info()->total);
      for (const char* key : {"temperature_c", "power_usage_mw", "utilization", "clocks", "mig", "processes"})
        EXPECT_TRUE(jd.contains(key)) << key;
    }
  } else {
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(j["component"], "nvml");
    ASSERT_TRUE(j["searched"].is_array());
    ASSERT_FALSE(j["searched"].empty());
    EXPECT_NE(j["searched"][0].get<std::string>().find("libnvidia-ml.so.1"), std::string::npos);
    EXPECT_NE(j["error"].get<std::string>().find("nvml could not be loaded"), std::string::npos);
  }
}

TEST(CliSmi, WatchPrintsAJsonLinePerRefreshUntilInterrupted) {
  // SIGINT after 1.5 s; --preserve-status keeps smi's own exit status.
  auto r = run("smi --json --watch 0.25 & pid=$!; sleep 1.5; kill -INT $pid 2>/dev/null; wait $pid");
  if (nvml_unavailable_reason().empty()) {
    EXPECT_EQ(r.status, 0) << r.out;
    std::istringstream lines(r.out);
    std::string line;
    int n = 0;
    while (std::getline(lines, line)) {
      auto j = nlohmann::json::parse(line);  // each line one document
      EXPECT_EQ(j["devices"].size(), static_cast<size_t>(cucore::system::get_num_devices()));
      ++n;
    }
    EXPECT_GE(n, 3) << r.out;
    EXPECT_LE(n, 8) << r.out;  // it waits between refreshes
  } else {
    EXPECT_EQ(r.status, 1) << r.out;  // the first sample fails: no loop
    auto j = nlohmann::json::parse(r.out);  // the error document
    EXPECT_EQ(j["component"], "nvml") << r.out;
  }
}

TEST(CliSmi, RejectsANonPositiveInterval) {
  // Refused before NVML is needed, in words (CLI11's PositiveNumber wrote its
  // bound, DBL_MAX, out in 309 digits), as is what would overflow the clock.
  for (const char* bad : {"0", "-1", "soon", "nan", "inf", "1e400", "86401", "0x"}) {
    auto r = run(std::string("smi --watch '") + bad + "'");
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_NE(r.out.find("--watch: SECONDS must be a number more than 0 and at most 86400 (a day), got '" +
                         std::string(bad) + "'"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("0000000000"), std::string::npos) << r.out;
  }
}

}  // namespace
