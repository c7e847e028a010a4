// `cucore compile`, run as a process: writes a valid cubin/PTX/LTO-IR, honours
// -I/-D/--std/-o, and on a bad file prints the compiler's log and exits 1.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

constexpr const char* kSaxpy = R"(extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

struct CliResult {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CliCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(CUCORE_CLI_PATH).empty()) GTEST_SKIP() << "the cucore tool is not built";
    dir_ = fs::temp_directory_path() / ("cucore_cli_compile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "cache");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path write(const std::string& name, const std::string& content) {
    fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

  // Runs the tool in dir_, with the cache kept inside dir_.
  CliResult run(const std::string& args) {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string cmd = "cd '" + dir_.string() + "' && XDG_CACHE_HOME='" + (dir_ / "cache").string() +
                            "' CUCORE_CACHE_DIR='" + (dir_ / "cache").string() + "' '" + CUCORE_CLI_PATH +
                            "' compile " + args + " >'" + out.string() + "' 2>'" + err.string() + "'";
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  fs::path dir_;
};

bool starts_with_elf(const std::string& s) { return s.size() > 4 && s.compare(0, 4, "\x7f" "ELF") == 0; }

}  // namespace

TEST_F(CliCompile, WritesAValidCubin) {
  write("saxpy.cu", kSaxpy);
  CliResult r = run("saxpy.cu --arch sm_90 --no-cache -o out.cubin");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string cubin = slurp(dir_ / "out.cubin");
  EXPECT_TRUE(starts_with_elf(cubin));
  EXPECT_NE(cubin.find("saxpy"), std::string::npos);
  EXPECT_NE(r.out.find("out.cubin"), std::string::npos) << r.out;  // says what it wrote
}

TEST_F(CliCompile, DefaultOutputTakesTheTargetsExtension) {
  write("k.cu", kSaxpy);
  CliResult r = run("k.cu --arch sm_90 --target ptx --no-cache");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string ptx = slurp(dir_ / "k.ptx");
  EXPECT_NE(ptx.find(".entry saxpy("), std::string::npos);
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  ASSERT_FALSE(ptx.empty());
  EXPECT_NE(ptx.back(), '\0');  // a text file

  r = run("k.cu --arch sm_90 --target ltoir --no-cache");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GT(fs::file_size(dir_ / "k.ltoir"), 16u);
}

TEST_F(CliCompile, BadFilePrintsTheLogAndFails) {
  write("bad.cu", "__global__ void k(int* p) {\n  p[0] = undefined_name;\n}\n");
  CliResult r = run("bad.cu --arch sm_90 --no-cache -o bad.cubin");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("bad.cu(2): error"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("undefined_name"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "bad.cubin"));
}

TEST_F(CliCompile, MissingFileAndBadOptionsFail) {
  CliResult r = run("nowhere.cu --arch sm_90 --no-cache");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nowhere.cu"), std::string::npos) << r.err;

  write("k.cu", kSaxpy);
  r = run("k.cu --arch sm_12 --no-cache");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("arch"), std::string::npos) << r.err;

  r = run("k.cu --arch sm_90 --target sass --no-cache");
  EXPECT_NE(r.code, 0);
}

TEST_F(CliCompile, IncludeDirsMacrosAndStdReachTheCompiler) {
  write("inc/factor.h", "constexpr int kFactor = FACTOR;\n");
  write("m.cu", "#include \"factor.h\"\n"
                "#if __cplusplus < 202002L\n#error needs C++20\n#endif\n"
                "extern \"C\" __global__ void k(int* p) { p[0] = kFactor; }\n");
  CliResult ok = run("m.cu --arch sm_90 -I inc -D FACTOR=3 --std c++20 -o m.cubin");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(starts_with_elf(slurp(dir_ / "m.cubin")));
  EXPECT_EQ(run("m.cu --arch sm_90 -I inc -D FACTOR=3 --std c++17 --no-cache").code, 1);  // the #error
  EXPECT_EQ(run("m.cu --arch sm_90 -I inc --std c++20 --no-cache").code, 1);              // FACTOR undefined
  EXPECT_EQ(run("m.cu --arch sm_90 -D FACTOR=3 --std c++20 --no-cache").code, 1);         // factor.h not found
}

TEST_F(CliCompile, ThroughTheCacheTwice) {
  write("c.cu", kSaxpy);
  CliResult first = run("c.cu --arch sm_90 -o c1.cubin");
  ASSERT_EQ(first.code, 0) << first.err;
  CliResult second = run("c.cu --arch sm_90 -o c2.cubin");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_TRUE(starts_with_elf(slurp(dir_ / "c1.cubin")));
  EXPECT_EQ(slurp(dir_ / "c1.cubin"), slurp(dir_ / "c2.cubin"));
}

TEST_F(CliCompile, NoArchWithoutADeviceAsksForOne) {
  write("k.cu", kSaxpy);
  CliResult r = run("k.cu --no-cache -o k.cubin");
  if (r.code == 0) {
    EXPECT_TRUE(starts_with_elf(slurp(dir_ / "k.cubin")));  // a device gave the arch
    return;
  }
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--arch"), std::string::npos) << r.err;
}
