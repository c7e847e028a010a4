// `cucore compile`, run as a process: writes a valid cubin/PTX/LTO-IR, honours
// -I/-D/--std/-o, and on a bad file prints the compiler's log and exits 1.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cucore/program_cache.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "common/message_of.hpp"

namespace fs = std::filesystem;

namespace {

using cucore::test::in_quotes;

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
    fs::create_directories(dir_ / "home");
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

  // Runs `cucore compile ARGS` in `cwd` (dir_ by default) with every cache the
  // tool could use pointed inside dir_: the program cache by the variable the
  // tool reads, the rest (toolchain memo, include manifests) by XDG_CACHE_HOME.
  // Fails the test if the default program cache was touched anyway.
  CliResult run(const std::string& args, const fs::path& cwd = {}, const std::string& env = "",
                const char* command = "compile") {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    // Every run under timeout(1): a CLI that blocks fails the test (status 124).
    const std::string cmd = "cd '" + (cwd.empty() ? dir_ : cwd).string() + "' && " + shell_prefix_ + "HOME='" +
                            (dir_ / "home").string() + "' XDG_CACHE_HOME='" + (dir_ / "xdg").string() +
                            "' CUCORE_PROGRAM_CACHE_DIR='" + cache_dir().string() + "' " + env +
                            " timeout -k 5 60 '" + CUCORE_CLI_PATH + "' " + command + " " + args + " >'" +
                            out.string() + "' 2>'" + err.string() + "'";
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    EXPECT_FALSE(fs::exists(dir_ / "xdg" / "cucore" / "programs")) << "the default program cache was used";
    EXPECT_FALSE(fs::exists(dir_ / "home" / ".cache")) << "the home directory's cache was used";
    return r;
  }
  fs::path cache_dir() const { return dir_ / "cache" / "programs"; }
  std::size_t cached_entries() const { return cucore::FileStreamProgramCache(cache_dir()).entries().size(); }

  // Shell commands run before the CLI's (a limit, a trap).
  std::string shell_prefix_;
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
  EXPECT_NE(first.out.find("compiled and cached"), std::string::npos) << first.out;
  EXPECT_EQ(cached_entries(), 1u);
  CliResult second = run("c.cu --arch sm_90 -o c2.cubin");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("cache hit"), std::string::npos) << second.out;
  EXPECT_TRUE(starts_with_elf(slurp(dir_ / "c1.cubin")));
  EXPECT_EQ(slurp(dir_ / "c1.cubin"), slurp(dir_ / "c2.cubin"));
  CliResult fresh = run("c.cu --arch sm_90 --no-cache -o c3.cubin");
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_EQ(fresh.out.find("cache"), std::string::npos) << fresh.out;
  EXPECT_EQ(slurp(dir_ / "c3.cubin"), slurp(dir_ / "c1.cubin"));
}

// ---------------------------------------------------------------- headers

constexpr const char* kWithConfig = "#include \"config.h\"\nextern \"C\" __global__ void k(long* p) { *p = VALUE; }\n";

long random_value() {
  static std::mt19937 rng{std::random_device{}()};
  return std::uniform_int_distribution<long>(10000000, 99999999)(rng);
}
std::string define_value(long v) { return "#define VALUE " + std::to_string(v) + "\n"; }

TEST_F(CliCompile, TwoProjectsWithTheSameSourceKeepTheirOwnHeaders) {
  const long a = random_value(), b = random_value();
  write("a/k.cu", kWithConfig);
  write("b/k.cu", kWithConfig);
  write("a/config.h", define_value(a));
  write("b/config.h", define_value(b));
  for (int pass = 0; pass < 2; ++pass) {
    CliResult ra = run("k.cu --arch sm_90 --target ptx", dir_ / "a");
    CliResult rb = run("k.cu --arch sm_90 --target ptx", dir_ / "b");
    ASSERT_EQ(ra.code, 0) << ra.err;
    ASSERT_EQ(rb.code, 0) << rb.err;
    EXPECT_NE(slurp(dir_ / "a/k.ptx").find(std::to_string(a)), std::string::npos);
    EXPECT_NE(slurp(dir_ / "b/k.ptx").find(std::to_string(b)), std::string::npos)
        << "the second project got the first one's binary: " << rb.out;
    const char* expect = pass == 0 ? "compiled and cached" : "cache hit";
    EXPECT_NE(ra.out.find(expect), std::string::npos) << ra.out;
    EXPECT_NE(rb.out.find(expect), std::string::npos) << rb.out;
  }
}

TEST_F(CliCompile, AnEditedHeaderIsRecompiledWithOrWithoutIncludePaths) {
  write("k.cu", kWithConfig);
  write("m.cu", "#include <lib.h>\nextern \"C\" __global__ void k(long* p) { *p = LIB; }\n");
  long v = random_value();
  write("config.h", define_value(v));
  write("inc/lib.h", "#define LIB " + std::to_string(v) + "\n");
  ASSERT_EQ(run("k.cu --arch sm_90 --target ptx").code, 0);
  ASSERT_EQ(run("m.cu --arch sm_90 --target ptx -I inc").code, 0);
  const long w = random_value();  // eight digits again: the same size
  write("config.h", define_value(w));
  write("inc/lib.h", "#define LIB " + std::to_string(w) + "\n");
  CliResult rk = run("k.cu --arch sm_90 --target ptx");
  CliResult rm = run("m.cu --arch sm_90 --target ptx -I inc");
  ASSERT_EQ(rk.code, 0) << rk.err;
  ASSERT_EQ(rm.code, 0) << rm.err;
  EXPECT_NE(slurp(dir_ / "k.ptx").find(std::to_string(w)), std::string::npos) << rk.out;
  EXPECT_NE(slurp(dir_ / "m.ptx").find(std::to_string(w)), std::string::npos) << rm.out;
  EXPECT_NE(rk.out.find("compiled and cached"), std::string::npos) << rk.out;
  EXPECT_NE(rm.out.find("compiled and cached"), std::string::npos) << rm.out;
}

TEST_F(CliCompile, AnIncludeBesideTheSourceIsFoundFromAnotherDirectory) {
  const long v = random_value();
  write("src/k.cu", kWithConfig);
  write("src/config.h", define_value(v));
  fs::create_directories(dir_ / "elsewhere");
  for (const char* flags : {"--no-cache", ""}) {
    CliResult r = run((dir_ / "src/k.cu").string() + " --arch sm_90 --target ptx -o out.ptx " + flags,
                      dir_ / "elsewhere");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(slurp(dir_ / "elsewhere/out.ptx").find(std::to_string(v)), std::string::npos);
  }
  // Errors name the file by the path given.
  write("src/bad.cu", "__global__ void k(int* p) {\n  p[0] = undefined_name;\n}\n");
  CliResult bad = run("../src/bad.cu --arch sm_90 --no-cache", dir_ / "elsewhere");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("../src/bad.cu(2): error"), std::string::npos) << bad.err;
}

// ---------------------------------------------------------------- refusals

TEST_F(CliCompile, TheOutputCannotBeTheSource) {
  write("k.cu", kSaxpy);
  CliResult r = run("k.cu --arch sm_90 --no-cache -o k.cu");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is the source file"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir_ / "k.cu"), kSaxpy);
  write("k.ptx", slurp(dir_ / "k.cu"));  // a source named like its default output
  r = run("k.ptx --arch sm_90 --target ptx --no-cache");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(slurp(dir_ / "k.ptx"), kSaxpy);
  fs::create_directories(dir_ / "sub");
  r = run("k.cu --arch sm_90 --no-cache -o ./sub/../k.cu");
  EXPECT_EQ(r.code, 1) << "another spelling of the same path";
  EXPECT_NE(r.err.find("is the source file"), std::string::npos) << r.err;
}

TEST_F(CliCompile, SourcesThatAreNotTextFilesAreRefusedByName) {
  fs::create_directories(dir_ / "adir.cu");
  CliResult r = run("adir.cu --arch sm_90 --no-cache");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'adir.cu' is a directory"), std::string::npos) << r.err;
  write("nul.cu", std::string("__global__ void k() {}\n") + '\0' + " hidden");
  r = run("nul.cu --arch sm_90 --no-cache");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'nul.cu' contains a NUL byte at offset 23"), std::string::npos) << r.err;
  ASSERT_EQ(::mkfifo((dir_ / "fifo.cu").c_str(), 0600), 0);
  r = run("fifo.cu --arch sm_90 --no-cache");  // opened without blocking, then refused
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'fifo.cu' is not a regular file"), std::string::npos) << r.err;
}

TEST_F(CliCompile, AFailedStoreIsNotReportedAsCached) {
  write("k.cu", kSaxpy);
  write("not-a-dir", "x");
  // The program cache under a regular file: it cannot be created.
  CliResult r = run("k.cu --arch sm_90 -o k.cubin", {}, "CUCORE_PROGRAM_CACHE_DIR='" + (dir_ / "not-a-dir/p").string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("compiled and cached"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("storing it in the cache failed"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("not-a-dir/p"), std::string::npos) << r.err;  // the cache's own message, naming it
  EXPECT_TRUE(starts_with_elf(slurp(dir_ / "k.cubin")));
}

TEST_F(CliCompile, AnNvrtcPathThatIsNotALibraryIsSaid) {
  write("k.cu", kSaxpy);
  write("not-a-library.so", "plain text");
  const std::string env = "CUCORE_NVRTC_PATH='" + (dir_ / "not-a-library.so").string() + "'";
  CliResult doctor = run("", {}, env, "doctor");
  EXPECT_NE(doctor.out.find("passed over $CUCORE_NVRTC_PATH='" + (dir_ / "not-a-library.so").string() +
                            "', which is not a loadable nvrtc library"),
            std::string::npos)
      << doctor.out;
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

// ---------------------------------------------------------------- files

// A write that fails (here a file size limit, as a full disk would) used to
// leave a truncated prefix of the cubin in place of the old output and say only
// "cannot write". The output is replaced whole or not at all.
TEST_F(CliCompile, AFailedWriteLeavesTheOldOutputAsItWas) {
  write("k.cu", kSaxpy);
  const std::string old = "the previous build's output, which must survive";
  write("k.cubin", old);
  // 1 block (512 bytes for dash, 1 KiB for bash) is far under a cubin (~3 KiB);
  // SIGXFSZ ignored, so write(2) fails with EFBIG instead of killing the tool.
  shell_prefix_ = "trap '' XFSZ; ulimit -f 1; ";
  CliResult r = run("k.cu --arch sm_90 --no-cache -o k.cubin");
  shell_prefix_.clear();
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("cucore compile: cannot write 'k.cubin': File too large; 'k.cubin' is left as it was"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(slurp(dir_ / "k.cubin"), old);
  for (const auto& e : fs::directory_iterator(dir_))  // no temporary file left behind
    EXPECT_EQ(e.path().filename().string().find(".k.cubin"), std::string::npos) << e.path();
  // Without the limit the same command replaces it.
  ASSERT_EQ(run("k.cu --arch sm_90 --no-cache -o k.cubin").code, 0);
  EXPECT_TRUE(starts_with_elf(slurp(dir_ / "k.cubin")));
}

TEST_F(CliCompile, AnOutputThatIsNotARegularFileIsRefusedBeforeTheCompile) {
  write("k.cu", kSaxpy);
  ASSERT_EQ(::mkfifo((dir_ / "fifo.cubin").c_str(), 0600), 0);
  CliResult r = run("k.cu --arch sm_90 --no-cache -o fifo.cubin");  // used to block forever
  EXPECT_EQ(r.code, 1) << "status 124: it blocked on the FIFO";
  EXPECT_NE(r.err.find("cucore compile: cannot write 'fifo.cubin': it is a FIFO; the output must be a regular file "
                       "or a new name"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo.cubin"));
  // A symlink is not followed (nor replaced): the file it names is kept.
  write("elsewhere.cubin", "not to be overwritten");
  fs::create_symlink(dir_ / "elsewhere.cubin", dir_ / "link.cubin");
  r = run("k.cu --arch sm_90 --no-cache -o link.cubin");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot write 'link.cubin': it is a symbolic link, which is not followed"), std::string::npos)
      << r.err;
  EXPECT_EQ(slurp(dir_ / "elsewhere.cubin"), "not to be overwritten");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.cubin"));
  fs::create_directories(dir_ / "adir.cubin");
  r = run("k.cu --arch sm_90 --no-cache -o adir.cubin");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot write 'adir.cubin': it is a directory"), std::string::npos) << r.err;
  r = run("k.cu --arch sm_90 --no-cache -o missing/k.cubin");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot write 'missing/k.cubin': cannot create a file in 'missing': No such file or directory"),
            std::string::npos)
      << r.err;
}

TEST_F(CliCompile, AFifoHeaderFailsFastWithOrWithoutTheCache) {
  write("k.cu", kWithConfig);
  ASSERT_EQ(::mkfifo((dir_ / "config.h").c_str(), 0600), 0);
  for (const char* flags : {"--no-cache", ""}) {
    SCOPED_TRACE(flags);
    CliResult r = run(std::string("k.cu --arch sm_90 --target ptx ") + flags);  // --no-cache used to hang in NVRTC
    EXPECT_EQ(r.code, 1) << "status 124: it blocked on the FIFO";
    EXPECT_NE(r.err.find((dir_ / "config.h").string() + " is not a regular file or directory (a FIFO or device?)"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "k.ptx"));
  }
}

TEST_F(CliCompile, AHeaderWithANulByteIsRefusedWithOrWithoutTheCache) {
  write("k.cu", kWithConfig);
  write("config.h", std::string("#define VALUE 5\n\0#error the rest\n", 33));
  for (const char* flags : {"", "--no-cache"}) {
    SCOPED_TRACE(flags);
    CliResult r = run(std::string("k.cu --arch sm_90 --target ptx ") + flags);  // cached, it compiled line one only
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.err.find(in_quotes(dir_ / "config.h") + " contains a NUL byte at offset 16; is it a header?"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "k.ptx"));
  }
  EXPECT_EQ(cached_entries(), 0u);
}

TEST_F(CliCompile, ProcFilesAndSparseGiantsAreRefusedAsSources) {
  CliResult r = run("/proc/self/status --arch sm_90 --no-cache -o p.ptx --target ptx");  // compiled as empty, before
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cucore compile: '/proc/self/status' reports a size of 0 but has contents (a /proc or /sys "
                       "file?): only regular files with a size are read"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "p.ptx"));
  write("huge.cu", "x");
  fs::resize_file(dir_ / "huge.cu", std::uintmax_t(100) << 30);  // sparse: std::bad_alloc, before
  r = run("huge.cu --arch sm_90 --no-cache");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cucore compile: 'huge.cu' is 107374182400 bytes (100.0 GiB), over the limit of 4 GiB for a "
                       "source file read whole"),
            std::string::npos)
      << r.err;
  // The limit is in the help.
  r = run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("of at most 4 GiB"), std::string::npos) << r.out;
}

TEST_F(CliCompile, ASymlinkToTheSourceIsFollowed) {
  write("real.cu", kSaxpy);
  fs::create_symlink(dir_ / "real.cu", dir_ / "link.cu");
  CliResult r = run("link.cu --arch sm_90 --no-cache -o k.cubin");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(starts_with_elf(slurp(dir_ / "k.cubin")));
}
