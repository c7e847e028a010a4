#pragma once
// The digests the caches use: SHA-256 for keys (collision-resistant: a key
// stands for everything that shaped a binary) and a fast 64-bit checksum for
// entry integrity. Internal to libcucore.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cucore::detail {

inline constexpr std::size_t kSha256Size = 32;

// SHA-256 of `data`, 32 raw bytes.
std::string sha256(std::string_view data);

// Lower-case hex.
std::string to_hex(std::string_view bytes);

// A fast 64-bit non-cryptographic checksum (the xxHash64 algorithm) for entry
// integrity: it guards against truncation and corruption, not adversaries
// (anyone who can write the cache directory can write a valid entry anyway),
// and it must be cheap because every disk hit verifies it.
std::uint64_t checksum64(const void* data, std::size_t size, std::uint64_t seed = 0) noexcept;

}  // namespace cucore::detail
