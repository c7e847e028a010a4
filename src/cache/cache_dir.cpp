// Cache directories that nobody else can write, and safe reads of their files.
#include <cucore/errors.hpp>
#include "cache/cache_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

#include "compile/program_compile.hpp"

namespace fs = std::filesystem;

namespace cucore::detail {

fs::path cucore_cache_root() {
  // Built as one string (each path::operator/ parses again, and a warm start asks for this).
  auto under = [](std::string base, const char* rest) {
    while (!base.empty() && base.back() == '/') base.pop_back();
    return fs::path(base + rest);
  };
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return under(x, "/cucore");
  if (const char* home = std::getenv("HOME"); home && *home == '/') return under(home, "/.cache/cucore");
  // No home to keep a cache in: a directory of our own under the temporary
  // directory. Anyone may pre-create that name, so open_private_dir checks it.
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  return tmp / ("cucore-" + std::to_string(::geteuid()));
}

namespace {

// The name to give the directory `levels` above `dir` in a message: `dir`'s
// lexical ancestor (the walk itself goes by "..", which is the truth where the
// path has symlinks: the message also says how many levels up).
std::string ancestor_name(const fs::path& dir, int levels) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "a/b/" is "a/b"
  for (int i = 0; i < levels; ++i) p = p.parent_path();
  return p.string() + (levels == 1 ? " (its parent)" : " (" + std::to_string(levels) + " levels up)");
}

constexpr const char* kUseYourOwn = "use a directory of your own (XDG_CACHE_HOME, or the cache's path)";

}  // namespace

namespace {
// NVRTC makes and fills the directory; its parent, cucore's cache root, is
// made private first, so nobody else can plant headers there.
std::string bundled_headers_dir() {
  const fs::path root = cucore_cache_root();
  std::string why;
  const int fd = open_private_dir(root, true, why);
  if (fd < 0)
    throw RuntimeError("ProgramOptions::use_bundled_headers: NVRTC's headers go under cucore's cache "
                             "directory " + root.string() + ", which cannot be used: " + why);
  ::close(fd);
  return (root / "nvrtc-bundled-headers").string();
}
const bool g_registered = (set_bundled_headers_dir(bundled_headers_dir), true);
}  // namespace

bool private_dir_is_safe(int fd, const fs::path& dir, std::string& why) {
  // Checked on the descriptor, so the directory cannot be swapped between the
  // check and its use.
  struct stat st;
  const uid_t euid = ::geteuid();
  if (::fstat(fd, &st) != 0) {
    why = std::string("cannot stat the directory (") + std::strerror(errno) + ")";
    return false;
  }
  if (st.st_uid != euid) {
    why = "refused: it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
          std::to_string(euid) + "), who could plant entries there; " + kUseYourOwn;
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    why = std::string("refused: it is writable by group or others (mode ") + mode +
          "), who could plant entries there; make it private (chmod go-w)";
    return false;
  }
  // Whoever can write any directory above it can rename the branch holding it
  // away and build another in its place; so every ancestor up to / must be this
  // user's or root's, and not writable by group or others unless sticky (as
  // /tmp is, where nobody may rename another's entries): ssh's rule for its
  // files. Walked by "..", "../..", ... from the opened directory (one fstatat
  // each: the real parents, whatever symlinks the path went through); / is the
  // one directory that is its own parent.
  std::string up = "..";
  struct stat below = st;
  for (int level = 1;; ++level, up += "/..") {
    struct stat a;
    if (level > 256 || ::fstatat(fd, up.c_str(), &a, 0) != 0) {
      why = "cannot check " + ancestor_name(dir, level) + " (" + (level > 256 ? "too deep" : std::strerror(errno)) +
            ")";
      return false;
    }
    if (a.st_dev == below.st_dev && a.st_ino == below.st_ino) return true;
    if (a.st_uid != euid && a.st_uid != 0) {
      why = "refused: " + ancestor_name(dir, level) + " is owned by uid " + std::to_string(a.st_uid) +
            ", who could replace the cache directory; " + kUseYourOwn;
      return false;
    }
    if ((a.st_mode & (S_IWGRP | S_IWOTH)) && !(a.st_mode & S_ISVTX)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(a.st_mode & 07777));
      why = "refused: " + ancestor_name(dir, level) + " is writable by group or others (mode " + mode +
            ", not sticky), who could replace the cache directory; " + kUseYourOwn;
      return false;
    }
    below = a;
  }
}

int open_private_dir(const fs::path& dir, bool create, std::string& why) {
  if (dir.empty()) {
    why = "the directory path is empty";
    return -1;
  }
  if (dir.native().find('\0') != std::string::npos) {  // the system would see only what precedes it
    why = "refused: the path contains a NUL byte";
    return -1;
  }
  if (create) {
    // Each missing component with mode 0700 (never wider, whatever the umask);
    // components that exist are left as they are.
    fs::path prefix;
    for (const auto& part : dir) {
      prefix /= part;
      if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
        why = "cannot create " + prefix.string() + " (" + std::strerror(errno) + ")";
        return -1;
      }
    }
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT && !create)
      why.clear();  // not there (yet): nothing wrong with it
    else
      why = std::string("cannot open the directory (") + std::strerror(errno) + ")";
    return -1;
  }
  if (private_dir_is_safe(fd, dir, why)) return fd;
  ::close(fd);
  return -1;
}

std::optional<std::string> read_file_safely(int dirfd, const char* name, std::size_t limit, bool follow_symlinks,
                                            int* error) {
  auto fail = [&](int e) -> std::optional<std::string> {
    if (error) *error = e;
    return std::nullopt;
  };
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_symlinks ? 0 : O_NOFOLLOW);
  const int fd = ::openat(dirfd, name, flags);
  if (fd < 0) return fail(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return fail(errno);
  if (!S_ISREG(st.st_mode)) return fail(EINVAL);
  if (static_cast<std::uint64_t>(st.st_size) > limit) return fail(EFBIG);
  std::string s(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < s.size()) {
    const ssize_t n = ::pread(fd, s.data() + got, s.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno);
    if (n == 0) break;  // shrank meanwhile: what is there
    got += static_cast<std::size_t>(n);
  }
  s.resize(got);
  return s;
}

std::vector<std::byte> read_buffer(std::size_t size) {
  std::vector<std::byte> v;
  v.reserve(size);
#ifdef MADV_POPULATE_WRITE
  // Only the pages wholly inside the buffer: the rest may be another allocation's.
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto at = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t begin = (at + page - 1) & ~(page - 1), end = (at + size) & ~(page - 1);
  // Worth a system call from 64 KiB on (a few faults cost less than one call).
  if (size && end >= begin + 16 * page)
    (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#endif
  v.resize(size);
  return v;
}

bool for_each_entry(int dirfd, const std::function<void(const char* name)>& fn, int* error) {
  const int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = fd < 0 ? nullptr : ::fdopendir(fd);
  if (!d) {
    if (error) *error = errno;
    if (fd >= 0) ::close(fd);
    return false;
  }
  const std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);  // also when `fn` throws
  while (const dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) fn(e->d_name);
  return true;
}

bool replace_file(int dirfd, const std::string& name, std::string_view data) {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char tmp[96];
  std::snprintf(tmp, sizeof tmp, ".tmp-%d-%u-%016llx", static_cast<int>(::getpid()), counter.fetch_add(1),
                static_cast<unsigned long long>(rng()));
  const int fd = ::openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  bool ok = true;
  for (std::size_t off = 0; ok && off < data.size();) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) off += static_cast<std::size_t>(n);
  }
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::renameat(dirfd, tmp, dirfd, name.c_str()) != 0) {
    ::unlinkat(dirfd, tmp, 0);
    return false;
  }
  return true;
}

}  // namespace cucore::detail
