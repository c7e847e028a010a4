// SHA-256 (OpenSSL) and the xxHash64 entry checksum.
// SHA256_* are deprecated in OpenSSL 3 (see sha256() below for why they are used).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <cucore/errors.hpp>
#include "hashing/hashing.hpp"

#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/sha.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace cucore::detail {

// OpenSSL's SHA-256. EVP's first use in a process sets up its provider (~1 ms
// here, twice the whole budget of a warm start), so where OpenSSL 3.x still has
// the direct SHA256_* functions (deprecated in 3.0, not removed; the same
// SHA-NI/AVX code behind EVP), they are used; else EVP. Both give the same
// digest; the tests check known SHA-256 vectors.
#if OPENSSL_VERSION_MAJOR < 4 && !defined(OPENSSL_NO_DEPRECATED_3_0)
std::string sha256(std::string_view data) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256_CTX ctx;
  if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, data.data(), data.size()) != 1 || SHA256_Final(out, &ctx) != 1)
    throw RuntimeError("OpenSSL: SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}

static_assert(sizeof(SHA256_CTX) <= kSha256StateSize && alignof(SHA256_CTX) <= 16);
namespace {
SHA256_CTX* ctx_of(unsigned char* state) { return reinterpret_cast<SHA256_CTX*>(state); }
}  // namespace
Sha256::Sha256() {
  if (SHA256_Init(ctx_of(state_)) != 1) throw RuntimeError("OpenSSL: SHA-256 failed");
}
Sha256::~Sha256() = default;
void Sha256::update(const void* data, std::size_t size) {
  if (done_) throw LogicError("Sha256::update after digest()");
  if (SHA256_Update(ctx_of(state_), data, size) != 1) throw RuntimeError("OpenSSL: SHA-256 failed");
}
std::string Sha256::digest() {
  if (done_) throw LogicError("Sha256::digest called twice");
  done_ = true;
  unsigned char out[SHA256_DIGEST_LENGTH];
  if (SHA256_Final(out, ctx_of(state_)) != 1) throw RuntimeError("OpenSSL: SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}
#else
namespace {
const EVP_MD* sha256_md() {
  // Fetched once: implicit fetches by name cost more than the hash of a small key.
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (!md) throw RuntimeError("OpenSSL: SHA-256 is unavailable");
  return md;
}
struct CtxFree {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};
}  // namespace

std::string sha256(std::string_view data) {
  // One context per thread, reused: creating one per key would cost more than hashing.
  thread_local std::unique_ptr<EVP_MD_CTX, CtxFree> ctx{EVP_MD_CTX_new()};
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!ctx || EVP_DigestInit_ex2(ctx.get(), sha256_md(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 || EVP_DigestFinal_ex(ctx.get(), out, &n) != 1 ||
      n != kSha256Size)
    throw RuntimeError("OpenSSL: SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(out), n);
}

// The context pointer lives in the opaque state.
namespace {
EVP_MD_CTX*& ctx_of(unsigned char* state) { return *reinterpret_cast<EVP_MD_CTX**>(state); }
}  // namespace
Sha256::Sha256() {
  ctx_of(state_) = EVP_MD_CTX_new();
  if (!ctx_of(state_) || EVP_DigestInit_ex2(ctx_of(state_), sha256_md(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_of(state_));
    throw RuntimeError("OpenSSL: SHA-256 failed");
  }
}
Sha256::~Sha256() { EVP_MD_CTX_free(ctx_of(state_)); }
void Sha256::update(const void* data, std::size_t size) {
  if (done_) throw LogicError("Sha256::update after digest()");
  if (EVP_DigestUpdate(ctx_of(state_), data, size) != 1) throw RuntimeError("OpenSSL: SHA-256 failed");
}
std::string Sha256::digest() {
  if (done_) throw LogicError("Sha256::digest called twice");
  done_ = true;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx_of(state_), out, &n) != 1 || n != kSha256Size)
    throw RuntimeError("OpenSSL: SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(out), n);
}
#endif

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<unsigned char>(bytes[i]);
    out[2 * i] = kDigits[b >> 4];
    out[2 * i + 1] = kDigits[b & 15];
  }
  return out;
}

namespace {
constexpr std::uint64_t P1 = 11400714785074694791ULL, P2 = 14029467366897019727ULL, P3 = 1609587929392839161ULL,
                        P4 = 9650029242287828579ULL, P5 = 2870177450012600261ULL;
inline std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, aarch64), as the rest of cucore
}
inline std::uint32_t load32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t round64(std::uint64_t acc, std::uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
inline std::uint64_t merge64(std::uint64_t acc, std::uint64_t v) { return (acc ^ round64(0, v)) * P1 + P4; }
}  // namespace

std::uint64_t checksum64(const void* data, std::size_t size, std::uint64_t seed) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + size;
  std::uint64_t h;
  if (size >= 32) {
    std::uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    const unsigned char* limit = end - 32;
    do {
      v1 = round64(v1, load64(p));
      v2 = round64(v2, load64(p + 8));
      v3 = round64(v3, load64(p + 16));
      v4 = round64(v4, load64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge64(h, v1);
    h = merge64(h, v2);
    h = merge64(h, v3);
    h = merge64(h, v4);
  } else {
    h = seed + P5;
  }
  h += size;
  for (; p + 8 <= end; p += 8) h = rotl(h ^ round64(0, load64(p)), 27) * P1 + P4;
  if (p + 4 <= end) {
    h = rotl(h ^ (std::uint64_t(load32(p)) * P1), 23) * P2 + P3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (*p * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

}  // namespace cucore::detail
