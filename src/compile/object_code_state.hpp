#pragma once
// The shared state behind ObjectCode (and every Kernel taken from it).
#include <cuda.h>

#include <cucore/object_code.hpp>

#include <cstddef>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "handles/handles.hpp"

namespace cucore::detail {

struct KernelInfo;  // a kernel's box: its library and cached facts (launch/kernel_info.hpp)

struct ObjectCodeState {
  // The compile-side facts: immutable once built. A path-backed object
  // (ObjectCode::from_path) reads `code` from `file` on first use.
  std::vector<std::byte> code;
  std::filesystem::path file;
  std::once_flag read_once;
  std::exception_ptr read_error;
  CodeType code_type = CodeType::cubin;
  std::string name;
  std::map<std::string, std::string> symbol_mapping;  // name expression -> lowered name
  std::string log;                                    // compiler warnings
  bool opaque = false;                                // bytes of no known kind (ObjectCode::opaque)

  // The load-side state: the library is loaded once, on first get_kernel, into
  // a box every kernel taken from it shares (so it stays loaded after this
  // state goes, as long as a Kernel does).
  std::once_flag load_once;
  LibraryHandle library;
  std::exception_ptr load_error;
  std::mutex kernels_mutex;
  std::unordered_map<std::string, std::shared_ptr<KernelInfo>> kernels;  // by lowered name

  // The code, read from `file` on the first call for a path-backed object
  // (a failure is kept and thrown again).
  const std::vector<std::byte>& bytes();

  ObjectCodeState() = default;
  ObjectCodeState(const ObjectCodeState&) = delete;
  ObjectCodeState& operator=(const ObjectCodeState&) = delete;
};

}  // namespace cucore::detail
