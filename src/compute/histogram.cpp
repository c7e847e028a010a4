// Histograms with even bins: CUB's DeviceHistogramInitKernel /
// DeviceHistogramSweepKernel, dispatched as DispatchHistogram::DispatchEven does
// (CUB 3.0), with its bin-scaling transform computed on the host.
#include <cucore/compute/histogram.hpp>

#include <cstdint>
#include <algorithm>
#include <climits>
#include <cstring>

#include "compute/common.hpp"
#include "compute/histogram_scale.hpp"
#include "compute/iterator_node.hpp"

namespace cucore::compute {

namespace detail {

namespace {
enum HistogramTuning { kBlock, kPixels, kScaleSize, kPassThruSize, kQueueSize, kCount };
constexpr int kMaxPrivatizedBins = 256;  // DispatchHistogram::MAX_PRIVATIZED_SMEM_BINS
constexpr int kInitTriggerMaxBins = 2048;  // CUB 3.6's init_kernel_pdl_trigger_max_bins

// The C++ common type of two built-in arithmetic types (usual arithmetic conversions).
Type common_type(const Type& a, const Type& b) {
  if (a.is_floating() || b.is_floating()) {
    if (a.kind() == TypeKind::float64 || b.kind() == TypeKind::float64) return Type::float64();
    return Type::float32();
  }
  auto promote = [](const Type& t) { return t.size() < 4 ? Type::int32() : t; };
  const Type x = promote(a), y = promote(b);
  if (x == y) return x;
  if (x.is_signed_integral() == y.is_signed_integral()) return x.size() >= y.size() ? x : y;
  const Type& s = x.is_signed_integral() ? x : y;
  const Type& u = x.is_signed_integral() ? y : x;
  if (u.size() >= s.size()) return u;
  return s;  // a wider signed type holds every value of the unsigned one
}

template <typename T>
T load(const Value& v, const Type& as) {
  // Converts the value's bytes (of its own built-in type) to T.
  const auto* p = v.bytes().data();
  auto get = [&](auto x) {
    std::memcpy(&x, p, sizeof x);
    return static_cast<T>(x);
  };
  (void)as;
  switch (v.type().kind()) {
    case TypeKind::int8: return get(std::int8_t{});
    case TypeKind::int16: return get(std::int16_t{});
    case TypeKind::int32: return get(std::int32_t{});
    case TypeKind::int64: return get(std::int64_t{});
    case TypeKind::uint8: return get(std::uint8_t{});
    case TypeKind::uint16: return get(std::uint16_t{});
    case TypeKind::uint32: return get(std::uint32_t{});
    case TypeKind::uint64: return get(std::uint64_t{});
    case TypeKind::float32: return get(float{});
    case TypeKind::float64: return get(double{});
    default: throw InvalidArgumentError("HistogramEven: levels must be integers, float32 or float64");
  }
}

template <typename T>
std::vector<std::byte> scale_transform(int num_levels, const Value& upper, const Value& lower, std::size_t sample_size) {
  HistogramScale<T> st{};
  st.max = load<T>(upper, upper.type());
  st.min = load<T>(lower, lower.type());
  if constexpr (std::is_floating_point_v<T>) {
    st.scale0 = static_cast<T>(static_cast<T>(num_levels - 1) / static_cast<T>(st.max - st.min));
  } else {
    // MayOverflow: (max - min) * bins must fit the integer arithmetic type.
    const bool narrow = sample_size + sizeof(T) <= 4;
    const std::uint64_t limit = narrow ? 0xffffffffULL : ~0ULL;
    const std::uint64_t diff = static_cast<std::uint64_t>(st.max) - static_cast<std::uint64_t>(st.min);
    const std::uint64_t range = narrow ? static_cast<std::uint32_t>(diff) : diff;
    const std::uint64_t bins = static_cast<std::uint64_t>(num_levels - 1);
    if (range > limit / bins)
      throw InvalidArgumentError("HistogramEven: (upper - lower) x " + std::to_string(num_levels - 1) +
                                  " bins overflows the " + (narrow ? "32" : "64") + "-bit arithmetic of the bin index");
    st.scale0 = static_cast<T>(num_levels - 1);
    st.scale1 = static_cast<T>(st.max - st.min);
    // The multiply-high form is exact when every (sample - min) * bins, sample
    // in [min, max), fits 32 bits. (range 1: the numerator is 0, any magic does.)
    if (st.max > st.min && (range - 1) <= 0xffffffffULL / bins) {
      st.fast = 1;
      st.bins = static_cast<std::uint32_t>(bins);
      st.magic = range < 2 ? 0 : ~0ULL / range + 1;  // ceil(2^64 / range)
    }
  }
  std::vector<std::byte> out(sizeof st);
  std::memcpy(out.data(), &st, sizeof st);
  return out;
}

bool supported_sample(const Type& t) {
  return (t.is_integral() && t.kind() != TypeKind::boolean) || t.kind() == TypeKind::float32 ||
         t.kind() == TypeKind::float64;
}

}  // namespace

std::vector<std::byte> histogram_scale(const Type& common, int num_levels, const Value& upper, const Value& lower,
                                       std::size_t sample_size) {
  switch (common.kind()) {
    case TypeKind::int32: return scale_transform<std::int32_t>(num_levels, upper, lower, sample_size);
    case TypeKind::int64: return scale_transform<std::int64_t>(num_levels, upper, lower, sample_size);
    case TypeKind::uint32: return scale_transform<std::uint32_t>(num_levels, upper, lower, sample_size);
    case TypeKind::uint64: return scale_transform<std::uint64_t>(num_levels, upper, lower, sample_size);
    case TypeKind::float32: return scale_transform<float>(num_levels, upper, lower, sample_size);
    case TypeKind::float64: return scale_transform<double>(num_levels, upper, lower, sample_size);
    default: throw InvalidArgumentError("HistogramEven: unsupported sample/level types");
  }
}

struct HistogramImpl {
  Iterator samples;
  Type counter, level, common;
  Variants variants;

  HistogramImpl(const Iterator& samples_, const Type& counter_, const Type& level_, int num_levels,
                const BuildOptions& o)
      : samples(samples_), counter(counter_), level(level_), common(Type::int32()),
        variants([this](const VariantKey& k) { return generate(k); }, o.cache) {
    if (!supported_sample(samples.value_type()))
      throw InvalidArgumentError("HistogramEven: samples must be integers, float32 or float64, not " +
                                  samples.value_type().describe());
    if (!supported_sample(level))
      throw InvalidArgumentError("HistogramEven: levels must be integers, float32 or float64, not " + level.describe());
    if (!counter.is_integral() || counter.kind() == TypeKind::boolean || counter.size() < 4)
      throw InvalidArgumentError("HistogramEven: counters must be 32- or 64-bit integers, not " + counter.describe());
    check_levels(num_levels);
    common = common_type(level, samples.value_type());
    variants.get({resolve_arch(o), false, flavor(num_levels)});
  }

  static void check_levels(int num_levels) {
    if (num_levels < 2)
      throw InvalidArgumentError("HistogramEven: num_levels is " + std::to_string(num_levels) +
                                  ": at least 2 levels make one bin");
  }
  bool byte_samples() const { return samples.value_type().size() == 1; }
  // The privatized shared-memory bins the sweep kernel is built with.
  int flavor(int num_levels) const {
    return byte_samples() || num_levels - 1 <= kMaxPrivatizedBins ? kMaxPrivatizedBins : 0;
  }

  TuSource generate(const VariantKey& k) const {
    TuBuilder b("histogram_even");
    // CUB 3.0 defines the histogram kernels and bin transforms in
    // dispatch_histogram.cuh, which NVRTC cannot compile (host headers). The
    // kernels below are those kernels' bodies over CUB's AgentHistogram (with
    // CUB 3.6's programmatic dependent launch), and the transforms do
    // DispatchHistogram's ScaleTransform / PassThruTransform arithmetic, the
    // former with an exact fast form (histogram_scale.hpp).
    b.include("<cub/device/dispatch/tuning/tuning_histogram.cuh>");
    b.include("<cub/grid/grid_queue.cuh>");
    const std::string s = b.input_iterator(samples), c = b.type(counter), l = b.type(level), ct = b.type(common);
    b.type(samples.value_type());
    const bool integral = !common.is_floating();
    const std::string wide_int = samples.value_type().size() + common.size() <= 4 ? "::cuda::std::uint32_t" : "::cuda::std::uint64_t";
    b.body("using cucore_samples = " + s + ";\n" + layout_check("cucore_samples", samples, "samples") +
           "using cucore_counter = " + c + ";\nusing cucore_level = " + l + ";\nusing cucore_offset = " +
           (k.wide ? "long long" : "int") +
           ";\nusing cucore_sample = cub::detail::it_value_t<cucore_samples>;\n"
           "using cucore_common = " + ct + ";\n"
           "static_assert(::cuda::std::is_same_v<::cuda::std::common_type_t<cucore_level, cucore_sample>, cucore_common>, "
           "\"cucore: the host's common sample/level type differs from C++'s\");\n"
           "// The host's HistogramScale<cucore_common>.\n"
           "struct cucore_scale {\n"
           "  cucore_common max, min, scale0, scale1;  // scale0/1: bins and range, or the reciprocal bin width\n"
           "  unsigned long long magic;  // ceil(2^64 / range)\n"
           "  unsigned bins, fast;  // fast: every (sample - min) * bins fits 32 bits\n"
           "  template <cub::CacheLoadModifier>\n"
           "  __device__ void BinSelect(cucore_sample sample, int& bin, bool valid) {\n"
           "    const cucore_common c = static_cast<cucore_common>(sample);\n"
           "    if (valid && c >= min && c < max) {\n" +
           (integral ? std::string(
                           "      if (fast) {  // CUB's quotient without its 64-bit division\n"
                           "        const unsigned n = static_cast<unsigned>(c) - static_cast<unsigned>(min);\n"
                           "        bin = static_cast<int>(__umul64hi(magic, static_cast<unsigned long long>(n * bins)));\n"
                           "      } else {\n"
                           "        bin = static_cast<int>((static_cast<") + wide_int + ">(c - min) * static_cast<" + wide_int +
                           ">(scale0)) / static_cast<" + wide_int + ">(scale1));\n      }\n"
                     : std::string("      bin = static_cast<int>((c - min) * scale0);\n")) +
           "    }\n  }\n};\n"
           "struct cucore_pass_thru {\n"
           "  template <cub::CacheLoadModifier, typename S>\n"
           "  __device__ void BinSelect(S sample, int& bin, bool valid) { if (valid) bin = static_cast<int>(sample); }\n"
           "};\n"
           "using cucore_policy = cub::detail::histogram::policy_hub<cucore_sample, cucore_counter, 1, 1, true>::MaxPolicy;\n"
           "using cucore_active = cucore_policy::ActivePolicy;\n"
           // Programmatic dependent launch (compute capability 9.0+), as CUB 3.6
           // does: a kernel may start before the one ahead of it in the stream
           // ends and waits for it (and its memory) before touching global memory.
           "#if __CUDA_ARCH__ >= 900\n"
           "#define CUCORE_PDL_WAIT() asm volatile(\"griddepcontrol.wait;\" ::: \"memory\")\n"
           "#define CUCORE_PDL_TRIGGER() asm volatile(\"griddepcontrol.launch_dependents;\" :::)\n"
           "#else\n#define CUCORE_PDL_WAIT()\n#define CUCORE_PDL_TRIGGER()\n#endif\n");
    const bool byte = byte_samples();
    const std::string priv = byte ? "cucore_pass_thru" : "cucore_scale";
    const std::string out = byte ? "cucore_scale" : "cucore_pass_thru";
    // The privatized bins in shared memory are zeroed before the wait; in
    // global memory (temporary storage earlier work may still use), after it.
    const std::string smem_bins = k.flavor > 0 ? "true" : "false";
    b.body("__global__ void cucore_histogram_init(::cuda::std::array<int, 1> num_output_bins,\n"
           "    ::cuda::std::array<cucore_counter*, 1> d_output_histograms, cub::GridQueue<int> tile_queue) {\n"
           "  CUCORE_PDL_WAIT();\n"
           "  // The sweep may start now: it waits for this kernel's end before its first global access.\n"
           "  if (num_output_bins[0] <= " + std::to_string(kInitTriggerMaxBins) + ") CUCORE_PDL_TRIGGER();\n"
           "  if (threadIdx.x == 0 && blockIdx.x == 0) tile_queue.ResetDrain();\n"
           "  const int output_bin = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (output_bin < num_output_bins[0]) d_output_histograms[0][output_bin] = 0;\n"
           "}\n"
           "__global__ __launch_bounds__(int(cucore_active::AgentHistogramPolicyT::BLOCK_THREADS))\n"
           "void cucore_histogram_sweep(cucore_samples d_samples, ::cuda::std::array<int, 1> num_output_bins,\n"
           "    ::cuda::std::array<int, 1> num_privatized_bins, ::cuda::std::array<cucore_counter*, 1> d_output_histograms,\n"
           "    ::cuda::std::array<cucore_counter*, 1> d_privatized_histograms,\n"
           "    ::cuda::std::array<" + out + ", 1> output_decode_op, ::cuda::std::array<" + priv + ", 1> privatized_decode_op,\n"
           "    cucore_offset num_row_pixels, cucore_offset num_rows, cucore_offset row_stride_samples, int tiles_per_row,\n"
           "    cub::GridQueue<int> tile_queue) {\n"
           "  using agent_t = cub::detail::histogram::AgentHistogram<cucore_active::AgentHistogramPolicyT, " +
           std::to_string(k.flavor) + ", 1, 1, cucore_samples, cucore_counter, " + priv + ", " + out +
           ", cucore_offset>;\n"
           "  __shared__ typename agent_t::TempStorage temp_storage;\n"
           "  agent_t agent(temp_storage, d_samples, num_output_bins.data(), num_privatized_bins.data(),\n"
           "                d_output_histograms.data(), d_privatized_histograms.data(), output_decode_op.data(),\n"
           "                privatized_decode_op.data());\n"
           "  constexpr bool smem_bins = " + smem_bins + ";\n"
           "  if (!smem_bins) CUCORE_PDL_WAIT();\n"
           "  agent.InitBinCounters();\n"
           "  if (smem_bins) CUCORE_PDL_WAIT();\n"
           "  agent.ConsumeTiles(num_row_pixels, num_rows, row_stride_samples, tiles_per_row, tile_queue);\n"
           "  CUCORE_PDL_TRIGGER();  // what follows may start; it waits for this kernel's end\n"
           "  agent.StoreOutput();\n"
           "}\n");
    b.tuning({"cucore_active::AgentHistogramPolicyT::BLOCK_THREADS",
              "cucore_active::AgentHistogramPolicyT::PIXELS_PER_THREAD", "sizeof(cucore_scale)",
              "sizeof(cucore_pass_thru)", "sizeof(cub::GridQueue<int>)"});
    b.kernel("cucore_histogram_init");
    b.kernel("cucore_histogram_sweep");
    return b.finish();
  }

  template <typename OffsetT>
  std::size_t dispatch(const Variant& v, const DeviceFacts& dev, void* temp, std::size_t temp_bytes,
                       const Iterator& samples_, CUdeviceptr histogram, int num_levels, const Value& lower,
                       const Value& upper, std::uint64_t n, StreamRef stream) const {
    const std::vector<std::byte> scale = histogram_scale(common, num_levels, upper, lower, samples.value_type().size());
    if (v.tuning(kScaleSize) != static_cast<long long>(scale.size()) || v.tuning(kQueueSize) != sizeof(void*))
      throw LogicError("HistogramEven: the compiled scale transform or CUB's GridQueue layout differs from the host's");
    const std::vector<std::byte> pass_thru(static_cast<std::size_t>(v.tuning(kPassThruSize)));
    const int block = v.itune(kBlock), pixels = v.itune(kPixels);
    const int occupancy = v.occupancy(dev.ordinal, 1, block, 0) * dev.sm_count;
    const int num_privatized_levels = byte_samples() ? 257 : num_levels;
    const int tiles_per_row = static_cast<int>(ceil_div(n, static_cast<std::uint64_t>(block) * pixels));
    const int blocks_per_row = std::min(occupancy, tiles_per_row);
    const int blocks_per_col = blocks_per_row > 0 ? std::min(occupancy / blocks_per_row, 1) : 0;
    const int num_blocks = blocks_per_row * blocks_per_col;
    const std::size_t sizes[2] = {static_cast<std::size_t>(num_blocks) * (num_privatized_levels - 1) * counter.size(),
                                  2 * sizeof(int)};
    void* parts[2];
    const std::size_t needed = alias_temporaries(temp, temp_bytes, sizes, parts, "HistogramEven");
    if (!temp) return needed;
    const int num_bins = num_levels - 1, num_privatized_bins = num_privatized_levels - 1;
    Args init;
    init.add(num_bins).add(histogram).add(parts[1]);
    // CUB launches both kernels programmatically from compute capability 9.0 on.
    const bool pdl = arch_at_least(dev.arch, 90);
    launch_kernel(stream, v.kernel(0), static_cast<int>(ceil_div(num_bins, 256)), 256, 0, init, pdl);
    if (blocks_per_row == 0 || blocks_per_col == 0) return temp_bytes;
    const auto& out_op = byte_samples() ? scale : pass_thru;
    const auto& priv_op = byte_samples() ? pass_thru : scale;
    Args a;
    add_iterator(a, samples_);
    a.add(num_bins).add(num_privatized_bins).add(histogram).add(parts[0]);
    constexpr std::size_t op_alignment = alignof(HistogramScale<double>);
    a.bytes(out_op, op_alignment).bytes(priv_op, op_alignment);
    a.add(static_cast<OffsetT>(n)).add(static_cast<OffsetT>(1)).add(static_cast<OffsetT>(n)).add(tiles_per_row);
    a.add(parts[1]);
    launch_kernel(stream, v.kernel(1), Dim3(blocks_per_row, blocks_per_col), block, 0, a, pdl);
    return temp_bytes;
  }

  std::size_t run(void* temp, std::size_t temp_bytes, const Iterator& samples_, CUdeviceptr histogram, int num_levels,
                  const Value& lower, const Value& upper, std::uint64_t n, StreamRef stream) const {
    check_iterator("HistogramEven", "samples", samples, samples_);
    check_levels(num_levels);
    check_value("HistogramEven", "lower", level, lower);
    check_value("HistogramEven", "upper", level, upper);
    if (histogram == 0) throw InvalidArgumentError("HistogramEven: the histogram array is null");
    const DeviceFacts& dev = call_device(stream);
    // CUB narrows offsets to int when the samples' bytes fit.
    const bool wide = n * samples.value_type().size() >= static_cast<std::uint64_t>(INT_MAX);
    const Variant& v = variants.get({dev.arch, wide, flavor(num_levels)});
    return wide ? dispatch<long long>(v, dev, temp, temp_bytes, samples_, histogram, num_levels, lower, upper, n, stream)
                : dispatch<int>(v, dev, temp, temp_bytes, samples_, histogram, num_levels, lower, upper, n, stream);
  }
};

}  // namespace detail

HistogramEven::HistogramEven(const Iterator& samples, const Type& counter_type, const Type& level_type,
                             int num_levels, const BuildOptions& options)
    : impl_(std::make_shared<detail::HistogramImpl>(samples, counter_type, level_type, num_levels, options)) {}

std::size_t HistogramEven::operator()(void* temp, std::size_t temp_bytes, const Iterator& samples,
                                      CUdeviceptr histogram, int num_levels, const Value& lower, const Value& upper,
                                      std::uint64_t num_samples, StreamRef stream) const {
  return impl_->run(temp, temp_bytes, samples, histogram, num_levels, lower, upper, num_samples, stream);
}

void HistogramEven::operator()(const Iterator& samples, CUdeviceptr histogram, int num_levels, const Value& lower,
                               const Value& upper, std::uint64_t num_samples, StreamRef stream,
                               const MemoryResource& mr) const {
  detail::with_temp_storage(stream, mr, [&](void* temp, std::size_t bytes) {
    return impl_->run(temp, bytes, samples, histogram, num_levels, lower, upper, num_samples, stream);
  });
}

void histogram_even(StreamRef stream, const Iterator& samples, const Type& counter_type, CUdeviceptr histogram,
                    int num_levels, const Value& lower, const Value& upper, std::uint64_t num_samples,
                    const CallOptions& options) {
  const std::string key = "histogram_even|" + samples.signature() + "|" + type_signature(counter_type) + "|" +
                          type_signature(lower.type()) + "|" + options.build.arch + "|" +
                          std::to_string(reinterpret_cast<std::uintptr_t>(options.build.cache));
  auto obj = std::static_pointer_cast<const HistogramEven>(detail::cached_build(key, [&] {
    return std::make_shared<const HistogramEven>(samples, counter_type, lower.type(), num_levels, options.build);
  }));
  (*obj)(samples, histogram, num_levels, lower, upper, num_samples, stream, options.memory_resource);
}

}  // namespace cucore::compute
