// FileStreamProgramCache: round trips within and between processes, damaged
// entries, eviction, many processes at once, unwritable and full directories,
// the default cache and the `cucore cache` command.
//
// Child processes are this test binary run again with CUCORE_CACHE_TEST_CHILD
// set: a static initializer (at the end of this file) runs the child's role and
// exits before GoogleTest starts.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
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

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cache/hashing.hpp"
#include "cache/toolchain_identity.hpp"

extern char** environ;

#include "common/compile_helpers.hpp"

namespace cucore {
namespace {

namespace fs = std::filesystem;

const std::string& kSaxpy = test::kSaxpyTemplate;

using test::sm90;

std::string str(const char* s) { return s ? s : ""; }
std::string env_or(const char* name) { return str(std::getenv(name)); }

// Counts puts: through Program::compile, one put is one compile.
class CountingCache final : public ProgramCache {
 public:
  explicit CountingCache(ProgramCache& inner) : inner_(inner) {}
  using ProgramCache::put;
  std::optional<ObjectCode> get(std::string_view key) override { return inner_.get(key); }
  std::optional<ObjectCode> get(std::string_view key, CodeType type) override { return inner_.get(key, type); }
  void put(std::string_view key, const ObjectCode& code) override {
    ++puts;
    inner_.put(key, code);
  }
  bool erase(std::string_view key) override { return inner_.erase(key); }
  void clear() override { inner_.clear(); }
  std::size_t size_bytes() const override { return inner_.size_bytes(); }
  CacheStats stats() const override { return inner_.stats(); }
  std::atomic<int> puts{0};

 private:
  ProgramCache& inner_;
};

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

int child_stress() {
  const bool big = env_or("CUCORE_CACHE_TEST_MODE") == "sidecar";
  const int id = std::atoi(env_or("CUCORE_CACHE_TEST_ID").c_str());
  FileStreamProgramCache cache(env_or("CUCORE_CACHE_TEST_DIR"));
  std::mt19937 rng(static_cast<unsigned>(id) * 7919u + 1);
  int bad = 0, puts = 0, read_hits = 0;
  std::string first_bad;
  for (int i = 0; i < 200; ++i) {
    const bool shared = rng() % 2;
    const int k = shared ? static_cast<int>(rng() % 8) : 100 + id * 16 + static_cast<int>(rng() % 16);
    if (rng() % 2) {
      cache.put(key_for(k), make_payload(k, id, i, 256 + rng() % 16384, big));
      ++puts;
    } else if (auto o = cache.get(key_for(k))) {
      ++read_hits;
      std::string why = verify_payload(*o, k, big);
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

int child_main(const std::string& role) {
  try {
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

pid_t spawn_child(const std::string& role, Env env) {
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
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return pid;
}

int wait_child(pid_t pid) {
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
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
std::map<std::string, std::string> run_child(const std::string& role, const fs::path& scratch, Env env) {
  static int n = 0;
  fs::path out = scratch / ("result-" + std::to_string(n++));
  env["CUCORE_CACHE_TEST_OUT"] = out.string();
  int rc = wait_child(spawn_child(role, env));
  EXPECT_EQ(rc, 0) << "child " << role;
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

TEST_F(FileCache, AFifoOrDirectoryUnderAnEntryNameIsADamagedMissNotAHang) {
  FileStreamProgramCache cache(dir_);
  cache.put("warm-up", make_payload(1, 0, 0, 500, false));  // creates the directory
  ASSERT_EQ(::mkfifo(cache.entry_path("fifo").c_str(), 0644), 0);
  fs::create_directory(cache.entry_path("dir"));
  EXPECT_FALSE(cache.get("fifo"));  // would block forever without O_NONBLOCK
  EXPECT_FALSE(cache.get("dir"));
  EXPECT_EQ(cache.stats().errors, 2u);
  EXPECT_FALSE(fs::exists(cache.entry_path("fifo")));
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

void stress(const fs::path& root, const fs::path& dir, const char* mode, bool expect_no_errors) {
  std::vector<pid_t> pids;
  std::vector<fs::path> outs;
  for (int i = 0; i < 8; ++i) {
    outs.push_back(root / (std::string("stress-") + mode + "-" + std::to_string(i)));
    pids.push_back(spawn_child("stress", {{"CUCORE_CACHE_TEST_DIR", dir.string()},
                                          {"CUCORE_CACHE_TEST_ID", std::to_string(i)},
                                          {"CUCORE_CACHE_TEST_MODE", mode},
                                          {"CUCORE_CACHE_TEST_OUT", outs.back().string()}}));
  }
  int read_hits = 0, puts = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(wait_child(pids[i]), 0) << "writer " << i;
    auto r = read_result(outs[i]);
    EXPECT_EQ(r["bad"], "0") << "writer " << i << ": " << r["first_bad"];
    if (expect_no_errors) {
      EXPECT_EQ(r["errors"], "0") << "writer " << i;
    }
    read_hits += std::atoi(r["read_hits"].c_str());
    puts += std::atoi(r["puts"].c_str());
  }
  EXPECT_GT(read_hits, 100);  // the readers did read entries, while others wrote them
  EXPECT_GT(puts, 600);
  // And every entry left behind is whole.
  FileStreamProgramCache cache(dir);
  int whole = 0;
  for (int k = 0; k < 8 + 8 * 16; ++k) {
    int key = k < 8 ? k : 100 + (k - 8);
    if (auto o = cache.get(key_for(key))) {
      EXPECT_EQ(verify_payload(*o, key, std::string(mode) == "sidecar"), "") << key;
      ++whole;
    }
  }
  EXPECT_GT(whole, 50);
  if (expect_no_errors) {
    EXPECT_EQ(cache.stats().errors, 0u);
  }
  int temps = 0;
  for (const auto& e : fs::directory_iterator(dir)) temps += e.path().filename().string().starts_with(".tmp-");
  EXPECT_EQ(temps, 0);
}

TEST_F(FileCache, EightProcessesMixingPutsAndGetsReadNoDamagedEntry) { stress(root_, dir_, "xattr", true); }

TEST_F(FileCache, EightProcessesWithSidecarRecordsReadNoDamagedEntry) { stress(root_, dir_, "sidecar", false); }

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

TEST_F(FileCache, DefaultCacheLivesUnderXdgCacheHome) {
  auto r = run_child("default", root_, {{"XDG_CACHE_HOME", root_.string()}, {"CUCORE_PROGRAM_CACHE_DIR", ""}});
  EXPECT_EQ(fs::path(r["dir"]), root_ / "cucore" / "programs");
  EXPECT_EQ(r["entries"], "1");
  EXPECT_EQ(r["stats"], "0,1,0,0");
  auto again = run_child("default", root_, {{"XDG_CACHE_HOME", root_.string()}, {"CUCORE_PROGRAM_CACHE_DIR", ""}});
  EXPECT_EQ(again["stats"], "1,0,0,0");
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

std::string run_cli(const std::string& args, int& rc) {
  std::string cmd = std::string(CUCORE_CLI_PATH) + " " + args + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    rc = -1;
    return out;
  }
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST_F(FileCache, CliInfoAndClear) {
  if (std::string(CUCORE_CLI_PATH).empty()) GTEST_SKIP() << "the cucore tool is not built";
  FileStreamProgramCache cache(dir_);
  std::size_t bytes = 0;
  for (CodeType t : {CodeType::cubin, CodeType::ptx}) {
    cache.put(key_of(t), compiled(t));
    bytes += compiled(t).code().size();
  }
  int rc = 0;
  std::string out = run_cli("cache info --dir " + dir_.string(), rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(dir_.string()), std::string::npos) << out;
  EXPECT_NE(out.find("entries     2 (1 cubin, 1 ptx)"), std::string::npos) << out;
  EXPECT_NE(out.find("bytes       " + std::to_string(bytes)), std::string::npos) << out;
  out = run_cli("cache info --json --dir " + dir_.string(), rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"entries\": 2"), std::string::npos) << out;
  out = run_cli("cache clear --dir " + dir_.string(), rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("removed 2 entries"), std::string::npos) << out;
  EXPECT_EQ(count_files(), 0);
  // The default directory follows XDG_CACHE_HOME.
  out = run_cli("cache info", rc);  // with the caller's environment: just runs
  EXPECT_EQ(rc, 0) << out;
  out = run_cli("cache info --json", rc);
  EXPECT_NE(out.find("\"this_run\""), std::string::npos) << out;
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
