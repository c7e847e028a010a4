// Type, Value, Op and Iterator: the descriptions the algorithms are built from.
#include <cucore/buffer.hpp>
#include <cucore/compute/iterator.hpp>
#include <cucore/compute/op.hpp>
#include <cucore/compute/types.hpp>

#include <cstdint>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

#include "compute/engine.hpp"
#include "compute/iterator_node.hpp"

namespace cucore::compute {

namespace {
struct Builtin {
  const char* name;
  const char* cpp;
  std::size_t size;
};
constexpr Builtin kBuiltins[] = {
    {"int8", "::cuda::std::int8_t", 1},     {"int16", "::cuda::std::int16_t", 2},
    {"int32", "::cuda::std::int32_t", 4},   {"int64", "::cuda::std::int64_t", 8},
    {"uint8", "::cuda::std::uint8_t", 1},   {"uint16", "::cuda::std::uint16_t", 2},
    {"uint32", "::cuda::std::uint32_t", 4}, {"uint64", "::cuda::std::uint64_t", 8},
    {"float16", "__half", 2},               {"bfloat16", "__nv_bfloat16", 2},
    {"float32", "float", 4},                {"float64", "double", 8},
    {"bool", "bool", 1},
};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}
}  // namespace

Type::Type(TypeKind kind) : kind_(kind) {
  const auto& b = kBuiltins[static_cast<int>(kind)];
  size_ = alignment_ = b.size;
  name_ = b.cpp;
}

Type Type::of(TypeKind kind) {
  if (kind == TypeKind::user) throw InvalidArgumentError("Type::of: TypeKind::user needs a definition (Type::user)");
  return Type(kind);
}

Type Type::user(std::string name, std::string definition, std::size_t size, std::size_t alignment) {
  if (!is_identifier(name)) throw InvalidArgumentError("Type::user: name \"" + name + "\" is not a C++ identifier");
  if (size == 0) throw InvalidArgumentError("Type::user: " + name + " has size 0");
  if (alignment == 0 || (alignment & (alignment - 1)) || size % alignment)
    throw InvalidArgumentError("Type::user: " + name + ": alignment " + std::to_string(alignment) +
                                " is not a power of two dividing the size " + std::to_string(size));
  Type t;
  t.kind_ = TypeKind::user;
  t.size_ = size;
  t.alignment_ = alignment;
  t.name_ = std::move(name);
  t.definition_ = std::move(definition);
  return t;
}

bool Type::is_integral() const noexcept { return kind_ <= TypeKind::uint64 || kind_ == TypeKind::boolean; }
bool Type::is_signed_integral() const noexcept { return kind_ <= TypeKind::int64; }
bool Type::is_floating() const noexcept { return kind_ >= TypeKind::float16 && kind_ <= TypeKind::float64; }

std::string Type::describe() const {
  if (kind_ == TypeKind::user) return "user " + name_;
  return kBuiltins[static_cast<int>(kind_)].name;
}

Value::Value(Type type, std::span<const std::byte> bytes) : type_(std::move(type)), bytes_(bytes.begin(), bytes.end()) {
  if (bytes_.size() != type_.size())
    throw InvalidArgumentError("Value: " + std::to_string(bytes_.size()) + " bytes for " + type_.describe() + " (" +
                                std::to_string(type_.size()) + " bytes)");
}

// ---------------------------------------------------------------- Op

Op::Op(OpKind kind) : form_(Form::well_known), kind_(kind) {
  if (static_cast<int>(kind) < 0 || kind > OpKind::maximum) throw InvalidArgumentError("Op: unknown OpKind");
}

Op Op::source(std::string callable, std::string preamble) {
  if (callable.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InvalidArgumentError("Op::source: the callable expression is empty");
  Op op;
  op.form_ = Form::source;
  op.text_ = std::move(callable);
  op.preamble_ = std::move(preamble);
  return op;
}

Op Op::ltoir(std::string symbol, std::vector<std::byte> ltoir, OpAbi abi, std::vector<std::vector<std::byte>> extra) {
  if (!is_identifier(symbol)) throw InvalidArgumentError("Op::ltoir: symbol \"" + symbol + "\" is not a C identifier");
  if (ltoir.empty()) throw InvalidArgumentError("Op::ltoir: no LTO-IR for " + symbol);
  Op op;
  op.form_ = Form::ltoir;
  op.abi_ = abi;
  op.text_ = std::move(symbol);
  auto all = std::make_shared<std::vector<std::vector<std::byte>>>();
  all->push_back(std::move(ltoir));
  for (auto& e : extra) {
    if (e.empty()) throw InvalidArgumentError("Op::ltoir: an empty extra LTO-IR module for " + op.text_);
    all->push_back(std::move(e));
  }
  op.ltoirs_ = std::move(all);
  return op;
}

const std::vector<std::vector<std::byte>>& Op::ltoirs() const noexcept {
  static const std::vector<std::vector<std::byte>> none;
  return ltoirs_ ? *ltoirs_ : none;
}

std::string Op::describe() const {
  static constexpr const char* kNames[] = {
      "plus",         "minus",         "multiplies", "divides",     "modulus", "equal_to", "not_equal_to", "greater",
      "less",         "greater_equal", "less_equal", "logical_and", "logical_or", "logical_not", "bit_and",
      "bit_or",       "bit_xor",       "bit_not",    "identity",    "negate",  "minimum",  "maximum"};
  switch (form_) {
    case Form::well_known: return kNames[static_cast<int>(kind_)];
    case Form::source: return "source: " + text_;
    case Form::ltoir: break;
  }
  return "ltoir: " + text_;
}

// ---------------------------------------------------------------- Iterator

std::string type_signature(const Type& t) {
  return t.is_user() ? "user:" + t.cpp_name() + ":" + std::to_string(t.size()) + ":" + std::to_string(t.alignment()) +
                           ":" + t.definition()
                     : t.describe();
}

namespace {
std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

std::shared_ptr<Iterator::Node> make_node(IteratorKind kind, Type value_type) {
  auto n = std::make_shared<Iterator::Node>();
  n->kind = kind;
  n->value_type = std::move(value_type);
  return n;
}

// 64-bit FNV-1a: names generated zip value types after their signature.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}
}  // namespace

std::string op_key(const Op& op) {
  if (op.is_well_known()) return op.describe();
  if (op.has_ltoir()) {
    std::string k = "ltoir:";
    k += op.callable();
    k += op.abi() == OpAbi::pointers ? ":pointers:" : ":values:";
    k += detail::sha256_hex(op.ltoirs());
    return k;
  }
  return "source:" + std::to_string(op.callable().size()) + ":" + op.callable() + ":" + op.preamble();
}


Iterator::Iterator() : Iterator(pointer(Type::int32(), CUdeviceptr{0})) {}

Iterator Iterator::pointer(Type value_type, CUdeviceptr ptr) {
  auto n = make_node(IteratorKind::pointer, std::move(value_type));
  n->state.resize(sizeof(CUdeviceptr));
  std::memcpy(n->state.data(), &ptr, sizeof ptr);
  n->state_alignment = alignof(CUdeviceptr);
  n->signature = "ptr<" + type_signature(n->value_type) + ">";
  return Iterator(std::move(n));
}

Iterator Iterator::pointer(Type value_type, const Buffer& buffer) {
  if (buffer.is_closed()) throw InvalidArgumentError("Iterator::pointer: the buffer is closed");
  if (buffer.size() % value_type.size())
    throw InvalidArgumentError("Iterator::pointer: a buffer of " + std::to_string(buffer.size()) +
                                " bytes does not hold whole " + value_type.describe() + " elements");
  return pointer(std::move(value_type), buffer.handle());
}

Iterator Iterator::counting(const Value& start) {
  const Type& t = start.type();
  if (!(t.is_integral() || t.kind() == TypeKind::float32 || t.kind() == TypeKind::float64) ||
      t.kind() == TypeKind::boolean)
    throw InvalidArgumentError("Iterator::counting: counts in integers, float32 or float64, not " + t.describe());
  auto n = make_node(IteratorKind::counting, t);
  n->state.assign(start.bytes().begin(), start.bytes().end());
  n->state_alignment = t.alignment();
  n->signature = "count<" + type_signature(t) + ">";
  return Iterator(std::move(n));
}

Iterator Iterator::constant(const Value& value) {
  auto n = make_node(IteratorKind::constant, value.type());
  n->state.assign(value.bytes().begin(), value.bytes().end());
  n->state_alignment = value.type().alignment();
  n->signature = "const<" + type_signature(value.type()) + ">";
  return Iterator(std::move(n));
}

Iterator Iterator::transform(const Iterator& base, const Op& op, Type value_type) {
  auto n = make_node(IteratorKind::transform, std::move(value_type));
  n->children.push_back(base);
  n->op = std::make_shared<Op>(op);
  n->state = base.node()->state;
  n->state_alignment = base.node()->state_alignment;
  n->signature = "xform<" + base.signature() + "," + op_key(op) + "," + type_signature(n->value_type) + ">";
  return Iterator(std::move(n));
}

Iterator Iterator::discard(Type value_type) {
  auto n = make_node(IteratorKind::discard, std::move(value_type));
  n->state.assign(1, std::byte{0});
  n->state_alignment = 1;
  n->signature = "discard<" + type_signature(n->value_type) + ">";
  return Iterator(std::move(n));
}

Iterator Iterator::zip(std::vector<Iterator> its) {
  if (its.size() < 2) throw InvalidArgumentError("Iterator::zip: zips two or more iterators");
  std::string sig = "zip<";
  std::size_t off = 0, align = 1, value_off = 0, value_align = 1;
  std::string fields;
  std::vector<std::byte> state;
  for (std::size_t i = 0; i < its.size(); ++i) {
    const auto& c = *its[i].node();
    sig += (i ? "," : "") + c.signature;
    off = align_up(off, c.state_alignment);
    state.resize(off + c.state.size());
    std::memcpy(state.data() + off, c.state.data(), c.state.size());
    off += c.state.size();
    align = std::max(align, c.state_alignment);
    const Type& vt = c.value_type;
    value_off = align_up(value_off, vt.alignment()) + vt.size();
    value_align = std::max(value_align, vt.alignment());
    fields += vt.cpp_name() + " f" + std::to_string(i) + "; ";
  }
  sig += ">";
  state.resize(align_up(off, align));
  std::string name = "cucore_zip_value_" + std::to_string(fnv1a(sig));
  Type vt = Type::user(name, "struct " + name + " { " + fields + "};", align_up(value_off, value_align), value_align);
  auto n = make_node(IteratorKind::zip, std::move(vt));
  n->children = std::move(its);
  n->state = std::move(state);
  n->state_alignment = align;
  n->signature = std::move(sig);
  return Iterator(std::move(n));
}

Iterator Iterator::reverse(const Iterator& base, std::uint64_t size) {
  if (size == 0) throw InvalidArgumentError("Iterator::reverse: size is 0 (nothing to reverse)");
  auto n = make_node(IteratorKind::reverse, base.value_type());
  n->children.push_back(base);
  const auto& c = *base.node();
  std::size_t off = align_up(c.state.size(), 8);
  n->state_alignment = std::max<std::size_t>(c.state_alignment, 8);
  n->state.assign(align_up(off + 8, n->state_alignment), std::byte{0});
  std::memcpy(n->state.data(), c.state.data(), c.state.size());
  const auto last = static_cast<long long>(size - 1);
  std::memcpy(n->state.data() + off, &last, sizeof last);
  n->signature = "rev<" + c.signature + ">";
  return Iterator(std::move(n));
}

Iterator Iterator::with_pointer(CUdeviceptr ptr) const {
  const Node& n = *node_;
  switch (n.kind) {
    case IteratorKind::pointer: return pointer(n.value_type, ptr);
    case IteratorKind::transform: return transform(n.children[0].with_pointer(ptr), *n.op, n.value_type);
    case IteratorKind::reverse: {
      long long last;
      std::memcpy(&last, n.state.data() + align_up(n.children[0].node()->state.size(), 8), sizeof last);
      return reverse(n.children[0].with_pointer(ptr), static_cast<std::uint64_t>(last) + 1);
    }
    default: throw InvalidArgumentError("Iterator::with_pointer: a " + n.signature + " iterator holds no pointer");
  }
}

IteratorKind Iterator::kind() const noexcept { return node_->kind; }
const Type& Iterator::value_type() const noexcept { return node_->value_type; }
const std::string& Iterator::signature() const noexcept { return node_->signature; }
std::span<const std::byte> Iterator::state() const noexcept { return node_->state; }
std::size_t Iterator::state_alignment() const noexcept { return node_->state_alignment; }
const std::vector<Iterator>& Iterator::children() const noexcept { return node_->children; }
const Op* Iterator::op() const noexcept { return node_->op.get(); }

CUdeviceptr Iterator::pointer_value() const {
  if (node_->kind != IteratorKind::pointer)
    throw InvalidArgumentError("Iterator::pointer_value: a " + node_->signature + " iterator is not a pointer");
  CUdeviceptr p;
  std::memcpy(&p, node_->state.data(), sizeof p);
  return p;
}

bool Iterator::is_writable() const noexcept {
  switch (node_->kind) {
    case IteratorKind::pointer:
    case IteratorKind::discard: return true;
    case IteratorKind::reverse: return node_->children[0].is_writable();
    default: return false;
  }
}

}  // namespace cucore::compute
