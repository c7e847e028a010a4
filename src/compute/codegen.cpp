// The generated translation units: prelude, types, operators, iterators.
#include <cucore/errors.hpp>
#include "compute/codegen.hpp"

#include <stdexcept>

#include "compute/iterator_node.hpp"

namespace cucore::compute::detail {

namespace {

// Before CUB: CUB 3.0 marks its host-side helpers __host__ (NVRTC's JIT mode
// refuses those) and, under NVRTC, leaves out the policy wrappers its tuning
// headers still name. Host-device helpers and stand-in wrappers let the tuning
// headers compile; only the kernels and their policies are used.
constexpr const char* kPreludeHead = R"(#define CUB_RUNTIME_FUNCTION __host__ __device__
#include <cuda/std/cstddef>
#include <cuda/std/cstdint>
#include <cuda/std/functional>
#include <cuda/std/iterator>
#include <cuda/std/type_traits>
#include <cuda/functional>
)";

constexpr const char* kPreludeCub = R"(#include <cub/util_device.cuh>
CUB_NAMESPACE_BEGIN
namespace detail {
template <typename PolicyT, typename = void, typename = void>
struct PolicyWrapper : PolicyT {
  __host__ __device__ PolicyWrapper(PolicyT base) : PolicyT(base) {}
};
template <typename PolicyT>
__host__ __device__ PolicyWrapper<PolicyT> MakePolicyWrapper(PolicyT policy) { return PolicyWrapper<PolicyT>{policy}; }
}  // namespace detail
CUB_NAMESPACE_END
)";

// Iterator templates: random-access iterators whose state is exactly their data
// members (the host lays the same bytes out as a kernel argument).
constexpr const char* kIterators = R"(
namespace cucore_gen {
using diff_t = ::cuda::std::ptrdiff_t;
#define CUCORE_ITERATOR_OPS(Self)                                                          \
  using difference_type   = ::cucore_gen::diff_t;                                                        \
  using iterator_category = ::cuda::std::random_access_iterator_tag;                       \
  __host__ __device__ Self operator+(::cucore_gen::diff_t n) const { Self r = *this; r.advance(n); return r; } \
  __host__ __device__ Self operator-(::cucore_gen::diff_t n) const { Self r = *this; r.advance(-n); return r; } \
  __host__ __device__ Self& operator+=(::cucore_gen::diff_t n) { advance(n); return *this; }             \
  __host__ __device__ Self& operator-=(::cucore_gen::diff_t n) { advance(-n); return *this; }            \
  __host__ __device__ Self& operator++() { advance(1); return *this; }                     \
  __host__ __device__ Self operator++(int) { Self r = *this; advance(1); return r; }       \
  __host__ __device__ Self& operator--() { advance(-1); return *this; }                    \
  __host__ __device__ Self operator--(int) { Self r = *this; advance(-1); return r; }      \
  __device__ reference operator*() const { return (*this)[0]; }                            \
  friend __host__ __device__ Self operator+(::cucore_gen::diff_t n, const Self& s) { return s + n; }

template <typename T>
struct counting {
  using value_type = T;
  using reference  = T;
  using pointer    = void;
  T value;
  __host__ __device__ void advance(diff_t n) { value = static_cast<T>(value + static_cast<T>(n)); }
  __device__ reference operator[](diff_t n) const { return static_cast<T>(value + static_cast<T>(n)); }
  CUCORE_ITERATOR_OPS(counting)
};

template <typename T>
struct constant {
  using value_type = T;
  using reference  = T;
  using pointer    = void;
  T value;
  __host__ __device__ void advance(diff_t) {}
  __device__ reference operator[](diff_t) const { return value; }
  CUCORE_ITERATOR_OPS(constant)
};

template <typename T>
struct discard {
  struct proxy {
    template <typename U>
    __device__ const proxy& operator=(const U&) const { return *this; }
    __device__ operator T() const { return T{}; }
  };
  using value_type = T;
  using reference  = proxy;
  using pointer    = void;
  char unused;
  __host__ __device__ void advance(diff_t) {}
  __device__ reference operator[](diff_t) const { return proxy{}; }
  CUCORE_ITERATOR_OPS(discard)
};

template <typename It, typename Op, typename V>
struct transform {
  using value_type = V;
  using reference  = V;
  using pointer    = void;
  It it;
  __host__ __device__ void advance(diff_t n) { it += n; }
  __device__ reference operator[](diff_t n) const { return static_cast<V>(Op{}(it[n])); }
  CUCORE_ITERATOR_OPS(transform)
};

template <typename It>
struct reverse {
  using value_type = typename ::cuda::std::iterator_traits<It>::value_type;
  using reference  = typename ::cuda::std::iterator_traits<It>::reference;
  using pointer    = void;
  It it;
  long long last;
  __host__ __device__ void advance(diff_t n) { last -= n; }
  __device__ reference operator[](diff_t n) const { return it[last - n]; }
  CUCORE_ITERATOR_OPS(reverse)
};
}  // namespace cucore_gen
)";

const char* well_known_op(OpKind k) {
  switch (k) {
    case OpKind::plus: return "::cuda::std::plus<>";
    case OpKind::minus: return "::cuda::std::minus<>";
    case OpKind::multiplies: return "::cuda::std::multiplies<>";
    case OpKind::divides: return "::cuda::std::divides<>";
    case OpKind::modulus: return "::cuda::std::modulus<>";
    case OpKind::equal_to: return "::cuda::std::equal_to<>";
    case OpKind::not_equal_to: return "::cuda::std::not_equal_to<>";
    case OpKind::greater: return "::cuda::std::greater<>";
    case OpKind::less: return "::cuda::std::less<>";
    case OpKind::greater_equal: return "::cuda::std::greater_equal<>";
    case OpKind::less_equal: return "::cuda::std::less_equal<>";
    case OpKind::logical_and: return "::cuda::std::logical_and<>";
    case OpKind::logical_or: return "::cuda::std::logical_or<>";
    case OpKind::logical_not: return "::cuda::std::logical_not<>";
    case OpKind::bit_and: return "::cuda::std::bit_and<>";
    case OpKind::bit_or: return "::cuda::std::bit_or<>";
    case OpKind::bit_xor: return "::cuda::std::bit_xor<>";
    case OpKind::bit_not: return "::cuda::std::bit_not<>";
    case OpKind::identity: return "::cuda::std::__identity";
    case OpKind::negate: return "::cuda::std::negate<>";
    case OpKind::minimum: return "::cuda::minimum<>";
    case OpKind::maximum: return "::cuda::maximum<>";
  }
  throw InvalidArgumentError("unknown OpKind");
}

// prefix + decimal number (appending avoids a GCC 12 -Wrestrict false positive
// on "literal" + std::string).
std::string numbered(const char* prefix, std::size_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

int op_arity(OpKind k) {
  switch (k) {
    case OpKind::logical_not:
    case OpKind::bit_not:
    case OpKind::identity:
    case OpKind::negate: return 1;
    default: return 2;
  }
}

}  // namespace

TuBuilder::TuBuilder(std::string algorithm) : algorithm_(std::move(algorithm)) { out_.name = algorithm_; }

void TuBuilder::include(const std::string& header) { includes_.push_back(header); }

std::string TuBuilder::type(const Type& t) {
  if (t.kind() == TypeKind::float16) fp16_ = true;
  if (t.kind() == TypeKind::bfloat16) bf16_ = true;
  if (t.is_user() && defined_types_.insert(t.cpp_name()).second) {
    types_ += t.definition() + "\n";
    types_ += "static_assert(sizeof(" + t.cpp_name() + ") == " + std::to_string(t.size()) + " && alignof(" +
              t.cpp_name() + ") == " + std::to_string(t.alignment()) + ", \"cucore: the device layout of " +
              t.cpp_name() + " differs from the host's (" + std::to_string(t.size()) + " bytes, aligned to " +
              std::to_string(t.alignment()) + ")\");\n";
  }
  return t.cpp_name();
}

std::string TuBuilder::op(const Op& op, const std::vector<Type>& args, const Type& result) {
  if (op.is_well_known()) {
    if (op_arity(op.kind()) != static_cast<int>(args.size()))
      throw InvalidArgumentError("operator " + op.describe() + " takes " + std::to_string(op_arity(op.kind())) +
                                  " argument(s), but the algorithm calls it with " + std::to_string(args.size()));
    for (const auto& a : args) type(a);
    type(result);
    return well_known_op(op.kind());
  }
  const std::string name = numbered("cucore_op_", next_id_++);
  std::string params, call_args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i) {
      params += ", ";
      call_args += ", ";
    }
    params += type(args[i]);
    params += numbered(" a", i);
    call_args += numbered("a", i);
  }
  const std::string r = type(result);
  if (op.has_ltoir()) {
    const std::string& sym = op.callable();
    if (op.abi() == OpAbi::pointers) {
      std::string decl = "extern \"C\" __device__ void " + sym + "(void*";
      std::string ptrs;
      for (std::size_t i = 0; i < args.size(); ++i) {
        decl += ", void*";
        ptrs += numbered("&a", i) + ", ";
      }
      ops_ += decl + ");\n";
      ops_ += "struct " + name + " {\n  __device__ " + r + " operator()(" + params + ") const {\n    " + r +
              " r;\n    " + sym + "(" + ptrs + "&r);\n    return r;\n  }\n};\n";
    } else {
      std::string types;
      for (std::size_t i = 0; i < args.size(); ++i) {
        if (i) types += ", ";
        types += args[i].cpp_name();
      }
      ops_ += "extern \"C\" __device__ " + r + " " + sym + "(" + types + ");\n";
      ops_ += "struct " + name + " {\n  __device__ " + r + " operator()(" + params + ") const { return " + sym + "(" +
              call_args + "); }\n};\n";
    }
    for (const auto& m : op.ltoirs()) out_.ltoirs.push_back(m);
    return name;
  }
  if (!op.preamble().empty()) ops_ += op.preamble() + "\n";
  ops_ += "struct " + name + " {\n  __device__ " + r + " operator()(" + params + ") const {\n    return static_cast<" +
          r + ">((" + op.callable() + ")(" + call_args + "));\n  }\n};\n";
  return name;
}

std::string TuBuilder::iterator(const Iterator& it, bool output) {
  const auto& n = *it.node();
  const std::string v = type(n.value_type);
  switch (n.kind) {
    case IteratorKind::pointer: return output ? v + "*" : "const " + v + "*";
    case IteratorKind::counting:
      if (output) break;
      return "cucore_gen::counting<" + v + ">";
    case IteratorKind::constant:
      if (output) break;
      return "cucore_gen::constant<" + v + ">";
    case IteratorKind::discard: return "cucore_gen::discard<" + v + ">";
    case IteratorKind::transform: {
      if (output) break;
      const std::string inner = iterator(n.children[0], false);
      const std::string f = op(*n.op, {n.children[0].value_type()}, n.value_type);
      return "cucore_gen::transform<" + inner + ", " + f + ", " + v + ">";
    }
    case IteratorKind::reverse: return "cucore_gen::reverse<" + iterator(n.children[0], output) + ">";
    case IteratorKind::zip: {
      if (output) break;
      const std::string name = numbered("cucore_zip_", next_id_++);
      std::string members, advance, values;
      for (std::size_t i = 0; i < n.children.size(); ++i) {
        const std::string c = iterator(n.children[i], false);
        const std::string m = numbered("i", i);
        members += "  " + c + " " + m + ";\n";
        advance += m + " += n; ";
        if (i) values += ", ";
        values += m + "[n]";
      }
      iterators_ += "struct " + name + " {\n  using value_type = " + v +
                    ";\n  using reference = " + v + ";\n  using pointer = void;\n" + members +
                    "  __host__ __device__ void advance(cucore_gen::diff_t n) { " + advance +
                    "}\n  __device__ reference operator[](cucore_gen::diff_t n) const { return " + v + "{" + values +
                    "}; }\n  CUCORE_ITERATOR_OPS(" + name + ")\n};\n";
      return name;
    }
  }
  throw InvalidArgumentError("a " + n.signature + " iterator cannot be written to");
}

std::string TuBuilder::input_iterator(const Iterator& it) { return iterator(it, false); }
std::string TuBuilder::output_iterator(const Iterator& it) {
  if (!it.is_writable()) throw InvalidArgumentError("a " + it.signature() + " iterator cannot be written to");
  return iterator(it, true);
}

void TuBuilder::body(const std::string& text) { body_ += text; }

void TuBuilder::tuning(const std::vector<std::string>& exprs) {
  body_ += "extern \"C\" __device__ const long long cucore_tuning[] = {\n";
  for (const auto& e : exprs) body_ += "  static_cast<long long>(" + e + "),\n";
  body_ += "};\n";
  out_.tuning_count = exprs.size();
}

void TuBuilder::kernel(const std::string& name_expression) { out_.kernels.push_back(name_expression); }

TuSource TuBuilder::finish() const {
  TuSource s = out_;
  s.code = "// cucore.compute " + algorithm_ + ": generated translation unit (schema 1)\n";
  s.code += kPreludeHead;
  if (fp16_) s.code += "#include <cuda_fp16.h>\n";
  if (bf16_) s.code += "#include <cuda_bf16.h>\n";
  s.code += kPreludeCub;
  for (const auto& h : includes_) s.code += "#include " + h + "\n";
  s.code += kIterators;
  s.code += types_;
  s.code += ops_;
  s.code += iterators_;
  s.code += body_;
  return s;
}

}  // namespace cucore::compute::detail
