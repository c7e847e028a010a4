#pragma once
// Compiled code (cubin, PTX, LTO-IR, fatbin, object, library): immutable bytes
// plus what the compiler said. Copies share one state; it is loaded into the
// driver lazily, once, context-independently (cuLibraryLoadData), and every
// Kernel taken from it keeps it loaded.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// cuda.h's module handle (the same typedef), so this header needs no cuda.h.
typedef struct CUmod_st* CUmodule;

namespace cucore {

class Kernel;

// The kinds of compiled code, as cuda.core names them ("cubin", "ptx", "ltoir",
// "fatbin", "object", "library").
enum class CodeType : std::uint8_t { cubin, ptx, ltoir, fatbin, object, library };

// "cubin", "ptx", ...
std::string_view to_string(CodeType type) noexcept;
// The CodeType named `name` exactly ("cubin", ...); std::nullopt for any other string.
std::optional<CodeType> parse_code_type(std::string_view name) noexcept;

namespace detail {
struct ObjectCodeState;
}

class ObjectCode {
 public:
  ObjectCode() = default;  // empty

  // From bytes (copied) or from a file, read at once (a missing, unreadable or
  // empty file, or empty bytes, is std::invalid_argument naming it). `name` is
  // for messages (a file's defaults to its file name); `symbol_mapping` maps
  // name expressions to lowered (mangled) names.
  static ObjectCode from_cubin(std::span<const std::byte> code, std::string name = {},
                               std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_cubin(const std::filesystem::path& file, std::string name = {},
                               std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_ptx(std::span<const std::byte> code, std::string name = {},
                             std::map<std::string, std::string> symbol_mapping = {});
  // PTX text. Strings are always text (the const char* and std::string
  // overloads settle the ambiguity with the path overload); PTX bytes always
  // end with a NUL, since the driver reads PTX as a C string.
  static ObjectCode from_ptx(std::string_view code, std::string name = {},
                             std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_ptx(const char* code, std::string name = {},
                             std::map<std::string, std::string> symbol_mapping = {}) {
    return from_ptx(std::string_view(code), std::move(name), std::move(symbol_mapping));
  }
  static ObjectCode from_ptx(const std::string& code, std::string name = {},
                             std::map<std::string, std::string> symbol_mapping = {}) {
    return from_ptx(std::string_view(code), std::move(name), std::move(symbol_mapping));
  }
  static ObjectCode from_ptx(const std::filesystem::path& file, std::string name = {},
                             std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_ltoir(std::span<const std::byte> code, std::string name = {},
                               std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_ltoir(const std::filesystem::path& file, std::string name = {},
                               std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_fatbin(std::span<const std::byte> code, std::string name = {},
                                std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_fatbin(const std::filesystem::path& file, std::string name = {},
                                std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_object(std::span<const std::byte> code, std::string name = {},
                                std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_object(const std::filesystem::path& file, std::string name = {},
                                std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_library(std::span<const std::byte> code, std::string name = {},
                                 std::map<std::string, std::string> symbol_mapping = {});
  static ObjectCode from_library(const std::filesystem::path& file, std::string name = {},
                                 std::map<std::string, std::string> symbol_mapping = {});
  // Path-backed, as cuda.core's ObjectCode.from_*(path): the file is read on
  // first use (code(), loading, linking, a cache write), not here; a missing
  // or unreadable file is std::invalid_argument then. `name` is kept as given.
  static ObjectCode from_path(CodeType code_type, std::filesystem::path file, std::string name = {},
                              std::map<std::string, std::string> symbol_mapping = {});
  // Used by the compiler and the caches: takes the bytes without copying.
  static ObjectCode from_bytes(std::vector<std::byte> code, CodeType code_type, std::string name = {},
                               std::map<std::string, std::string> symbol_mapping = {}, std::string log = {});

  // The code (read now, for a path-backed object not yet read).
  // Bytes of no known kind: a program cache's value written as raw bytes that
  // are no code cucore recognises (cuda.core's caches take any bytes, empty
  // ones too).
  // code_type() says cubin; compiles through a cache never take such an entry.
  static ObjectCode opaque(std::vector<std::byte> bytes);
  bool is_opaque() const noexcept;

  std::span<const std::byte> code() const;
  // The file a path-backed object reads its code from; empty otherwise.
  const std::filesystem::path& source_path() const noexcept;
  CodeType code_type() const noexcept;  // CodeType::cubin for an empty ObjectCode
  const std::string& name() const noexcept;
  const std::map<std::string, std::string>& symbol_mapping() const noexcept;
  const std::string& compile_log() const noexcept;  // the compiler's warnings, if any
  explicit operator bool() const noexcept { return state_ != nullptr; }

  // Loads (once) and returns the kernel; `name` may be a name expression.
  // An unknown name throws std::invalid_argument listing the kernels there are.
  Kernel get_kernel(std::string_view name) const;
  std::vector<std::string> kernel_names() const;  // loads
  void* library_handle() const;                   // CUlibrary, loading on first use
  // The CUlibrary for code outside cucore: loaded on first use and, from then
  // on, never unloaded by cucore, for the holder of the raw handle may unload
  // it itself (numba-cuda unloads what cuda.core's ObjectCode.handle gives it;
  // cuda.core never unloads) or use it after this ObjectCode is gone.
  void* exported_library_handle() const;
  // The library's CUmodule in the current context (cuLibraryGetModule), for
  // driver calls that take a module (cuModuleGetFunction, ...): loads on first
  // use, and the library then stays loaded, as exported_library_handle's. The
  // driver's error (CudaError) where no context is current.
  CUmodule get_module() const;
  bool is_loaded() const noexcept;

  // Internal: the shared state (kernels keep it alive).
  const std::shared_ptr<detail::ObjectCodeState>& state() const noexcept { return state_; }

 private:
  explicit ObjectCode(std::shared_ptr<detail::ObjectCodeState> s) noexcept : state_(std::move(s)) {}
  std::shared_ptr<detail::ObjectCodeState> state_;
};

}  // namespace cucore
