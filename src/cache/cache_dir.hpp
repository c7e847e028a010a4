#pragma once
// Where cucore's caches live and how their files are opened: only directories
// nobody else can write (so nobody can plant an entry), and every file opened so
// that a FIFO, a symlink or a device planted in its place neither hangs a reader
// nor redirects it. Internal to libcucore.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cucore::detail {

// $XDG_CACHE_HOME/cucore (when absolute), else $HOME/.cache/cucore, else a
// private directory $TMPDIR/cucore-<uid> (created 0700 and checked, as every
// cache directory is, by open_private_dir).
std::filesystem::path cucore_cache_root();

// Opens the directory `dir` (creating it and its missing parents with mode 0700
// when `create`) and checks it with private_dir_is_safe. Returns the
// O_DIRECTORY descriptor, or -1 with `why` saying what is wrong and what to do
// (empty when the directory does not exist and `create` is false). A path with
// a NUL byte is refused (the system would see only what precedes it).
int open_private_dir(const std::filesystem::path& dir, bool create, std::string& why);

// Whether the opened directory `fd` (at `dir`, named in messages) is one nobody
// else can write or replace: a directory owned by this user (the effective uid)
// and not writable by group or others, as ssh and ccache require of theirs, and
// every directory above it up to / this user's or root's and not writable by
// group or others unless sticky (/tmp). false with `why` (what is wrong and
// what to do) otherwise. A system call per level: cheap enough to repeat
// before each store.
bool private_dir_is_safe(int fd, const std::filesystem::path& dir, std::string& why);

// A whole regular file, read safely: opened (relative to `dirfd`, or AT_FDCWD
// for a path) with O_NONBLOCK and, unless `follow_symlinks`, O_NOFOLLOW; checked
// with fstat to be a regular file of at most `limit` bytes; read no further than
// the size fstat gave. std::nullopt for anything else (`error` gets errno, or
// EINVAL for "not a regular file", EFBIG for "over the limit").
std::optional<std::string> read_file_safely(int dirfd, const char* name, std::size_t limit,
                                            bool follow_symlinks = false, int* error = nullptr);

// A zeroed buffer of `size` bytes to read a file into. A large buffer is fresh
// memory that the kernel maps a page per fault (some 65 faults for a 256 KiB
// cubin, each several microseconds in a virtual machine: most of a warm disk
// hit's time); its pages are made present with one madvise(MADV_POPULATE_WRITE)
// instead, where the kernel has it (Linux 5.14; elsewhere the faults happen as
// before).
std::vector<std::byte> read_buffer(std::size_t size);

// Calls `fn` with the name of every entry of the directory `dirfd` but "."
// and ".." (read through a descriptor of its own, so `dirfd` stays the
// caller's; `fn` may unlink what it is given). false, with `error` (if given)
// getting errno, when the directory cannot be read.
bool for_each_entry(int dirfd, const std::function<void(const char* name)>& fn, int* error = nullptr);

// Writes `data` to `name` in `dirfd` through a temporary file and a rename, so a
// reader sees the old or the new file whole. Best effort: false on any failure
// (the temporary file is removed).
bool replace_file(int dirfd, const std::string& name, std::string_view data);

}  // namespace cucore::detail
