#pragma once
// The shared state behind ObjectCode (and every Kernel taken from it).
#include <cuda.h>

#include <cucore/object_code.hpp>

#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace cucore::detail {

struct KernelInfo;  // per-kernel cached facts (parameter layout), defined in kernel code

struct ObjectCodeState {
  // The compile-side facts: immutable once built.
  std::vector<std::byte> code;
  CodeType code_type = CodeType::cubin;
  std::string name;
  std::map<std::string, std::string> symbol_mapping;  // name expression -> lowered name
  std::string log;                                    // compiler warnings

  // The load-side state: the library is loaded once, on first get_kernel.
  std::once_flag load_once;
  CUlibrary library = nullptr;
  std::exception_ptr load_error;
  std::mutex kernels_mutex;
  std::unordered_map<std::string, std::shared_ptr<KernelInfo>> kernels;  // by lowered name

  ObjectCodeState() = default;
  ObjectCodeState(const ObjectCodeState&) = delete;
  ObjectCodeState& operator=(const ObjectCodeState&) = delete;
  ~ObjectCodeState();  // unloads the library; never throws
};

}  // namespace cucore::detail
