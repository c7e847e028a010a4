#pragma once
// What each kind of compiled code looks like, byte by byte: checks that catch
// truncated, damaged and wrong-type cache entries, and recognition of raw bytes.
// Internal to libcucore.
#include <cucore/object_code.hpp>

#include <cstddef>
#include <optional>
#include <span>

namespace cucore::detail {

// Whether `code` is structurally a `type` object: ELF header and every section
// inside the bytes for cubin/object, header and payload size for fatbin, the
// magic for LTO-IR and libraries, text with a .target for PTX. Catches
// truncation of ELF and fatbin and every wrong-type entry.
bool structurally_valid(CodeType type, std::span<const std::byte> code) noexcept;

// Recognises cubin / fatbin / ltoir / object / library / ptx from the bytes.
std::optional<CodeType> detect_code_type(std::span<const std::byte> code) noexcept;

}  // namespace cucore::detail
