#pragma once
// Operators of the parallel algorithms: the well-known ones (cuda.compute's
// OpKind, compiled as libcu++'s function objects, so CUB picks the tuning it
// has for them) and user operators, as CUDA C++ source or as LTO-IR that is
// linked in with nvJitLink.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace cucore::compute {

enum class OpKind {
  plus, minus, multiplies, divides, modulus,
  equal_to, not_equal_to, greater, less, greater_equal, less_equal,
  logical_and, logical_or, logical_not,
  bit_and, bit_or, bit_xor, bit_not,
  identity, negate, minimum, maximum,
};

// How an LTO-IR operator takes its arguments.
enum class OpAbi {
  // extern "C" __device__ void name(void* arg0, ..., void* result): cuda.compute's
  // RawOp convention (untyped pointers to the arguments and to the result).
  pointers,
  // extern "C" __device__ R name(A0 arg0, ...): values in, value out (the C ABI of
  // numba.cuda.compile(..., abi="c")).
  values,
};

class Op {
 public:
  Op(OpKind kind);  // NOLINT(google-explicit-constructor): OpKind::plus where an Op is taken

  // A callable expression in CUDA C++ device code: a __device__ function's name
  // ("my_max", defined in `preamble`), a function object ("Max{}"), or a lambda
  // ("[](int a, int b) { return a < b ? b : a; }"). `preamble` holds whatever the
  // expression needs (functions, structs, includes). The compiler's log is in the
  // CompileError when it does not compile.
  static Op source(std::string callable, std::string preamble = {});
  // Pre-compiled LTO-IR defining `symbol` (extern "C"); extra LTO-IR modules it
  // calls may follow. Linked with nvJitLink (link-time optimization).
  static Op ltoir(std::string symbol, std::vector<std::byte> ltoir, OpAbi abi = OpAbi::pointers,
                  std::vector<std::vector<std::byte>> extra_ltoirs = {});

  bool is_well_known() const noexcept { return form_ == Form::well_known; }
  OpKind kind() const noexcept { return kind_; }  // well-known ops
  bool has_ltoir() const noexcept { return form_ == Form::ltoir; }
  const std::string& callable() const noexcept { return text_; }  // source: the expression; ltoir: the symbol
  const std::string& preamble() const noexcept { return preamble_; }
  OpAbi abi() const noexcept { return abi_; }
  // The LTO-IR modules (first the operator's), empty unless has_ltoir().
  const std::vector<std::vector<std::byte>>& ltoirs() const noexcept;
  // "plus", "source: <callable>", "ltoir: <symbol>" (for messages).
  std::string describe() const;

 private:
  enum class Form { well_known, source, ltoir };
  Op() = default;
  Form form_ = Form::well_known;
  OpKind kind_ = OpKind::plus;
  OpAbi abi_ = OpAbi::pointers;
  std::string text_, preamble_;
  std::shared_ptr<const std::vector<std::vector<std::byte>>> ltoirs_;  // shared: ops are copied into builds
};

}  // namespace cucore::compute
