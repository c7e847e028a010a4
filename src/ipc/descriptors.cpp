// UUIDs and the flat forms of the IPC descriptors.
#include <cucore/ipc.hpp>

#include <sys/random.h>

#include <cstdint>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace cucore {

Uuid random_uuid() {
  Uuid u{};
  std::size_t got = 0;
  while (got < u.size()) {
    ssize_t n = getrandom(u.data() + got, u.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(errno, std::generic_category(), "random_uuid: getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
  u[6] = static_cast<unsigned char>((u[6] & 0x0f) | 0x40);  // version 4
  u[8] = static_cast<unsigned char>((u[8] & 0x3f) | 0x80);  // RFC 4122 variant
  return u;
}

std::string uuid_to_string(const Uuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(36);
  for (std::size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += kHex[uuid[i] >> 4];
    s += kHex[uuid[i] & 0xf];
  }
  return s;
}

Uuid uuid_from_string(std::string_view text) {
  auto bad = [&]() -> Uuid {
    throw InvalidArgumentError("uuid_from_string: \"" + std::string(text) +
                                "\" is not a UUID (32 hexadecimal digits, dashes allowed)");
  };
  Uuid u{};
  std::size_t nibble = 0;
  for (char c : text) {
    if (c == '-') continue;
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (v < 0 || nibble >= 32) return bad();
    u[nibble / 2] = static_cast<unsigned char>(nibble % 2 ? (u[nibble / 2] | v) : v << 4);
    ++nibble;
  }
  if (nibble != 32) return bad();
  return u;
}

std::array<std::byte, IPCBufferDescriptor::kSerializedSize> IPCBufferDescriptor::to_bytes() const {
  std::array<std::byte, kSerializedSize> out{};
  std::memcpy(out.data(), payload.data(), kPayloadSize);
  std::uint64_t n = size;
  for (int i = 0; i < 8; ++i) out[kPayloadSize + i] = static_cast<std::byte>(n >> (8 * i));
  out[kPayloadSize + 8] = std::byte{pool_uuid ? std::uint8_t{1} : std::uint8_t{0}};
  if (pool_uuid) std::memcpy(out.data() + kPayloadSize + 9, pool_uuid->data(), 16);
  return out;
}

IPCBufferDescriptor IPCBufferDescriptor::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != kSerializedSize)
    throw InvalidArgumentError("IPCBufferDescriptor::from_bytes: " + std::to_string(bytes.size()) +
                                " bytes; a descriptor has " + std::to_string(kSerializedSize));
  IPCBufferDescriptor d;
  std::memcpy(d.payload.data(), bytes.data(), kPayloadSize);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t(std::to_integer<std::uint8_t>(bytes[kPayloadSize + i])) << (8 * i);
  d.size = static_cast<std::size_t>(n);
  auto flag = std::to_integer<std::uint8_t>(bytes[kPayloadSize + 8]);
  if (flag > 1)
    throw InvalidArgumentError("IPCBufferDescriptor::from_bytes: the UUID flag byte is " + std::to_string(flag) +
                                " (0 or 1 expected)");
  if (flag) {
    Uuid u;
    std::memcpy(u.data(), bytes.data() + kPayloadSize + 9, 16);
    d.pool_uuid = u;
  }
  return d;
}

std::array<std::byte, IPCEventDescriptor::kSerializedSize> IPCEventDescriptor::to_bytes() const {
  std::array<std::byte, kSerializedSize> out{};
  std::memcpy(out.data(), handle.data(), handle.size());
  out[handle.size()] = std::byte{blocking_sync ? std::uint8_t{1} : std::uint8_t{0}};
  return out;
}

IPCEventDescriptor IPCEventDescriptor::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != kSerializedSize)
    throw InvalidArgumentError("IPCEventDescriptor::from_bytes: " + std::to_string(bytes.size()) +
                                " bytes; a descriptor has " + std::to_string(kSerializedSize));
  IPCEventDescriptor d;
  std::memcpy(d.handle.data(), bytes.data(), d.handle.size());
  auto flag = std::to_integer<std::uint8_t>(bytes[d.handle.size()]);
  if (flag > 1)
    throw InvalidArgumentError("IPCEventDescriptor::from_bytes: the blocking-sync byte is " + std::to_string(flag) +
                                " (0 or 1 expected)");
  d.blocking_sync = flag == 1;
  return d;
}

}  // namespace cucore
