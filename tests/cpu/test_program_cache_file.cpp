// FileStreamProgramCache: round trips within and between processes, damaged
// entries, eviction, many processes at once, unwritable and full directories,
// the default cache and the `cucore cache` command.
//
// Child processes are this test binary run again with CUCORE_CACHE_TEST_CHILD
// set: a static initializer (at the end of this file) runs the child's role and
// exits before GoogleTest starts.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cucore/errors.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <cstdint>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_dir.hpp"
#include "cache/entry_record.hpp"
#include "hashing/hashing.hpp"
#include "cache/toolchain_identity.hpp"
#include "common/counting_cache.hpp"
#include "loader/driver.hpp"

extern char** environ;


#include "common/compile_helpers.hpp"
#include "common/run_command.hpp"

namespace cucore {
namespace {

namespace fs = std::filesystem;

const std::string& kSaxpy = test::kSaxpyTemplate;

using test::sm90;

std::string str(const char* s) { return s ? s : ""; }
std::string env_or(const char* name) { return str(std::getenv(name)); }

using test::CountingCache;

// ---------------------------------------------------------------- payloads
// Self-describing entries for the many-writer tests: the bytes name their key,
// writer and sequence number, so any reader regenerates and compares them all.

std::string key_for(int k) { return detail::sha256("stress-key-" + std::to_string(k)); }

ObjectCode make_payload(int k, int writer, int seq, std::size_t size, bool big_record) {
  std::mt19937_64 rng(std::uint64_t(k) * 1000003u + std::uint64_t(writer) * 10007u + std::uint64_t(seq));
  std::vector<std::byte> b;
  CodeType type;
  if (k % 2 == 0) {
    type = CodeType::ptx;
    char head[128];
    int n = std::snprintf(head, sizeof head, "// k=%d w=%d s=%d n=%zu\n.target sm_90\n", k, writer, seq, size);
    std::string text(head, static_cast<std::size_t>(n));
    while (text.size() + 1 < size) text.push_back(static_cast<char>('a' + rng() % 26));
    text.push_back('\0');
    b.resize(text.size());
    std::memcpy(b.data(), text.data(), text.size());
  } else {
    type = CodeType::fatbin;
    size = std::max<std::size_t>(size, 64);
    b.resize(size);
    const std::uint32_t magic = 0xBA55ED50u;
    const std::uint16_t version = 1, header = 16;
    const std::uint64_t payload = size - 16;
    std::memcpy(b.data(), &magic, 4);
    std::memcpy(b.data() + 4, &version, 2);
    std::memcpy(b.data() + 6, &header, 2);
    std::memcpy(b.data() + 8, &payload, 8);
    const std::int64_t ids[4] = {k, writer, seq, static_cast<std::int64_t>(size)};
    std::memcpy(b.data() + 16, ids, sizeof ids);
    for (std::size_t i = 48; i < size; ++i) b[i] = static_cast<std::byte>(rng());
  }
  std::map<std::string, std::string> symbols{
      {"id", std::to_string(k) + "/" + std::to_string(writer) + "/" + std::to_string(seq)}};
  if (big_record)  // too large for an xattr: stored in a sidecar
    for (int i = 0; i < 200; ++i)
      symbols["name_expression<" + std::to_string(i) + ">"] = "_Z_lowered_" + symbols["id"] + "_" + std::to_string(i);
  return ObjectCode::from_bytes(std::move(b), type, "payload", std::move(symbols));
}

// Empty when `o` is exactly one writer's whole entry for key k.
std::string verify_payload(const ObjectCode& o, int k, bool big_record) {
  int k2 = -1, w = -1, s = -1;
  std::size_t n = 0;
  auto c = o.code();
  if (o.code_type() == CodeType::ptx) {
    std::string head(reinterpret_cast<const char*>(c.data()), std::min<std::size_t>(c.size(), 100));
    if (std::sscanf(head.c_str(), "// k=%d w=%d s=%d n=%zu", &k2, &w, &s, &n) != 4) return "unparsable ptx";
  } else if (o.code_type() == CodeType::fatbin && c.size() >= 48) {
    std::int64_t ids[4];
    std::memcpy(ids, c.data() + 16, sizeof ids);
    k2 = static_cast<int>(ids[0]), w = static_cast<int>(ids[1]), s = static_cast<int>(ids[2]);
    n = static_cast<std::size_t>(ids[3]);
  } else {
    return "unexpected type " + std::string(to_string(o.code_type()));
  }
  if (k2 != k) return "entry of key " + std::to_string(k2) + " under key " + std::to_string(k);
  ObjectCode expect = make_payload(k, w, s, n, big_record);
  if (expect.code().size() != c.size()) return "size differs";
  if (std::memcmp(expect.code().data(), c.data(), c.size()) != 0) return "bytes differ";
  if (expect.symbol_mapping() != o.symbol_mapping()) return "record of another write";
  if (expect.code_type() != o.code_type()) return "type differs";
  return {};
}

// ---------------------------------------------------------------- child roles

void write_result(const std::map<std::string, std::string>& kv) {
  std::ofstream out(env_or("CUCORE_CACHE_TEST_OUT"));
  for (const auto& [k, v] : kv) out << k << "=" << v << "\n";
}

std::string stats_str(const CacheStats& s) {
  return std::to_string(s.hits) + "," + std::to_string(s.misses) + "," + std::to_string(s.evictions) + "," +
         std::to_string(s.errors);
}

int child_compile() {
  FileStreamProgramCache disk(env_or("CUCORE_CACHE_TEST_DIR"));
  CountingCache cache(disk);
  Program prog(kSaxpy, "c++", sm90());
  ObjectCode o = prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);
  auto s = disk.stats();
  auto c = o.code();
  char sum[32];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(detail::checksum64(c.data(), c.size())));
  write_result({{"puts", std::to_string(cache.puts.load())},
                {"hits", std::to_string(s.hits)},
                {"misses", std::to_string(s.misses)},
                {"errors", std::to_string(s.errors)},
                {"lowered", o.symbol_mapping().count("saxpy<float>") ? o.symbol_mapping().at("saxpy<float>") : ""},
                {"checksum", sum},
                {"type", std::string(to_string(o.code_type()))}});
  return 0;
}

// Sidecar records are big; a capped run mixes both kinds under kStressCap.
constexpr std::size_t kStressCap = 256 << 10;
bool big_record(const std::string& mode, int k) { return mode == "sidecar" || (mode == "capped" && k % 3 == 0); }

int child_stress() {
  const std::string mode = env_or("CUCORE_CACHE_TEST_MODE");
  const int id = std::atoi(env_or("CUCORE_CACHE_TEST_ID").c_str());
  const std::optional<std::size_t> cap = mode == "capped" ? std::optional<std::size_t>(kStressCap) : std::nullopt;
  FileStreamProgramCache cache(env_or("CUCORE_CACHE_TEST_DIR"), cap);
  std::mt19937 rng(static_cast<unsigned>(id) * 7919u + 1);
  int bad = 0, puts = 0, read_hits = 0;
  std::size_t largest = 0;  // of the directory, seen after a put returned
  std::string first_bad;
  for (int i = 0; i < 200; ++i) {
    const bool shared = rng() % 2;
    const int k = shared ? static_cast<int>(rng() % 8) : 100 + id * 16 + static_cast<int>(rng() % 16);
    if (rng() % 2) {
      cache.put(key_for(k), make_payload(k, id, i, 256 + rng() % 16384, big_record(mode, k)));
      ++puts;
      if (cap) largest = std::max(largest, cache.size_bytes());
    } else if (auto o = cache.get(key_for(k))) {
      ++read_hits;
      std::string why = verify_payload(*o, k, big_record(mode, k));
      if (!why.empty()) {
        ++bad;
        if (first_bad.empty()) first_bad = why;
      }
    }
  }
  auto s = cache.stats();
  write_result({{"bad", std::to_string(bad)},
                {"first_bad", first_bad},
                {"puts", std::to_string(puts)},
                {"hits", std::to_string(s.hits)},
                {"read_hits", std::to_string(read_hits)},
                {"largest", std::to_string(largest)},
                {"evictions", std::to_string(s.evictions)},
                {"errors", std::to_string(s.errors)}});
  return 0;
}

// A disk that takes no file beyond 1 KiB (RLIMIT_FSIZE): writes fail like a full disk.
int child_fsize() {
  ::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the writer
  const fs::path dir = env_or("CUCORE_CACHE_TEST_DIR");
  std::string result_path = env_or("CUCORE_CACHE_TEST_OUT");
  rlimit lim{1024, 1024};
  if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 3;
  FileStreamProgramCache disk(dir);
  CountingCache cache(disk);
  Program prog(kSaxpy, "c++", sm90());
  std::string outcome = "ok";
  ObjectCode o;
  try {
    o = prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);  // a ~3 KiB cubin: the write fails
  } catch (const std::exception& e) {
    outcome = e.what();
  }
  auto again = disk.get(
      make_program_cache_key(prog.code(), "c++", prog.options(), CodeType::cubin, std::vector<std::string>{"saxpy<float>"}));
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(dir)) leftovers += e.path().filename() != ".cucore-lock";
  auto s = disk.stats();
  rlimit none{RLIM_INFINITY, RLIM_INFINITY};
  ::setrlimit(RLIMIT_FSIZE, &none);
  write_result({{"outcome", outcome},
                {"compiled", o && o.code_type() == CodeType::cubin ? "1" : "0"},
                {"puts", std::to_string(cache.puts.load())},
                {"errors", std::to_string(s.errors)},
                {"stored", again ? "1" : "0"},
                {"files", std::to_string(leftovers)}});
  return 0;
}

int child_default() {
  Program prog(kSaxpy, "c++", sm90());
  ObjectCode o = prog.compile(CodeType::cubin, {"saxpy<float>"}, &default_program_cache());
  auto& two = default_two_level_program_cache();
  write_result({{"dir", two.disk().path().string()},
                {"entries", std::to_string(two.disk().entries().size())},
                {"stats", stats_str(default_program_cache().stats())}});
  return 0;
}

bool nvrtc_loaded() {
  for (const char* so : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
    if (void* h = dlopen(so, RTLD_LAZY | RTLD_NOLOAD)) {
      dlclose(h);
      return true;
    }
  return false;
}

int child_identity() {
  const bool before = nvrtc_loaded();
  std::string id = detail::nvrtc_identity();
  write_result({{"loaded_before", before ? "1" : "0"}, {"loaded_after", nvrtc_loaded() ? "1" : "0"}, {"identity", id}});
  return 0;
}

// A program with a quoted include, compiled through the cache at $CUCORE_CACHE_TEST_DIR.
int child_include_compile() {
  const fs::path src = env_or("CUCORE_CACHE_TEST_SOURCE");
  std::ifstream in(src);
  std::stringstream text;
  text << in.rdbuf();
  FileStreamProgramCache disk(env_or("CUCORE_CACHE_TEST_DIR"));
  ProgramOptions o = sm90();
  o.name = src.string();
  ObjectCode code = Program(text.str(), "c++", o).compile(CodeType::ptx, {}, &disk);
  const std::string ptx(reinterpret_cast<const char*>(code.code().data()), code.code().size());
  write_result({{"hits", std::to_string(disk.stats().hits)}, {"ptx", ptx.find(env_or("CUCORE_CACHE_TEST_EXPECT")) !=
                                                                         std::string::npos ? "1" : "0"}});
  return 0;
}

// Compiles SAXPY through the default cache with stderr kept in a file: a
// victim's view of whatever cache directory the environment leads to.
int child_victim() {
  if (!std::freopen(env_or("CUCORE_CACHE_TEST_ERR").c_str(), "w", stderr)) return 5;
  Program prog(kSaxpy, "c++", sm90());
  ObjectCode o = prog.compile(CodeType::cubin, {"saxpy<float>"}, &default_program_cache());
  auto c = o.code();
  auto& two = default_two_level_program_cache();
  write_result({{"checksum", std::to_string(detail::checksum64(c.data(), c.size()))},
                {"dir", two.disk().path().string()},
                {"disk_hits", std::to_string(two.disk().stats().hits)},
                {"usable", two.disk().usable() ? "1" : "0"}});
  std::fflush(stderr);
  return 0;
}

// A warm start: a Program with its arch given, compiled through a disk cache
// that has it. Reports whether the driver or NVRTC got loaded on the way.
int child_warm_start() {
  FileStreamProgramCache disk(env_or("CUCORE_CACHE_TEST_DIR"));
  Program prog(kSaxpy, "c++", sm90());
  ObjectCode o = prog.compile(CodeType::cubin, {"saxpy<float>"}, &disk);
  write_result({{"hits", std::to_string(disk.stats().hits)},
                {"driver", detail::g_driver.load() ? "1" : "0"},
                {"nvrtc", nvrtc_loaded() ? "1" : "0"}});
  return 0;
}

int child_main(const std::string& role) {
  try {
    if (role == "warm-start") return child_warm_start();
    if (role == "victim") return child_victim();
    if (role == "include-compile") return child_include_compile();
    if (role == "compile") return child_compile();
    if (role == "stress") return child_stress();
    if (role == "fsize") return child_fsize();
    if (role == "default") return child_default();
    if (role == "identity") return child_identity();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child %s: %s\n", role.c_str(), e.what());
    return 2;
  }
  return 4;
}

// ---------------------------------------------------------------- parent side

using Env = std::map<std::string, std::string>;

// `exe` is the path the child is started by (the kernel's alias by default).
pid_t spawn_child(const std::string& role, Env env, const std::string& exe = "/proc/self/exe") {
  env["CUCORE_CACHE_TEST_CHILD"] = role;
  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    if (!env.count(s.substr(0, s.find('=')))) entries.push_back(s);
  }
  for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : entries) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string argv0 = exe;
  char* argv[] = {argv0.data(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return pid;
}

// The child's exit code; -1 if it is still running after `seconds` (it is then
// killed: a hang fails the test rather than stalling the suite).
int wait_child(pid_t pid, int seconds = 300) {
  int status = 0;
  if (pid < 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::map<std::string, std::string> read_result(const fs::path& file) {
  std::map<std::string, std::string> kv;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (auto eq = line.find('='); eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  return kv;
}

// Runs one child to completion; its result map.
std::map<std::string, std::string> run_child(const std::string& role, const fs::path& scratch, Env env,
                                             int seconds = 300, const std::string& exe = "/proc/self/exe") {
  static int n = 0;
  fs::path out = scratch / ("result-" + std::to_string(n++));
  env["CUCORE_CACHE_TEST_OUT"] = out.string();
  int rc = wait_child(spawn_child(role, env, exe), seconds);
  EXPECT_EQ(rc, 0) << "child " << role << (rc == -1 ? " hung" : "");
  return read_result(out);
}

class FileCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cucore-file-cache-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ / "programs";
  }
  void TearDown() override {
    for (const auto& m : mounts_) ::umount2(m.c_str(), MNT_DETACH);
    std::error_code ec;
    fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add, ec);
    if (fs::exists(dir_, ec)) fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(root_, ec);
  }

  static ObjectCode compiled(CodeType target) {
    static std::map<CodeType, ObjectCode> objects;
    if (!objects.count(target)) objects[target] = Program(kSaxpy, "c++", sm90()).compile(target, {"saxpy<float>"});
    return objects[target];
  }
  static std::string key_of(CodeType target) {
    Program prog(kSaxpy, "c++", sm90());
    return make_program_cache_key(prog.code(), "c++", prog.options(), target, std::vector<std::string>{"saxpy<float>"});
  }
  static std::vector<char> file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void expect_same(const ObjectCode& got, const ObjectCode& want) {
    EXPECT_EQ(got.code_type(), want.code_type());
    EXPECT_EQ(got.name(), want.name());
    EXPECT_EQ(got.symbol_mapping(), want.symbol_mapping());
    ASSERT_EQ(got.code().size(), want.code().size());
    EXPECT_EQ(std::memcmp(got.code().data(), want.code().data(), want.code().size()), 0);
  }
  // Files in the cache directory but its writers' lock file.
  int count_files(const std::string& prefix = "") const {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec))
      if (e.path().filename() != ".cucore-lock" && e.path().filename().string().starts_with(prefix)) ++n;
    return n;
  }
  // Mounts a tmpfs at `where` (needs root); false (and why) otherwise.
  bool mount_tmpfs(const fs::path& where, const std::string& options, std::string& why) {
    fs::create_directories(where);
    // mode=0700: a cache directory must be private (tmpfs roots are 1777 by default).
    if (::mount("tmpfs", where.c_str(), "tmpfs", 0, (options + ",mode=0700").c_str()) != 0) {
      why = std::string("cannot mount a tmpfs here: ") + std::strerror(errno);
      return false;
    }
    mounts_.push_back(where);
    return true;
  }

  fs::path root_, dir_;
  std::vector<fs::path> mounts_;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(FileCache, RoundTripKeepsBytesTypeNameAndMappingInARawFile) {
  FileStreamProgramCache cache(dir_);
  std::map<std::string, ObjectCode> put;
  for (CodeType target : {CodeType::cubin, CodeType::ptx, CodeType::ltoir}) put[key_of(target)] = compiled(target);
  put[key_for(1)] = make_payload(1, 0, 0, 5000, false);  // a fatbin
  put["any string can be a key"] = make_payload(3, 0, 0, 700, false);
  {  // a ~2 KiB record: still an xattr, but larger than the first read's buffer
    ObjectCode c = compiled(CodeType::cubin);
    auto symbols = c.symbol_mapping();
    for (int i = 0; i < 40; ++i) symbols["saxpy<S" + std::to_string(i) + ">"] = std::string(40, 'a' + i % 26);
    put[key_for(5)] = ObjectCode::from_bytes({c.code().begin(), c.code().end()}, CodeType::cubin, "many names", symbols);
  }
  for (const auto& [k, o] : put) cache.put(k, o);
  for (const auto& [k, o] : put) {
    auto got = cache.get(k);
    ASSERT_TRUE(got) << to_string(o.code_type());
    expect_same(*got, o);
    // The file is the raw binary, as cuobjdump and nvdisasm read it.
    EXPECT_FALSE(fs::exists(cache.entry_path(k).string() + ".meta"));  // the record is an xattr
    auto raw = file_bytes(cache.entry_path(k));
    ASSERT_EQ(raw.size(), o.code().size());
    EXPECT_EQ(std::memcmp(raw.data(), o.code().data(), raw.size()), 0);
  }
  EXPECT_EQ(cache.stats().hits, put.size());
  EXPECT_EQ(cache.stats().errors, 0u);
  auto entries = cache.entries();
  EXPECT_EQ(entries.size(), put.size());
  std::size_t total = 0;
  for (const auto& e : entries) {
    EXPECT_TRUE(e.code_type.has_value());
    total += e.size_bytes;
  }
  EXPECT_EQ(cache.size_bytes(), total);
  EXPECT_TRUE(cache.erase(key_of(CodeType::ptx)));
  EXPECT_FALSE(cache.erase(key_of(CodeType::ptx)));
  EXPECT_FALSE(cache.get(key_of(CodeType::ptx)));
  cache.clear();
  EXPECT_EQ(count_files(), 0);
}

TEST_F(FileCache, SecondProcessHitsWithoutCompiling) {
  auto first = run_child("compile", root_, {{"CUCORE_CACHE_TEST_DIR", dir_.string()}});
  EXPECT_EQ(first["puts"], "1");
  EXPECT_EQ(first["misses"], "1");
  EXPECT_EQ(first["hits"], "0");
  auto second = run_child("compile", root_, {{"CUCORE_CACHE_TEST_DIR", dir_.string()}});
  EXPECT_EQ(second["puts"], "0");  // no compile
  EXPECT_EQ(second["hits"], "1");
  EXPECT_EQ(second["misses"], "0");
  EXPECT_EQ(second["errors"], "0");
  EXPECT_EQ(second["checksum"], first["checksum"]);
  EXPECT_EQ(second["type"], "cubin");
  // The name-expression mapping survived the disk: get_kernel("saxpy<float>") can find it.
  EXPECT_EQ(second["lowered"], compiled(CodeType::cubin).symbol_mapping().at("saxpy<float>"));
  EXPECT_FALSE(second["lowered"].empty());
}

TEST_F(FileCache, DamagedEntriesAreCountedRemovedMissedAndRepaired) {
  const std::string key = key_of(CodeType::cubin);
  const ObjectCode good = compiled(CodeType::cubin);
  std::mt19937 rng(99);
  struct Damage {
    const char* what;
    std::function<void(const fs::path&)> apply;
  };
  const std::vector<Damage> damages = {
      {"truncated", [&](const fs::path& f) { fs::resize_file(f, 1 + rng() % (fs::file_size(f) - 1)); }},
      {"truncated to nothing", [](const fs::path& f) { fs::resize_file(f, 0); }},
      {"garbage in place",  // same size, same xattr record: only the checksum sees it
       [&](const fs::path& f) {
         int fd = ::open(f.c_str(), O_WRONLY);
         std::vector<char> junk(fs::file_size(f));
         for (auto& c : junk) c = static_cast<char>(rng());
         ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
         ::close(fd);
       }},
      {"one flipped byte",
       [&](const fs::path& f) {
         int fd = ::open(f.c_str(), O_RDWR);
         char c;
         off_t at = static_cast<off_t>(rng() % fs::file_size(f));
         ASSERT_EQ(::pread(fd, &c, 1, at), 1);
         c ^= 0x10;
         ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
         ::close(fd);
       }},
      {"replaced by a random file",
       [&](const fs::path& f) {
         fs::remove(f);
         std::ofstream out(f, std::ios::binary);
         for (int i = 0; i < 4000; ++i) out.put(static_cast<char>(rng()));
       }},
      {"PTX text in the cubin's place",
       [&](const fs::path& f) {
         auto ptx = compiled(CodeType::ptx).code();
         std::ofstream out(f, std::ios::binary | std::ios::trunc);  // keeps the cubin record
         out.write(reinterpret_cast<const char*>(ptx.data()), static_cast<std::streamsize>(ptx.size()));
       }},
      {"another entry moved over it (PTX with its own record)",
       [&](const fs::path& f) {
         FileStreamProgramCache other(dir_);
         other.put(key_of(CodeType::ptx), compiled(CodeType::ptx));
         fs::rename(other.entry_path(key_of(CodeType::ptx)), f);
       }},
  };
  for (const auto& d : damages) {
    SCOPED_TRACE(d.what);
    FileStreamProgramCache cache(dir_);
    Program prog(kSaxpy, "c++", sm90());
    prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);
    ASSERT_TRUE(fs::exists(cache.entry_path(key)));
    d.apply(cache.entry_path(key));
    FileStreamProgramCache reader(dir_);
    EXPECT_FALSE(reader.get(key, CodeType::cubin));
    EXPECT_EQ(reader.stats().errors, 1u);
    EXPECT_EQ(reader.stats().misses, 1u);
    EXPECT_FALSE(fs::exists(reader.entry_path(key))) << "damaged entry left in place";
    // The next compile through the cache stores a good entry again.
    CountingCache counting(reader);
    expect_same(prog.compile(CodeType::cubin, {"saxpy<float>"}, &counting), good);
    EXPECT_EQ(counting.puts.load(), 1);
    auto again = FileStreamProgramCache(dir_).get(key, CodeType::cubin);
    ASSERT_TRUE(again);
    expect_same(*again, good);
  }
}

// A FIFO, symlink or directory planted under any name the cache opens is
// damage or refused: never a hang (each case runs in a child that is killed,
// failing the test, if it does not finish), never a redirect.
TEST_F(FileCache, PlantedFifosSymlinksAndDirectoriesNeverHangOrRedirect) {
  FileStreamProgramCache setup(dir_);
  const ObjectCode small = make_payload(1, 0, 0, 500, false), big = make_payload(3, 0, 0, 700, true);
  setup.put("warm-up", small);  // creates the directory (and its lock file)
  const fs::path secret = root_ / "secret";
  std::ofstream(secret) << "not for the cache";
  struct Case {
    const char* what;
    std::function<void()> plant;
    std::function<int()> use;  // in the child: 0 when all went as it should
  };
  auto entry = [&](const char* key) { return setup.entry_path(key); };
  auto meta = [&](const char* key) { return fs::path(setup.entry_path(key).string() + ".meta"); };
  const std::vector<Case> cases = {
      {"a FIFO as an entry", [&] { ASSERT_EQ(::mkfifo(entry("fifo").c_str(), 0600), 0); },
       [&] {
         FileStreamProgramCache c(dir_);
         return !c.get("fifo") && c.stats().errors == 1 && !fs::exists(entry("fifo")) ? 0 : 1;
       }},
      {"a FIFO as a sidecar",
       [&] {
         setup.put("side", big);
         fs::remove(meta("side"));
         ASSERT_EQ(::mkfifo(meta("side").c_str(), 0600), 0);
       },
       [&] {
         FileStreamProgramCache c(dir_);
         return !c.get("side") && c.stats().errors == 1 && !fs::exists(entry("side")) ? 0 : 1;
       }},
      {"a symlink to another file as an entry",
       [&] { fs::create_symlink(secret, entry("link")); },
       [&] {
         FileStreamProgramCache c(dir_);
         return !c.get("link") && !fs::exists(fs::symlink_status(entry("link"))) && fs::exists(secret) ? 0 : 1;
       }},
      {"a directory of ours as an entry: a damaged miss, then replaced by a put",
       [&] { fs::create_directories(entry("dir") / "inside"); },
       [&] {
         FileStreamProgramCache c(dir_);
         if (c.get("dir") || c.stats().errors != 1) return 1;
         fs::create_directories(entry("dir") / "again");
         c.put("dir", small);
         auto got = c.get("dir");
         return got && verify_payload(*got, 1, false).empty() ? 0 : 2;
       }},
      {"a FIFO as the writers' lock file",
       [&] {
         fs::remove(dir_ / ".cucore-lock");
         ASSERT_EQ(::mkfifo((dir_ / ".cucore-lock").c_str(), 0600), 0);
       },
       [&] {
         FileStreamProgramCache c(dir_, 1 << 20);
         c.put("after-lock", small);
         (void)c.size_bytes();
         c.erase("warm-up");
         return c.get("after-lock") && fs::is_regular_file(dir_ / ".cucore-lock") ? 0 : 1;
       }},
      {"FIFOs under every name, listed and cleared",
       [&] {
         ASSERT_EQ(::mkfifo(entry("fifo2").c_str(), 0600), 0);
         setup.put("side2", big);
         fs::remove(meta("side2"));
         ASSERT_EQ(::mkfifo(meta("side2").c_str(), 0600), 0);
       },
       [&] {
         FileStreamProgramCache c(dir_);
         (void)c.entries();
         (void)c.size_bytes();
         c.clear();
         return 0;
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    c.plant();
    const int rc = test::run_with_timeout(c.use);
    EXPECT_EQ(rc, 0) << (rc == -1 ? "hung" : "wrong outcome");
  }
  if (std::string(CUCORE_CLI_PATH).empty()) return;
  ASSERT_EQ(::mkfifo(entry("fifo3").c_str(), 0600), 0);
  for (const char* cmd : {"cache info --dir ", "cache clear --dir "}) {
    const int rc = test::run_with_timeout([&] {
      return std::system((std::string(CUCORE_CLI_PATH) + " " + cmd + dir_.string() + " >/dev/null 2>&1").c_str());
    });
    EXPECT_NE(rc, -1) << cmd << " hung";
  }
}

// The other files cucore opens under the cache root: the compiler identity's
// memo and the include manifests. Fresh processes (they read them once).
TEST_F(FileCache, FifosInPlaceOfTheMemoAndTheManifestsDoNotHang) {
  const long value = std::uniform_int_distribution<long>(10000000, 99999999)(rng_);
  fs::create_directories(root_ / "src");
  std::ofstream(root_ / "src/config.h") << "#define VALUE " << value << "\n";
  std::ofstream(root_ / "src/k.cu") << "#include \"config.h\"\nextern \"C\" __global__ void k(long* p) { *p = VALUE; }\n";
  Env env{{"XDG_CACHE_HOME", (root_ / "xdg").string()},
          {"CUCORE_CACHE_TEST_DIR", dir_.string()},
          {"CUCORE_CACHE_TEST_SOURCE", (root_ / "src/k.cu").string()},
          {"CUCORE_CACHE_TEST_EXPECT", std::to_string(value)}};
  auto first = run_child("include-compile", root_, env, 60);
  EXPECT_EQ(first["ptx"], "1");
  EXPECT_EQ(first["hits"], "0");
  int planted = 0;
  for (const char* sub : {"toolchain", "includes"})
    for (const auto& e : fs::directory_iterator(root_ / "xdg" / "cucore" / sub)) {
      fs::remove(e.path());
      ASSERT_EQ(::mkfifo(e.path().c_str(), 0600), 0);
      ++planted;
    }
  EXPECT_EQ(planted, 2);
  auto second = run_child("include-compile", root_, env, 60);  // would block for ever on a FIFO
  EXPECT_EQ(second["ptx"], "1");
  EXPECT_EQ(second["hits"], "1");
}

// Records with a valid checksum but crafted contents: each is a miss counted in
// errors, the entry removed, never an exception, never an allocation sized by
// the record rather than the file.
TEST_F(FileCache, CraftedRecordsAreDamagedMissesNeverExceptionsOrHugeAllocations) {
  const ObjectCode payload = make_payload(1, 0, 0, 2000, false);  // a 2 KB fatbin
  const auto bytes = payload.code();
  auto base = [&](const std::string& entry) {
    detail::EntryRecord r;
    r.size = bytes.size();
    r.checksum = detail::checksum64(bytes.data(), bytes.size());
    r.entry = entry;
    r.code_type = CodeType::fatbin;
    r.name = "crafted";
    return r;
  };
  // Puts a new checksum at the end, as a crafter would.
  auto reseal = [](std::string rec) {
    const std::uint64_t sum = detail::checksum64(rec.data(), rec.size() - 8);
    std::memcpy(rec.data() + rec.size() - 8, &sum, 8);
    return rec;
  };
  struct Craft {
    const char* what;
    std::function<std::string(detail::EntryRecord)> record;
  };
  auto with = [&](auto change) {
    return [&, change](detail::EntryRecord r) {
      change(r);
      return detail::encode_entry_record(r);
    };
  };
  const std::vector<Craft> crafts = {
      {"unknown code type", [&](detail::EntryRecord r) {
         std::string e = detail::encode_entry_record(r);
         e[5] = 42;
         return reseal(e);
       }},
      {"size 0", with([](auto& r) { r.size = 0; })},
      {"size 2^62", with([](auto& r) { r.size = 1ull << 62; })},
      {"size 512 MiB", with([](auto& r) { r.size = 512ull << 20; })},
      {"size 6 GiB", with([](auto& r) { r.size = 6ull << 30; })},
      {"size UINT64_MAX", with([](auto& r) { r.size = UINT64_MAX; })},
      {"size one more than the file", with([&](auto& r) { r.size = bytes.size() + 1; })},
      {"size one less than the file", with([&](auto& r) { r.size = bytes.size() - 1; })},
      {"checksum of other bytes", with([](auto& r) { r.checksum ^= 1; })},
      {"another entry's name", with([](auto& r) { r.entry = std::string(64, 'a'); })},
      {"no entry name", with([](auto& r) { r.entry.clear(); })},
      {"a type the bytes are not", with([](auto& r) { r.code_type = CodeType::cubin; })},
      {"2^32-1 symbols claimed", [&](detail::EntryRecord r) {
         std::string e = detail::encode_entry_record(r);
         std::memset(e.data() + e.size() - 12, 0xff, 4);
         return reseal(e);
       }},
      {"a string longer than the record", [&](detail::EntryRecord r) {
         std::string e = detail::encode_entry_record(r);
         std::memset(e.data() + 32, 0xff, 4);  // the entry name's length
         return reseal(e);
       }},
      {"trailing bytes", [&](detail::EntryRecord r) { return reseal(detail::encode_entry_record(r) + "junk" + std::string(8, '\0')); }},
      {"cut short", [&](detail::EntryRecord r) {
         std::string e = detail::encode_entry_record(r);
         return reseal(e.substr(0, e.size() - 9) + std::string(8, '\0'));
       }},
      {"another version", [&](detail::EntryRecord r) {
         std::string e = detail::encode_entry_record(r);
         e[4] = 1;
         return reseal(e);
       }},
      {"no magic", [&](detail::EntryRecord r) {
         std::string e = detail::encode_entry_record(r);
         e[0] = 'X';
         return reseal(e);
       }},
      {"empty", [](detail::EntryRecord) { return std::string(); }},
      {"a bad checksum", [&](detail::EntryRecord r) {
         std::string e = detail::encode_entry_record(r);
         e.back() ^= 1;
         return e;
       }},
  };
  // A reader that allocated what a record claims would raise the process's peak
  // address space by 512 MiB in that case (the larger claims cannot be mapped at
  // all here: a 1 GiB headroom is set where no sanitizer needs the address space).
  auto vm = [](const char* field) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field))) * 1024;
    return 0ull;
  };
  const int rc = test::run_with_timeout([&] {
#if !defined(__SANITIZE_ADDRESS__)
    const rlim_t headroom = vm("VmSize:") + (1ull << 30);
    rlimit lim{headroom, headroom};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) return 40;
#endif
    const auto peak_before = vm("VmPeak:");
    int failures = 0;
    for (bool sidecar : {false, true}) {
      for (const auto& c : crafts) {
        FileStreamProgramCache cache(dir_);
        const std::string key = std::string("crafted ") + c.what + (sidecar ? " sidecar" : "");
        const fs::path file = cache.entry_path(key);
        fs::create_directories(dir_);
        {
          std::ofstream out(file, std::ios::binary);
          out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        }
        detail::EntryRecord r = base(file.filename().string());
        struct stat st;
        ::stat(file.c_str(), &st);
        if (sidecar) r.data_inode = st.st_ino;
        const std::string rec = c.record(r);
        if (sidecar)
          std::ofstream(file.string() + ".meta", std::ios::binary) << rec;
        else if (::setxattr(file.c_str(), "user.cucore", rec.data(), rec.size(), 0) != 0)
          return 41;
        try {
          const bool hit = cache.get(key).has_value();
          const bool counted = cache.stats().errors == 1 && cache.stats().misses == 1;
          if (hit || !counted || fs::exists(file)) {
            std::fprintf(stderr, "crafted record '%s'%s: hit %d counted %d left %d\n", c.what,
                         sidecar ? " (sidecar)" : "", hit, counted, static_cast<int>(fs::exists(file)));
            ++failures;
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "crafted record '%s': threw %s\n", c.what, e.what());
          ++failures;
        }
      }
    }
    if (vm("VmPeak:") - peak_before > (256ull << 20)) {
      std::fprintf(stderr, "a reader allocated what a record claimed: VmPeak rose by %llu MiB\n",
                   static_cast<unsigned long long>((vm("VmPeak:") - peak_before) >> 20));
      ++failures;
    }
    return failures;
  });
  EXPECT_EQ(rc, 0) << (rc == -1 ? "hung" : "see stderr");
}

TEST_F(FileCache, ASidecarOfAnotherWriteIsARaceUntilItIsOld) {
  FileStreamProgramCache cache(dir_);
  const ObjectCode first = make_payload(3, 0, 0, 900, true), second = make_payload(3, 1, 1, 1200, true);
  cache.put("k", first);
  const fs::path file = cache.entry_path("k"), meta = file.string() + ".meta";
  // A second writer between its two renames: its sidecar is in place, its bytes not yet.
  FileStreamProgramCache other(root_ / "staging");
  other.put("k", second);
  fs::rename(other.entry_path("k").string() + ".meta", meta);
  FileStreamProgramCache reader(dir_);
  EXPECT_FALSE(reader.get("k"));
  EXPECT_EQ(reader.stats().errors, 0u) << "a write under way was taken for damage";
  EXPECT_TRUE(fs::exists(file));
  fs::rename(other.entry_path("k"), file);  // its bytes arrive
  auto got = reader.get("k");
  ASSERT_TRUE(got);
  EXPECT_EQ(verify_payload(*got, 3, true), "");
  EXPECT_EQ(got->symbol_mapping(), second.symbol_mapping());
  // A writer that died between its renames: once its sidecar is old, damage.
  other.put("k", first);
  fs::rename(other.entry_path("k").string() + ".meta", meta);
  const timespec old[2] = {{std::time(nullptr) - 3600, 0}, {std::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, meta.c_str(), old, 0), 0);
  EXPECT_FALSE(reader.get("k"));
  EXPECT_EQ(reader.stats().errors, 1u);
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(FileCache, ARewriteWithAnXattrRecordLeavesNoStaleSidecar) {
  FileStreamProgramCache cache(dir_);
  cache.put("k", make_payload(3, 0, 0, 900, true));
  const fs::path meta = cache.entry_path("k").string() + ".meta";
  ASSERT_TRUE(fs::exists(meta));
  const ObjectCode small = make_payload(3, 0, 1, 900, false);
  cache.put("k", small);
  EXPECT_FALSE(fs::exists(meta));
  auto got = FileStreamProgramCache(dir_).get("k");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->symbol_mapping(), small.symbol_mapping());
  EXPECT_EQ(cache.size_bytes(), small.code().size());
}

TEST_F(FileCache, AskingForAnotherTypeIsADamagedMiss) {
  FileStreamProgramCache cache(dir_);
  cache.put(key_of(CodeType::cubin), compiled(CodeType::cubin));
  EXPECT_FALSE(cache.get(key_of(CodeType::cubin), CodeType::ptx));
  EXPECT_EQ(cache.stats().errors, 1u);
  EXPECT_FALSE(cache.get(key_of(CodeType::cubin)));
}

TEST_F(FileCache, TruncationOfEveryTypeIsDetectedInBothRecordForms) {
  std::mt19937 rng(5);
  for (bool sidecar : {false, true}) {
    for (CodeType type : {CodeType::cubin, CodeType::ptx, CodeType::ltoir, CodeType::fatbin}) {
      SCOPED_TRACE(std::string(to_string(type)) + (sidecar ? " with a sidecar record" : " with an xattr record"));
      ObjectCode obj = type == CodeType::fatbin ? make_payload(1, 0, 0, 6000, false) : compiled(type);
      if (sidecar) {  // the same bytes with a record too large for an xattr
        auto symbols = obj.symbol_mapping();
        for (int i = 0; i < 200; ++i) symbols["expr<" + std::to_string(i) + ">"] = std::string(30, 'x');
        obj = ObjectCode::from_bytes({obj.code().begin(), obj.code().end()}, obj.code_type(), obj.name(), symbols);
      }
      FileStreamProgramCache cache(dir_);
      const std::string key = std::string("truncate-") + std::string(to_string(type));
      for (int t = 0; t < 8; ++t) {
        cache.put(key, obj);
        const fs::path f = cache.entry_path(key);
        ASSERT_EQ(fs::exists(fs::path(f.string() + ".meta")), sidecar);
        fs::resize_file(f, rng() % obj.code().size());
        const auto errors = cache.stats().errors;
        EXPECT_FALSE(cache.get(key));
        EXPECT_EQ(cache.stats().errors, errors + 1);
        EXPECT_FALSE(fs::exists(f));
      }
      cache.put(key, obj);
      auto got = cache.get(key);
      ASSERT_TRUE(got);
      expect_same(*got, obj);
    }
  }
}

TEST_F(FileCache, BytesNotOfTheirTypeAreNotStoredAndDoNotThrow) {
  FileStreamProgramCache cache(dir_);
  std::vector<std::byte> junk(4000);
  std::mt19937 rng(3);
  for (auto& b : junk) b = static_cast<std::byte>(rng());
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(cache.put("junk", ObjectCode::from_bytes(junk, CodeType::cubin)));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not a valid cubin"), std::string::npos) << err;
  EXPECT_EQ(cache.stats().errors, 1u);
  EXPECT_FALSE(cache.get("junk"));
  EXPECT_EQ(count_files(), 0);
}

// Raw bytes of no known kind (cuda.core's caches take any bytes): kept as
// written, checked by their checksum alone, read back untyped in a second
// cache object, never handed to a compile, and still detected when damaged.
TEST_F(FileCache, OpaqueBytesRoundTripUntypedAndNeverAsCode) {
  std::mt19937 rng(11);
  std::vector<std::byte> junk(3000);
  for (auto& b : junk) b = static_cast<std::byte>(rng());
  junk[0] = std::byte{0x01};
  {
    FileStreamProgramCache cache(dir_);
    cache.put("opaque", junk);
    EXPECT_EQ(cache.stats().errors, 0u);
  }
  FileStreamProgramCache cache(dir_);
  auto got = cache.get("opaque");
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->is_opaque());
  ASSERT_EQ(got->code().size(), junk.size());
  EXPECT_EQ(std::memcmp(got->code().data(), junk.data(), junk.size()), 0);
  EXPECT_FALSE(cache.get("opaque", CodeType::cubin));  // a compile never takes it
  EXPECT_EQ(cache.stats().errors, 0u);
  EXPECT_TRUE(cache.get("opaque")) << "a typed miss must not drop the entry";
  // The checksum still guards it: a flipped byte is damage.
  const fs::path f = cache.entry_path("opaque");
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(1234);
    char c = 0;
    io.read(&c, 1);
    io.seekp(1234);
    c = static_cast<char>(c ^ 0x40);
    io.write(&c, 1);
  }
  EXPECT_FALSE(cache.get("opaque"));
  EXPECT_EQ(cache.stats().errors, 1u);
}

TEST_F(FileCache, LargeEntriesRoundTripByteForByte) {
  // Large entries are read into buffers whose pages are made present first
  // (read_buffer): every byte must still be the file's, whatever the size's
  // alignment to pages.
  for (std::size_t size : {std::size_t(20 * 4096 + 1), std::size_t(300001), std::size_t((1 << 20) + 4093)}) {
    const ObjectCode o = make_payload(7, 1, static_cast<int>(size % 1000), size, false);
    FileStreamProgramCache(dir_).put("large", o);
    auto got = FileStreamProgramCache(dir_).get("large");  // a fresh reader
    ASSERT_TRUE(got) << size;
    expect_same(*got, o);
  }
  for (std::size_t size : {std::size_t(0), std::size_t(1), std::size_t(5 * 4096 + 7), std::size_t(1 << 20)}) {
    const std::vector<std::byte> b = detail::read_buffer(size);
    ASSERT_EQ(b.size(), size);
    EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; })) << size;
  }
}

TEST_F(FileCache, LargeRecordsLiveInASidecarAndRoundTrip) {
  FileStreamProgramCache cache(dir_);
  ObjectCode big = make_payload(2, 0, 0, 3000, true);
  cache.put("big", big);
  const fs::path f = cache.entry_path("big");
  EXPECT_TRUE(fs::exists(f.string() + ".meta"));
  EXPECT_LT(::getxattr(f.c_str(), "user.cucore", nullptr, 0), 0);
  auto got = FileStreamProgramCache(dir_).get("big");
  ASSERT_TRUE(got);
  expect_same(*got, big);
  EXPECT_EQ(verify_payload(*got, 2, true), "");
  // A missing sidecar makes the entry damaged, not half-read.
  fs::remove(f.string() + ".meta");
  FileStreamProgramCache reader(dir_);
  EXPECT_FALSE(reader.get("big"));
  EXPECT_EQ(reader.stats().errors, 1u);
  cache.put("big", big);
  EXPECT_TRUE(cache.erase("big"));
  EXPECT_EQ(count_files(), 0);
}

TEST_F(FileCache, EvictsTheLeastRecentlyReadOverTheCap) {
  std::vector<ObjectCode> objs;
  for (int i = 0; i < 5; ++i) objs.push_back(make_payload(2 * i + 1, 0, i, 1000, false));  // 1000-byte fatbins
  FileStreamProgramCache cache(dir_, 3000);
  cache.put("a", objs[0]);
  cache.put("b", objs[1]);
  cache.put("c", objs[2]);
  ASSERT_TRUE(cache.get("a"));  // b is now the least recently read
  cache.put("d", objs[3]);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_FALSE(fs::exists(cache.entry_path("b")));
  // Another process's reads count too: read c from a second cache object.
  ASSERT_TRUE(FileStreamProgramCache(dir_).get("c"));
  cache.put("e", objs[4]);  // evicts a (read before d was written)
  EXPECT_FALSE(fs::exists(cache.entry_path("a")));
  EXPECT_LE(cache.size_bytes(), 3000u);
  std::map<std::string, int> live = {{"c", 2}, {"d", 3}, {"e", 4}};
  for (const auto& [k, i] : live) {
    auto got = cache.get(k);
    ASSERT_TRUE(got) << k;
    expect_same(*got, objs[static_cast<std::size_t>(i)]);
  }
  EXPECT_EQ(cache.stats().evictions, 2u);
}

TEST_F(FileCache, SweepsStaleTemporaryFiles) {
  fs::create_directories(dir_);
  const fs::path stale = dir_ / ".tmp-123-0-deadbeef", fresh = dir_ / ".tmp-456-0-feedface";
  std::ofstream(stale) << "half an entry";
  std::ofstream(fresh) << "a writer still at work";
  const timespec old[2] = {{std::time(nullptr) - 3600, 0}, {std::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, stale.c_str(), old, 0), 0);
  FileStreamProgramCache cache(dir_);
  cache.put("k", make_payload(1, 0, 0, 500, false));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
}

// 8 processes x 200 random puts and gets of shared and private keys: every
// entry read is exactly one writer's whole entry, no good entry is ever taken
// for damage (no errors), and with a cap the directory is under it whenever a
// put has returned.
void stress(const fs::path& root, const fs::path& dir, const std::string& mode) {
  std::vector<pid_t> pids;
  std::vector<fs::path> outs;
  for (int i = 0; i < 8; ++i) {
    outs.push_back(root / ("stress-" + mode + "-" + std::to_string(i)));
    pids.push_back(spawn_child("stress", {{"CUCORE_CACHE_TEST_DIR", dir.string()},
                                          {"CUCORE_CACHE_TEST_ID", std::to_string(i)},
                                          {"CUCORE_CACHE_TEST_MODE", mode},
                                          {"CUCORE_CACHE_TEST_OUT", outs.back().string()}}));
  }
  int read_hits = 0, puts = 0, evictions = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(wait_child(pids[i]), 0) << "writer " << i;
    auto r = read_result(outs[i]);
    EXPECT_EQ(r["bad"], "0") << "writer " << i << ": " << r["first_bad"];
    EXPECT_EQ(r["errors"], "0") << "writer " << i << " took a good entry for damage";
    if (mode == "capped") {
      EXPECT_LE(std::stoull(r["largest"]), kStressCap) << "writer " << i << ": cap exceeded";
    }
    read_hits += std::atoi(r["read_hits"].c_str());
    puts += std::atoi(r["puts"].c_str());
    evictions += std::atoi(r["evictions"].c_str());
  }
  EXPECT_GT(read_hits, mode == "capped" ? 30 : 100);  // the readers did read entries, while others wrote them
  EXPECT_GT(puts, 600);
  if (mode == "capped") {
    EXPECT_GT(evictions, 100);  // the cap was at work
  }
  // And every entry left behind is whole.
  FileStreamProgramCache cache(dir);
  int whole = 0;
  for (int k = 0; k < 8 + 8 * 16; ++k) {
    int key = k < 8 ? k : 100 + (k - 8);
    if (auto o = cache.get(key_for(key))) {
      EXPECT_EQ(verify_payload(*o, key, big_record(mode, key)), "") << key;
      ++whole;
    }
  }
  EXPECT_GT(whole, mode == "capped" ? 5 : 50);
  EXPECT_EQ(cache.stats().errors, 0u);
  if (mode == "capped") {
    EXPECT_LE(cache.size_bytes(), kStressCap);
  }
  int temps = 0;
  for (const auto& e : fs::directory_iterator(dir)) temps += e.path().filename().string().starts_with(".tmp-");
  EXPECT_EQ(temps, 0);
}

TEST_F(FileCache, EightProcessesMixingPutsAndGetsReadNoDamagedEntry) { stress(root_, dir_, "xattr"); }

TEST_F(FileCache, EightProcessesWithSidecarRecordsReadNoDamagedEntry) { stress(root_, dir_, "sidecar"); }

TEST_F(FileCache, EightProcessesUnderASizeCapKeepUnderIt) { stress(root_, dir_, "capped"); }

TEST_F(FileCache, UncreatableDirectoryDoesNotFailCompiles) {
  std::ofstream(root_ / "a-file") << "not a directory";
  FileStreamProgramCache disk(root_ / "a-file" / "programs");
  CountingCache cache(disk);
  Program prog(kSaxpy, "c++", sm90());
  testing::internal::CaptureStderr();
  ObjectCode a = prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);
  ObjectCode b = prog.compile(CodeType::cubin, {"saxpy<double>"}, &cache);
  std::string err = testing::internal::GetCapturedStderr();
  expect_same(a, compiled(CodeType::cubin));
  EXPECT_EQ(b.code_type(), CodeType::cubin);
  EXPECT_EQ(disk.stats().errors, 2u);
  EXPECT_FALSE(disk.usable());
  // Said once, naming the directory.
  EXPECT_NE(err.find((root_ / "a-file" / "programs").string()), std::string::npos) << err;
  EXPECT_EQ(err.find("cucore: program cache"), err.rfind("cucore: program cache")) << err;
}

TEST_F(FileCache, ReadOnlyDirectoryServesHitsAndDoesNotFailCompiles) {
  // Root ignores permission bits: make the directory read-only by mounting it so.
  if (::geteuid() == 0) {
    std::string why;
    if (!mount_tmpfs(dir_, "size=4m", why)) GTEST_SKIP() << "running as root and " << why;
  }
  Program prog(kSaxpy, "c++", sm90());
  {
    FileStreamProgramCache writer(dir_);
    prog.compile(CodeType::cubin, {"saxpy<float>"}, &writer);
  }
  if (::geteuid() == 0)
    ASSERT_EQ(::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  else
    fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec, fs::perm_options::replace);
  FileStreamProgramCache disk(dir_);
  CountingCache cache(disk);
  testing::internal::CaptureStderr();
  ObjectCode hit = prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);  // stored before: a hit
  ObjectCode miss1 = prog.compile(CodeType::ptx, {"saxpy<float>"}, &cache);
  ObjectCode miss2 = prog.compile(CodeType::ltoir, {"saxpy<float>"}, &cache);
  std::string err = testing::internal::GetCapturedStderr();
  expect_same(hit, compiled(CodeType::cubin));
  expect_same(miss1, compiled(CodeType::ptx));
  EXPECT_EQ(miss2.code_type(), CodeType::ltoir);
  EXPECT_EQ(cache.puts.load(), 2);
  EXPECT_EQ(disk.stats().hits, 1u);
  EXPECT_EQ(disk.stats().errors, 2u);
  EXPECT_NE(err.find(dir_.string()), std::string::npos) << err;
  EXPECT_EQ(err.find("cucore: program cache"), err.rfind("cucore: program cache")) << err;
}

TEST_F(FileCache, FullFilesystemDoesNotFailCompiles) {
  std::string why;
  if (!mount_tmpfs(dir_, "size=16k", why)) GTEST_SKIP() << why << " (FileSizeLimitDoesNotFailCompiles covers it)";
  FileStreamProgramCache disk(dir_);
  CountingCache cache(disk);
  testing::internal::CaptureStderr();
  // Fill it: 3 KiB fatbins until writes fail, then a compile on top.
  int stored = 0;
  for (int i = 0; i < 12; ++i) {
    disk.put("fill-" + std::to_string(i), make_payload(1, 0, i, 3000, false));
    stored += disk.get("fill-" + std::to_string(i)).has_value();
  }
  Program prog(kSaxpy + "// full\n", "c++", sm90());
  ObjectCode o = prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(o.code_type(), CodeType::cubin);
  EXPECT_GT(stored, 0);
  EXPECT_LT(stored, 12);
  EXPECT_GT(disk.stats().errors, 0u);
  EXPECT_NE(err.find("No space left"), std::string::npos) << err;
  EXPECT_EQ(count_files(".tmp-"), 0);  // failed writes leave nothing behind
  // Every entry that did get in is whole.
  for (int i = 0; i < 12; ++i)
    if (auto got = disk.get("fill-" + std::to_string(i))) {
      EXPECT_EQ(verify_payload(*got, 1, false), "");
    }
}

TEST_F(FileCache, FileSizeLimitDoesNotFailCompiles) {
  fs::create_directories(dir_);
  auto r = run_child("fsize", root_, {{"CUCORE_CACHE_TEST_DIR", dir_.string()}});
  EXPECT_EQ(r["outcome"], "ok");
  EXPECT_EQ(r["compiled"], "1");
  EXPECT_EQ(r["puts"], "1");
  EXPECT_EQ(r["errors"], "1");
  EXPECT_EQ(r["stored"], "0");
  EXPECT_EQ(r["files"], "0");  // the failed temporary file was removed
}

// ---------------------------------------------------------------- whose directory

// What a victim with no HOME and no XDG_CACHE_HOME runs with: the cache falls
// back to $TMPDIR/cucore-<uid>, a name anyone can make first.
Env homeless(const fs::path& tmpdir, const fs::path& err) {
  return {{"HOME", ""}, {"XDG_CACHE_HOME", ""}, {"CUCORE_PROGRAM_CACHE_DIR", ""}, {"TMPDIR", tmpdir.string()},
          {"CUCORE_CACHE_TEST_ERR", err.string()}};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Plants, as whoever runs it, a valid entry with another program's cubin under
// the key the victim's SAXPY compile will look up.
void plant_entry(const fs::path& programs, const ObjectCode& evil) {
  Program prog(kSaxpy, "c++", sm90());
  const std::string key = make_program_cache_key(prog.code(), "c++", prog.options(), CodeType::cubin,
                                                 std::vector<std::string>{"saxpy<float>"});
  const fs::path file = programs / detail::to_hex(key);
  auto bytes = evil.code();
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  detail::EntryRecord r;
  r.size = bytes.size();
  r.checksum = detail::checksum64(bytes.data(), bytes.size());
  r.entry = file.filename().string();
  r.code_type = CodeType::cubin;
  r.symbols = {{"saxpy<float>", "evil"}};
  const std::string rec = detail::encode_entry_record(r);
  if (::setxattr(file.c_str(), "user.cucore", rec.data(), rec.size(), 0) != 0) std::abort();
}

std::string checksum_of(const ObjectCode& o) { return std::to_string(detail::checksum64(o.code().data(), o.code().size())); }

// The victim's compile with a cache directory nobody tampered with.
std::string reference_checksum(const fs::path& root) {
  const fs::path clean = root / "clean-tmp";
  fs::create_directories(clean);
  return run_child("victim", root, homeless(clean, root / "clean.err"))["checksum"];
}

TEST_F(FileCache, ACacheDirectoryAnotherUserMadeIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to plant the directory as another user (nobody)";
  const ObjectCode evil = Program("extern \"C\" __global__ void evil() {}", "c++", sm90()).compile(CodeType::cubin);
  const fs::path tmp = root_ / "tmp";
  fs::create_directories(tmp);
  fs::permissions(root_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::permissions(tmp, fs::perms::all | fs::perms::sticky_bit);  // as /tmp is
  // The attacker, uid 65534, makes the victim's fallback directory first and plants an entry.
  const int rc = test::run_with_timeout([&] {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 1;
    const fs::path programs = tmp / "cucore-0" / "programs";
    fs::create_directories(programs);
    fs::permissions(tmp / "cucore-0", fs::perms::all);
    fs::permissions(programs, fs::perms::all);
    plant_entry(programs, evil);
    return 0;
  });
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(fs::status(tmp / "cucore-0").permissions() & fs::perms::others_write, fs::perms::others_write);
  auto r = run_child("victim", root_, homeless(tmp, root_ / "victim.err"));
  const std::string err = slurp(root_ / "victim.err");
  EXPECT_NE(r["checksum"], checksum_of(evil)) << "the victim ran the attacker's code";
  EXPECT_EQ(r["checksum"], reference_checksum(root_));
  EXPECT_EQ(r["disk_hits"], "0");
  EXPECT_EQ(r["usable"], "0");
  EXPECT_EQ(r["dir"], (tmp / "cucore-0" / "programs").string());
  EXPECT_NE(err.find("refused"), std::string::npos) << err;
  EXPECT_NE(err.find("uid 65534"), std::string::npos) << err;
  // No file of the victim's (a memo, an entry) went into the attacker's directory.
  for (const auto& e : fs::recursive_directory_iterator(tmp / "cucore-0")) {
    struct stat st;
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode) || st.st_uid == 65534) << e.path();
  }
}

TEST_F(FileCache, AWorldWritableCacheDirectoryIsRefusedEvenIfOurs) {
  const ObjectCode evil = Program("extern \"C\" __global__ void evil() {}", "c++", sm90()).compile(CodeType::cubin);
  const fs::path tmp = root_ / "tmp", programs = tmp / ("cucore-" + std::to_string(::geteuid())) / "programs";
  fs::create_directories(programs);
  fs::permissions(programs, fs::perms::all);  // 0777: anyone could have planted this entry
  plant_entry(programs, evil);
  auto r = run_child("victim", root_, homeless(tmp, root_ / "victim.err"));
  const std::string err = slurp(root_ / "victim.err");
  EXPECT_NE(r["checksum"], checksum_of(evil)) << "the victim ran the planted code";
  EXPECT_EQ(r["checksum"], reference_checksum(root_));
  EXPECT_EQ(r["disk_hits"], "0");
  EXPECT_NE(err.find("refused: it is writable by group or others (mode 0777)"), std::string::npos) << err;
  // A listing says so too, rather than reporting an empty cache.
  try {
    FileStreamProgramCache(programs).entries();
    ADD_FAILURE() << "entries() of a refused directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(programs.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
}

TEST_F(FileCache, WithoutAHomeTheCacheIsAPrivateTemporaryDirectory) {
  const fs::path tmp = root_ / "tmp";
  fs::create_directories(tmp);
  auto first = run_child("victim", root_, homeless(tmp, root_ / "first.err"));
  const fs::path mine = tmp / ("cucore-" + std::to_string(::geteuid()));
  EXPECT_EQ(first["dir"], (mine / "programs").string());
  EXPECT_EQ(first["usable"], "1") << slurp(root_ / "first.err");
  for (const fs::path& d : {mine, mine / "programs", mine / "toolchain"})
    EXPECT_EQ(fs::status(d).permissions(), fs::perms::owner_all) << d;  // 0700, whatever the umask
  auto second = run_child("victim", root_, homeless(tmp, root_ / "second.err"));
  EXPECT_EQ(second["disk_hits"], "1");
  EXPECT_EQ(second["checksum"], first["checksum"]);
}

TEST_F(FileCache, AnUnreadableOrMisplacedDirectoryIsAnErrorToListNotAnEmptyCache) {
  std::ofstream(root_ / "a-file") << "not a directory";
  for (const fs::path& p : {root_ / "a-file", root_ / "a-file" / "programs"}) {
    try {
      FileStreamProgramCache(p).entries();
      ADD_FAILURE() << p;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(FileStreamProgramCache(root_ / "not-yet").entries().empty());  // missing: simply empty
}

TEST_F(FileCache, DefaultCacheLivesUnderXdgCacheHome) {
  auto r = run_child("default", root_, {{"XDG_CACHE_HOME", root_.string()}, {"CUCORE_PROGRAM_CACHE_DIR", ""}});
  EXPECT_EQ(fs::path(r["dir"]), root_ / "cucore" / "programs");
  EXPECT_EQ(r["entries"], "1");
  EXPECT_EQ(r["stats"], "0,1,0,0");
  auto again = run_child("default", root_, {{"XDG_CACHE_HOME", root_.string()}, {"CUCORE_PROGRAM_CACHE_DIR", ""}});
  EXPECT_EQ(again["stats"], "1,0,0,0");
}

TEST_F(FileCache, AWarmStartLoadsNeitherTheDriverNorNvrtc) {
  Env env{{"XDG_CACHE_HOME", root_.string()}, {"CUCORE_CACHE_TEST_DIR", dir_.string()}};
  auto cold = run_child("warm-start", root_, env);
  EXPECT_EQ(cold["hits"], "0");
  EXPECT_EQ(cold["nvrtc"], "1");  // it compiled
  auto warm = run_child("warm-start", root_, env);
  EXPECT_EQ(warm["hits"], "1");
  EXPECT_EQ(warm["driver"], "0") << "the driver was started for a Program whose arch was given";
  EXPECT_EQ(warm["nvrtc"], "0") << "NVRTC was loaded for a cache hit";
}

TEST_F(FileCache, CompilerIdentityMemoSparesLaterProcessesLoadingNvrtc) {
  Env env{{"XDG_CACHE_HOME", root_.string()}};
  auto first = run_child("identity", root_, env);
  EXPECT_EQ(first["loaded_before"], "0");
  EXPECT_EQ(first["loaded_after"], "1");  // nothing known yet: it asked NVRTC
  EXPECT_EQ(first["identity"], detail::nvrtc_identity());
  auto second = run_child("identity", root_, env);
  EXPECT_EQ(second["loaded_after"], "0");  // from the memo
  EXPECT_EQ(second["identity"], first["identity"]);
  // A memo whose files changed is not trusted.
  int memos = 0;
  for (const auto& e : fs::directory_iterator(root_ / "cucore" / "toolchain")) {
    std::ifstream in(e.path());
    std::stringstream body;
    body << in.rdbuf();
    std::string text = body.str();
    auto line = text.find('\n', text.find('\n') + 1) + 1;  // first stamp line
    text.insert(line, "9");                                // another inode
    std::ofstream(e.path(), std::ios::trunc) << text;
    ++memos;
  }
  EXPECT_EQ(memos, 1);
  auto third = run_child("identity", root_, env);
  EXPECT_EQ(third["loaded_after"], "1");
  EXPECT_EQ(third["identity"], first["identity"]);
  EXPECT_EQ(run_child("identity", root_, env)["loaded_after"], "0");  // rewritten
}

// The main program's object, as dl_iterate_phdr hands it out (the first it visits).
std::optional<detail::RunPaths> main_program_run_paths() {
  std::optional<detail::RunPaths> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        *static_cast<std::optional<detail::RunPaths>*>(data) = detail::run_paths_of(*info);
        return 1;
      },
      &out);
  return out;
}

// An ELF file's run paths, read from the file itself (not from memory, as
// cucore reads them): its dynamic segment's DT_RPATH and DT_RUNPATH strings.
detail::RunPaths run_paths_in_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto at = [&](std::size_t offset, auto& out) {
    if (offset + sizeof out > image.size()) throw std::runtime_error("truncated ELF file " + file.string());
    std::memcpy(&out, image.data() + offset, sizeof out);
  };
  ElfW(Ehdr) eh;
  at(0, eh);
  std::vector<ElfW(Phdr)> ph(eh.e_phnum);
  for (std::size_t k = 0; k < ph.size(); ++k) at(eh.e_phoff + k * eh.e_phentsize, ph[k]);
  auto file_offset = [&](ElfW(Addr) vaddr) {
    for (const auto& p : ph)
      if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr < p.p_vaddr + p.p_filesz)
        return vaddr - p.p_vaddr + p.p_offset;
    throw std::runtime_error("an address outside the loaded segments of " + file.string());
  };
  detail::RunPaths out;
  for (const auto& p : ph) {
    if (p.p_type != PT_DYNAMIC) continue;
    ElfW(Addr) strtab = 0;
    std::vector<std::pair<ElfW(Sxword), std::size_t>> wanted;
    for (std::size_t off = p.p_offset; off + sizeof(ElfW(Dyn)) <= p.p_offset + p.p_filesz; off += sizeof(ElfW(Dyn))) {
      ElfW(Dyn) d;
      at(off, d);
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
      if (d.d_tag == DT_RPATH || d.d_tag == DT_RUNPATH) wanted.emplace_back(d.d_tag, d.d_un.d_val);
    }
    for (const auto& [tag, index] : wanted)
      (tag == DT_RPATH ? out.rpath : out.runpath) = std::string(image.c_str() + file_offset(strtab) + index);
  }
  return out;
}

std::string random_path(std::mt19937& rng) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789_-./";
  std::string s = "/";
  for (auto n = 1 + rng() % 40; n-- > 0;) s += kChars[rng() % (sizeof kChars - 1)];
  return s;
}

// A loaded object made by hand: one segment holding a dynamic array and its
// string table, at a base of our choosing.
struct HandMadeObject {
  std::vector<ElfW(Dyn)> memory;  // the segment: the dynamic array, then the strings
  ElfW(Phdr) ph[2]{};
  dl_phdr_info info{};

  // `relocated`: DT_STRTAB holds the table's address (as glibc leaves it on
  // x86-64), else its offset from the base, as the file has it.
  HandMadeObject(const std::vector<std::pair<ElfW(Sxword), std::string>>& strings, bool relocated) {
    std::string table(1, '\0');
    std::vector<ElfW(Dyn)> dyn;
    for (const auto& [tag, s] : strings) {
      dyn.push_back({tag, {table.size()}});
      table += s + '\0';
    }
    const std::size_t dyn_bytes = (dyn.size() + 3) * sizeof(ElfW(Dyn));
    memory.resize((dyn_bytes + table.size()) / sizeof(ElfW(Dyn)) + 1);
    char* seg = reinterpret_cast<char*>(memory.data());
    const ElfW(Addr) fake_vaddr = 0x10000;  // where the segment "was linked"
    const ElfW(Addr) base = reinterpret_cast<ElfW(Addr)>(seg) - fake_vaddr;
    std::memcpy(seg + dyn_bytes, table.data(), table.size());
    dyn.push_back({DT_STRTAB, {(relocated ? base : 0) + fake_vaddr + dyn_bytes}});
    dyn.push_back({DT_STRSZ, {table.size()}});
    dyn.push_back({DT_NULL, {0}});
    std::memcpy(seg, dyn.data(), dyn.size() * sizeof(ElfW(Dyn)));
    ph[0].p_type = PT_LOAD;
    ph[0].p_vaddr = fake_vaddr;
    ph[0].p_memsz = memory.size() * sizeof(ElfW(Dyn));
    ph[1].p_type = PT_DYNAMIC;
    ph[1].p_vaddr = fake_vaddr;
    ph[1].p_memsz = dyn_bytes;
    info.dlpi_addr = base;
    info.dlpi_phdr = ph;
    info.dlpi_phnum = 2;
  }
  ElfW(Dyn)& entry(ElfW(Sxword) tag) {
    for (auto& d : memory)
      if (d.d_tag == tag) return d;
    throw std::logic_error("no such entry");
  }
};

TEST(ToolchainSearch, RunPathsAreReadFromAnObjectsDynamicSection) {
  std::mt19937 rng(23);
  for (int t = 0; t < 50; ++t) {
    const std::string rpath = random_path(rng), runpath = "$ORIGIN" + random_path(rng);
    for (bool relocated : {true, false}) {
      HandMadeObject both({{DT_RPATH, rpath}, {DT_RUNPATH, runpath}}, relocated);
      auto got = detail::run_paths_of(both.info);
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(got->rpath, rpath);
      EXPECT_EQ(got->runpath, runpath);
      HandMadeObject one({{DT_RUNPATH, runpath}}, relocated);
      got = detail::run_paths_of(one.info);
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(got->rpath, "");
      EXPECT_EQ(got->runpath, runpath);
    }
  }
  // Nothing is read outside the object's segments: a string table, a string or
  // a dynamic array that lies elsewhere makes the paths unknown.
  const std::string path = random_path(rng);
  HandMadeObject far({{DT_RUNPATH, path}}, true);
  far.entry(DT_STRTAB).d_un.d_ptr += far.ph[0].p_memsz;
  EXPECT_FALSE(detail::run_paths_of(far.info).has_value());
  HandMadeObject past({{DT_RUNPATH, path}}, true);
  past.entry(DT_RUNPATH).d_un.d_val = past.entry(DT_STRSZ).d_un.d_val;
  EXPECT_FALSE(detail::run_paths_of(past.info).has_value());
  HandMadeObject outside({{DT_RUNPATH, path}}, true);
  outside.ph[1].p_vaddr += outside.ph[0].p_memsz;
  EXPECT_FALSE(detail::run_paths_of(outside.info).has_value());
  // A string the table ends inside is cut at the table's end, not read past it.
  HandMadeObject cut({{DT_RUNPATH, path}}, true);
  cut.entry(DT_STRSZ).d_un.d_val -= 3;  // its last two characters and its terminator
  auto got = detail::run_paths_of(cut.info);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->runpath, path.substr(0, path.size() - 2));
  // An object without a dynamic section (linked statically) has none.
  HandMadeObject plain({{DT_RUNPATH, path}}, true);
  plain.info.dlpi_phnum = 1;
  got = detail::run_paths_of(plain.info);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->rpath + got->runpath, "");
}

TEST(ToolchainSearch, TheProcessesRunPathsAreThoseItsFilesDeclare) {
  auto exe = main_program_run_paths();
  ASSERT_TRUE(exe.has_value());
  const detail::RunPaths in_file = run_paths_in_file("/proc/self/exe");
  EXPECT_EQ(exe->rpath, in_file.rpath);
  EXPECT_EQ(exe->runpath, in_file.runpath);
  const std::string fp = detail::toolchain_search_fingerprint();
  EXPECT_NE(fp.find("\nexe rpath=" + in_file.rpath + "\nexe runpath=" + in_file.runpath + "\n"), std::string::npos)
      << fp;
  Dl_info self{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(&detail::toolchain_search_fingerprint), &self), 0);
  const detail::RunPaths lib = run_paths_in_file(self.dli_fname);
  EXPECT_NE(fp.find("\nlibcucore rpath=" + lib.rpath + "\nlibcucore runpath=" + lib.runpath + "\n"), std::string::npos)
      << self.dli_fname << "\n" << fp;
}

TEST(ToolchainSearch, AnObjectsLocationCountsOnlyThroughATokenOrWhenUnread) {
  std::mt19937 rng(29);
  for (int t = 0; t < 50; ++t) {
    const std::string where = random_path(rng), plain = random_path(rng);
    int asked = 0;
    auto location = [&] {
      ++asked;
      return where;
    };
    std::string fp;
    detail::append_run_paths(fp, "exe", detail::RunPaths{plain, random_path(rng)}, location);
    EXPECT_EQ(asked, 0) << "the location was looked up though no run path depends on it";
    EXPECT_EQ(fp.find(where), std::string::npos) << fp;
    for (const auto& paths : {detail::RunPaths{plain, "$ORIGIN/../lib"}, detail::RunPaths{"${ORIGIN}" + plain, ""},
                              detail::RunPaths{"/opt/$LIB", plain}}) {
      fp.clear();
      detail::append_run_paths(fp, "exe", paths, location);
      EXPECT_NE(fp.find("\nexe=" + where + "\n"), std::string::npos) << fp;
    }
    fp.clear();
    detail::append_run_paths(fp, "exe", std::nullopt, location);
    EXPECT_EQ(fp, "exe=" + where + "\n");
    EXPECT_EQ(asked, 4);
  }
}

TEST_F(FileCache, TheMemoServesTheExecutableHoweverItIsStarted) {
  // Started through the kernel's alias, through its real path and through a
  // symlink, the same executable's search is the same: one memo serves all
  // (its location counts only when a run path names it through $ORIGIN).
  auto paths = main_program_run_paths();
  ASSERT_TRUE(paths.has_value());
  if ((paths->rpath + paths->runpath).find('$') != std::string::npos)
    GTEST_SKIP() << "this test binary's run paths name its location (" << paths->rpath << paths->runpath
                 << "): its memo depends on where it was started from";
  Env env{{"XDG_CACHE_HOME", root_.string()}};
  EXPECT_EQ(run_child("identity", root_, env)["loaded_after"], "1");  // nothing known yet
  const fs::path real = fs::read_symlink("/proc/self/exe");
  const fs::path link = root_ / "through-a-link";
  fs::create_symlink(real, link);
  EXPECT_EQ(run_child("identity", root_, env, 300, real.string())["loaded_after"], "0") << real;
  EXPECT_EQ(run_child("identity", root_, env, 300, link.string())["loaded_after"], "0") << link;
  EXPECT_EQ(run_child("identity", root_, env)["loaded_after"], "0");
  int memos = 0;
  for (const auto& e : fs::directory_iterator(root_ / "cucore" / "toolchain")) memos += e.is_regular_file();
  EXPECT_EQ(memos, 1);
}

// Memos of searches no longer made are pruned when a memo is written: the
// most recently written stay, the one just written always, and nothing but
// regular "nvrtc-" files is touched (a link, a directory, another file).
TEST_F(FileCache, OldToolchainMemosArePrunedWhenOneIsWritten) {
  const fs::path dir = root_ / "toolchain";
  fs::create_directories(dir);
  std::mt19937 rng(7);
  std::vector<int> ages(100);
  for (int i = 0; i < 100; ++i) ages[i] = i;
  std::shuffle(ages.begin(), ages.end(), rng);  // written in random order, with distinct times
  for (int i = 0; i < 100; ++i) {
    const fs::path f = dir / ("nvrtc-" + std::to_string(ages[i]));
    std::ofstream(f) << "memo " << ages[i];
    const struct timespec t[2] = {{1700000000 - ages[i] * 60, 0}, {1700000000 - ages[i] * 60, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), t, AT_SYMLINK_NOFOLLOW), 0);
  }
  // The one just written is the oldest by its time here: it stays all the same.
  const std::string just = "nvrtc-99";
  std::ofstream(dir / "other-file") << "x";
  fs::create_directory(dir / "nvrtc-dir");
  fs::create_symlink(dir / "other-file", dir / "nvrtc-link");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  EXPECT_EQ(detail::prune_toolchain_memos(dfd, 64, just), 100u - 64u);
  EXPECT_EQ(detail::prune_toolchain_memos(dfd, 64, just), 0u) << "a second prune finds nothing more";
  ::close(dfd);
  for (int age = 0; age < 100; ++age) {
    const bool kept = age < 63 || "nvrtc-" + std::to_string(age) == just;
    EXPECT_EQ(fs::exists(dir / ("nvrtc-" + std::to_string(age))), kept) << "memo of age " << age;
  }
  EXPECT_TRUE(fs::exists(dir / "other-file"));
  EXPECT_TRUE(fs::is_directory(dir / "nvrtc-dir"));
  EXPECT_TRUE(fs::is_symlink(dir / "nvrtc-link"));

  // And a process that writes its memo prunes: 100 old ones of other searches
  // in a cache root, then a fresh process that finds no memo of its own.
  const fs::path home = root_ / "home";
  const fs::path memos = home / "cucore" / "toolchain";
  fs::create_directories(memos);
  for (const fs::path& d : {home / "cucore", memos}) fs::permissions(d, fs::perms::owner_all);
  for (int age = 0; age < 100; ++age) {
    const fs::path f = memos / ("nvrtc-old-" + std::to_string(age));
    std::ofstream(f) << "memo";
    const struct timespec t[2] = {{1600000000 - age * 60, 0}, {1600000000 - age * 60, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), t, AT_SYMLINK_NOFOLLOW), 0);
  }
  EXPECT_EQ(run_child("identity", root_, Env{{"XDG_CACHE_HOME", home.string()}})["loaded_after"], "1");
  int left = 0, old_left = 0;
  for (const auto& e : fs::directory_iterator(memos)) {
    ++left;
    old_left += e.path().filename().string().starts_with("nvrtc-old-");
  }
  EXPECT_EQ(left, 64) << "the process's memo and the 63 newest others";
  EXPECT_EQ(old_left, 63);
  for (int age = 0; age < 63; ++age) EXPECT_TRUE(fs::exists(memos / ("nvrtc-old-" + std::to_string(age)))) << age;
}

using cucore::test::run_cli;

TEST_F(FileCache, CliInfoAndClear) {
  if (std::string(CUCORE_CLI_PATH).empty()) GTEST_SKIP() << "the cucore tool is not built";
  const fs::path home = root_ / "home";
  FileStreamProgramCache cache(dir_);
  FileStreamProgramCache default_cache(home / "default-programs");
  std::size_t bytes = 0;
  for (CodeType t : {CodeType::cubin, CodeType::ptx}) {
    cache.put(key_of(t), compiled(t));
    default_cache.put(key_of(t), compiled(t));
    bytes += compiled(t).code().size();
  }
  int rc = 0;
  std::string out = run_cli("cache info --dir " + dir_.string(), rc, home);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(dir_.string()), std::string::npos) << out;
  EXPECT_NE(out.find("entries     2 (1 cubin, 1 ptx)"), std::string::npos) << out;
  EXPECT_NE(out.find("bytes       " + std::to_string(bytes)), std::string::npos) << out;
  out = run_cli("cache info --json --dir " + dir_.string(), rc, home);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"entries\": 2"), std::string::npos) << out;
  // An empty --dir (an unset variable) is an error, not the default cache.
  out = run_cli("cache clear --dir ''", rc, home);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--dir is empty"), std::string::npos) << out;
  EXPECT_EQ(default_cache.entries().size(), 2u);
  out = run_cli("cache clear --dir " + dir_.string(), rc, home);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("removed 2 entries"), std::string::npos) << out;
  EXPECT_EQ(count_files(), 0);
  // The default cache: the one the environment names.
  out = run_cli("cache info", rc, home);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find((home / "default-programs").string()), std::string::npos) << out;
  EXPECT_NE(out.find("entries     2"), std::string::npos) << out;
  out = run_cli("cache info --json", rc, home);
  EXPECT_NE(out.find("\"this_run\""), std::string::npos) << out;
  // A directory that cannot be read is an error, not an empty cache.
  std::ofstream(root_ / "a-file") << "x";
  out = run_cli("cache info --dir " + (root_ / "a-file").string(), rc, home);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find((root_ / "a-file").string()), std::string::npos) << out;
  fs::permissions(dir_, fs::perms::all);
  out = run_cli("cache info --dir " + dir_.string(), rc, home);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("refused"), std::string::npos) << out;
  fs::permissions(dir_, fs::perms::owner_all);
}

// Runs the child role, if this process is one, before GoogleTest starts.
struct ChildHook {
  ChildHook() {
    if (const char* role = std::getenv("CUCORE_CACHE_TEST_CHILD"); role && *role) {
      int rc = child_main(role);
      std::fflush(nullptr);
      ::_exit(rc);
    }
  }
} const child_hook;

}  // namespace
}  // namespace cucore
