#pragma once
// Program caches: compiled bytes keyed by a digest of everything that shaped
// them (make_program_cache_key), kept in memory (InMemoryProgramCache), on disk
// across processes and runs (FileStreamProgramCache), or both
// (TwoLevelProgramCache, the library's default). Program::compile(target,
// names, cache) goes through one: a hit runs no compiler. docs/program-cache.md
// has the design.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <cucore/object_code.hpp>
#include <cucore/program.hpp>

namespace cucore {

struct CacheStats {
  std::uint64_t hits = 0, misses = 0;
  std::uint64_t evictions = 0;  // entries removed to stay under the size cap
  // Damaged entries found (truncated, garbage, wrong type: each removed and
  // treated as a miss), plus writes that failed (unwritable directory, full disk).
  std::uint64_t errors = 0;
};

// The cache key: a SHA-256 digest (32 raw bytes in a std::string) over
// labelled, length-prefixed fields: key schema version; compiler identity (NVRTC
// version for "c++", linker backend and version for "ptx", plus the CUDA and
// CCCL header versions); code type; target; the code's SHA-256; the flags exactly
// as ProgramOptions::as_nvrtc_flags() renders them (so spellings and defaults that
// render alike give one key); sorted, de-duplicated name expressions;
// options.name; extra_digest.
//
// Throws std::invalid_argument when options.arch is empty (pass the Program's
// options(), whose arch is resolved), when options read files the key cannot see
// (include_path, pre_include, pch, use_pch, pch_dir, a name with a directory)
// and extra_digest is empty (fingerprint those files and pass it), and for
// options with side effects (create_pch, time, fdevice_time_trace).
std::string make_program_cache_key(std::string_view code, std::string_view code_type, const ProgramOptions& options,
                                   CodeType target, std::span<const std::string> name_expressions = {},
                                   std::string_view extra_digest = {});
// An extra digest that is given even when empty: cuda.core's extra_digest=b""
// is a digest (it stands for the files the key cannot see, and keys apart from
// none), where the string_view form above takes empty for none.
struct GivenExtraDigest {
  std::string_view bytes{};
};
std::string make_program_cache_key(std::string_view code, std::string_view code_type, const ProgramOptions& options,
                                   CodeType target, std::span<const std::string> name_expressions,
                                   GivenExtraDigest extra_digest);
inline constexpr std::size_t kProgramCacheKeySize = 32;
// Whether `code` has the structure of `type`'s code (an ELF cubin, a fatbin,
// LTO-IR, PTX text, ...): the check the caches make before storing or
// returning compiled code.
bool is_valid_code(CodeType type, std::span<const std::byte> code) noexcept;
// Lower-case hex of a key (64 characters for a make_program_cache_key key).
std::string program_cache_key_hex(std::string_view key);

// Keys are byte strings (make_program_cache_key's digest, or any string).
// Values are compiled bytes with their code type, name and name-expression
// mapping, handed back as an ObjectCode. There is deliberately no contains():
// check-then-read races between processes; call get() and use what it returns.
class ProgramCache {
 public:
  virtual ~ProgramCache() = default;

  virtual std::optional<ObjectCode> get(std::string_view key) = 0;
  // Like get(), but an entry of another code type than `code_type` is damage:
  // counted in errors, removed, and a miss.
  virtual std::optional<ObjectCode> get(std::string_view key, CodeType code_type);
  virtual void put(std::string_view key, const ObjectCode& code) = 0;
  // Raw bytes (copied). With no code_type it is recognised from the bytes (ELF
  // cubin, fatbin, LTO-IR, PTX text, ELF object, archive); bytes of no kind
  // recognised are stored as they are, as cuda.core's caches store any bytes
  // (ObjectCode::opaque: read back by get(key), never by a typed get). With a
  // code_type, std::invalid_argument when the bytes are not a valid one.
  void put(std::string_view key, std::span<const std::byte> code, std::optional<CodeType> code_type = {});
  virtual bool erase(std::string_view key) = 0;
  virtual void clear() = 0;
  virtual std::size_t size_bytes() const = 0;
  virtual CacheStats stats() const = 0;
};

// In-process LRU by total bytes; reads refresh recency; thread-safe. get()
// returns the stored ObjectCode itself (shared state, no copy), so a kernel
// taken twice from one entry is loaded once. An entry larger than the cap is
// not stored.
class InMemoryProgramCache final : public ProgramCache {
 public:
  explicit InMemoryProgramCache(std::optional<std::size_t> max_size_bytes = {});
  ~InMemoryProgramCache() override;
  InMemoryProgramCache(const InMemoryProgramCache&) = delete;
  InMemoryProgramCache& operator=(const InMemoryProgramCache&) = delete;

  using ProgramCache::put;
  std::optional<ObjectCode> get(std::string_view key) override;
  std::optional<ObjectCode> get(std::string_view key, CodeType code_type) override;
  void put(std::string_view key, const ObjectCode& code) override;
  // Stores `code` unless the key is present; returns the resident object either
  // way (how concurrent fillers end up sharing one loaded module).
  ObjectCode put_if_absent(std::string_view key, const ObjectCode& code);
  bool erase(std::string_view key) override;
  void clear() override;
  std::size_t size_bytes() const override;
  CacheStats stats() const override;
  std::size_t entry_count() const;
  std::optional<std::size_t> max_size_bytes() const noexcept { return max_size_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::optional<std::size_t> max_size_;
};

// One entry of a FileStreamProgramCache directory.
struct FileCacheEntry {
  std::filesystem::path file{};         // the raw binary
  std::optional<CodeType> code_type{};  // empty when its record is missing or unreadable
  std::size_t size_bytes = 0;
  std::filesystem::file_time_type last_read{};
};

struct FileStreamProgramCacheOptions {
  // The directory's cap in bytes (every capped put evicts to it, whoever wrote
  // the entries); none: no cap.
  std::optional<std::size_t> max_size_bytes{};
  // Create the directory now, as cuda.core's constructor does (else the first
  // put does); a failure is reported at first use, as any.
  bool create_directory = false;
  // How long a store waits for the directory's writers' lock, held by another
  // process, before it gives the store up (the compile goes on; the log says
  // so once per process); while that lock stays taken, later stores of this
  // cache try it once without waiting. Unset: CUCORE_PROGRAM_CACHE_LOCK_WAIT
  // (seconds, e.g. 0.5), else 5 s. std::invalid_argument when negative.
  std::optional<std::chrono::milliseconds> lock_wait{};
};

// A directory shared by processes and runs. Each entry is one file, named by the
// key's hex, holding the raw binary (cuobjdump / nvdisasm read it as is); its
// record (code type, size, checksum, name, name-expression mapping) sits in the
// file's extended attribute `user.cucore`, or in a `<file>.meta` sidecar where
// the filesystem has no user xattrs (or the record is too large). Writes go to a
// temporary file that is fsynced and renamed into place. Reads check the record
// against the bytes (size, checksum, ELF/fatbin/LTO-IR/PTX structure); a
// damaged entry is counted in errors, removed and a miss. Eviction removes the
// least recently read entries, so the directory stays under the cap whenever a
// put returns. An unwritable or missing directory or a full disk never throws:
// the cache misses and says so once. So does a directory another user could
// write or replace (not owned by this user, or writable by group or others, or
// with any directory above it, up to /, not this user's or root's or writable
// by group or others and not sticky; checked again before each store): it is
// refused, since anyone who can write it can plant entries. An empty path, or
// one holding a NUL byte, is std::invalid_argument. A directory removed (or
// replaced) while the cache is open is followed: a store remakes it, and
// misses, erase, clear and listings look at what is at the path now. The cap
// counts other writers' temporary files in flight too (they are about to land),
// and a value larger than the cap is not stored (the key's old value is removed,
// the other entries stay).
class FileStreamProgramCache final : public ProgramCache {
 public:
  // $XDG_CACHE_HOME/cucore/programs, else $HOME/.cache/cucore/programs, else
  // $TMPDIR/cucore-<uid>/programs (private, and refused if someone else made it).
  static std::filesystem::path default_path();

  explicit FileStreamProgramCache(std::filesystem::path path = default_path(),
                                  std::optional<std::size_t> max_size_bytes = {});
  // FileStreamProgramCache(dir, {.max_size_bytes = 1 << 30, .lock_wait = std::chrono::milliseconds(500)})
  FileStreamProgramCache(std::filesystem::path path, const FileStreamProgramCacheOptions& options);
  ~FileStreamProgramCache() override;
  FileStreamProgramCache(const FileStreamProgramCache&) = delete;
  FileStreamProgramCache& operator=(const FileStreamProgramCache&) = delete;

  using ProgramCache::put;
  std::optional<ObjectCode> get(std::string_view key) override;
  std::optional<ObjectCode> get(std::string_view key, CodeType code_type) override;
  void put(std::string_view key, const ObjectCode& code) override;
  bool erase(std::string_view key) override;
  void clear() override;  // removes every entry (and stale temporary files; young ones are writes in flight)
  // The entries' bytes (records included). After a capped put it is at most the
  // cap less the other writers' temporary files in flight then.
  std::size_t size_bytes() const override;
  CacheStats stats() const override;

  const std::filesystem::path& path() const noexcept;
  std::optional<std::size_t> max_size_bytes() const noexcept;
  std::filesystem::path entry_path(std::string_view key) const;
  // Every entry. Empty when the directory does not exist; std::runtime_error
  // (naming it and why) when it exists but cannot be read or is refused.
  std::vector<FileCacheEntry> entries() const;
  // Whether the directory can be used (false after a failure was reported).
  bool usable() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Memory in front of disk: a hit in memory returns the resident object; a disk
// hit is promoted into memory (so its loaded module is shared from then on); a
// put goes to both.
class TwoLevelProgramCache final : public ProgramCache {
 public:
  explicit TwoLevelProgramCache(std::optional<std::size_t> memory_max_bytes = {},
                                std::filesystem::path dir = FileStreamProgramCache::default_path(),
                                std::optional<std::size_t> disk_max_bytes = {});
  ~TwoLevelProgramCache() override;

  using ProgramCache::put;
  std::optional<ObjectCode> get(std::string_view key) override;
  std::optional<ObjectCode> get(std::string_view key, CodeType code_type) override;
  void put(std::string_view key, const ObjectCode& code) override;
  bool erase(std::string_view key) override;
  void clear() override;
  std::size_t size_bytes() const override;  // the disk level's
  CacheStats stats() const override;        // hits at either level; misses at both

  InMemoryProgramCache& memory() noexcept { return memory_; }
  FileStreamProgramCache& disk() noexcept { return disk_; }

 private:
  std::optional<ObjectCode> lookup(std::string_view key, std::optional<CodeType> code_type);
  InMemoryProgramCache memory_;
  FileStreamProgramCache disk_;
  struct Counters;
  std::unique_ptr<Counters> counters_;
};

// The process-wide default cache: 256 MiB in memory in front of
// FileStreamProgramCache::default_path() capped at 1 GiB. CUCORE_PROGRAM_CACHE_DIR
// overrides the directory.
ProgramCache& default_program_cache();
TwoLevelProgramCache& default_two_level_program_cache();

}  // namespace cucore
