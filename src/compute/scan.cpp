// Device-wide scans: CUB's DeviceScanInitKernel / DeviceScanKernel (decoupled
// look-back), dispatched as DispatchScan does (CUB 3.0).
#include <cucore/compute/scan.hpp>

#include <cstdint>
#include <algorithm>

#include "compute/common.hpp"
#include "compute/iterator_node.hpp"

namespace cucore::compute {

namespace detail {

namespace {
enum ScanTuning { kBlock, kItems, kSingleWord, kDescriptionBytes, kPayloadBytes, kTileStateSize, kCount };
constexpr int kInitKernelThreads = 128;  // DispatchScan::INIT_KERNEL_THREADS
constexpr int kTilePadding = 32;         // ScanTileState's TILE_STATUS_PADDING (warp threads)
}  // namespace

struct ScanImpl {
  const char* name;
  Iterator in, out;
  Op op;
  Type accum;
  bool has_init, exclusive;
  Variants variants;

  ScanImpl(const char* name_, const Iterator& in_, const Iterator& out_, const Op& op_, std::optional<Type> init,
           bool exclusive_, const BuildOptions& o)
      : name(name_), in(in_), out(out_), op(op_), accum(init ? *init : in_.value_type()), has_init(init.has_value()),
        exclusive(exclusive_), variants([this](const VariantKey& k) { return generate(k); }, o.cache) {
    if (!out.is_writable()) throw InvalidArgumentError(std::string(name) + ": a " + out.signature() + " iterator cannot be written to");
    if (accum.is_user() && !(in.value_type() == accum))
      throw InvalidArgumentError(std::string(name) + ": input elements are " + in.value_type().describe() +
                                  " but the accumulator is " + accum.describe() + ": struct scans need both alike");
    check_assignable(name, accum, out);
    variants.get({resolve_arch(o), false, 0});
  }

  TuSource generate(const VariantKey& k) const {
    TuBuilder b(exclusive ? "exclusive_scan" : "inclusive_scan");
    b.include("<cub/device/dispatch/kernels/scan.cuh>");
    b.include("<cub/device/dispatch/tuning/tuning_scan.cuh>");
    const std::string i = b.input_iterator(in), o = b.output_iterator(out), a = b.type(accum);
    const std::string f = b.op(op, {accum, accum}, accum);
    b.type(in.value_type());
    b.type(out.value_type());
    // The initial value: CUB's NullType for none, else a wrapper laid out as the value.
    const std::string init_t = has_init ? "cucore_init" : "cub::NullType";
    b.body("using cucore_in = " + i + ";\nusing cucore_out = " + o + ";\nusing cucore_accum = " + a +
           ";\nusing cucore_op = " + f + ";\nusing cucore_offset = " + unsigned_offset(k.wide) +
           ";\nstruct cucore_init {\n  using value_type = cucore_accum;\n  cucore_accum value;\n"
           "  __host__ __device__ operator cucore_accum() const { return value; }\n};\n"
           "using cucore_policy = cub::detail::scan::policy_hub<cub::detail::it_value_t<cucore_in>, "
           "cub::detail::it_value_t<cucore_out>, cucore_accum, cucore_offset, cucore_op>::MaxPolicy;\n"
           "using cucore_active = cucore_policy::ActivePolicy;\n"
           "using cucore_tile_state = cub::ScanTileState<cucore_accum>;\n");
    b.body(layout_check("cucore_in", in, "input") + layout_check("cucore_out", out, "output"));
    b.tuning({"cucore_active::ScanPolicyT::BLOCK_THREADS", "cucore_active::ScanPolicyT::ITEMS_PER_THREAD",
              "cub::detail::is_primitive<cucore_accum>::value", "cucore_tile_state::description_bytes_per_tile",
              "cucore_tile_state::payload_bytes_per_tile", "sizeof(cucore_tile_state)"});
    b.kernel("cub::detail::scan::DeviceScanInitKernel<cucore_tile_state>");
    b.kernel("cub::detail::scan::DeviceScanKernel<cucore_policy, cucore_in, cucore_out, cucore_tile_state, cucore_op, " +
             init_t + ", cucore_offset, cucore_accum, " + (has_init && !exclusive ? "true" : "false") + ">");
    return b.finish();
  }

  std::size_t run(void* temp, std::size_t temp_bytes, const Iterator& in_, const Iterator& out_, std::uint64_t n,
                  const Value* init, StreamRef stream) const {
    check_iterator(name, "in", in, in_);
    check_iterator(name, "out", out, out_);
    if (has_init != (init != nullptr))
      throw InvalidArgumentError(std::string(name) + (has_init ? ": the object was built with an initial value; pass one"
                                                                : ": the object was built without an initial value"));
    if (init) check_value(name, "init", accum, *init);
    const DeviceFacts& dev = call_device(stream);
    const bool wide = needs_wide(n);
    const Variant& v = variants.get({dev.arch, wide, 0});
    const int block = v.itune(kBlock), tile = block * v.itune(kItems);
    const auto num_tiles = static_cast<int>(ceil_div(n, static_cast<std::uint64_t>(tile)));
    // ScanTileState::AllocationSize: descriptors, partials and inclusives for
    // the tiles plus a warp of padding, aliased as three blocks.
    const std::size_t states = static_cast<std::size_t>(kTilePadding) + num_tiles;
    const std::size_t tile_sizes[3] = {states * v.tuning(kDescriptionBytes), states * v.tuning(kPayloadBytes),
                                       states * v.tuning(kPayloadBytes)};
    void* tile_parts[3];
    const std::size_t sizes[1] = {alias_temporaries(nullptr, 0, tile_sizes, tile_parts, name)};
    void* parts[1];
    const std::size_t needed = alias_temporaries(temp, temp_bytes, sizes, parts, name);
    if (!temp || n == 0) return temp ? temp_bytes : needed;
    // The tile state: one pointer (single-word states) or three.
    std::vector<void*> state;
    if (v.tuning(kSingleWord)) {
      state.push_back(parts[0]);
    } else {
      alias_temporaries(parts[0], sizes[0], tile_sizes, tile_parts, name);
      state.assign(tile_parts, tile_parts + 3);
    }
    if (static_cast<long long>(state.size() * sizeof(void*)) != v.tuning(kTileStateSize))
      throw LogicError(std::string(name) + ": cub::ScanTileState's layout differs from cucore's mirror");
    const auto state_bytes = std::as_bytes(std::span(state));
    Args ia;
    ia.bytes(state_bytes, alignof(void*)).add(num_tiles);
    launch_kernel(stream, v.kernel(0), static_cast<int>(ceil_div(num_tiles, kInitKernelThreads)), kInitKernelThreads,
                  0, ia);
    const int grid = std::min(num_tiles, dev.max_grid_dim_x);
    for (int start_tile = 0; start_tile < num_tiles; start_tile += grid) {
      Args a;
      add_iterator(a, in_);
      add_iterator(a, out_);
      a.bytes(state_bytes, alignof(void*)).add(start_tile).empty_struct();
      if (init)
        a.bytes(init->bytes(), accum.alignment());
      else
        a.empty_struct();  // cub::NullType
      add_offset(a, wide, n);
      launch_kernel(stream, v.kernel(1), grid, block, 0, a);
    }
    return temp_bytes;
  }
};

}  // namespace detail

InclusiveScan::InclusiveScan(const Iterator& in, const Iterator& out, const Op& op, std::optional<Type> init_type,
                             const BuildOptions& options)
    : impl_(std::make_shared<detail::ScanImpl>("InclusiveScan", in, out, op, std::move(init_type), false, options)) {}

std::size_t InclusiveScan::operator()(void* temp, std::size_t temp_bytes, const Iterator& in, const Iterator& out,
                                      std::uint64_t num_items, const std::optional<Value>& init, StreamRef stream) const {
  return impl_->run(temp, temp_bytes, in, out, num_items, init ? &*init : nullptr, stream);
}

void InclusiveScan::operator()(const Iterator& in, const Iterator& out, std::uint64_t num_items,
                               const std::optional<Value>& init, StreamRef stream, const MemoryResource& mr) const {
  detail::with_temp_storage(stream, mr, [&](void* temp, std::size_t bytes) {
    return impl_->run(temp, bytes, in, out, num_items, init ? &*init : nullptr, stream);
  });
}

ExclusiveScan::ExclusiveScan(const Iterator& in, const Iterator& out, const Op& op, const Type& init_type,
                             const BuildOptions& options)
    : impl_(std::make_shared<detail::ScanImpl>("ExclusiveScan", in, out, op, init_type, true, options)) {}

std::size_t ExclusiveScan::operator()(void* temp, std::size_t temp_bytes, const Iterator& in, const Iterator& out,
                                      std::uint64_t num_items, const Value& init, StreamRef stream) const {
  return impl_->run(temp, temp_bytes, in, out, num_items, &init, stream);
}

void ExclusiveScan::operator()(const Iterator& in, const Iterator& out, std::uint64_t num_items, const Value& init,
                               StreamRef stream, const MemoryResource& mr) const {
  detail::with_temp_storage(stream, mr, [&](void* temp, std::size_t bytes) {
    return impl_->run(temp, bytes, in, out, num_items, &init, stream);
  });
}

namespace {
std::string scan_key(const char* kind, const Iterator& in, const Iterator& out, const Op& op, const Type* init,
                     const CallOptions& options) {
  return std::string(kind) + "|" + in.signature() + "|" + out.signature() + "|" + op_key(op) + "|" +
         (init ? type_signature(*init) : std::string("-")) + "|" + options.build.arch + "|" +
         std::to_string(reinterpret_cast<std::uintptr_t>(options.build.cache));
}
}  // namespace

void inclusive_scan(StreamRef stream, const Iterator& in, const Iterator& out, std::uint64_t num_items, const Op& op,
                    const std::optional<Value>& init, const CallOptions& options) {
  std::optional<Type> init_type;
  if (init) init_type = init->type();
  auto obj = std::static_pointer_cast<const InclusiveScan>(detail::cached_build(
      scan_key("inclusive_scan", in, out, op, init ? &*init_type : nullptr, options),
      [&] { return std::make_shared<const InclusiveScan>(in, out, op, init_type, options.build); }));
  (*obj)(in, out, num_items, init, stream, options.memory_resource);
}

void exclusive_scan(StreamRef stream, const Iterator& in, const Iterator& out, std::uint64_t num_items, const Op& op,
                    const Value& init, const CallOptions& options) {
  auto obj = std::static_pointer_cast<const ExclusiveScan>(
      detail::cached_build(scan_key("exclusive_scan", in, out, op, &init.type(), options),
                           [&] { return std::make_shared<const ExclusiveScan>(in, out, op, init.type(), options.build); }));
  (*obj)(in, out, num_items, init, stream, options.memory_resource);
}

}  // namespace cucore::compute
