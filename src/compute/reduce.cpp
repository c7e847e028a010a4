// Device-wide reduction: CUB's DeviceReduceKernel / DeviceReduceSingleTileKernel,
// dispatched as DispatchReduce does (CUB 3.0).
#include <cucore/compute/reduce.hpp>

#include <cstdint>
#include <algorithm>

#include "compute/common.hpp"
#include "compute/iterator_node.hpp"

namespace cucore::compute {

namespace detail {

namespace {
// The number of partial reductions under Determinism::gpu_to_gpu: enough blocks
// to fill any current GPU (CUB uses occupancy x SMs x 5), fixed so that the
// reduction order does not depend on the device.
constexpr int kFixedReduceBlocks = 4096;

enum ReduceTuning { kBlock, kItems, kSingleBlock, kSingleItems, kSubscription, kEvenShareSize, kCount };

}  // namespace

struct ReduceImpl {
  Iterator in, out;
  Op op;
  Type accum;
  Determinism determinism;
  Variants variants;

  ReduceImpl(const Iterator& in_, const Iterator& out_, const Op& op_, const Type& accum_, const ReduceOptions& o)
      : in(in_), out(out_), op(op_), accum(accum_), determinism(o.determinism),
        variants([this](const VariantKey& k) { return generate(k); }, o.build.cache) {
    if (accum.is_user() && !(in.value_type() == accum))
      throw InvalidArgumentError("Reduce: input elements are " + in.value_type().describe() +
                                  " but the initial value is " + accum.describe() + ": struct reductions need both alike");
    if (!out.is_writable()) throw InvalidArgumentError("Reduce: a " + out.signature() + " iterator cannot be written to");
    check_assignable("Reduce", accum, out);
    variants.get({resolve_arch(o.build), false, 0});  // built now; loaded at the first call
  }

  TuSource generate(const VariantKey& k) const {
    TuBuilder b("reduce");
    b.include("<cub/device/dispatch/kernels/reduce.cuh>");
    b.include("<cub/device/dispatch/tuning/tuning_reduce.cuh>");
    const std::string i = b.input_iterator(in), o = b.output_iterator(out), a = b.type(accum);
    const std::string f = b.op(op, {accum, accum}, accum);
    b.body("using cucore_in = " + i + ";\nusing cucore_out = " + o + ";\nusing cucore_accum = " + a +
           ";\nusing cucore_op = " + f + ";\nusing cucore_offset = " + unsigned_offset(k.wide) +
           ";\nusing cucore_policy = cub::detail::reduce::policy_hub<cucore_accum, cucore_offset, cucore_op>::MaxPolicy;\n"
           "using cucore_active = cucore_policy::ActivePolicy;\n");
    b.body(layout_check("cucore_in", in, "input") + layout_check("cucore_out", out, "output"));
    b.tuning({"cucore_active::ReducePolicy::BLOCK_THREADS", "cucore_active::ReducePolicy::ITEMS_PER_THREAD",
              "cucore_active::SingleTilePolicy::BLOCK_THREADS", "cucore_active::SingleTilePolicy::ITEMS_PER_THREAD",
              "cub::detail::subscription_factor", "sizeof(cub::GridEvenShare<cucore_offset>)"});
    b.kernel("cub::detail::reduce::DeviceReduceSingleTileKernel<cucore_policy, cucore_in, cucore_out, cucore_offset, "
             "cucore_op, cucore_accum, cucore_accum, ::cuda::std::__identity>");
    b.kernel("cub::detail::reduce::DeviceReduceKernel<cucore_policy, cucore_in, cucore_offset, cucore_op, "
             "cucore_accum, ::cuda::std::__identity>");
    b.kernel("cub::detail::reduce::DeviceReduceSingleTileKernel<cucore_policy, cucore_accum*, cucore_out, int, "
             "cucore_op, cucore_accum, cucore_accum, ::cuda::std::__identity>");
    return b.finish();
  }

  template <typename OffsetT>
  std::size_t passes(const Variant& v, const DeviceFacts& dev, void* temp, std::size_t temp_bytes,
                     const Iterator& in_, const Iterator& out_, std::uint64_t n, const Value& init,
                     StreamRef stream) const {
    if (v.tuning(kEvenShareSize) != static_cast<long long>(sizeof(GridEvenShare<OffsetT>)))
      throw LogicError("Reduce: cub::GridEvenShare's layout differs from cucore's mirror");
    const int block = v.itune(kBlock), tile = block * v.itune(kItems);
    int max_blocks = kFixedReduceBlocks;
    if (determinism != Determinism::gpu_to_gpu)
      max_blocks = v.occupancy(dev.ordinal, 1, block, 0) * dev.sm_count * v.itune(kSubscription);
    GridEvenShare<OffsetT> even_share;
    even_share.dispatch_init(static_cast<OffsetT>(n), max_blocks, tile);
    const std::size_t sizes[1] = {static_cast<std::size_t>(max_blocks) * accum.size()};
    void* parts[1];
    const std::size_t needed = alias_temporaries(temp, temp_bytes, sizes, parts, "Reduce");
    if (!temp) return needed;
    Args a;
    add_iterator(a, in_).add(parts[0]).add(static_cast<OffsetT>(n));
    a.bytes(std::as_bytes(std::span(&even_share, 1)), alignof(GridEvenShare<OffsetT>)).empty_struct().empty_struct();
    launch_kernel(stream, v.kernel(1), even_share.grid_size, block, 0, a);
    Args s;
    s.add(parts[0]);
    add_iterator(s, out_).add(even_share.grid_size).empty_struct().bytes(init.bytes(), accum.alignment()).empty_struct();
    launch_kernel(stream, v.kernel(2), 1, v.itune(kSingleBlock), 0, s);
    return temp_bytes;
  }

  std::size_t run(void* temp, std::size_t temp_bytes, const Iterator& in_, const Iterator& out_, std::uint64_t n,
                  const Value& init, StreamRef stream) const {
    check_iterator("Reduce", "in", in, in_);
    check_iterator("Reduce", "out", out, out_);
    check_value("Reduce", "init", accum, init);
    const DeviceFacts& dev = call_device(stream);
    const bool wide = needs_wide(n);
    const Variant& v = variants.get({dev.arch, wide, 0});
    if (n <= static_cast<std::uint64_t>(v.itune(kSingleBlock)) * v.itune(kSingleItems)) {
      if (!temp) return 1;
      Args a;
      add_iterator(a, in_);
      add_iterator(a, out_);
      add_offset(a, wide, n).empty_struct().bytes(init.bytes(), accum.alignment()).empty_struct();
      launch_kernel(stream, v.kernel(0), 1, v.itune(kSingleBlock), 0, a);
      return temp_bytes;
    }
    return wide ? passes<unsigned long long>(v, dev, temp, temp_bytes, in_, out_, n, init, stream)
                : passes<unsigned int>(v, dev, temp, temp_bytes, in_, out_, n, init, stream);
  }
};

}  // namespace detail

Reduce::Reduce(const Iterator& in, const Iterator& out, const Op& op, const Type& init_type, const ReduceOptions& options)
    : impl_(std::make_shared<detail::ReduceImpl>(in, out, op, init_type, options)) {}

std::size_t Reduce::operator()(void* temp, std::size_t temp_bytes, const Iterator& in, const Iterator& out,
                               std::uint64_t num_items, const Value& init, StreamRef stream) const {
  return impl_->run(temp, temp_bytes, in, out, num_items, init, stream);
}

void Reduce::operator()(const Iterator& in, const Iterator& out, std::uint64_t num_items, const Value& init,
                        StreamRef stream, const MemoryResource& mr) const {
  detail::with_temp_storage(stream, mr, [&](void* temp, std::size_t bytes) {
    return impl_->run(temp, bytes, in, out, num_items, init, stream);
  });
}

void reduce(StreamRef stream, const Iterator& in, const Iterator& out, std::uint64_t num_items, const Op& op,
            const Value& init, const CallOptions& options, Determinism determinism) {
  const std::string key = "reduce|" + in.signature() + "|" + out.signature() + "|" + op_key(op) + "|" +
                          type_signature(init.type()) + "|" + std::to_string(static_cast<int>(determinism)) + "|" +
                          options.build.arch + "|" + std::to_string(reinterpret_cast<std::uintptr_t>(options.build.cache));
  auto obj = std::static_pointer_cast<const Reduce>(detail::cached_build(key, [&] {
    return std::make_shared<const Reduce>(in, out, op, init.type(), ReduceOptions{determinism, options.build});
  }));
  (*obj)(in, out, num_items, init, stream, options.memory_resource);
}

}  // namespace cucore::compute
