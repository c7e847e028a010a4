// Structural checks of compiled code (ELF, fatbin, LTO-IR, archives, PTX text).
#include "cache/code_format.hpp"

#include <cucore/program_cache.hpp>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace cucore::detail {

namespace {
template <typename T>
T read_le(std::span<const std::byte> b, std::size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

bool valid_elf64(std::span<const std::byte> b, int machine) {
  if (b.size() < 64) return false;
  const auto* u = reinterpret_cast<const unsigned char*>(b.data());
  if (u[0] != 0x7f || u[1] != 'E' || u[2] != 'L' || u[3] != 'F' || u[4] != 2 /*64-bit*/ || u[5] != 1 /*LE*/)
    return false;
  if (machine >= 0 && read_le<std::uint16_t>(b, 18) != machine) return false;
  const std::uint64_t n = b.size();
  const auto phoff = read_le<std::uint64_t>(b, 32), shoff = read_le<std::uint64_t>(b, 40);
  const auto phentsize = read_le<std::uint16_t>(b, 54), phnum = read_le<std::uint16_t>(b, 56);
  const auto shentsize = read_le<std::uint16_t>(b, 58), shnum = read_le<std::uint16_t>(b, 60);
  if (phnum && (phoff > n || std::uint64_t(phentsize) * phnum > n - phoff)) return false;
  if (shnum) {
    if (shentsize < 64 || shoff > n || std::uint64_t(shentsize) * shnum > n - shoff) return false;
    // Every section's bytes must be there: truncation anywhere cuts one off.
    for (std::uint64_t i = 0; i < shnum; ++i) {
      const std::uint64_t sh = shoff + i * shentsize;
      const auto type = read_le<std::uint32_t>(b, sh + 4);
      const auto off = read_le<std::uint64_t>(b, sh + 24), size = read_le<std::uint64_t>(b, sh + 32);
      if (type != 8 /*SHT_NOBITS*/ && type != 0 /*SHT_NULL*/ && (off > n || size > n - off)) return false;
    }
  }
  return true;
}

bool valid_fatbin(std::span<const std::byte> b) {
  if (b.size() < 16 || read_le<std::uint32_t>(b, 0) != 0xBA55ED50u) return false;
  const auto header = read_le<std::uint16_t>(b, 6);
  const auto payload = read_le<std::uint64_t>(b, 8);
  return header >= 16 && header <= b.size() && payload <= b.size() - header;
}

bool valid_ptx(std::span<const std::byte> b) {
  std::size_t n = b.size();
  while (n && b[n - 1] == std::byte{0}) --n;  // NVRTC's PTX ends with a NUL
  if (n == 0) return false;
  std::string_view text(reinterpret_cast<const char*>(b.data()), n);
  return text.find('\0') == std::string_view::npos && text.find(".target") != std::string_view::npos;
}

bool valid_ltoir(std::span<const std::byte> b) { return b.size() >= 8 && read_le<std::uint32_t>(b, 0) == 0x7F4E43EDu; }

bool valid_archive(std::span<const std::byte> b) { return b.size() >= 8 && std::memcmp(b.data(), "!<arch>\n", 8) == 0; }
}  // namespace

bool structurally_valid(CodeType type, std::span<const std::byte> code) noexcept {
  switch (type) {
    case CodeType::cubin: return valid_elf64(code, 190 /*EM_CUDA*/);
    case CodeType::object: return valid_elf64(code, -1);
    case CodeType::fatbin: return valid_fatbin(code);
    case CodeType::ptx: return valid_ptx(code);
    case CodeType::ltoir: return valid_ltoir(code);
    case CodeType::library: return valid_archive(code);
  }
  return false;
}

std::optional<CodeType> detect_code_type(std::span<const std::byte> code) noexcept {
  if (valid_elf64(code, 190)) return CodeType::cubin;
  if (valid_fatbin(code)) return CodeType::fatbin;
  if (valid_ltoir(code)) return CodeType::ltoir;
  if (valid_elf64(code, -1)) return CodeType::object;
  if (valid_archive(code)) return CodeType::library;
  if (valid_ptx(code)) return CodeType::ptx;
  return std::nullopt;
}

}  // namespace cucore::detail

namespace cucore {
bool is_valid_code(CodeType type, std::span<const std::byte> code) noexcept {
  return detail::structurally_valid(type, code);
}
}  // namespace cucore
