// FileStreamProgramCache: one raw binary per key in a directory shared by
// processes. The layout, the record and why they are so: docs/program-cache.md.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cucore/program_cache.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/program_cache_internal.hpp"

namespace fs = std::filesystem;

namespace cucore {
namespace {

constexpr const char* kXattr = "user.cucore";
constexpr std::string_view kMetaSuffix = ".meta";
constexpr std::string_view kTempPrefix = ".tmp-";
constexpr char kRecordMagic[4] = {'C', 'U', 'C', 'R'};
constexpr std::uint8_t kRecordVersion = 1;
// ext4 keeps all of an inode's xattrs in one 4 KiB block; larger records go to a sidecar.
constexpr std::size_t kMaxXattrRecord = 3072;
// No writer holds a temporary file this long; older ones were left by a crash.
constexpr std::time_t kStaleTempSeconds = 600;

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

// ---------------------------------------------------------------- the record
// magic "CUCR" | u8 version | 3 reserved | u64 size | u64 checksum | str entry
// name | str code type | str object name | u32 count, (str expr, str lowered)* |
// u64 checksum of all the bytes before. Strings are u32 length + bytes.

struct Record {
  std::uint64_t size = 0, checksum = 0;
  std::string entry, code_type, name;
  std::map<std::string, std::string> symbols;
};

void put_u32(std::string& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
void put_str(std::string& b, std::string_view s) {
  put_u32(b, static_cast<std::uint32_t>(s.size()));
  b.append(s);
}

std::string encode(const Record& r) {
  std::string b(kRecordMagic, 4);
  b.push_back(static_cast<char>(kRecordVersion));
  b.append(3, '\0');
  put_u64(b, r.size);
  put_u64(b, r.checksum);
  put_str(b, r.entry);
  put_str(b, r.code_type);
  put_str(b, r.name);
  put_u32(b, static_cast<std::uint32_t>(r.symbols.size()));
  for (const auto& [k, v] : r.symbols) {
    put_str(b, k);
    put_str(b, v);
  }
  put_u64(b, detail::checksum64(b.data(), b.size()));
  return b;
}

struct Reader {
  std::string_view b;
  std::size_t at = 0;
  bool ok = true;
  template <typename T>
  T num() {
    T v{};
    if (b.size() - at < sizeof(T)) {
      ok = false;
      return v;
    }
    std::memcpy(&v, b.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string str() {
    auto n = num<std::uint32_t>();
    if (!ok || b.size() - at < n) {
      ok = false;
      return {};
    }
    std::string s(b.substr(at, n));
    at += n;
    return s;
  }
};

std::optional<Record> decode(std::string_view b) {
  if (b.size() < 4 + 4 + 16 + 8 || std::memcmp(b.data(), kRecordMagic, 4) != 0 ||
      static_cast<std::uint8_t>(b[4]) != kRecordVersion)
    return std::nullopt;
  std::uint64_t tail;
  std::memcpy(&tail, b.data() + b.size() - 8, 8);
  if (tail != detail::checksum64(b.data(), b.size() - 8)) return std::nullopt;
  Reader r{b.substr(0, b.size() - 8), 8};
  Record rec;
  rec.size = r.num<std::uint64_t>();
  rec.checksum = r.num<std::uint64_t>();
  rec.entry = r.str();
  rec.code_type = r.str();
  rec.name = r.str();
  auto count = r.num<std::uint32_t>();
  for (std::uint32_t i = 0; r.ok && i < count; ++i) {
    std::string k = r.str();
    std::string v = r.str();
    rec.symbols.emplace(std::move(k), std::move(v));
  }
  if (!r.ok || r.at != r.b.size()) return std::nullopt;
  return rec;
}

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

// Asks for `n` bytes from the start and returns how many came, SIZE_MAX on an
// error (a FIFO or a directory gives one). Stops once `enough` have come: a
// whole entry is one pread that returns exactly its size (regular files read
// short only at their end), while a longer file fills all `n`.
std::size_t read_exactly(int fd, void* data, std::size_t n, std::size_t enough) {
  char* p = static_cast<char*>(data);
  std::size_t off = 0;
  while (off < enough) {
    ssize_t r = ::pread(fd, p + off, n - off, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      return SIZE_MAX;
    }
    if (r == 0) break;
    off += static_cast<std::size_t>(r);
  }
  return off;
}

std::optional<std::string> read_small_file(int dirfd, const std::string& name) {
  Fd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return std::nullopt;
  struct stat st;
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) return std::nullopt;
  std::string s(static_cast<std::size_t>(st.st_size), '\0');
  if (!read_all(fd.fd, s.data(), s.size())) return std::nullopt;
  return s;
}

}  // namespace

// ---------------------------------------------------------------- the cache

struct FileStreamProgramCache::Impl {
  fs::path dir;
  std::optional<std::size_t> max;
  // The directory, opened once: entries are opened relative to it (no path walk
  // per read). Replaced if the directory is deleted and remade; old descriptors
  // are kept open until the cache goes, since a reader may still be using one.
  std::atomic<int> dirfd{-1};
  std::vector<int> retired;
  // Best-effort cap without a directory scan per put: bytes known to be there
  // (last scan) plus bytes written since. Other processes' writes show up at the
  // next scan, which comes when the estimate passes the cap or every 64 puts.
  std::mutex estimate_mutex;
  std::optional<std::uint64_t> estimate;
  int puts_since_scan = 0;
  std::atomic<std::uint64_t> hits{0}, misses{0}, evictions{0}, errors{0};
  std::atomic<bool> warned{false};
  std::atomic<bool> xattrs{true};  // false once the filesystem refused user xattrs
  std::atomic<bool> swept{false};
  std::atomic<std::uint64_t> temp_counter{0};
  std::mutex dir_mutex;  // reopening the directory

  ~Impl() {
    if (dirfd >= 0) ::close(dirfd);
    for (int fd : retired) ::close(fd);
  }

  // The one message per cache: compiles go on, uncached.
  void warn(const std::string& what) {
    if (!warned.exchange(true))
      std::fprintf(stderr, "cucore: program cache %s: %s; compiles go on without storing there (reported once)\n",
                   dir.c_str(), what.c_str());
  }

  // `why` (if given) says what failed.
  bool open_dir(bool create, std::string* why = nullptr) {
    std::lock_guard lock(dir_mutex);
    if (dirfd >= 0) {
      // Still the directory at that path? (It may have been deleted and remade.)
      struct stat a, b;
      if (::fstat(dirfd, &a) == 0 && a.st_nlink > 0 && ::stat(dir.c_str(), &b) == 0 && a.st_ino == b.st_ino &&
          a.st_dev == b.st_dev)
        return true;
      retired.push_back(dirfd.exchange(-1));
    }
    if (create) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) {
        if (why) *why = "cannot create the directory (" + ec.message() + ")";
        return false;
      }
    }
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      if (why) *why = std::string("cannot open the directory (") + std::strerror(errno) + ")";
      return false;
    }
    dirfd = fd;
    return true;
  }

  std::string temp_name() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[96];
    std::snprintf(buf, sizeof buf, ".tmp-%d-%llu-%016llx", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(temp_counter.fetch_add(1)), static_cast<unsigned long long>(rng()));
    return buf;
  }

  // Removes the entry `name` if it is still the file we read (another process
  // may have replaced it with a good one meanwhile).
  static void remove_damaged(int dfd, const std::string& name, const struct stat& seen, bool sidecar) {
    struct stat now;
    if (::fstatat(dfd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == seen.st_ino &&
        now.st_dev == seen.st_dev) {
      ::unlinkat(dfd, name.c_str(), 0);
      if (sidecar) ::unlinkat(dfd, (name + std::string(kMetaSuffix)).c_str(), 0);
    }
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

  enum class Outcome { hit, miss, damaged, retry };

  Outcome read_entry(int dfd, const std::string& name, std::string_view expected, std::optional<ObjectCode>& out) {
    // O_NONBLOCK: a FIFO planted under an entry's name must not hang a reader.
    Fd fd(::openat(dfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.fd < 0) {
      if (errno != ENOENT) warn(std::string("cannot read an entry (") + std::strerror(errno) + ")");
      return Outcome::miss;
    }
    // No fstat on the way to a hit (a syscall is ~1 us on some machines): the
    // record has the size, and reading one byte more than it says tells a
    // truncated or extended file from a whole one.
    auto damaged = [&] {
      struct stat st;
      if (::fstat(fd.fd, &st) == 0) remove_damaged(dfd, name, st, false);
      return Outcome::damaged;
    };
    // The record: in the file's xattr (atomic with the bytes), else the sidecar.
    char small[1024];
    std::string big;
    std::string_view raw;
    bool sidecar = false;
    ssize_t n = ::fgetxattr(fd.fd, kXattr, small, sizeof small);
    if (n < 0 && errno == ERANGE) {
      ssize_t need = ::fgetxattr(fd.fd, kXattr, nullptr, 0);
      if (need > 0) {
        big.resize(static_cast<std::size_t>(need));
        n = ::fgetxattr(fd.fd, kXattr, big.data(), big.size());
        if (n >= 0) raw = std::string_view(big.data(), static_cast<std::size_t>(n));
      }
    } else if (n >= 0) {
      raw = std::string_view(small, static_cast<std::size_t>(n));
    }
    if (n < 0) {
      auto meta = read_small_file(dfd, name + std::string(kMetaSuffix));
      if (!meta) {
        // A writer renames the sidecar before the bytes and an eraser removes the
        // bytes first, so this is a race only if the bytes are gone now.
        return Outcome::retry;
      }
      big = std::move(*meta);
      raw = big;
      sidecar = true;
    }
    auto rec = decode(raw);
    bool good = rec && rec->entry == name;
    if (good && !expected.empty() && rec->code_type != expected) good = false;  // wrong type
    std::vector<std::byte> data;
    if (good) {
      data.resize(rec->size + 1);
      good = read_exactly(fd.fd, data.data(), data.size(), rec->size) == rec->size;
      data.pop_back();
      good = good && detail::checksum64(data.data(), data.size()) == rec->checksum &&
             detail::structurally_valid(rec->code_type, data);
    }
    if (!good) {
      // A sidecar and its bytes are two renames: re-read once before calling it damage.
      if (sidecar) return Outcome::retry;
      return damaged();
    }
    // Least-recently-read eviction needs the read time; atime updates may be off.
    touch(fd.fd);
    out = ObjectCode::from_bytes(std::move(data), std::move(rec->code_type), std::move(rec->name),
                                 std::move(rec->symbols));
    return Outcome::hit;
  }

  std::optional<ObjectCode> get(std::string_view key, std::string_view expected) {
    int dfd = dirfd.load(std::memory_order_acquire);
    if (dfd < 0) {
      if (!open_dir(false)) {
        ++misses;
        return std::nullopt;
      }
      dfd = dirfd.load(std::memory_order_acquire);
    }
    const std::string name = entry_name(key);
    std::optional<ObjectCode> out;
    for (int attempt = 0; attempt < 2; ++attempt) {
      switch (read_entry(dfd, name, expected, out)) {
        case Outcome::hit:
          ++hits;
          return out;
        case Outcome::miss:
          ++misses;
          return std::nullopt;
        case Outcome::damaged:
          ++errors;
          ++misses;
          return std::nullopt;
        case Outcome::retry:
          break;
      }
    }
    // Still inconsistent after a re-read: damaged (sidecar mode).
    struct stat st;
    if (::fstatat(dfd, name.c_str(), &st, 0) == 0) {
      remove_damaged(dfd, name, st, true);
      ++errors;
    }
    ++misses;
    return std::nullopt;
  }

  void fail_write(int dfd, const std::string& tmp, const char* step, int err) {
    if (!tmp.empty()) ::unlinkat(dfd, tmp.c_str(), 0);
    ++errors;
    warn(std::string(step) + " failed (" + std::strerror(err) + ")");
  }

  // Writes `bytes` + `record` to a new temporary file, fsynced; returns its name or "".
  std::string write_temp(int dfd, std::span<const std::byte> bytes, const std::string* xattr_record, bool& xattr_done) {
    std::string tmp = temp_name();
    Fd fd(::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
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
    if (::fsync(fd.fd) != 0) {
      fail_write(dfd, tmp, "fsync", errno);
      return {};
    }
    if (::close(fd.release()) != 0) {
      fail_write(dfd, tmp, "closing", errno);
      return {};
    }
    return tmp;
  }

  void put(std::string_view key, const ObjectCode& code) {
    if (!code) throw std::invalid_argument("FileStreamProgramCache::put: empty ObjectCode");
    const auto bytes = code.code();
    if (!detail::structurally_valid(code.code_type(), bytes)) {
      // Never stored: a read would reject it. Not thrown either: a compile
      // that produced it must not fail because of the cache.
      ++errors;
      warn("not storing an entry whose bytes are not a valid " + code.code_type());
      return;
    }
    std::string why;
    if (!open_dir(true, &why)) {
      ++errors;
      warn(why);
      return;
    }
    const int dfd = dirfd.load(std::memory_order_acquire);
    if (!swept.exchange(true)) maintain(false);

    const std::string name = entry_name(key);
    Record rec;
    rec.size = bytes.size();
    rec.checksum = detail::checksum64(bytes.data(), bytes.size());
    rec.entry = name;
    rec.code_type = code.code_type();
    rec.name = code.name();
    rec.symbols = code.symbol_mapping();
    const std::string record = encode(rec);

    bool in_xattr = false;
    const bool try_xattr = xattrs.load() && record.size() <= kMaxXattrRecord;
    std::string tmp = write_temp(dfd, bytes, try_xattr ? &record : nullptr, in_xattr);
    if (tmp.empty()) return;
    if (!in_xattr) {
      // Sidecar first, then the bytes: a reader that sees the new bytes finds
      // their record; one that sees old bytes with the new record re-reads.
      std::string mtmp = temp_name();
      Fd m(::openat(dfd, mtmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (m.fd < 0) return fail_write(dfd, tmp, "creating a record file", errno);
      if (!write_all(m.fd, record.data(), record.size()) || ::fsync(m.fd) != 0) {
        int e = errno;
        ::unlinkat(dfd, mtmp.c_str(), 0);
        return fail_write(dfd, tmp, "writing a record file", e);
      }
      ::close(m.release());
      if (::renameat(dfd, mtmp.c_str(), dfd, (name + std::string(kMetaSuffix)).c_str()) != 0) {
        int e = errno;
        ::unlinkat(dfd, mtmp.c_str(), 0);
        return fail_write(dfd, tmp, "renaming a record file", e);
      }
    }
    if (::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) return fail_write(dfd, tmp, "renaming", errno);
    if (max) {
      bool scan_now;
      {
        std::lock_guard lock(estimate_mutex);
        if (estimate) *estimate += bytes.size();
        scan_now = !estimate || *estimate > *max || ++puts_since_scan >= 64;
      }
      if (scan_now) maintain(true);
    }
  }

  struct Scanned {
    std::string name;
    std::uint64_t bytes = 0;  // data + sidecar
    struct timespec atime {};
    bool data = false, meta = false;
  };

  // Lists entries; sweeps stale temporary files and orphaned sidecars.
  std::vector<Scanned> scan(bool sweep) const {
    std::vector<Scanned> out;
    const int dfd = dirfd.load(std::memory_order_acquire);
    if (dfd < 0) return out;
    int fd = ::openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return out;
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      return out;
    }
    std::map<std::string, Scanned> by_name;
    const std::time_t now = std::time(nullptr);
    while (dirent* e = ::readdir(d)) {
      std::string_view n = e->d_name;
      struct stat st;
      if (n.starts_with(kTempPrefix)) {
        if (sweep && ::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            now - st.st_mtim.tv_sec > kStaleTempSeconds)
          ::unlinkat(dfd, e->d_name, 0);
        continue;
      }
      bool meta = n.ends_with(kMetaSuffix);
      std::string_view base = meta ? n.substr(0, n.size() - kMetaSuffix.size()) : n;
      if (!is_entry_name(base) || ::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
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
    }
    ::closedir(d);
    for (auto& [n, s] : by_name) {
      if (!s.data) {
        // A sidecar whose bytes never arrived (or were removed): old ones are litter.
        if (sweep && now - s.atime.tv_sec > kStaleTempSeconds)
          ::unlinkat(dfd, (n + std::string(kMetaSuffix)).c_str(), 0);
        continue;
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  void remove_entry(const std::string& name, bool meta) const {
    const int dfd = dirfd.load(std::memory_order_acquire);
    ::unlinkat(dfd, name.c_str(), 0);  // bytes first: readers then miss rather than see a lone record
    if (meta) ::unlinkat(dfd, (name + std::string(kMetaSuffix)).c_str(), 0);
  }

  // Sweeps litter and, when capped, evicts least recently read entries.
  void maintain(bool evict) {
    auto entries = scan(true);
    if (!evict || !max) return;
    const int dfd = dirfd.load(std::memory_order_acquire);
    std::uint64_t total = 0;
    for (const auto& e : entries) total += e.bytes;
    struct Settle {  // records what is there once eviction is done
      Impl& impl;
      std::uint64_t& total;
      ~Settle() {
        std::lock_guard lock(impl.estimate_mutex);
        impl.estimate = total;
        impl.puts_since_scan = 0;
      }
    } settle{*this, total};
    if (total <= *max) return;
    std::sort(entries.begin(), entries.end(), [](const Scanned& a, const Scanned& b) {
      if (a.atime.tv_sec != b.atime.tv_sec) return a.atime.tv_sec < b.atime.tv_sec;
      if (a.atime.tv_nsec != b.atime.tv_nsec) return a.atime.tv_nsec < b.atime.tv_nsec;
      return a.name < b.name;
    });
    for (const auto& e : entries) {
      if (total <= *max) break;
      // Another process may be evicting too: count only what we removed.
      if (::unlinkat(dfd, e.name.c_str(), 0) == 0) ++evictions;
      if (e.meta) ::unlinkat(dfd, (e.name + std::string(kMetaSuffix)).c_str(), 0);
      total -= e.bytes;
    }
  }
};

fs::path FileStreamProgramCache::default_path() { return detail::cucore_cache_root() / "programs"; }

FileStreamProgramCache::FileStreamProgramCache(fs::path path, std::optional<std::size_t> max_size_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->dir = std::move(path);
  impl_->max = max_size_bytes;
  // Created lazily by the first put if missing; a failure here is not reported
  // yet: a read-only cache directory still serves hits.
  impl_->open_dir(false);
}

FileStreamProgramCache::~FileStreamProgramCache() = default;

std::optional<ObjectCode> FileStreamProgramCache::get(std::string_view key) { return impl_->get(key, {}); }
std::optional<ObjectCode> FileStreamProgramCache::get(std::string_view key, std::string_view code_type) {
  return impl_->get(key, code_type);
}
void FileStreamProgramCache::put(std::string_view key, const ObjectCode& code) { impl_->put(key, code); }

bool FileStreamProgramCache::erase(std::string_view key) {
  if (impl_->dirfd < 0 && !impl_->open_dir(false)) return false;
  const std::string name = entry_name(key);
  const int dfd = impl_->dirfd.load();
  bool had = ::unlinkat(dfd, name.c_str(), 0) == 0;
  ::unlinkat(dfd, (name + std::string(kMetaSuffix)).c_str(), 0);
  return had;
}

void FileStreamProgramCache::clear() {
  if (impl_->dirfd < 0 && !impl_->open_dir(false)) return;
  for (const auto& e : impl_->scan(true)) impl_->remove_entry(e.name, e.meta);
}

std::size_t FileStreamProgramCache::size_bytes() const {
  if (impl_->dirfd < 0 && !impl_->open_dir(false)) return 0;
  std::size_t total = 0;
  for (const auto& e : impl_->scan(false)) total += e.bytes;
  return total;
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
  if (impl_->dirfd < 0 && !impl_->open_dir(false)) return out;
  for (const auto& e : impl_->scan(false)) {
    FileCacheEntry fe;
    fe.file = impl_->dir / e.name;
    fe.size_bytes = e.bytes;
    // file_time_type's clock is the filesystem's; convert through system_clock.
    auto since_epoch = std::chrono::seconds(e.atime.tv_sec) + std::chrono::nanoseconds(e.atime.tv_nsec);
    fe.last_read = fs::file_time_type::clock::from_sys(std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(since_epoch)));
    std::string raw(1024, '\0');
    ssize_t n = ::getxattr(fe.file.c_str(), kXattr, raw.data(), raw.size());
    std::optional<std::string> meta;
    if (n >= 0) {
      raw.resize(static_cast<std::size_t>(n));
    } else {
      if (errno == ERANGE) {
        n = ::getxattr(fe.file.c_str(), kXattr, nullptr, 0);
        raw.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        n = n > 0 ? ::getxattr(fe.file.c_str(), kXattr, raw.data(), raw.size()) : -1;
      }
      if (n < 0) {
        meta = read_small_file(impl_->dirfd, e.name + std::string(kMetaSuffix));
        raw = meta.value_or(std::string());
      }
    }
    if (auto rec = decode(raw)) fe.code_type = rec->code_type;
    out.push_back(std::move(fe));
  }
  return out;
}

}  // namespace cucore
