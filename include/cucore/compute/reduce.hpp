#pragma once
// Device-wide reduction (cuda.compute's reduce_into / make_reduce_into; CUB's
// DeviceReduce::Reduce): out[0] = init op in[0] op in[1] op ... op in[n-1].
//
//   cucore::compute::Reduce sum(Iterator::pointer<float>(nullptr), Iterator::pointer<float>(nullptr),
//                               OpKind::plus, Type::float32());
//   sum(Iterator::pointer(d_in), Iterator::pointer(d_out), n, 0.0f, stream);   // any n, any arrays
//   cucore::compute::reduce(stream, d_in, d_out, n, OpKind::plus, 0.0f);       // one-shot
#include <cstddef>
#include <cstdint>
#include <memory>

#include <cucore/compute/build.hpp>
#include <cucore/compute/iterator.hpp>
#include <cucore/compute/op.hpp>
#include <cucore/compute/types.hpp>
#include <cucore/stream.hpp>

namespace cucore::compute {

namespace detail {
struct ReduceImpl;
}

// What a reduction guarantees about floating-point results (cuda.compute's Determinism).
enum class Determinism {
  // No promise beyond the result being a reduction of the inputs (currently run_to_run's kernels).
  not_guaranteed,
  // CUB's: the same inputs on the same device give bitwise the same result.
  run_to_run,
  // The same result on any GPU of the same architecture: the number of partial
  // reductions is fixed instead of following the device's SM count.
  gpu_to_gpu,
};

struct ReduceOptions {
  Determinism determinism = Determinism::run_to_run;
  BuildOptions build{};
};

class Reduce {
 public:
  // Built for iterators of the kinds of `in` and `out`, operator `op` (called as
  // op(T, T) -> T) and initial values of `init_type` (T, the accumulator type).
  // Types that do not fit (out not writable, a struct init with other struct
  // inputs, ...) are std::invalid_argument; a user operator that does not compile
  // is CompileError with the compiler's log.
  Reduce(const Iterator& in, const Iterator& out, const Op& op, const Type& init_type, const ReduceOptions& options = {});

  // CUB's two-phase form: with temp == nullptr returns the temporary storage
  // bytes needed and does nothing else; otherwise runs on `stream` (temp_bytes
  // too small: std::invalid_argument before anything runs). `in` and `out` must
  // have the signatures built for (other arrays or start values are fine).
  std::size_t operator()(void* temp, std::size_t temp_bytes, const Iterator& in, const Iterator& out,
                         std::uint64_t num_items, const Value& init, StreamRef stream) const;
  // Temporary storage from `mr` (empty: the device's pool), on `stream`.
  void operator()(const Iterator& in, const Iterator& out, std::uint64_t num_items, const Value& init,
                  StreamRef stream, const MemoryResource& mr = {}) const;

 private:
  std::shared_ptr<const detail::ReduceImpl> impl_;
};

// One-shot: builds (or finds in the per-process cache) and runs.
void reduce(StreamRef stream, const Iterator& in, const Iterator& out, std::uint64_t num_items, const Op& op,
            const Value& init, const CallOptions& options = {}, Determinism determinism = Determinism::run_to_run);
template <typename T>
void reduce(StreamRef stream, const T* in, T* out, std::uint64_t num_items, const Op& op, T init,
            const CallOptions& options = {}) {
  reduce(stream, Iterator::pointer(in), Iterator::pointer(static_cast<const T*>(out)), num_items, op, Value(init),
         options);
}

}  // namespace cucore::compute
