// FileStreamProgramCache: one raw binary per key in a directory shared by
// processes. The layout, the record and why they are so: docs/program-cache.md.
//
// Every file here is opened with O_NONBLOCK | O_NOFOLLOW and checked with fstat
// before it is read, and no read allocates more than the file holds: a FIFO,
// symlink, directory or crafted record planted under an entry's name is a
// damaged entry (counted, removed, a miss), never a hang, a redirect or an
// exception.
#include <cucore/errors.hpp>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cucore/log.hpp>
#include <cucore/program_cache.hpp>

#include <cstdint>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_dir.hpp"
#include "cache/code_format.hpp"
#include "cache/entry_record.hpp"
#include "hashing/hashing.hpp"

namespace fs = std::filesystem;

namespace cucore {
namespace {

using detail::EntryRecord;

constexpr const char* kXattr = "user.cucore";
constexpr std::string_view kMetaSuffix = ".meta";
constexpr std::string_view kTempPrefix = ".tmp-";
// Writers take this lock (flock) around their renames and eviction.
constexpr const char* kLockName = ".cucore-lock";
// ext4 keeps all of an inode's xattrs in one 4 KiB block; larger records go to a sidecar.
constexpr std::size_t kMaxXattrRecord = 3072;
// Bounds on what a reader takes from a record's xattr or sidecar.
constexpr std::size_t kMaxRecordRead = 16 << 20;
// No writer holds a temporary file this long; older ones were left by a crash.
constexpr std::time_t kStaleTempSeconds = 600;
// A writer waits this long for another process's locked section (a few renames
// and an eviction scan) before it gives its store up; the options or
// CUCORE_PROGRAM_CACHE_LOCK_WAIT (seconds) say otherwise.
constexpr std::chrono::milliseconds kDefaultLockWait = std::chrono::seconds(5);
constexpr const char* kLockWaitVariable = "CUCORE_PROGRAM_CACHE_LOCK_WAIT";

// The wait the environment asks for; the default (and a word in the log) for
// anything but a number of seconds from 0 to a day.
std::chrono::milliseconds lock_wait_from_environment() {
  const char* v = std::getenv(kLockWaitVariable);
  if (!v || !*v) return kDefaultLockWait;
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(v, &end);
  if (errno || end == v || *end || !(seconds >= 0 && seconds <= 86400)) {
    detail::log(LogLevel::warning, std::string(kLockWaitVariable) + "='" + v +
                                       "' is not a number of seconds (0 to 86400); the program cache waits " +
                                       std::to_string(kDefaultLockWait.count() / 1000) + " s for its writers' lock");
    return kDefaultLockWait;
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000 + 0.5));
}

// A stopped process holding a cache's lock is said once per process, whatever
// the number of caches and stores it stops.
std::atomic<bool> g_said_lock_busy{false};

// An entry's file name: the key's hex when it is a 32-byte digest, else the hex
// of its SHA-256 (any string can be a key; names stay short and safe).
std::string entry_name(std::string_view key) {
  if (key.size() == kProgramCacheKeySize) return detail::to_hex(key);
  return detail::to_hex(detail::sha256(std::string("cucore-user-key\0", 16) + std::string(key)));
}

bool is_entry_name(std::string_view n) {
  return n.size() == 64 &&
         std::all_of(n.begin(), n.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string meta_name(const std::string& name) { return name + std::string(kMetaSuffix); }

// ---------------------------------------------------------------- small I/O helpers

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (w == 0) {
      errno = ENOSPC;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  std::size_t off = 0;
  while (off < n) {
    ssize_t r = ::pread(fd, p + off, n - off, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) return false;  // shorter than fstat said
    off += static_cast<std::size_t>(r);
  }
  return true;
}

// The record in the open file's xattr, read into `small` (no allocation on a
// hit) or, when larger, `big`: std::nullopt when there is none (ENODATA, or no
// xattrs on this filesystem), an empty view on any other failure.
std::optional<std::string_view> xattr_record(int fd, char (&small)[1024], std::string& big) {
  ssize_t n = ::fgetxattr(fd, kXattr, small, sizeof small);
  if (n >= 0) return std::string_view(small, static_cast<std::size_t>(n));
  if (errno == ENODATA || errno == ENOTSUP || errno == EOPNOTSUPP) return std::nullopt;
  if (errno != ERANGE) return std::string_view();
  const ssize_t need = ::fgetxattr(fd, kXattr, nullptr, 0);
  if (need <= 0 || static_cast<std::size_t>(need) > kMaxRecordRead) return std::string_view();
  big.resize(static_cast<std::size_t>(need));
  n = ::fgetxattr(fd, kXattr, big.data(), big.size());
  if (n < 0) return std::string_view();
  return std::string_view(big.data(), static_cast<std::size_t>(n));
}

// Removes `name` in `dfd` whatever it is; a directory (which no writer of ours
// makes) only when it is this user's, with everything in it. Whether it removed
// `name`.
bool remove_tree_at(int dfd, const char* name, int depth = 0) {
  struct stat st;
  if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(dfd, name, 0) == 0;
  if (st.st_uid != ::geteuid() || depth > 16) return false;
  const int sub = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (sub < 0) return false;
  std::vector<std::string> names;
  detail::for_each_entry(sub, [&](const char* n) { names.emplace_back(n); });
  for (const auto& n : names) remove_tree_at(sub, n.c_str(), depth + 1);
  ::close(sub);
  return ::unlinkat(dfd, name, AT_REMOVEDIR) == 0;
}

}  // namespace

// ---------------------------------------------------------------- the cache

struct FileStreamProgramCache::Impl {
  fs::path dir;
  std::optional<std::size_t> max;
  std::chrono::milliseconds lock_wait = kDefaultLockWait;
  // The directory, opened once: entries are opened relative to it (no path walk
  // per read). Replaced if the directory is deleted and remade; old descriptors
  // are kept open until the cache goes, since a reader may still be using one.
  std::atomic<int> dirfd{-1};
  std::vector<int> retired;
  std::mutex dir_mutex;  // reopening the directory
  // Writers: this process's threads take the mutex, processes the file lock.
  std::mutex write_mutex;
  int lock_fd = -1;     // the lock file, in the current directory (under write_mutex)
  int lock_dirfd = -1;  // the directory it was opened in
  // The last wait for the lock ran out (under write_mutex): until the lock is
  // had again, writers try it once rather than wait again for each store.
  bool lock_stuck = false;
  std::atomic<std::uint64_t> hits{0}, misses{0}, evictions{0}, errors{0};
  std::atomic<bool> warned{false};
  std::atomic<bool> xattrs{true};  // false once the filesystem refused user xattrs
  std::atomic<bool> swept{false};
  std::atomic<std::uint64_t> temp_counter{0};

  ~Impl() {
    if (lock_fd >= 0) ::close(lock_fd);
    if (dirfd >= 0) ::close(dirfd);
    for (int fd : retired) ::close(fd);
  }

  // The one message per cache: compiles go on, uncached.
  void warn(const std::string& what) {
    if (!warned.exchange(true))
      std::fprintf(stderr, "cucore: program cache %s: %s; compiles go on without storing there (reported once)\n",
                   dir.c_str(), what.c_str());
  }

  // Opens (or re-validates) the directory. `why` gets what is wrong, empty when
  // it merely does not exist yet (and !create). With `recheck` (each store),
  // an open directory is checked again, its ancestors included: one found
  // unsafe is given up, for reads too.
  bool open_dir(bool create, std::string& why, bool recheck = false) {
    std::lock_guard lock(dir_mutex);
    if (dirfd >= 0) {
      // Still the directory at that path? (It may have been deleted and remade.)
      struct stat a, b;
      if (::fstat(dirfd, &a) == 0 && a.st_nlink > 0 && ::stat(dir.c_str(), &b) == 0 && a.st_ino == b.st_ino &&
          a.st_dev == b.st_dev) {
        if (!recheck || detail::private_dir_is_safe(dirfd, dir, why)) return true;
      }
      retired.push_back(dirfd.exchange(-1));
      if (!why.empty()) return false;
    }
    const int fd = detail::open_private_dir(dir, create, why);
    if (fd < 0) return false;
    dirfd = fd;
    return true;
  }

  // The directory for a reader: opened if need be; -1 (a miss) if it cannot be.
  int reader_dir() {
    int dfd = dirfd.load(std::memory_order_acquire);
    if (dfd >= 0) return dfd;
    std::string why;
    if (!open_dir(false, why)) {
      if (!why.empty()) warn(why);
      return -1;
    }
    return dirfd.load(std::memory_order_acquire);
  }

  // The directory at the path now, for what must not act on one removed or
  // replaced since it was opened (a miss, erase, clear, a listing): another
  // cache object or process may have made it again and stored there. -1 when
  // there is none (or it is refused: said once).
  int fresh_dir() {
    std::string why;
    if (!open_dir(false, why)) {
      if (!why.empty()) warn(why);
      return -1;
    }
    return dirfd.load(std::memory_order_acquire);
  }

  std::string temp_name() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[96];
    std::snprintf(buf, sizeof buf, ".tmp-%d-%llu-%016llx", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(temp_counter.fetch_add(1)), static_cast<unsigned long long>(rng()));
    return buf;
  }

  // ---- the writers' lock

  enum class Lock {
    held,
    busy,         // another process held it for the whole wait (a stopped process?)
    unavailable,  // no lock file could be opened and locked
  };

  void close_lock_file() {
    if (lock_fd >= 0) ::close(lock_fd);
    lock_fd = -1;
  }

  // Takes the lock file's flock (write_mutex held), waiting at most lock_wait,
  // or not at all while the last wait ran out.
  Lock acquire(int dfd) {
    using Clock = std::chrono::steady_clock;
    if (lock_dirfd != dfd) close_lock_file();
    const auto give_up = Clock::now() + (lock_stuck ? std::chrono::milliseconds(0) : lock_wait);
    for (int swaps = 0;;) {
      if (lock_fd < 0) {
        lock_dirfd = dfd;
        lock_fd = open_lock_file(dfd);
        if (lock_fd < 0) return Lock::unavailable;
      }
      auto pause = std::chrono::microseconds(100);
      while (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) return Lock::unavailable;
        const auto now = Clock::now();
        if (now >= give_up) {
          lock_stuck = true;
          return Lock::busy;
        }
        std::this_thread::sleep_for(std::min<Clock::duration>(pause, give_up - now));
        pause = std::min(pause * 2, std::chrono::microseconds(10000));
      }
      // The lock of a file no longer at the lock's name excludes nobody (someone
      // replaced it while it was open here, or while this writer waited):
      // checked after locking, then the file now at the name is taken instead.
      struct stat had, now;
      if (::fstat(lock_fd, &had) == 0 && ::fstatat(dfd, kLockName, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
          had.st_dev == now.st_dev && had.st_ino == now.st_ino) {
        lock_stuck = false;
        return Lock::held;
      }
      ::flock(lock_fd, LOCK_UN);
      close_lock_file();
      if (++swaps == 8) return Lock::unavailable;  // someone keeps replacing it
    }
  }

  // Runs `fn(Lock)` holding the directory's lock if it can be had (this
  // process's threads by a mutex, other processes by flock on the lock file).
  template <typename F>
  auto locked(int dfd, F&& fn) {
    std::lock_guard guard(write_mutex);
    const Lock lock = acquire(dfd);
    struct Unlock {
      int fd;
      bool held;
      ~Unlock() {
        if (held) ::flock(fd, LOCK_UN);
      }
    } unlock{lock_fd, lock == Lock::held};
    return fn(lock);
  }

  static int open_lock_file(int dfd) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const int fd = ::openat(dfd, kLockName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      struct stat st;
      if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return fd;
      if (fd >= 0) ::close(fd);
      remove_tree_at(dfd, kLockName);  // something else in its place: ours to replace
    }
    return -1;
  }

  // ---- reading

  // Removes the entry `name` if it is still the file we read (another process
  // may have replaced it with a good one meanwhile), and its sidecar.
  void remove_damaged(int dfd, const std::string& name, const struct stat& seen) {
    locked(dfd, [&](Lock) {
      struct stat now;
      if (::fstatat(dfd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == seen.st_ino &&
          now.st_dev == seen.st_dev) {
        remove_tree_at(dfd, name.c_str());
        ::unlinkat(dfd, meta_name(name).c_str(), 0);
      }
      return 0;
    });
  }

  // Read times order eviction. The kernel's own timestamps are tick-coarse (ms),
  // so several reads in one tick would tie: stamp with the precise clock.
  static void touch(int fd) {
    struct timespec times[2];
    ::clock_gettime(CLOCK_REALTIME, &times[0]);
    times[1].tv_sec = 0;
    times[1].tv_nsec = UTIME_OMIT;
    ::futimens(fd, times);
  }

  enum class Outcome {
    hit,
    miss,
    damaged,
    // The bytes have no record of their own: no xattr and no sidecar (after a
    // re-read, damage), or a sidecar that describes other bytes (a writer
    // between its two renames; after a re-read, a miss, or damage once old).
    no_record,
    foreign_record,
    opaque,  // a user's bytes, asked for as compiled code: a miss, kept
  };

  Outcome read_entry(int dfd, const std::string& name, std::optional<CodeType> expected, std::optional<ObjectCode>& out,
                     struct stat& st) {
    Fd fd(::openat(dfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
    if (fd.fd < 0) {
      if (errno == ENOENT) return Outcome::miss;
      if (errno == ELOOP && ::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return Outcome::damaged;
      warn(std::string("cannot read an entry (") + std::strerror(errno) + ")");
      return Outcome::miss;
    }
    if (::fstat(fd.fd, &st) != 0) return Outcome::miss;
    if (!S_ISREG(st.st_mode)) return Outcome::damaged;  // a FIFO, directory or device
    // The record: in the file's xattr (atomic with the bytes), else the sidecar.
    char small[1024];
    std::string big;
    std::optional<std::string_view> raw = xattr_record(fd.fd, small, big);
    bool sidecar = false;
    if (!raw) {
      int err = 0;
      auto meta = detail::read_file_safely(dfd, meta_name(name).c_str(), kMaxRecordRead, false, &err);
      if (!meta) return err == ENOENT ? Outcome::no_record : Outcome::damaged;
      big = std::move(*meta);
      raw = big;
      sidecar = true;
    }
    std::optional<EntryRecord> rec = detail::decode_entry_record(*raw);
    if (!rec || rec->entry != name) return Outcome::damaged;
    if (sidecar && rec->data_inode != static_cast<std::uint64_t>(st.st_ino)) return Outcome::foreign_record;
    if (expected && rec->opaque) return Outcome::opaque;  // a user's bytes: never taken for compiled code
    if (expected && rec->code_type != *expected) return Outcome::damaged;  // wrong type
    // Sized by the file itself: a record cannot make the reader allocate more.
    if (rec->size != static_cast<std::uint64_t>(st.st_size)) return Outcome::damaged;
    try {
      std::vector<std::byte> data = detail::read_buffer(static_cast<std::size_t>(rec->size));
      if (!read_all(fd.fd, data.data(), data.size()) ||
          detail::checksum64(data.data(), data.size()) != rec->checksum ||
          (!rec->opaque && !detail::structurally_valid(rec->code_type, data)))
        return Outcome::damaged;
      // Least-recently-read eviction needs the read time; atime updates may be off.
      touch(fd.fd);
      out = rec->opaque ? ObjectCode::opaque(std::move(data))
                        : ObjectCode::from_bytes(std::move(data), rec->code_type, std::move(rec->name),
                                                 std::move(rec->symbols));
    } catch (...) {  // std::bad_alloc of a huge but real file: a miss like any other
      return Outcome::damaged;
    }
    return Outcome::hit;
  }

  std::optional<ObjectCode> get(std::string_view key, std::optional<CodeType> expected) {
    int dfd = reader_dir();
    if (dfd < 0) {
      ++misses;
      return std::nullopt;
    }
    const std::string name = entry_name(key);
    std::optional<ObjectCode> out;
    struct stat st {};
    Outcome o = Outcome::miss;
    for (int attempt = 0; attempt < 2; ++attempt) {
      o = read_entry(dfd, name, expected, out, st);
      // Not there: in the directory at the path now? (Hits need no check: a
      // miss is followed by a compile, which dwarfs the two system calls.)
      if (o == Outcome::miss && attempt == 0) {
        const int now = fresh_dir();
        if (now < 0 || now == dfd) break;
        dfd = now;
        continue;
      }
      if (o != Outcome::no_record && o != Outcome::foreign_record) break;
    }
    switch (o) {
      case Outcome::hit:
        ++hits;
        return out;
      case Outcome::foreign_record: {
        // A writer between its renames (or one that died there): damage only
        // once the sidecar is older than any writer takes.
        struct stat meta;
        if (::fstatat(dfd, meta_name(name).c_str(), &meta, AT_SYMLINK_NOFOLLOW) != 0 ||
            std::time(nullptr) - meta.st_mtim.tv_sec <= kStaleTempSeconds)
          break;
        [[fallthrough]];
      }
      case Outcome::no_record:  // writers put the sidecar in place before the bytes
      case Outcome::damaged:
        remove_damaged(dfd, name, st);
        ++errors;
        break;
      case Outcome::miss:
      case Outcome::opaque:
        break;
    }
    ++misses;
    return std::nullopt;
  }

  // ---- writing

  void fail_write(int dfd, const std::string& tmp, const char* step, int err) {
    if (!tmp.empty()) ::unlinkat(dfd, tmp.c_str(), 0);
    ++errors;
    warn(std::string(step) + " failed (" + std::strerror(err) + ")");
  }

  // Writes `bytes` (+ `xattr_record`) to a new temporary file, fsynced; returns
  // its name ("" on failure) and inode.
  std::string write_temp(int dfd, std::span<const std::byte> bytes, const std::string* xattr_record, bool& xattr_done,
                         std::uint64_t& inode) {
    std::string tmp = temp_name();
    Fd fd(::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.fd < 0) {
      fail_write(dfd, {}, "creating a file", errno);
      return {};
    }
    if (!write_all(fd.fd, bytes.data(), bytes.size())) {
      fail_write(dfd, tmp, "writing", errno);
      return {};
    }
    touch(fd.fd);  // a new entry counts as just read
    xattr_done = false;
    if (xattr_record) {
      if (::fsetxattr(fd.fd, kXattr, xattr_record->data(), xattr_record->size(), 0) == 0) {
        xattr_done = true;
      } else if (errno == ENOTSUP || errno == EOPNOTSUPP) {
        xattrs = false;  // this filesystem has none: sidecars from now on
      }                  // E2BIG / ENOSPC / ERANGE: too large here; this entry uses a sidecar
    }
    struct stat st;
    if (::fstat(fd.fd, &st) != 0 || ::fsync(fd.fd) != 0) {
      fail_write(dfd, tmp, "fsync", errno);
      return {};
    }
    inode = static_cast<std::uint64_t>(st.st_ino);
    if (::close(fd.release()) != 0) {
      fail_write(dfd, tmp, "closing", errno);
      return {};
    }
    return tmp;
  }

  // renameat, replacing a directory found at `to` when it is this user's (none
  // of our writers makes one: it was planted, or left by a bug).
  static bool rename_into_place(int dfd, const std::string& from, const std::string& to) {
    if (::renameat(dfd, from.c_str(), dfd, to.c_str()) == 0) return true;
    if (errno != EISDIR && errno != ENOTEMPTY && errno != EEXIST) return false;
    const int saved = errno;
    struct stat st;
    if (::fstatat(dfd, to.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::geteuid()) {
      errno = saved;
      return false;
    }
    remove_tree_at(dfd, to.c_str());
    return ::renameat(dfd, from.c_str(), dfd, to.c_str()) == 0;
  }

  void put(std::string_view key, const ObjectCode& code) {
    if (!code) throw InvalidArgumentError("FileStreamProgramCache::put: empty ObjectCode");
    const auto bytes = code.code();
    if (!code.is_opaque() && !detail::structurally_valid(code.code_type(), bytes)) {
      // Never stored: a read would reject it. Not thrown either: a compile
      // that produced it must not fail because of the cache.
      ++errors;
      warn("not storing an entry whose bytes are not a valid " + std::string(to_string(code.code_type())));
      return;
    }
    if (max && bytes.size() > *max) {
      // Cannot fit: not stored (nor made room for by evicting everything else),
      // and the key's old value is not served either, as InMemoryProgramCache.
      const int dfd = fresh_dir();
      if (dfd >= 0) {
        const std::string name = entry_name(key);
        locked(dfd, [&](Lock) {
          remove_tree_at(dfd, name.c_str());
          remove_tree_at(dfd, meta_name(name).c_str());
          return 0;
        });
      }
      return;
    }
    std::string why;
    if (!open_dir(true, why, true)) {  // the directory and its ancestors, checked again for each store
      ++errors;
      warn(why);
      return;
    }
    const int dfd = dirfd.load(std::memory_order_acquire);

    const std::string name = entry_name(key);
    EntryRecord rec;
    rec.size = bytes.size();
    rec.checksum = detail::checksum64(bytes.data(), bytes.size());
    rec.entry = name;
    rec.code_type = code.code_type();
    rec.opaque = code.is_opaque();
    rec.name = code.name();
    rec.symbols = code.symbol_mapping();
    const std::string record = detail::encode_entry_record(rec);

    bool in_xattr = false;
    std::uint64_t inode = 0;
    const bool try_xattr = xattrs.load() && record.size() <= kMaxXattrRecord;
    std::string tmp = write_temp(dfd, bytes, try_xattr ? &record : nullptr, in_xattr, inode);
    if (tmp.empty()) return;
    std::string mtmp;
    if (!in_xattr) {
      // A sidecar names the inode of its bytes, so a reader that sees it with
      // other bytes knows a write is under way rather than damage.
      rec.data_inode = inode;
      const std::string sidecar = detail::encode_entry_record(rec);
      mtmp = temp_name();
      Fd m(::openat(dfd, mtmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
      if (m.fd < 0) return fail_write(dfd, tmp, "creating a record file", errno);
      if (!write_all(m.fd, sidecar.data(), sidecar.size()) || ::fsync(m.fd) != 0) {
        const int e = errno;
        ::unlinkat(dfd, mtmp.c_str(), 0);
        return fail_write(dfd, tmp, "writing a record file", e);
      }
    }
    // Renames and eviction under the lock: writers of one key never interleave
    // their two renames, and the cap holds when each put returns. Without the
    // lock nothing is stored: another writer may be between its renames.
    const Lock lock = locked(dfd, [&](Lock l) {
      if (l != Lock::held) {
        if (!mtmp.empty()) ::unlinkat(dfd, mtmp.c_str(), 0);
        ::unlinkat(dfd, tmp.c_str(), 0);
        ++errors;
        return l;
      }
      if (!in_xattr) {
        // Sidecar first, then the bytes: a reader that sees the new bytes finds
        // their record.
        if (!rename_into_place(dfd, mtmp, meta_name(name))) {
          const int e = errno;
          ::unlinkat(dfd, mtmp.c_str(), 0);
          fail_write(dfd, tmp, "renaming a record file", e);
          return l;
        }
      }
      if (!rename_into_place(dfd, tmp, name)) {
        fail_write(dfd, tmp, "renaming", errno);
        return l;
      }
      if (in_xattr) remove_tree_at(dfd, meta_name(name).c_str());  // a sidecar of an earlier write
      // Every capped put counts what the directory holds, whoever wrote it (a
      // writer with no cap, another program); the first put of each cache
      // object sweeps litter.
      if (max || !swept.exchange(true)) maintain(dfd, max.has_value());
      return l;
    });
    // Said outside the locks: the log's handler may run anything (Python code).
    if (lock == Lock::unavailable) {
      warn(std::string("cannot take the writers' lock ") + kLockName + "; not storing there");
    } else if (lock == Lock::busy && !g_said_lock_busy.exchange(true)) {
      char waited[32];
      std::snprintf(waited, sizeof waited, "%g s", static_cast<double>(lock_wait.count()) / 1000);
      detail::log(LogLevel::warning, "program cache " + dir.string() + ": another process held its writers' lock (" +
                                         kLockName + ") for " + waited +
                                         " (a stopped process?); compiles go on without storing there while it "
                                         "does (said once per process; " + kLockWaitVariable +
                                         " sets the wait, in seconds)");
    }
  }

  // ---- scanning, eviction

  struct Scanned {
    std::string name;
    std::uint64_t bytes = 0;  // data + sidecar
    struct timespec atime {};
    bool data = false, meta = false;
  };

  // Lists entries; with `sweep`, removes stale temporary files and orphaned
  // sidecars. `error` (if given) gets errno when the directory cannot be read;
  // `temp_bytes` (if given) the size of the young temporary files: writes in
  // flight (regular files only: a FIFO or symlink there is no writer's).
  std::vector<Scanned> scan(int dfd, bool sweep, int* error = nullptr, std::uint64_t* temp_bytes = nullptr) const {
    std::vector<Scanned> out;
    std::map<std::string, Scanned> by_name;
    const std::time_t now = std::time(nullptr);
    const bool read = detail::for_each_entry(dfd, [&](const char* name) {
      std::string_view n = name;
      struct stat st;
      if (n.starts_with(kTempPrefix)) {
        if ((!sweep && !temp_bytes) || ::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return;
        if (now - st.st_mtim.tv_sec > kStaleTempSeconds) {
          if (sweep) ::unlinkat(dfd, name, 0);
        } else if (temp_bytes && S_ISREG(st.st_mode)) {
          *temp_bytes += static_cast<std::uint64_t>(st.st_size);
        }
        return;
      }
      bool meta = n.ends_with(kMetaSuffix);
      std::string_view base = meta ? n.substr(0, n.size() - kMetaSuffix.size()) : n;
      if (!is_entry_name(base) || ::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return;
      Scanned& s = by_name[std::string(base)];
      s.name = base;
      s.bytes += static_cast<std::uint64_t>(st.st_size);
      if (meta) {
        s.meta = true;
        if (!s.data) s.atime = st.st_mtim;
      } else {
        s.data = true;
        s.atime = st.st_atim;
      }
    }, error);
    if (!read) return out;
    for (auto& [n, s] : by_name) {
      if (!s.data) {
        // A sidecar whose bytes never arrived (or were removed): old ones are litter.
        if (sweep && now - s.atime.tv_sec > kStaleTempSeconds) ::unlinkat(dfd, meta_name(n).c_str(), 0);
        continue;
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  // Sweeps litter and, when capped, evicts least recently read entries; the
  // caller holds the lock.
  void maintain(int dfd, bool evict) {
    // Other writers' temporary files count: they are about to land (and take
    // the disk now). Only entries can be evicted for them.
    std::uint64_t total = 0;
    auto entries = scan(dfd, true, nullptr, evict && max ? &total : nullptr);
    if (!evict || !max) return;
    for (const auto& e : entries) total += e.bytes;
    if (total > *max) {
      std::sort(entries.begin(), entries.end(), [](const Scanned& a, const Scanned& b) {
        if (a.atime.tv_sec != b.atime.tv_sec) return a.atime.tv_sec < b.atime.tv_sec;
        if (a.atime.tv_nsec != b.atime.tv_nsec) return a.atime.tv_nsec < b.atime.tv_nsec;
        return a.name < b.name;
      });
      for (const auto& e : entries) {
        if (total <= *max) break;
        // Bytes first: readers then miss rather than see a lone record.
        if (remove_tree_at(dfd, e.name.c_str())) ++evictions;
        if (e.meta) remove_tree_at(dfd, meta_name(e.name).c_str());
        total -= e.bytes;
      }
    }
  }

  // The directory at the path now, for listing: throws when it exists but
  // cannot be used; -1 when it does not exist.
  int listing_dir(const char* what) {
    std::string why;
    if (open_dir(false, why)) return dirfd.load();
    if (why.empty()) return -1;
    throw RuntimeError(std::string("FileStreamProgramCache::") + what + ": " + dir.string() + ": " + why);
  }
};

fs::path FileStreamProgramCache::default_path() { return detail::cucore_cache_root() / "programs"; }

FileStreamProgramCache::FileStreamProgramCache(fs::path path, std::optional<std::size_t> max_size_bytes)
    : FileStreamProgramCache(std::move(path), FileStreamProgramCacheOptions{.max_size_bytes = max_size_bytes}) {}

FileStreamProgramCache::FileStreamProgramCache(fs::path path, const FileStreamProgramCacheOptions& options) {
  // "" would be the working directory, whatever it is when a put runs.
  if (path.empty())
    throw InvalidArgumentError("FileStreamProgramCache: the path is empty; name a directory, or use default_path()");
  // The system would see the path only up to the NUL, and write there.
  if (const auto at = path.native().find('\0'); at != std::string::npos)
    throw InvalidArgumentError("FileStreamProgramCache: the path contains a NUL byte (after \"" +
                                path.native().substr(0, at) + "\"); no file name can hold one");
  if (options.lock_wait && options.lock_wait->count() < 0)
    throw InvalidArgumentError("FileStreamProgramCacheOptions::lock_wait is negative (" +
                                std::to_string(options.lock_wait->count()) + " ms)");
  impl_ = std::make_unique<Impl>();
  impl_->dir = std::move(path);
  impl_->max = options.max_size_bytes;
  impl_->lock_wait = options.lock_wait ? *options.lock_wait : lock_wait_from_environment();
  // Created now if asked, else by the first put; a refusal is reported at first use.
  std::string why;
  impl_->open_dir(options.create_directory, why);
}

FileStreamProgramCache::~FileStreamProgramCache() = default;

std::optional<ObjectCode> FileStreamProgramCache::get(std::string_view key) { return impl_->get(key, std::nullopt); }
std::optional<ObjectCode> FileStreamProgramCache::get(std::string_view key, CodeType code_type) {
  return impl_->get(key, code_type);
}
void FileStreamProgramCache::put(std::string_view key, const ObjectCode& code) { impl_->put(key, code); }

bool FileStreamProgramCache::erase(std::string_view key) {
  const int dfd = impl_->fresh_dir();
  if (dfd < 0) return false;
  const std::string name = entry_name(key);
  return impl_->locked(dfd, [&](Impl::Lock) {
    const bool had = remove_tree_at(dfd, name.c_str());  // whatever sits there, as clear() and get() remove it
    remove_tree_at(dfd, meta_name(name).c_str());
    return had;
  });
}

void FileStreamProgramCache::clear() {
  const int dfd = impl_->fresh_dir();
  if (dfd < 0) return;
  impl_->locked(dfd, [&](Impl::Lock) {
    for (const auto& e : impl_->scan(dfd, true)) {
      // Bytes first: readers then miss rather than see a lone record. Whatever
      // sits at the names (a directory planted there too, as get() removes).
      remove_tree_at(dfd, e.name.c_str());
      if (e.meta) remove_tree_at(dfd, meta_name(e.name).c_str());
    }
    return 0;
  });
}

std::size_t FileStreamProgramCache::size_bytes() const {
  const int dfd = impl_->fresh_dir();
  if (dfd < 0) return 0;
  // Under the writers' lock: no put is between its rename and its eviction.
  return impl_->locked(dfd, [&](Impl::Lock) {
    std::size_t total = 0;
    for (const auto& e : impl_->scan(dfd, false)) total += e.bytes;
    return total;
  });
}

CacheStats FileStreamProgramCache::stats() const {
  return {impl_->hits.load(), impl_->misses.load(), impl_->evictions.load(), impl_->errors.load()};
}

const fs::path& FileStreamProgramCache::path() const noexcept { return impl_->dir; }
std::optional<std::size_t> FileStreamProgramCache::max_size_bytes() const noexcept { return impl_->max; }
fs::path FileStreamProgramCache::entry_path(std::string_view key) const { return impl_->dir / entry_name(key); }
bool FileStreamProgramCache::usable() const noexcept { return impl_->dirfd >= 0 && !impl_->warned.load(); }

std::vector<FileCacheEntry> FileStreamProgramCache::entries() const {
  std::vector<FileCacheEntry> out;
  const int dfd = impl_->listing_dir("entries");
  if (dfd < 0) return out;
  int error = 0;
  const auto scanned = impl_->scan(dfd, false, &error);
  if (error)
    throw RuntimeError("FileStreamProgramCache::entries: cannot read " + impl_->dir.string() + " (" +
                             std::strerror(error) + ")");
  for (const auto& e : scanned) {
    FileCacheEntry fe;
    fe.file = impl_->dir / e.name;
    fe.size_bytes = e.bytes;
    // file_time_type's clock is the filesystem's; convert through system_clock.
    auto since_epoch = std::chrono::seconds(e.atime.tv_sec) + std::chrono::nanoseconds(e.atime.tv_nsec);
    fe.last_read = fs::file_time_type::clock::from_sys(std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(since_epoch)));
    Fd fd(::openat(dfd, e.name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
    struct stat st;
    if (fd.fd >= 0 && ::fstat(fd.fd, &st) == 0 && S_ISREG(st.st_mode)) {
      char small[1024];
      std::string big;
      std::optional<std::string_view> raw = xattr_record(fd.fd, small, big);
      if (!raw) {
        big = detail::read_file_safely(dfd, meta_name(e.name).c_str(), kMaxRecordRead).value_or("");
        raw = big;
      }
      if (auto rec = detail::decode_entry_record(*raw)) fe.code_type = rec->code_type;
    }
    out.push_back(std::move(fe));
  }
  return out;
}

}  // namespace cucore
