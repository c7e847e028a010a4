#pragma once
// libNVVM's C API, declared here: nvvm.h lies in different places in
// different toolkit layouts (nvvm/include, include) and wheels, and cucore
// binds libNVVM at run time anyway. The declarations follow nvvm.h (CUDA 12
// and 13 agree on every one used).
#include <cstddef>

namespace cucore::detail::nvvm {

enum Result : int {
  SUCCESS = 0,
  ERROR_OUT_OF_MEMORY = 1,
  ERROR_PROGRAM_CREATION_FAILURE = 2,
  ERROR_IR_VERSION_MISMATCH = 3,
  ERROR_INVALID_INPUT = 4,
  ERROR_INVALID_PROGRAM = 5,
  ERROR_INVALID_IR = 6,
  ERROR_INVALID_OPTION = 7,
  ERROR_NO_MODULE_IN_PROGRAM = 8,
  ERROR_COMPILATION = 9,
  ERROR_CANCELLED = 10,
};

struct ProgramImpl;
using Program = ProgramImpl*;

// X(name, return type, parameters); the types spelled in full, as the list
// is expanded outside this namespace.
#define CUCORE_NVVM_R ::cucore::detail::nvvm::Result
#define CUCORE_NVVM_P ::cucore::detail::nvvm::Program
#define CUCORE_NVVM_FUNCTIONS(X)                                                                   \
  X(nvvmGetErrorString, const char*, (CUCORE_NVVM_R))                                             \
  X(nvvmVersion, CUCORE_NVVM_R, (int*, int*))                                                     \
  X(nvvmIRVersion, CUCORE_NVVM_R, (int*, int*, int*, int*))                                       \
  X(nvvmCreateProgram, CUCORE_NVVM_R, (CUCORE_NVVM_P*))                                           \
  X(nvvmDestroyProgram, CUCORE_NVVM_R, (CUCORE_NVVM_P*))                                          \
  X(nvvmAddModuleToProgram, CUCORE_NVVM_R, (CUCORE_NVVM_P, const char*, std::size_t, const char*)) \
  X(nvvmLazyAddModuleToProgram, CUCORE_NVVM_R, (CUCORE_NVVM_P, const char*, std::size_t, const char*)) \
  X(nvvmCompileProgram, CUCORE_NVVM_R, (CUCORE_NVVM_P, int, const char**))                       \
  X(nvvmVerifyProgram, CUCORE_NVVM_R, (CUCORE_NVVM_P, int, const char**))                        \
  X(nvvmGetCompiledResultSize, CUCORE_NVVM_R, (CUCORE_NVVM_P, std::size_t*))                     \
  X(nvvmGetCompiledResult, CUCORE_NVVM_R, (CUCORE_NVVM_P, char*))                                \
  X(nvvmGetProgramLogSize, CUCORE_NVVM_R, (CUCORE_NVVM_P, std::size_t*))                         \
  X(nvvmGetProgramLog, CUCORE_NVVM_R, (CUCORE_NVVM_P, char*))

}  // namespace cucore::detail::nvvm
