#pragma once
// The record of a FileStreamProgramCache entry: what the bytes are (code type,
// size, checksum, object name, name-expression mapping) and which entry they
// belong to. Kept in the entry file's extended attribute, or in a sidecar file
// (which also names the inode of the bytes it describes, so that a reader can
// tell a concurrent rewrite from damage). Internal to libcucore.
#include <cucore/object_code.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace cucore::detail {

struct EntryRecord {
  std::uint64_t size = 0;      // of the bytes, > 0 unless opaque
  std::uint64_t checksum = 0;  // checksum64 of the bytes
  std::string entry;           // the entry's file name (a key's hex)
  CodeType code_type = CodeType::cubin;
  std::string name;
  std::map<std::string, std::string> symbols;
  std::uint64_t data_inode = 0;  // sidecar records: the inode of the bytes; 0 in an xattr
  bool opaque = false;           // bytes of no known kind (ObjectCode::opaque): no structural check
};

// magic "CUCR" | u8 version 2 | u8 code type | u8 flags (1: opaque) | 1 reserved
// | u64 size | u64 checksum
// | u64 data inode | str entry | str object name | u32 count, (str expr, str
// lowered)* | u64 checksum64 of all the bytes before. Strings are u32 length +
// bytes; integers little-endian.
std::string encode_entry_record(const EntryRecord& record);

// std::nullopt unless `bytes` is exactly one well-formed record: magic, version,
// a known code type, a non-zero size (unless opaque), every length inside the bytes, nothing
// left over, and the trailing checksum matching. Never throws; allocates no
// more than the input's size.
std::optional<EntryRecord> decode_entry_record(std::string_view bytes) noexcept;

}  // namespace cucore::detail
