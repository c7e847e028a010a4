// `cucore doctor` runs on any machine and prints libcucore's report
// (pathfinder::doctor) as is.
#include <cucore/device.hpp>
#include <cucore/pathfinder.hpp>

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/run_command.hpp"

using cucore::test::run_command;

TEST(CliDoctor, JsonReportMatchesTheLibrary) {
  auto cli = run_command(std::string(CUCORE_CLI_PATH) + " doctor --json");
  auto j = nlohmann::json::parse(cli.out);
  auto names = cucore::pathfinder::component_names();
  ASSERT_EQ(j["components"].size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& c = j["components"][i];
    EXPECT_EQ(c["name"], names[i]);
    auto lib = cucore::pathfinder::find(names[i]);
    EXPECT_EQ(c["found"].get<bool>(), lib.found) << names[i];
    if (lib.found) EXPECT_EQ(c["path"], lib.path) << names[i];
    else EXPECT_FALSE(c["searched"].empty()) << names[i];
  }
  EXPECT_FALSE(j["verdict"].get<std::string>().empty());
  // NVML: available exactly when the pathfinder finds it, with its version.
  auto nvml = cucore::pathfinder::find("nvml");
  ASSERT_TRUE(j["nvml"].is_object()) << j.dump(2);
  EXPECT_EQ(j["nvml"]["available"].get<bool>(), nvml.found);
  if (nvml.found) {
    EXPECT_EQ(j["nvml"]["version"], nvml.version);
    EXPECT_FALSE(j["nvml"]["driver_version"].get<std::string>().empty());
  } else {
    EXPECT_NE(j["nvml"]["error"].get<std::string>().find("libnvidia-ml.so.1"), std::string::npos) << j["nvml"];
  }
  int count = 0;
  try {
    count = cucore::Device::count();
  } catch (...) {
    count = 0;
  }
  EXPECT_EQ(j["devices"].size(), static_cast<size_t>(count));
  if (count == 0) {
    EXPECT_EQ(j["verdict"].get<std::string>().rfind("compile-only", 0), 0u) << j["verdict"];
    EXPECT_EQ(cli.status, 0);
  } else {
    EXPECT_EQ(j["verdict"].get<std::string>().rfind("ready", 0), 0u) << j["verdict"];
    EXPECT_EQ(j["devices"][0]["arch"], "sm_" + cucore::Device(0).arch());
  }
}

TEST(CliDoctor, HumanReportEndsWithTheVerdict) {
  std::string out = run_command(std::string(CUCORE_CLI_PATH) + " doctor").out;
  ASSERT_FALSE(out.empty());
  auto last_line_start = out.rfind("verdict: ");
  ASSERT_NE(last_line_start, std::string::npos);
  EXPECT_EQ(out.find('\n', last_line_start), out.size() - 1);  // it is the last line
  EXPECT_NE(out.find("Components"), std::string::npos);
  EXPECT_NE(out.find("nvrtc"), std::string::npos);
  EXPECT_NE(out.find("\nNVML (system monitoring)\n"), std::string::npos);
}

// One wording: the CLI prints the library's report, byte for byte (the Python
// module's `python -m cucore doctor` is held to the same in tests/python).
TEST(CliDoctor, PrintsTheLibrarysReportAsIs) {
  auto report = cucore::pathfinder::doctor();
  auto text = run_command(std::string(CUCORE_CLI_PATH) + " doctor");
  EXPECT_EQ(text.out, report.text());
  EXPECT_EQ(text.status, report.exit_status);
  EXPECT_EQ(run_command(std::string(CUCORE_CLI_PATH) + " doctor --json").out, report.json());
  EXPECT_EQ(nlohmann::json::parse(report.json())["verdict"], report.verdict);
}

// Paths come from the environment and the disk, in no promised encoding: bytes
// that are not UTF-8 become U+FFFD and the report stays valid JSON (it used to
// throw nlohmann's type_error 316, and the CLI printed no report at all).
TEST(CliDoctor, JsonIsValidForPathsThatAreNotUtf8) {
  cucore::pathfinder::DoctorReport r;
  cucore::pathfinder::ComponentInfo c;
  c.name = "nvrtc";
  c.searched = {"$CUDA_PATH: /opt/cuda-\xff\xfe/lib64 - not found"};
  r.components.push_back(c);
  r.device_error = "no driver at /opt/\xc3";  // a cut UTF-8 sequence
  const auto j = nlohmann::json::parse(r.json());
  EXPECT_EQ(j["components"][0]["searched"][0], "$CUDA_PATH: /opt/cuda-\xef\xbf\xbd\xef\xbf\xbd/lib64 - not found");
  EXPECT_EQ(j["device_error"], "no driver at /opt/\xef\xbf\xbd");

  // The CLI, with such a path in its environment (printf: /bin/sh has no $'...').
  auto cli = run_command("CUDA_PATH=\"$(printf '/tmp/cucore-no-such-\\377\\376-toolkit')\" " +
                         std::string(CUCORE_CLI_PATH) + " doctor --json 2>&1");
  nlohmann::json doc;
  ASSERT_NO_THROW(doc = nlohmann::json::parse(cli.out)) << cli.out;
  EXPECT_NE(doc.dump().find("/tmp/cucore-no-such-\xef\xbf\xbd\xef\xbf\xbd-toolkit"), std::string::npos) << cli.out;
  EXPECT_FALSE(doc["verdict"].get<std::string>().empty());
}
