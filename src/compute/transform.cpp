// Element-wise transforms: CUB's transform_kernel, dispatched as
// DeviceTransform's dispatch_t does (CUB 3.0): the bulk-copy (TMA) algorithm on
// sm_90 and later for contiguous inputs, else the prefetch algorithm.
#include <cucore/compute/transform.hpp>

#include <cstdint>
#include <algorithm>
#include <cstring>

#include "compute/common.hpp"
#include "compute/iterator_node.hpp"

namespace cucore::compute {

namespace detail {

namespace {
enum TransformTuning {
  kAlgorithm,  // 0: prefetch, 1: ublkcp
  kBlock,
  kMinItems,
  kMaxItems,
  kItemsNoInput,  // prefetch only (else 0)
  kMinBytesInFlight,
  kLoadedBytesPerIteration,
  kBulkCopyAlignment,
  kArgSize0,  // sizeof(kernel_arg<In_i>), then their alignments
};
constexpr int kUblkcp = 1;
}  // namespace

struct TransformImpl {
  const char* name;
  std::vector<Iterator> ins;
  Iterator out;
  Op op;
  Variants variants;

  TransformImpl(const char* name_, std::vector<Iterator> ins_, const Iterator& out_, const Op& op_,
                const BuildOptions& o)
      : name(name_), ins(std::move(ins_)), out(out_), op(op_),
        variants([this](const VariantKey& k) { return generate(k); }, o.cache) {
    if (!out.is_writable()) throw InvalidArgumentError(std::string(name) + ": a " + out.signature() + " iterator cannot be written to");
    variants.get({resolve_arch(o), false, 0});
  }

  TuSource generate(const VariantKey& k) const {
    TuBuilder b(ins.size() == 1 ? "unary_transform" : "binary_transform");
    b.include("<cub/device/dispatch/kernels/transform.cuh>");
    b.include("<cub/device/dispatch/tuning/tuning_transform.cuh>");
    std::vector<Type> arg_types;
    std::string in_list, body;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      const std::string t = b.input_iterator(ins[i]), alias = "cucore_in" + std::to_string(i);
      body += "using " + alias + " = " + t + ";\n" + layout_check(alias, ins[i], "input");
      in_list += ", " + alias;
      arg_types.push_back(ins[i].value_type());
    }
    const std::string o = b.output_iterator(out);
    const std::string f = b.op(op, arg_types, out.kind() == IteratorKind::discard ? arg_types[0] : out.value_type());
    b.body(body + "using cucore_out = " + o + ";\n" + layout_check("cucore_out", out, "output") +
           "using cucore_op = " + f + ";\nusing cucore_offset = " + (k.wide ? "long long" : "int") +
           ";\nusing cucore_policy = cub::detail::transform::policy_hub<false, ::cuda::std::tuple<" +
           in_list.substr(2) + ">>::max_policy;\nusing cucore_active = cucore_policy::ActivePolicy;\n"
           "template <typename P, typename = void> struct cucore_no_input_items { static constexpr int value = 0; };\n"
           "template <typename P> struct cucore_no_input_items<P, ::cuda::std::void_t<decltype(P::items_per_thread_no_input)>> "
           "{ static constexpr int value = P::items_per_thread_no_input; };\n");
    std::vector<std::string> tuning = {
        "static_cast<int>(cucore_active::algorithm)", "cucore_active::algo_policy::block_threads",
        "cucore_active::algo_policy::min_items_per_thread", "cucore_active::algo_policy::max_items_per_thread",
        "cucore_no_input_items<cucore_active::algo_policy>::value", "cucore_active::min_bif",
        "cub::detail::transform::loaded_bytes_per_iteration<" + in_list.substr(2) + ">()",
        "cub::detail::transform::bulk_copy_alignment"};
    for (std::size_t i = 0; i < ins.size(); ++i)
      tuning.push_back("sizeof(cub::detail::transform::kernel_arg<cucore_in" + std::to_string(i) + ">)");
    for (std::size_t i = 0; i < ins.size(); ++i)
      tuning.push_back("alignof(cub::detail::transform::kernel_arg<cucore_in" + std::to_string(i) + ">)");
    b.tuning(tuning);
    b.kernel("cub::detail::transform::transform_kernel<cucore_policy, cucore_offset, cucore_op, cucore_out" + in_list +
             ">");
    return b.finish();
  }

  void run(const std::vector<const Iterator*>& ins_, const Iterator& out_, std::uint64_t n, StreamRef stream) const {
    for (std::size_t i = 0; i < ins.size(); ++i) check_iterator(name, ins.size() == 1 ? "in" : (i ? "in2" : "in1"), ins[i], *ins_[i]);
    check_iterator(name, "out", out, out_);
    if (n == 0) return;
    const DeviceFacts& dev = call_device(stream);
    const bool wide = n > static_cast<std::uint64_t>(std::numeric_limits<int>::max());
    const Variant& v = variants.get({dev.arch, wide, 0});
    const int block = v.itune(kBlock);
    const long long loaded = v.tuning(kLoadedBytesPerIteration);
    const std::size_t nin = ins.size();
    int items = 0, tile = 0;
    std::size_t smem = 0;
    if (v.itune(kAlgorithm) == kUblkcp) {
      // configure_ublkcp_kernel: the fewest items per thread that put min_bif
      // bytes in flight per SM within the shared memory a block may use.
      const int align = v.itune(kBulkCopyAlignment);
      auto smem_for = [&](int tile_size) {
        return static_cast<std::size_t>(((8 + align - 1) / align) * align + tile_size * loaded +
                                        static_cast<long long>(nin) * align);
      };
      int last_items = 0, last_tile = 0;
      std::size_t last_smem = 0;
      for (int e = v.itune(kMinItems); e < v.itune(kMaxItems); ++e) {
        const int t = block * e;
        const std::size_t s = smem_for(t);
        if (s > static_cast<std::size_t>(dev.max_shared_memory_per_block)) break;
        last_items = e, last_tile = t, last_smem = s;
        if (static_cast<std::uint64_t>(t) >= n) break;
        const int occ = v.occupancy(dev.ordinal, 0, block, s);
        if (v.tuning(kMinBytesInFlight) <= static_cast<long long>(occ) * t * loaded) break;
      }
      if (last_items == 0)
        throw LogicError(std::string(name) + ": no tile fits the device's shared memory per block");
      items = last_items, tile = last_tile, smem = last_smem;
    } else {
      // invoke_prefetch_algorithm
      const int occ = v.occupancy(dev.ordinal, 0, block, 0);
      const long long ipt = loaded == 0 ? v.tuning(kItemsNoInput)
                                        : ceil_div(static_cast<std::uint64_t>(v.tuning(kMinBytesInFlight)),
                                                   static_cast<std::uint64_t>(occ) * block * loaded);
      const long long spread =
          std::min<long long>(ipt, static_cast<long long>(n / (static_cast<std::uint64_t>(dev.sm_count) * block * occ)));
      items = static_cast<int>(std::clamp<long long>(spread, v.tuning(kMinItems), v.tuning(kMaxItems)));
      tile = block * items;
    }
    Args a;
    if (wide)
      a.add(static_cast<long long>(n));
    else
      a.add(static_cast<int>(n));
    a.add(items).empty_struct();
    add_iterator(a, out_);
    for (std::size_t i = 0; i < nin; ++i) {
      // kernel_arg<It>: a union of the iterator and an aligned_base_ptr (the pointer
      // rounded down to the bulk-copy alignment and the bytes skipped).
      std::vector<std::byte> arg(static_cast<std::size_t>(v.tuning(kArgSize0 + i)));
      if (v.itune(kAlgorithm) == kUblkcp) {
        const CUdeviceptr p = ins_[i]->pointer_value();
        const CUdeviceptr base = p & ~static_cast<CUdeviceptr>(v.tuning(kBulkCopyAlignment) - 1);
        const int head = static_cast<int>(p - base);
        std::memcpy(arg.data(), &base, sizeof base);
        std::memcpy(arg.data() + sizeof base, &head, sizeof head);
      } else {
        std::memcpy(arg.data(), ins_[i]->state().data(), ins_[i]->state().size());
      }
      a.bytes(arg, static_cast<std::size_t>(v.tuning(kArgSize0 + nin + i)));
    }
    launch_kernel(stream, v.kernel(0), static_cast<unsigned>(ceil_div(n, static_cast<std::uint64_t>(tile))), block,
                  smem, a);
  }
};

}  // namespace detail

UnaryTransform::UnaryTransform(const Iterator& in, const Iterator& out, const Op& op, const BuildOptions& options)
    : impl_(std::make_shared<detail::TransformImpl>("UnaryTransform", std::vector<Iterator>{in}, out, op, options)) {}

void UnaryTransform::operator()(const Iterator& in, const Iterator& out, std::uint64_t num_items, StreamRef stream) const {
  impl_->run({&in}, out, num_items, stream);
}

BinaryTransform::BinaryTransform(const Iterator& in1, const Iterator& in2, const Iterator& out, const Op& op,
                                 const BuildOptions& options)
    : impl_(std::make_shared<detail::TransformImpl>("BinaryTransform", std::vector<Iterator>{in1, in2}, out, op,
                                                    options)) {}

void BinaryTransform::operator()(const Iterator& in1, const Iterator& in2, const Iterator& out,
                                 std::uint64_t num_items, StreamRef stream) const {
  impl_->run({&in1, &in2}, out, num_items, stream);
}

namespace {
std::string transform_key(const char* kind, std::initializer_list<const Iterator*> its, const Op& op,
                          const BuildOptions& options) {
  std::string k = kind;
  for (const Iterator* it : its) k += "|" + it->signature();
  return k + "|" + op_key(op) + "|" + options.arch + "|" + std::to_string(reinterpret_cast<std::uintptr_t>(options.cache));
}
}  // namespace

void unary_transform(StreamRef stream, const Iterator& in, const Iterator& out, std::uint64_t num_items, const Op& op,
                     const BuildOptions& options) {
  auto obj = std::static_pointer_cast<const UnaryTransform>(detail::cached_build(
      transform_key("unary_transform", {&in, &out}, op, options),
      [&] { return std::make_shared<const UnaryTransform>(in, out, op, options); }));
  (*obj)(in, out, num_items, stream);
}

void binary_transform(StreamRef stream, const Iterator& in1, const Iterator& in2, const Iterator& out,
                      std::uint64_t num_items, const Op& op, const BuildOptions& options) {
  auto obj = std::static_pointer_cast<const BinaryTransform>(detail::cached_build(
      transform_key("binary_transform", {&in1, &in2, &out}, op, options),
      [&] { return std::make_shared<const BinaryTransform>(in1, in2, out, op, options); }));
  (*obj)(in1, in2, out, num_items, stream);
}

}  // namespace cucore::compute
