#pragma once
// Files cucore reads or writes by a path it is given (a source, a header, a
// code file, the CLI's output): whatever is at the path, a FIFO, a device, a
// directory, a /proc file or a huge sparse file neither hangs nor fools nor
// exhausts a reader, and a write that fails leaves the old file as it was.
// Below every other layer (it needs only libc). The caches' own files, opened
// relative to a private directory, go through cache/cache_dir.hpp. Internal to
// libcucore (and the CLI).
#include <cucore/errors.hpp>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cucore::detail {

// The most a file read whole may hold unless the caller says otherwise: far
// above any real source, header, cubin, fatbin or static library, and checked
// before any memory is allocated for the contents.
inline constexpr std::uint64_t kMaxReadFileBytes = std::uint64_t(4) << 30;  // 4 GiB

// What went wrong with a file, naming its path (and the errno text when a
// system call failed). A std::invalid_argument: the path given is what is wrong
// (Python sees ValueError).
class FileError : public InvalidArgumentError {
 public:
  enum class Kind {
    open,         // open(2) failed (errno)
    not_regular,  // a directory, FIFO, socket, device or (not followed) symlink
    too_large,    // st_size over the limit
    no_size,      // reports a size of 0 but has contents (/proc, /sys)
    changed,      // shrank, grew or was modified while it was read
    read,         // read(2) failed (errno)
    nul_byte,     // text with a NUL byte in it
    write,        // creating, writing, syncing or renaming the output failed (errno)
  };
  FileError(Kind kind, std::string path, int error_number, const std::string& message);
  Kind kind() const noexcept { return kind_; }
  const std::string& path() const noexcept { return path_; }
  // The errno of the failed call; 0 for a check of cucore's own.
  int error_number() const noexcept { return errno_; }

 private:
  Kind kind_;
  std::string path_;
  int errno_;
};

struct ReadOptions {
  std::uint64_t limit = kMaxReadFileBytes;
  // A symlink the user names is theirs to name: followed by default (the
  // fstat of what it reaches is checked all the same).
  bool follow_symlinks = true;
  // Refuse a NUL byte, naming its offset: NVRTC takes text as a C string, so
  // a NUL would cut it short unseen.
  bool text = false;
  // The file's role, for messages: "'x' is a directory, not a <what>".
  const char* what = "file";
};

// The whole file at `path`: opened with O_NONBLOCK (a FIFO cannot block the
// open) after a stat that refuses anything but a regular file without opening
// it, checked again by fstat on the descriptor, refused over `limit`, read with
// exactly st_size bytes and checked to end there and to be unchanged after
// (a /proc file's size of 0 is refused, as it is no size). `st` (if given) gets
// the stat it was read under. Throws FileError.
std::string read_text_file(const std::filesystem::path& path, const ReadOptions& options = {},
                           struct stat* st = nullptr);
std::vector<std::byte> read_binary_file(const std::filesystem::path& path, const ReadOptions& options = {},
                                        struct stat* st = nullptr);

// Throws FileError unless `path` can be written by write_file_atomically: it
// does not exist, or is a regular file (lstat: a symlink is refused, never
// followed; a FIFO, device or directory is refused, never opened). For a
// caller that wants to refuse before it does the work of making the contents.
void check_output_path(const std::filesystem::path& path);

// Writes `data` to `path` whole or not at all: into a new file beside it
// (created O_EXCL in the same directory, so the rename stays on one file
// system), fsync'ed, then renamed over `path`. An existing `path` must pass
// check_output_path and keeps its permission bits; a new one gets 0666 less
// the umask, as open(2) gives. On any failure the temporary file is removed,
// `path` is as it was, and FileError (Kind::write) says what failed with the
// errno text.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> data);

}  // namespace cucore::detail
