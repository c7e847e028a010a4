#pragma once
// Generates the CUDA C++ translation unit of one algorithm build: CUB's
// headers, the user's types and operators, iterator types, the kernels to
// instantiate (as NVRTC name expressions) and the table of compile-time facts
// the host-side dispatch reads back from the cubin (`cucore_tuning`).
#include <cucore/compute/iterator.hpp>
#include <cucore/compute/op.hpp>
#include <cucore/compute/types.hpp>

#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace cucore::compute::detail {

struct TuSource {
  std::string name;                          // "reduce", ... (the program's name)
  std::string code;                          // the whole translation unit
  std::vector<std::string> kernels;          // name expressions, in the order the dispatch uses them
  std::vector<std::vector<std::byte>> ltoirs;  // user LTO-IR to link in besides the TU's own
  std::size_t tuning_count = 0;              // entries of cucore_tuning
};

class TuBuilder {
 public:
  explicit TuBuilder(std::string algorithm);

  void include(const std::string& header);  // <cub/...> after the prelude
  // The C++ spelling of `t`; user types get their definition (and a layout check) emitted.
  std::string type(const Type& t);
  // A function-object type calling `op` as result(args...). Well-known ops are
  // libcu++'s function objects (CUB's tuning recognises them); user ops get a
  // typed wrapper.
  std::string op(const Op& op, const std::vector<Type>& args, const Type& result);
  // The C++ type of an iterator read from (pointers are `const T*`) or written to.
  std::string input_iterator(const Iterator& it);
  std::string output_iterator(const Iterator& it);
  void body(const std::string& text);
  // Facts the host reads back (each a constant expression, stored as long long).
  void tuning(const std::vector<std::string>& exprs);
  void kernel(const std::string& name_expression);

  TuSource finish() const;

 private:
  std::string iterator(const Iterator& it, bool output);
  std::string algorithm_;
  std::vector<std::string> includes_;
  std::string types_, ops_, iterators_, body_;
  std::set<std::string> defined_types_;
  bool fp16_ = false, bf16_ = false;
  int next_id_ = 0;
  TuSource out_;
};

}  // namespace cucore::compute::detail
