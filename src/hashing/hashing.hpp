#pragma once
// cucore's one home for digests: SHA-256 for keys (collision-resistant: a key
// stands for everything that shaped a binary; the program caches', compute's
// builds') and a fast 64-bit checksum for entry integrity. Internal to libcucore.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cucore::detail {

inline constexpr std::size_t kSha256Size = 32;
inline constexpr std::size_t kSha256StateSize = 128;  // room for OpenSSL's SHA256_CTX (112 bytes)

// SHA-256 of `data`, 32 raw bytes.
std::string sha256(std::string_view data);

// SHA-256 over several pieces fed in turn (the digest of their concatenation,
// without making it): for digests over large blobs. One use: digest() spends it.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  std::string digest();  // 32 raw bytes

 private:
  // OpenSSL's context, kept opaque so this header needs no OpenSSL headers.
  alignas(16) unsigned char state_[kSha256StateSize];
  bool done_ = false;
};

// Lower-case hex.
std::string to_hex(std::string_view bytes);

// A fast 64-bit non-cryptographic checksum (the xxHash64 algorithm) for entry
// integrity: it guards against truncation and corruption, not adversaries
// (anyone who can write the cache directory can write a valid entry anyway),
// and it must be cheap because every disk hit verifies it.
std::uint64_t checksum64(const void* data, std::size_t size, std::uint64_t seed = 0) noexcept;

}  // namespace cucore::detail
