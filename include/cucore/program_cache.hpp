#pragma once
// Program caches: compiled bytes keyed by a digest of everything that shaped
// them. (Interface sketch: the cache work fills this header out.)
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <cucore/object_code.hpp>

namespace cucore {

struct CacheStats {
  std::uint64_t hits = 0, misses = 0, evictions = 0, errors = 0;
};

// Keys are byte strings (make_program_cache_key's 32-byte digest, or any
// string). Values are the compiled bytes; get() returns them as an ObjectCode
// that shares storage with the cache (no copy).
class ProgramCache {
 public:
  virtual ~ProgramCache() = default;
  virtual std::optional<ObjectCode> get(std::string_view key) = 0;
  virtual void put(std::string_view key, const ObjectCode& code) = 0;
  virtual bool erase(std::string_view key) = 0;
  virtual void clear() = 0;
  virtual std::size_t size_bytes() const = 0;
  virtual CacheStats stats() const = 0;
};

// The process-wide default cache (memory in front of disk).
ProgramCache& default_program_cache();

}  // namespace cucore
