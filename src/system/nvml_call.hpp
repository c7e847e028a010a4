#pragma once
// Calling NVML from cucore::system: one macro per outcome policy. Internal.
#include <cucore/system.hpp>

#include "loader/toolkit.hpp"

namespace cucore::detail {

[[noreturn]] void throw_nvml_error(nvml::Return r, const char* call);
[[noreturn]] void throw_nvml_missing(const char* call);
// The loader's slow path, its nvmlInit_v2 refusal thrown as NvmlError.
const NvmlTable& load_nvml_for_system();

// NVML's table (loaded and initialized on first use).
inline const NvmlTable& nvml_for_system() {
  if (const NvmlTable* t = g_nvml.load(std::memory_order_acquire)) [[likely]]
    return *t;
  return load_nvml_for_system();
}

inline nvml::Device nvml_handle(void* h) noexcept { return static_cast<nvml::Device>(h); }

// The entry point, or NvmlError(NVML_ERROR_FUNCTION_NOT_FOUND) when this NVML lacks it.
template <typename Fn>
inline Fn nvml_entry(Fn NvmlTable::*member, const char* name) {
  Fn f = nvml_for_system().*member;
  if (!f) [[unlikely]]
    throw_nvml_missing(name);
  return f;
}

// True while a system::UnsupportedAsError lives on this thread: what NVML
// declines is thrown as NvmlError rather than answered empty. Read on the
// declined path only.
bool unsupported_is_error() noexcept;

// SUCCESS: true; NOT_SUPPORTED: false (the caller returns an empty optional),
// or NvmlError within an UnsupportedAsError scope; anything else throws NvmlError.
inline bool nvml_supported(nvml::Return r, const char* call) {
  if (r == nvml::SUCCESS) [[likely]]
    return true;
  if (r == nvml::ERROR_NOT_SUPPORTED && !unsupported_is_error()) return false;
  throw_nvml_error(r, call);
}

inline void nvml_check(nvml::Return r, const char* call) {
  if (r != nvml::SUCCESS) [[unlikely]]
    throw_nvml_error(r, call);
}

}  // namespace cucore::detail

// CUCORE_NVML(fn)(args...) calls the entry point; CUCORE_NVML_OK(fn, args...)
// is nvml_supported() of the call; CUCORE_NVML_CHECK(fn, args...) throws on
// any failure.
#define CUCORE_NVML(fn) ::cucore::detail::nvml_entry(&::cucore::detail::NvmlTable::fn, #fn)
#define CUCORE_NVML_OK(fn, ...) ::cucore::detail::nvml_supported(CUCORE_NVML(fn)(__VA_ARGS__), #fn)
#define CUCORE_NVML_CHECK(fn, ...) ::cucore::detail::nvml_check(CUCORE_NVML(fn)(__VA_ARGS__), #fn)
