#pragma once
// The rule for a driver call on an object that belongs to a context, made on a
// thread where another context, or none, may be current (a finalizer, a
// worker, a multiprocessing feeder thread, cucore's graph release thread): the
// call is made as it is, and only where the driver refuses it for want of a
// context (CUDA_ERROR_INVALID_CONTEXT) is the object's context made current
// (ScopedContext: put back after, so the thread is left as it was) and the
// call made again. The usual path costs no driver call more.
#include <cuda.h>

#include <cucore/context.hpp>
#include <cucore/errors.hpp>

#include <optional>
#include <type_traits>

namespace cucore::detail {

// Where a refused call was made again: that context stays current for the
// rest of the operation (its later calls run in it directly); empty until a
// refusal.
using RetryScope = std::optional<ScopedContext>;

// Makes `context()` current in `scope` for a refused call; false where there
// is nothing more to try (refused in it already, or no context to offer).
template <typename GetContext>
bool enter_context_for_retry(RetryScope& scope, GetContext& context) {
  if (scope) return false;
  CUcontext ctx = context();
  if (!ctx) return false;
  scope.emplace(ctx);
  return true;
}

// `call` returns a CUresult, or returns nothing and throws CudaError (and
// changes nothing when it fails); `context()` gives the object's context,
// asked only after a refusal (null: the refusal stands).
template <typename GetContext, typename Call>
auto call_in_context(RetryScope& scope, GetContext&& context, Call&& call) {
  if constexpr (std::is_void_v<std::invoke_result_t<Call&>>) {
    try {
      call();
      return;
    } catch (const CudaError& e) {
      if (e.code() != CUDA_ERROR_INVALID_CONTEXT || !enter_context_for_retry(scope, context)) throw;
    }
    call();
  } else {
    CUresult r = call();
    if (r != CUDA_ERROR_INVALID_CONTEXT) [[likely]]
      return r;
    if (!enter_context_for_retry(scope, context)) return r;
    return call();
  }
}

}  // namespace cucore::detail
