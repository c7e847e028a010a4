// FileStreamProgramCache against other writers and hostile directories: a
// stopped process holding the writers' lock, a writer with no cap sharing a
// capped directory, a lock file swapped under a writer, cache paths with a NUL,
// ancestors another user could replace (at open and at every store),
// directories planted at entry names, a directory removed and made again, the
// cap's count of writes in flight, values too large or empty, and `cucore
// cache` on a path that is not UTF-8. No compiler runs here: the entries are hand-written PTX.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cucore/log.hpp>
#include <cucore/program_cache.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache_dir.hpp"
#include "common/compile_helpers.hpp"
#include "common/run_command.hpp"

namespace cucore {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// PTX text of about `size` bytes that names `tag` (so entries differ).
ObjectCode ptx(const std::string& tag, std::size_t size = 1000) {
  std::string text = "// " + tag + "\n.version 8.0\n.target sm_90\n";
  while (text.size() + 1 < size) text.push_back(static_cast<char>('a' + text.size() % 26));
  text.push_back('\0');
  std::vector<std::byte> b(text.size());
  std::memcpy(b.data(), text.data(), text.size());
  return ObjectCode::from_bytes(std::move(b), CodeType::ptx, tag);
}

bool holds(FileStreamProgramCache& c, const std::string& key, const std::string& tag) {
  auto got = c.get(key, CodeType::ptx);
  return got && got->name() == tag;
}

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Captures cucore's log while alive.
struct LogCapture {
  std::mutex m;
  std::vector<std::string> lines;
  LogCapture() {
    set_log_handler([this](LogLevel, std::string_view msg) {
      std::lock_guard lock(m);
      lines.emplace_back(msg);
    });
  }
  ~LogCapture() { set_log_handler({}); }
  int count(const std::string& needle) {
    std::lock_guard lock(m);
    int n = 0;
    for (const auto& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
  std::string all() {
    std::lock_guard lock(m);
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

// A child process that takes the writers' lock of `dir` and stops itself
// (SIGSTOP), as a process stopped in a debugger or by ^Z would hold it.
struct StoppedHolder {
  pid_t pid = -1;
  explicit StoppedHolder(const fs::path& dir) {
    const std::string lock = (dir / ".cucore-lock").string();
    pid = ::fork();
    if (pid == 0) {  // async-signal-safe calls only
      const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
      ADD_FAILURE() << "the lock holder did not stop";
      pid = -1;
    }
  }
  void release() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~StoppedHolder() { release(); }
};

// Sets an environment variable for the scope.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* o = std::getenv(n)) old = o;
    if (value)
      ::setenv(n, value, 1);
    else
      ::unsetenv(n);
  }
  ~ScopedEnv() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

class CacheHardening : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cucore-cache-hardening-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ / "programs";
  }
  void TearDown() override {
    std::error_code ec;
    // Undo what tests did to modes and owners, so everything can be removed.
    for (auto it = fs::recursive_directory_iterator(root_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0700);
    fs::remove_all(root_, ec);
  }
  // Files in `d` but the writers' lock file.
  static int count_files(const fs::path& d, const std::string& prefix = "") {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().filename() != ".cucore-lock" && e.path().filename().string().starts_with(prefix)) ++n;
    return n;
  }
  static bool is_root() { return ::geteuid() == 0; }

  fs::path root_, dir_;
};

// ---------------------------------------------------------------- the writers' lock

// A stopped process holding the lock: a store waits once, is skipped (its
// temporary file removed, an error counted) and says so in the log once per
// process; later stores of that cache do not wait again while the lock stays
// stuck, and store again once it is free.
TEST_F(CacheHardening, AStoppedLockHolderCostsOneWaitAndIsSaidOncePerProcess) {
  FileStreamProgramCache(dir_).put("warm-up", ptx("warm-up"));  // makes the directory
  LogCapture log;
  StoppedHolder holder(dir_);
  ASSERT_GT(holder.pid, 0);
  FileStreamProgramCache cache(dir_, FileStreamProgramCacheOptions{.lock_wait = 400ms});

  auto t = Clock::now();
  cache.put("a", ptx("a"));
  const auto first = ms_since(t);
  EXPECT_GE(first, 390) << "the store did not wait for the lock";
  EXPECT_LT(first, 790) << "the store waited more than once";
  EXPECT_FALSE(holds(cache, "a", "a")) << "stored without the writers' lock";
  EXPECT_EQ(count_files(dir_, ".tmp-"), 0) << "a skipped store left its temporary file";
  EXPECT_EQ(cache.stats().errors, 1u);

  t = Clock::now();
  cache.put("b", ptx("b"));
  EXPECT_LT(ms_since(t), 300) << "a second store waited again for a lock known to be stuck";
  EXPECT_FALSE(holds(cache, "b", "b"));
  EXPECT_EQ(cache.stats().errors, 2u);

  // Another cache object of the process waits once too, but is not said again.
  FileStreamProgramCache other(dir_, FileStreamProgramCacheOptions{.lock_wait = 400ms});
  t = Clock::now();
  other.put("c", ptx("c"));
  EXPECT_GE(ms_since(t), 390);
  EXPECT_FALSE(holds(other, "c", "c"));
  EXPECT_EQ(log.count("writers' lock"), 1) << log.all();
  EXPECT_EQ(log.count(dir_.string()), 1) << log.all();

  holder.release();  // the lock is free again: stores resume, without a word
  cache.put("d", ptx("d"));
  EXPECT_TRUE(holds(cache, "d", "d"));
  EXPECT_TRUE(holds(cache, "warm-up", "warm-up"));
  EXPECT_EQ(log.count("writers' lock"), 1) << log.all();
}

// The wait comes from CUCORE_PROGRAM_CACHE_LOCK_WAIT (seconds) when the options
// leave it unset. (In forked children, with the variable set for them alone.)
TEST_F(CacheHardening, TheLockWaitComesFromTheEnvironment) {
  FileStreamProgramCache(dir_).put("warm-up", ptx("warm-up"));
  StoppedHolder holder(dir_);
  ASSERT_GT(holder.pid, 0);
  const int rc = test::run_with_timeout([&] {
    ScopedEnv env("CUCORE_PROGRAM_CACHE_LOCK_WAIT", "0.4");
    FileStreamProgramCache cache(dir_);
    auto t = Clock::now();
    cache.put("a", ptx("a"));
    const auto waited = ms_since(t);
    if (waited < 390 || waited > 1500) {
      std::fprintf(stderr, "waited %lld ms for a 0.4 s wait\n", waited);
      return 1;
    }
    if (cache.get("a")) return 2;
    // An explicit option wins over the environment.
    FileStreamProgramCache quick(dir_, FileStreamProgramCacheOptions{.lock_wait = 0ms});
    t = Clock::now();
    quick.put("b", ptx("b"));
    if (ms_since(t) > 300 || quick.get("b")) return 3;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  // Nonsense in the variable: the default wait, and a word in the log.
  const int bad = test::run_with_timeout([&] {
    ScopedEnv env("CUCORE_PROGRAM_CACHE_LOCK_WAIT", "soon");
    LogCapture log;
    FileStreamProgramCache cache(dir_);
    return log.count("CUCORE_PROGRAM_CACHE_LOCK_WAIT") == 1 ? 0 : 1;
  });
  EXPECT_EQ(bad, 0);
  test::expect_invalid([&] { FileStreamProgramCache(dir_, FileStreamProgramCacheOptions{.lock_wait = -1ms}); },
                       "lock_wait");
}

// Someone replaces the lock file while this cache keeps the old one open: the
// old file's lock excludes nobody, so a writer that locked it checks, after
// locking, that the name still holds the file it locked, and takes the new one.
TEST_F(CacheHardening, ALockFileSwappedUnderAWriterIsNoticed) {
  FileStreamProgramCache cache(dir_, FileStreamProgramCacheOptions{.lock_wait = 400ms});
  cache.put("a", ptx("a"));  // opens (and keeps) the lock file
  ASSERT_TRUE(holds(cache, "a", "a"));
  const fs::path lock = dir_ / ".cucore-lock", fresh = dir_ / "fresh-lock";
  std::ofstream(fresh) << "";
  fs::rename(fresh, lock);
  const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another writer, in the new file
  cache.put("b", ptx("b"));
  EXPECT_FALSE(holds(cache, "b", "b")) << "stored under the lock of a file no longer at the lock's name";
  ::flock(fd, LOCK_UN);
  cache.put("c", ptx("c"));
  EXPECT_TRUE(holds(cache, "c", "c"));
  // A swap while this cache waits for the old file: once it has that lock, it
  // finds another file at the name, held by another writer, and waits for that.
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // the file this cache has open
  int fd2 = -1;
  std::thread swapper([&] {
    std::this_thread::sleep_for(100ms);
    std::ofstream(fresh) << "";
    fs::rename(fresh, lock);
    fd2 = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
    if (fd2 >= 0) ::flock(fd2, LOCK_EX);
    ::flock(fd, LOCK_UN);
  });
  cache.put("d", ptx("d"));
  swapper.join();
  ASSERT_GE(fd2, 0);
  EXPECT_FALSE(holds(cache, "d", "d")) << "stored under the lock of a file swapped away while waiting";
  ::close(fd2);
  ::close(fd);
  cache.put("e", ptx("e"));
  EXPECT_TRUE(holds(cache, "e", "e"));
}

// ---------------------------------------------------------------- the cap

// A writer with no cap shares the directory: every capped put brings the
// directory back under its cap, whoever wrote the bytes.
TEST_F(CacheHardening, TheCapHoldsWhenAnUncappedWriterSharesTheDirectory) {
  constexpr std::size_t cap = 64 << 10;
  FileStreamProgramCache capped(dir_, cap), uncapped(dir_);
  capped.put("first", ptx("first", 8000));
  for (int i = 0; i < 20; ++i) {
    const std::string key = std::string("u").append(std::to_string(i));  // (GCC 12's -Wrestrict misreads "u" + s)
    uncapped.put(key, ptx(key, 16000));
  }
  EXPECT_GT(capped.size_bytes(), cap);  // the uncapped writer keeps no cap, as it should
  capped.put("last", ptx("last", 8000));
  EXPECT_LE(capped.size_bytes(), cap) << "a capped put left the directory over its cap";
  EXPECT_TRUE(holds(capped, "last", "last"));
  // The least recently read went: the first writes, not the newest.
  EXPECT_FALSE(capped.get("first"));
  EXPECT_FALSE(capped.get("u0"));
  EXPECT_TRUE(holds(capped, "u19", "u19"));
}

// ---------------------------------------------------------------- paths

TEST_F(CacheHardening, ACachePathWithANulIsRefused) {
  const std::string with_nul = (root_ / "a").string() + std::string("\0b", 2);
  test::expect_invalid([&] { FileStreamProgramCache c{fs::path(with_nul)}; }, "NUL");
  test::expect_invalid([&] { TwoLevelProgramCache c(1 << 20, fs::path(with_nul)); }, "NUL");
  std::string why;
  EXPECT_EQ(detail::open_private_dir(fs::path(with_nul), true, why), -1);
  EXPECT_NE(why.find("NUL"), std::string::npos) << why;
  EXPECT_FALSE(fs::exists(root_ / "a")) << "a path with a NUL wrote at its prefix";
}

// Every directory from the cache's up to / must be this user's or root's and
// not writable by group or others unless sticky (ssh's rule): a grandparent
// another user owns could rename the whole tree away and put theirs in its place.
TEST_F(CacheHardening, AnAncestorAnotherUserOwnsIsRefused) {
  if (!is_root()) GTEST_SKIP() << "needs root, to give a directory to another user (nobody)";
  const fs::path theirs = root_ / "theirs", programs = theirs / "mine" / "programs";
  fs::create_directories(programs);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((theirs / "mine").c_str(), 0700), 0);
  FileStreamProgramCache cache(programs);
  cache.put("a", ptx("a"));
  EXPECT_EQ(count_files(programs), 0) << "stored under a directory another user owns";
  EXPECT_FALSE(cache.usable());
  try {
    (void)cache.entries();
    ADD_FAILURE() << "entries() of a refused directory";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("refused"), std::string::npos) << m;
    EXPECT_NE(m.find("uid 65534"), std::string::npos) << m;
    EXPECT_NE(m.find(theirs.string()), std::string::npos) << m;
  }
  // The other cache directories (the compiler memo, the manifests) go through the same check.
  std::string why;
  EXPECT_EQ(detail::open_private_dir(theirs / "mine" / "toolchain", true, why), -1);
  EXPECT_NE(why.find("uid 65534"), std::string::npos) << why;
}

TEST_F(CacheHardening, AGroupWritableAncestorIsRefusedUnlessSticky) {
  const fs::path shared = root_ / "shared", programs = shared / "mine" / "programs";
  fs::create_directories(programs);
  ASSERT_EQ(::chmod((shared / "mine").c_str(), 0700), 0);
  for (mode_t mode : {0770, 0777, 01777, 0755}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(::chmod(shared.c_str(), mode), 0);
    const bool safe = (mode & S_ISVTX) || !(mode & 022);
    const std::string key = std::string("k").append(std::to_string(mode));
    FileStreamProgramCache cache(programs);
    cache.put(key, ptx(key));
    EXPECT_EQ(holds(cache, key, key), safe);
    EXPECT_EQ(fs::exists(cache.entry_path(key)), safe);
    std::string why;
    const int fd = detail::open_private_dir(programs, false, why);
    EXPECT_EQ(fd >= 0, safe) << why;
    if (fd >= 0) ::close(fd);
    if (!safe) {
      EXPECT_NE(why.find(shared.string()), std::string::npos) << why;
    }
  }
}

// The chain is checked again on every store: an ancestor made writable, or
// replaced, after the cache was opened stops the stores (and the reads).
TEST_F(CacheHardening, AnAncestorMadeUnsafeAfterOpeningStopsStores) {
  const fs::path top = root_ / "top", programs = top / "mid" / "programs";
  fs::create_directories(programs);
  FileStreamProgramCache cache(programs);
  cache.put("a", ptx("a"));
  ASSERT_TRUE(holds(cache, "a", "a"));
  ASSERT_EQ(::chmod(top.c_str(), 0777), 0);
  cache.put("b", ptx("b"));
  EXPECT_FALSE(fs::exists(cache.entry_path("b"))) << "stored although an ancestor became world-writable";
  EXPECT_FALSE(cache.usable());
  EXPECT_FALSE(cache.get("a")) << "read an entry of a directory found unsafe";
}

TEST_F(CacheHardening, AReplacedAncestorIsNoticedOnTheNextStore) {
  if (!is_root()) GTEST_SKIP() << "needs root, to make the replacement another user's";
  const fs::path top = root_ / "top", programs = top / "mid" / "programs";
  fs::create_directories(programs);
  FileStreamProgramCache cache(programs);
  cache.put("a", ptx("a"));
  ASSERT_TRUE(holds(cache, "a", "a"));
  // Another user moves the tree away and builds one of the same shape; the
  // directories under theirs look like ours.
  fs::rename(top, root_ / "top-moved");
  fs::create_directories(programs);
  ASSERT_EQ(::chmod((top / "mid").c_str(), 0700), 0);
  ASSERT_EQ(::chmod(programs.c_str(), 0700), 0);
  ASSERT_EQ(::chown(top.c_str(), 65534, 65534), 0);
  cache.put("b", ptx("b"));
  EXPECT_EQ(count_files(programs), 0) << "stored into a tree another user built";
  EXPECT_FALSE(cache.usable());
}

// ---------------------------------------------------------------- planted directories

TEST_F(CacheHardening, ClearEraseAndEvictionRemoveDirectoriesPlantedAtEntryNames) {
  FileStreamProgramCache cache(dir_);
  cache.put("a", ptx("a"));
  const fs::path planted = cache.entry_path("planted"), planted_meta = cache.entry_path("a").string() + ".meta";
  fs::create_directories(planted / "inside");
  std::ofstream(planted / "inside" / "file") << "x";
  fs::create_directories(planted_meta / "inside");
  ASSERT_EQ(cache.entries().size(), 2u);
  cache.clear();
  EXPECT_TRUE(cache.entries().empty());
  EXPECT_FALSE(fs::exists(planted));
  EXPECT_FALSE(fs::exists(planted_meta));
  EXPECT_EQ(count_files(dir_), 0);
  // The CLI reports them removed.
  if (!std::string(CUCORE_CLI_PATH).empty()) {
    fs::create_directories(planted / "inside");
    const std::string cmd = std::string(CUCORE_CLI_PATH) + " cache clear --dir '" + dir_.string() + "' 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[512];
    std::string out;
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int status = ::pclose(p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    EXPECT_NE(out.find("removed 1 entries"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(planted));
  }
  // So does erase().
  fs::create_directories(planted / "inside");
  EXPECT_TRUE(cache.erase("planted"));
  EXPECT_FALSE(fs::exists(planted));
  // Eviction takes a planted directory like any entry, oldest first.
  FileStreamProgramCache capped(dir_, 6000);
  fs::create_directories(planted / "inside");
  const timespec old[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, planted.c_str(), old, AT_SYMLINK_NOFOLLOW), 0);
  capped.put("b", ptx("b"));
  capped.put("c", ptx("c"));
  EXPECT_FALSE(fs::exists(planted));
  EXPECT_TRUE(holds(capped, "b", "b"));
  EXPECT_TRUE(holds(capped, "c", "c"));
  EXPECT_LE(capped.size_bytes(), 6000u);
}

// ---------------------------------------------------------------- cuda.core's behaviours

TEST_F(CacheHardening, AnEmptyPathIsRefusedAndCreateDirectoryMakesItNow) {
  test::expect_invalid([&] { FileStreamProgramCache c{fs::path()}; }, "empty");
  FileStreamProgramCache lazy(dir_);
  EXPECT_FALSE(fs::exists(dir_));  // made by the first put unless asked
  FileStreamProgramCache eager(dir_ / "eager", {.create_directory = true});
  ASSERT_TRUE(fs::is_directory(dir_ / "eager"));
  EXPECT_EQ(fs::status(dir_ / "eager").permissions(), fs::perms::owner_all);
}

// A directory removed by hand and made again by another cache object (another
// process): misses, erase, clear and listings look at the one at the path now.
TEST_F(CacheHardening, ADirectoryRemadeByAnotherWriterIsFollowed) {
  FileStreamProgramCache first(dir_);
  first.put("a", ptx("a"));
  // Before each operation of `first`: the directory removed by hand and made
  // again, with "b" and "c", by a cache object of its own (another process).
  auto remake = [&] {
    fs::remove_all(dir_);
    FileStreamProgramCache other(dir_);
    other.put("b", ptx("b"));
    other.put("c", ptx("c"));
  };
  remake();
  EXPECT_EQ(first.entries().size(), 2u);
  remake();
  EXPECT_GT(first.size_bytes(), 0u);
  remake();
  EXPECT_TRUE(first.erase("c"));
  EXPECT_FALSE(FileStreamProgramCache(dir_).get("c"));
  remake();
  first.clear();
  EXPECT_TRUE(FileStreamProgramCache(dir_).entries().empty());
  remake();
  EXPECT_TRUE(holds(first, "b", "b"));
  fs::remove_all(dir_);
  EXPECT_FALSE(first.get("b"));
  first.put("d", ptx("d"));  // a store makes it again
  EXPECT_TRUE(holds(first, "d", "d"));
}

// Other writers' temporary files (young, regular) are writes about to land:
// the cap counts them. A FIFO, a symlink or a stale temporary file does not
// count (the stale one is swept), and none is opened.
TEST_F(CacheHardening, TheCapCountsTemporaryFilesInFlight) {
  FileStreamProgramCache capped(dir_, std::size_t(10000));
  capped.put("a", ptx("a", 3000));
  capped.put("b", ptx("b", 3000));
  std::ofstream(dir_ / ".tmp-77-0-0000000000000001") << std::string(3500, 't');
  ASSERT_EQ(::mkfifo((dir_ / ".tmp-fifo").c_str(), 0600), 0);
  std::ofstream(root_ / "big") << std::string(100000, 'b');
  fs::create_symlink(root_ / "big", dir_ / ".tmp-link");
  std::ofstream(dir_ / ".tmp-1-1-stale") << std::string(9000, 's');
  const timespec old[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir_ / ".tmp-1-1-stale").c_str(), old, AT_SYMLINK_NOFOLLOW), 0);
  capped.put("c", ptx("c", 3000));  // 3 * 3000 + 3500 > 10000: the least recently read goes
  EXPECT_FALSE(capped.get("a"));
  EXPECT_TRUE(holds(capped, "b", "b"));
  EXPECT_TRUE(holds(capped, "c", "c"));
  EXPECT_LE(capped.size_bytes() + 3500, 10000u);
  EXPECT_FALSE(fs::exists(dir_ / ".tmp-1-1-stale"));
  EXPECT_EQ(fs::file_size(root_ / "big"), 100000u);
}

// A value larger than the cap is not stored, and takes its key's old value
// with it, but evicts nothing else (cuda.core's would empty the directory).
TEST_F(CacheHardening, AValueLargerThanTheCapEvictsNothingElse) {
  FileStreamProgramCache capped(dir_, std::size_t(8000));
  capped.put("a", ptx("a", 2000));
  capped.put("b", ptx("b", 2000));
  capped.put("k", ptx("k", 2000));
  capped.put("k", ptx("huge", 8001));
  EXPECT_FALSE(capped.get("k"));
  EXPECT_TRUE(holds(capped, "a", "a"));
  EXPECT_TRUE(holds(capped, "b", "b"));
  EXPECT_EQ(capped.entries().size(), 2u);
}

// cuda.core stores any bytes, empty ones too.
TEST_F(CacheHardening, EmptyBytesRoundTrip) {
  {
    FileStreamProgramCache cache(dir_);
    cache.put("empty", std::span<const std::byte>());
  }
  FileStreamProgramCache again(dir_);
  auto got = again.get("empty");
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->is_opaque());
  EXPECT_TRUE(got->code().empty());
  EXPECT_FALSE(again.get("empty", CodeType::cubin));  // never compiled code
  EXPECT_EQ(again.stats().errors, 0u);
  InMemoryProgramCache memory;
  memory.put("empty", std::span<const std::byte>());
  ASSERT_TRUE(memory.get("empty"));
  EXPECT_TRUE(memory.get("empty")->code().empty());
}

// ---------------------------------------------------------------- the CLI

using cucore::test::run_cli;

// A directory whose name is not UTF-8 (Latin-1 "café"): the JSON replaces the
// byte that is not UTF-8 (U+FFFD) rather than failing.
TEST_F(CacheHardening, CliJsonOfAPathThatIsNotUtf8) {
  if (std::string(CUCORE_CLI_PATH).empty()) GTEST_SKIP() << "the cucore tool is not built";
  const fs::path latin1 = root_ / "caf\xe9" / "programs";
  FileStreamProgramCache cache(latin1);
  cache.put("a", ptx("a"));
  for (const char* sub : {"info", "clear"}) {
    SCOPED_TRACE(sub);
    int rc = 0;
    const std::string out = run_cli(std::string("cache ") + sub + " --json --dir '" + latin1.string() + "'", rc, root_);
    ASSERT_EQ(rc, 0) << out;
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(out)) << out;
    EXPECT_EQ(j["directory"].get<std::string>(), (root_ / "caf\xEF\xBF\xBD" / "programs").string());
    EXPECT_EQ(j[std::string(sub) == "info" ? "entries" : "removed"], 1);
  }
}

}  // namespace
}  // namespace cucore
