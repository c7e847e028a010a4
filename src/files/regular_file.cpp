// Reading and writing files by path (see regular_file.hpp).
#include "files/regular_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

namespace fs = std::filesystem;

namespace cucore::detail {

FileError::FileError(Kind kind, std::string path, int error_number, const std::string& message)
    : InvalidArgumentError(message), kind_(kind), path_(std::move(path)), errno_(error_number) {}

namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

[[noreturn]] void not_regular(const std::string& path, mode_t mode, const char* what) {
  if (S_ISDIR(mode))
    throw FileError(FileError::Kind::not_regular, path, 0, quoted(path) + " is a directory, not a " + what);
  throw FileError(FileError::Kind::not_regular, path, 0,
                  quoted(path) + " is not a regular file (" + kind_of(mode) + ")");
}

[[noreturn]] void system_failure(FileError::Kind kind, const std::string& path, const char* doing, int err) {
  throw FileError(kind, path, err, std::string("cannot ") + doing + " " + quoted(path) + ": " + std::strerror(err));
}

// "4294967296 bytes (4.0 GiB)"
std::string size_text(std::uint64_t bytes) {
  char buf[64];
  if (bytes >= (std::uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%llu bytes (%.1f GiB)", static_cast<unsigned long long>(bytes),
                  static_cast<double>(bytes) / double(std::uint64_t(1) << 30));
  else if (bytes >= (std::uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(bytes),
                  static_cast<double>(bytes) / double(1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  return buf;
}

std::string limit_text(std::uint64_t limit) {
  if (limit >= (std::uint64_t(1) << 30) && limit % (std::uint64_t(1) << 30) == 0)
    return std::to_string(limit >> 30) + " GiB";
  if (limit >= (std::uint64_t(1) << 20) && limit % (std::uint64_t(1) << 20) == 0)
    return std::to_string(limit >> 20) + " MiB";
  return std::to_string(limit) + " bytes";
}

bool same_stamp(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
         a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

template <class Buffer>
Buffer read_whole(const fs::path& file, const ReadOptions& o, struct stat* st_out) {
  const std::string path = file.string();
  struct stat st;
  // Looked at before it is opened: a device is refused without the effects
  // opening one can have. The descriptor's fstat below is what counts.
  if ((o.follow_symlinks ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0)
    system_failure(FileError::Kind::open, path, "open", errno);
  if (!S_ISREG(st.st_mode)) not_regular(path, st.st_mode, o.what);
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (o.follow_symlinks ? 0 : O_NOFOLLOW))};
  if (fd.fd < 0) {
    const int err = errno;
    if (err == ELOOP && !o.follow_symlinks) not_regular(path, S_IFLNK, o.what);
    system_failure(FileError::Kind::open, path, "open", err);
  }
  if (::fstat(fd.fd, &st) != 0) system_failure(FileError::Kind::read, path, "read", errno);
  if (!S_ISREG(st.st_mode)) not_regular(path, st.st_mode, o.what);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > o.limit)
    throw FileError(FileError::Kind::too_large, path, 0,
                    quoted(path) + " is " + size_text(size) + ", over the limit of " + limit_text(o.limit) +
                        " for a " + o.what + " read whole");
  Buffer b;
  b.resize(static_cast<std::size_t>(size));
  auto* data = reinterpret_cast<char*>(b.data());
  std::size_t got = 0;
  while (got < b.size()) {
    const ssize_t n = ::pread(fd.fd, data + got, b.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) system_failure(FileError::Kind::read, path, "read", errno);
    if (n == 0)
      throw FileError(FileError::Kind::changed, path, 0,
                      quoted(path) + " shrank while it was read (" + std::to_string(got) + " of " +
                          std::to_string(size) + " bytes)");
    got += static_cast<std::size_t>(n);
  }
  // It must end where fstat said: a /proc or /sys file reports 0 and has
  // contents of no fixed size, and a file being written has more.
  for (;;) {
    char extra;
    const ssize_t n = ::pread(fd.fd, &extra, 1, static_cast<off_t>(size));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) system_failure(FileError::Kind::read, path, "read", errno);
    if (n > 0 && size == 0)
      throw FileError(FileError::Kind::no_size, path, 0,
                      quoted(path) + " reports a size of 0 but has contents (a /proc or /sys file?): only regular "
                                     "files with a size are read");
    if (n > 0) throw FileError(FileError::Kind::changed, path, 0, quoted(path) + " grew while it was read");
    break;
  }
  struct stat after;
  if (::fstat(fd.fd, &after) != 0) system_failure(FileError::Kind::read, path, "read", errno);
  if (!same_stamp(st, after))
    throw FileError(FileError::Kind::changed, path, 0, quoted(path) + " changed while it was read");
  if (o.text) {
    const std::string_view text(data, b.size());
    if (auto at = text.find('\0'); at != std::string_view::npos)
      throw FileError(FileError::Kind::nul_byte, path, 0,
                      quoted(path) + " contains a NUL byte at offset " + std::to_string(at) + "; is it a " + o.what +
                          "?");
  }
  if (st_out) *st_out = st;
  return b;
}

std::string temporary_name(const std::string& name) {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp-%d-%u-%016llx", static_cast<int>(::getpid()), counter.fetch_add(1),
                static_cast<unsigned long long>(rng()));
  // Hidden, and named after what it becomes (cut short, so that a name near
  // NAME_MAX still leaves room for the suffix).
  std::string tmp(1, '.');
  tmp.append(name, 0, 128);
  tmp += suffix;
  return tmp;
}

}  // namespace

std::string read_text_file(const fs::path& path, const ReadOptions& options, struct stat* st) {
  return read_whole<std::string>(path, options, st);
}

std::vector<std::byte> read_binary_file(const fs::path& path, const ReadOptions& options, struct stat* st) {
  return read_whole<std::vector<std::byte>>(path, options, st);
}

void check_output_path(const fs::path& file) {
  const std::string path = file.string();
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // a new file (whether its directory takes one shows when it is written)
    system_failure(FileError::Kind::write, path, "write", errno);
  }
  if (S_ISLNK(st.st_mode))
    throw FileError(FileError::Kind::not_regular, path, 0,
                    "cannot write " + quoted(path) +
                        ": it is a symbolic link, which is not followed (name the file it points to)");
  if (!S_ISREG(st.st_mode))
    throw FileError(FileError::Kind::not_regular, path, 0,
                    "cannot write " + quoted(path) + ": it is " + kind_of(st.st_mode) +
                        "; the output must be a regular file or a new name");
}

void write_file_atomically(const fs::path& file, std::span<const std::byte> data) {
  const std::string path = file.string();
  check_output_path(file);
  struct stat old;
  const bool existed = ::lstat(path.c_str(), &old) == 0;
  const std::string name = file.filename().string();
  if (name.empty() || name == "." || name == "..")
    throw FileError(FileError::Kind::not_regular, path, 0, "cannot write " + quoted(path) + ": it names a directory");
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");

  std::string tmp;
  Fd fd;
  for (int attempt = 0; fd.fd < 0 && attempt < 8; ++attempt) {
    tmp = (dir / temporary_name(name)).string();
    // 0666: the umask applies, as to any new file.
    fd.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd.fd < 0 && errno != EEXIST) break;
  }
  const std::string kept = existed ? "; " + quoted(path) + " is left as it was" : "";
  if (fd.fd < 0) {
    const int err = errno;
    throw FileError(FileError::Kind::write, path, err,
                    "cannot write " + quoted(path) + ": cannot create a file in " + quoted(dir.string()) + ": " +
                        std::strerror(err) + kept);
  }
  auto fail = [&](const char* step, int err) {
    ::close(fd.fd);
    fd.fd = -1;
    ::unlink(tmp.c_str());
    throw FileError(FileError::Kind::write, path, err,
                    "cannot write " + quoted(path) + ": " + step + std::strerror(err) + kept);
  };
  if (existed) (void)::fchmod(fd.fd, old.st_mode & 0777);  // keeps what it replaces (best effort)
  const auto* p = reinterpret_cast<const char*>(data.data());
  for (std::size_t off = 0; off < data.size();) {
    const ssize_t n = ::write(fd.fd, p + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("", n < 0 ? errno : EIO);
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.fd) != 0) fail("fsync: ", errno);
  const int closed = ::close(fd.fd);
  fd.fd = -1;
  if (closed != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw FileError(FileError::Kind::write, path, err, "cannot write " + quoted(path) + ": " + std::strerror(err) + kept);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw FileError(FileError::Kind::write, path, err,
                    "cannot write " + quoted(path) + ": rename: " + std::strerror(err) + kept);
  }
  // The rename itself on disk (best effort: the file is in place either way).
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd >= 0) (void)::fsync(d.fd);
}

}  // namespace cucore::detail
