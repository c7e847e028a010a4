#pragma once
// Value types of the parallel algorithms (cuda.compute's TypeEnum plus user
// structs): what the generated CUDA C++ calls the type, and its size and
// alignment, which the host side uses to lay out kernel arguments. A user struct
// is given by its C++ definition; the compiled code checks that its size and
// alignment match the host's.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace cucore::compute {

enum class TypeKind : std::uint8_t {
  int8, int16, int32, int64,
  uint8, uint16, uint32, uint64,
  float16, bfloat16, float32, float64,
  boolean,
  user,  // a trivially copyable struct given by its C++ definition (also zip values)
};

class Type {
 public:
  Type() = default;  // int32

  static Type int8() { return Type(TypeKind::int8); }
  static Type int16() { return Type(TypeKind::int16); }
  static Type int32() { return Type(TypeKind::int32); }
  static Type int64() { return Type(TypeKind::int64); }
  static Type uint8() { return Type(TypeKind::uint8); }
  static Type uint16() { return Type(TypeKind::uint16); }
  static Type uint32() { return Type(TypeKind::uint32); }
  static Type uint64() { return Type(TypeKind::uint64); }
  static Type float16() { return Type(TypeKind::float16); }    // __half
  static Type bfloat16() { return Type(TypeKind::bfloat16); }  // __nv_bfloat16
  static Type float32() { return Type(TypeKind::float32); }
  static Type float64() { return Type(TypeKind::float64); }
  static Type boolean() { return Type(TypeKind::boolean); }
  static Type of(TypeKind kind);  // a built-in kind (user is std::invalid_argument)

  // A struct defined in CUDA C++ (`definition`, e.g. "struct Pair { int a; float b; };"),
  // named `name` there, with the host's size and alignment. The name must be a
  // C++ identifier; the definition must define it (checked when compiled).
  static Type user(std::string name, std::string definition, std::size_t size, std::size_t alignment);
  // The same for a host type of identical layout: Type::user<Pair>("Pair", "struct Pair {...};").
  template <typename T>
  static Type user(std::string name, std::string definition) {
    static_assert(std::is_trivially_copyable_v<T>, "user types are trivially copyable");
    return user(std::move(name), std::move(definition), sizeof(T), alignof(T));
  }

  // The built-in type for a C++ arithmetic type (bool, int8_t ... double).
  template <typename T>
  static Type of();

  TypeKind kind() const noexcept { return kind_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t alignment() const noexcept { return alignment_; }
  // The CUDA C++ spelling ("::cuda::std::int32_t", "__half", "float", the user's name).
  const std::string& cpp_name() const noexcept { return name_; }
  const std::string& definition() const noexcept { return definition_; }  // user types only
  bool is_integral() const noexcept;  // integers and bool
  bool is_signed_integral() const noexcept;
  bool is_floating() const noexcept;  // float16, bfloat16, float32, float64
  bool is_user() const noexcept { return kind_ == TypeKind::user; }
  // "int32", "float16", "user Pair" (for messages).
  std::string describe() const;

  friend bool operator==(const Type& a, const Type& b) noexcept {
    return a.kind_ == b.kind_ && a.size_ == b.size_ && a.alignment_ == b.alignment_ && a.name_ == b.name_ &&
           a.definition_ == b.definition_;
  }

 private:
  explicit Type(TypeKind kind);
  TypeKind kind_ = TypeKind::int32;
  std::size_t size_ = 4, alignment_ = 4;
  std::string name_ = "::cuda::std::int32_t";
  std::string definition_;
};

template <typename T>
Type Type::of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return boolean();
  else if constexpr (std::is_same_v<U, float>) return float32();
  else if constexpr (std::is_same_v<U, double>) return float64();
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
    static_assert(sizeof(U) <= 8, "integers up to 64 bits");
    if constexpr (sizeof(U) == 1) return int8();
    else if constexpr (sizeof(U) == 2) return int16();
    else if constexpr (sizeof(U) == 4) return int32();
    else return int64();
  } else if constexpr (std::is_integral_v<U>) {
    static_assert(sizeof(U) <= 8, "integers up to 64 bits");
    if constexpr (sizeof(U) == 1) return uint8();
    else if constexpr (sizeof(U) == 2) return uint16();
    else if constexpr (sizeof(U) == 4) return uint32();
    else return uint64();
  } else {
    static_assert(std::is_arithmetic_v<U>, "Type::of<T>: T is bool, an integer, float or double; use Type::user for structs");
  }
}

// A typed value (an initial value, a counting iterator's start, ...): a Type and
// its bytes.
class Value {
 public:
  Value() = default;
  Value(Type type, std::span<const std::byte> bytes);  // bytes.size() must be type.size()
  template <typename T>
    requires std::is_arithmetic_v<T>
  Value(T v) : type_(Type::of<T>()), bytes_(sizeof(T)) {  // NOLINT(google-explicit-constructor)
    std::memcpy(bytes_.data(), &v, sizeof(T));
  }
  // A user struct value (its Type made with Type::user<T>).
  template <typename T>
  static Value of(const Type& type, const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return Value(type, std::as_bytes(std::span<const T, 1>(&v, 1)));
  }

  const Type& type() const noexcept { return type_; }
  std::span<const std::byte> bytes() const noexcept { return bytes_; }

 private:
  Type type_;
  std::vector<std::byte> bytes_;
};

}  // namespace cucore::compute
