// The entry record's encoding (see entry_record.hpp for the layout).
#include "cache/entry_record.hpp"

#include <cstdint>
#include <cstring>

#include "hashing/hashing.hpp"

namespace cucore::detail {
namespace {

constexpr char kMagic[4] = {'C', 'U', 'C', 'R'};
constexpr std::uint8_t kVersion = 2;

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

// Bounds-checked reads: a failed read sets !ok and returns a zero value.
struct Reader {
  std::string_view b;
  std::size_t at = 0;
  bool ok = true;
  template <typename T>
  T num() {
    T v{};
    if (!ok || b.size() - at < sizeof(T)) {
      ok = false;
      return v;
    }
    std::memcpy(&v, b.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string_view str() {
    const auto n = num<std::uint32_t>();
    if (!ok || b.size() - at < n) {
      ok = false;
      return {};
    }
    std::string_view s = b.substr(at, n);
    at += n;
    return s;
  }
};

}  // namespace

std::string encode_entry_record(const EntryRecord& r) {
  std::string b(kMagic, 4);
  b.push_back(static_cast<char>(kVersion));
  b.push_back(static_cast<char>(r.code_type));
  b.push_back(static_cast<char>(r.opaque ? 1 : 0));
  b.push_back('\0');
  put_u64(b, r.size);
  put_u64(b, r.checksum);
  put_u64(b, r.data_inode);
  put_str(b, r.entry);
  put_str(b, r.name);
  put_u32(b, static_cast<std::uint32_t>(r.symbols.size()));
  for (const auto& [k, v] : r.symbols) {
    put_str(b, k);
    put_str(b, v);
  }
  put_u64(b, checksum64(b.data(), b.size()));
  return b;
}

std::optional<EntryRecord> decode_entry_record(std::string_view b) noexcept {
  try {
    if (b.size() < 8 + 24 + 8 || std::memcmp(b.data(), kMagic, 4) != 0 || static_cast<std::uint8_t>(b[4]) != kVersion)
      return std::nullopt;
    std::uint64_t tail;
    std::memcpy(&tail, b.data() + b.size() - 8, 8);
    if (tail != checksum64(b.data(), b.size() - 8)) return std::nullopt;
    const auto type = static_cast<std::uint8_t>(b[5]);
    if (type > static_cast<std::uint8_t>(CodeType::library)) return std::nullopt;
    Reader r{b.substr(0, b.size() - 8), 8};
    EntryRecord rec;
    rec.code_type = static_cast<CodeType>(type);
    const auto flags = static_cast<std::uint8_t>(b[6]);
    if (flags & ~1u) return std::nullopt;  // a flag this version does not know
    rec.opaque = (flags & 1u) != 0;
    rec.size = r.num<std::uint64_t>();
    rec.checksum = r.num<std::uint64_t>();
    rec.data_inode = r.num<std::uint64_t>();
    rec.entry = r.str();
    rec.name = r.str();
    const auto count = r.num<std::uint32_t>();
    // Each pair takes at least 8 bytes, so a count the bytes cannot hold stops
    // at the first failed read, before it allocates anything.
    for (std::uint32_t i = 0; r.ok && i < count; ++i) {
      std::string_view k = r.str();
      std::string_view v = r.str();
      if (r.ok) rec.symbols.emplace(k, v);
    }
    // Compiled code is never empty; a user's bytes may be (cuda.core stores b"").
    if (!r.ok || r.at != r.b.size() || (rec.size == 0 && !rec.opaque)) return std::nullopt;
    return rec;
  } catch (...) {  // std::bad_alloc: a record is small, but never throw from here
    return std::nullopt;
  }
}

}  // namespace cucore::detail
