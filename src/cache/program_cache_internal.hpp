#pragma once
// Helpers shared by the program-cache sources. Internal to libcucore.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace cucore::detail {

// SHA-256 (OpenSSL EVP) of `data`, 32 raw bytes.
std::string sha256(std::string_view data);

// Lower-case hex.
std::string to_hex(std::string_view bytes);

// A fast 64-bit non-cryptographic checksum (the xxHash64 algorithm) for entry
// integrity: it guards against truncation and corruption, not adversaries
// (anyone who can write the cache directory can write a valid entry anyway),
// and it must be cheap because every disk hit verifies it.
std::uint64_t checksum64(const void* data, std::size_t size, std::uint64_t seed = 0) noexcept;

// $XDG_CACHE_HOME/cucore, else ~/.cache/cucore (the parent of the program cache).
std::filesystem::path cucore_cache_root();

// The compiler identity the key uses for C++ ("nvrtc 13.0; cuda.h 13000; cccl
// 3000001"), found without loading NVRTC when a memo of an earlier run still
// matches the files. refresh_nvrtc_identity() is called once NVRTC is loaded
// (after a compile): it returns true when the identity differed from the memo's
// (so the caller recomputes its key), and corrects the memo.
std::string nvrtc_identity();
bool refresh_nvrtc_identity();

// Whether `code` is structurally a `code_type` object: ELF header and every
// section inside the bytes for cubin/object, header and payload size for fatbin,
// the magic for LTO-IR and libraries, text with a .target for PTX. Unknown types
// pass. Catches truncation of ELF and fatbin and every wrong-type entry.
bool structurally_valid(std::string_view code_type, std::span<const std::byte> code) noexcept;

// Recognises cubin / fatbin / ltoir / ptx / library from the bytes; empty if none.
std::string detect_code_type(std::span<const std::byte> code) noexcept;

}  // namespace cucore::detail
