// ObjectCode: the factories and the compile-side accessors. Loading
// (get_kernel, kernel_names, library_handle) lives in object_code_load.cpp.
#include <cucore/errors.hpp>
#include <cucore/object_code.hpp>

#include <stdexcept>
#include <string>
#include <utility>

#include "compile/object_code_state.hpp"
#include "files/regular_file.hpp"

namespace cucore {
namespace {

const std::string& empty_string() {
  static const std::string s;
  return s;
}

const std::map<std::string, std::string>& empty_mapping() {
  static const std::map<std::string, std::string> m;
  return m;
}

// The driver reads PTX as a C string (cuLibraryLoadData takes no size), so PTX
// bytes always end with a NUL; other code types are taken as they are.
void terminate_ptx(std::vector<std::byte>& code, CodeType code_type) {
  if (code_type == CodeType::ptx && (code.empty() || code.back() != std::byte{0})) code.push_back(std::byte{0});
}

// The file whole (files/regular_file.hpp: a FIFO, device or directory is
// refused without blocking, and a file over the size limit before any memory
// is taken for it).
std::vector<std::byte> read_file(const std::filesystem::path& file, const char* factory) {
  std::vector<std::byte> bytes;
  detail::ReadOptions o;
  o.what = "code file";
  try {
    bytes = detail::read_binary_file(file, o);
  } catch (const detail::FileError& e) {
    throw detail::FileError(e.kind(), e.path(), e.error_number(), std::string("ObjectCode::") + factory + ": " + e.what());
  }
  if (bytes.empty())
    throw InvalidArgumentError(std::string("ObjectCode::") + factory + ": '" + file.string() + "' is empty");
  return bytes;
}

std::vector<std::byte> copy_bytes(std::span<const std::byte> code, const char* factory) {
  if (code.empty()) throw InvalidArgumentError(std::string("ObjectCode::") + factory + ": the code is empty");
  return {code.begin(), code.end()};
}

}  // namespace

std::string_view to_string(CodeType type) noexcept {
  switch (type) {
    case CodeType::cubin: return "cubin";
    case CodeType::ptx: return "ptx";
    case CodeType::ltoir: return "ltoir";
    case CodeType::fatbin: return "fatbin";
    case CodeType::object: return "object";
    case CodeType::library: return "library";
  }
  return "unknown";
}

std::optional<CodeType> parse_code_type(std::string_view name) noexcept {
  for (CodeType t : {CodeType::cubin, CodeType::ptx, CodeType::ltoir, CodeType::fatbin, CodeType::object,
                     CodeType::library})
    if (name == to_string(t)) return t;
  return std::nullopt;
}

ObjectCode ObjectCode::from_bytes(std::vector<std::byte> code, CodeType code_type, std::string name,
                                  std::map<std::string, std::string> symbol_mapping, std::string log) {
  if (static_cast<unsigned>(code_type) > static_cast<unsigned>(CodeType::library))
    throw InvalidArgumentError("ObjectCode: code_type " + std::to_string(static_cast<unsigned>(code_type)) +
                                " is not a CodeType");
  if (code.empty()) throw InvalidArgumentError("ObjectCode: the " + std::string(to_string(code_type)) + " code is empty");
  auto s = std::make_shared<detail::ObjectCodeState>();
  terminate_ptx(code, code_type);
  s->code = std::move(code);
  s->code_type = code_type;
  s->name = std::move(name);
  s->symbol_mapping = std::move(symbol_mapping);
  s->log = std::move(log);
  return ObjectCode(std::move(s));
}

// A file's default name is its file name, so messages say where code came from.
#define CUCORE_OBJECT_CODE_FACTORIES(fn, type)                                                                  \
  ObjectCode ObjectCode::fn(std::span<const std::byte> code, std::string name,                                   \
                            std::map<std::string, std::string> symbol_mapping) {                                 \
    return from_bytes(copy_bytes(code, #fn), type, std::move(name), std::move(symbol_mapping));                  \
  }                                                                                                              \
  ObjectCode ObjectCode::fn(const std::filesystem::path& file, std::string name,                                 \
                            std::map<std::string, std::string> symbol_mapping) {                                 \
    if (name.empty()) name = file.filename().string();                                                           \
    return from_bytes(read_file(file, #fn), type, std::move(name), std::move(symbol_mapping));                   \
  }

CUCORE_OBJECT_CODE_FACTORIES(from_cubin, CodeType::cubin)
CUCORE_OBJECT_CODE_FACTORIES(from_ptx, CodeType::ptx)
CUCORE_OBJECT_CODE_FACTORIES(from_ltoir, CodeType::ltoir)
CUCORE_OBJECT_CODE_FACTORIES(from_fatbin, CodeType::fatbin)
CUCORE_OBJECT_CODE_FACTORIES(from_object, CodeType::object)
CUCORE_OBJECT_CODE_FACTORIES(from_library, CodeType::library)
#undef CUCORE_OBJECT_CODE_FACTORIES

ObjectCode ObjectCode::from_ptx(std::string_view code, std::string name,
                                std::map<std::string, std::string> symbol_mapping) {
  return from_ptx(std::as_bytes(std::span(code.data(), code.size())), std::move(name), std::move(symbol_mapping));
}

ObjectCode ObjectCode::from_path(CodeType code_type, std::filesystem::path file, std::string name,
                                 std::map<std::string, std::string> symbol_mapping) {
  if (static_cast<unsigned>(code_type) > static_cast<unsigned>(CodeType::library))
    throw InvalidArgumentError("ObjectCode::from_path: code_type " + std::to_string(static_cast<unsigned>(code_type)) +
                                " is not a CodeType");
  if (file.empty()) throw InvalidArgumentError("ObjectCode::from_path: the path is empty");
  auto s = std::make_shared<detail::ObjectCodeState>();
  s->file = std::move(file);
  s->code_type = code_type;
  s->name = std::move(name);
  s->symbol_mapping = std::move(symbol_mapping);
  return ObjectCode(std::move(s));
}

ObjectCode ObjectCode::opaque(std::vector<std::byte> bytes) {
  auto s = std::make_shared<detail::ObjectCodeState>();
  s->code = std::move(bytes);
  s->opaque = true;
  return ObjectCode(std::move(s));
}

bool ObjectCode::is_opaque() const noexcept { return state_ && state_->opaque; }

const std::vector<std::byte>& detail::ObjectCodeState::bytes() {
  if (file.empty()) return code;
  std::call_once(read_once, [this] {
    try {
      std::vector<std::byte> b = read_file(file, ("from_" + std::string(to_string(code_type))).c_str());
      terminate_ptx(b, code_type);
      code = std::move(b);
    } catch (...) {
      read_error = std::current_exception();
    }
  });
  if (read_error) std::rethrow_exception(read_error);
  return code;
}

std::span<const std::byte> ObjectCode::code() const {
  if (!state_) return {};
  return state_->bytes();
}

const std::filesystem::path& ObjectCode::source_path() const noexcept {
  static const std::filesystem::path none;
  return state_ ? state_->file : none;
}

CodeType ObjectCode::code_type() const noexcept { return state_ ? state_->code_type : CodeType::cubin; }
const std::string& ObjectCode::name() const noexcept { return state_ ? state_->name : empty_string(); }
const std::map<std::string, std::string>& ObjectCode::symbol_mapping() const noexcept {
  return state_ ? state_->symbol_mapping : empty_mapping();
}
const std::string& ObjectCode::compile_log() const noexcept { return state_ ? state_->log : empty_string(); }

}  // namespace cucore
