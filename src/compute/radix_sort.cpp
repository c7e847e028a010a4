// Device-wide radix sort: CUB's single-tile, onesweep (histogram, exclusive sum,
// onesweep) and upsweep/scan/downsweep kernels, dispatched as DispatchRadixSort
// does (CUB 3.0).
#include <cucore/compute/radix_sort.hpp>

#include <cstdint>
#include <algorithm>

#include "compute/common.hpp"
#include "compute/iterator_node.hpp"

namespace cucore::compute {

namespace detail {

namespace {
enum SortTuning {
  kSingleBlock, kSingleItems, kOnesweep, kOnesweepBits, kOnesweepBlock, kOnesweepItems, kHistoBlock, kSumBlock,
  kUpBlock, kUpItems, kAltUpBlock, kAltUpItems, kScanBlock, kScanItems,
  kDownBlock, kDownItems, kDownBits, kAltDownBlock, kAltDownItems, kAltDownBits,
  kSubscription, kEvenShareSize, kCount
};
enum OnesweepKernels { kSingle = 0, kHisto = 1, kSum = 2, kSweep = 3 };
enum PassKernels { kUp = 1, kAltUp = 2, kScanBins = 3, kDown = 4, kAltDown = 5 };

// DoubleBuffer over raw addresses with the element size for pointer arithmetic.
struct Buffers {
  CUdeviceptr b[2] = {0, 0};
  int selector = 0;
  CUdeviceptr cur() const { return b[selector]; }
  CUdeviceptr alt() const { return b[selector ^ 1]; }
};

int arch_number(const std::string& arch) { return std::stoi(arch.substr(3)) * 10; }
}  // namespace

struct RadixSortImpl {
  Type key, value;
  bool keys_only;
  SortOrder order;
  Variants variants;

  RadixSortImpl(const Type& key_, std::optional<Type> value_, SortOrder order_, const BuildOptions& o)
      : key(key_), value(value_ ? *value_ : Type::uint8()), keys_only(!value_), order(order_),
        variants([this](const VariantKey& k) { return generate(k); }, o.cache) {
    if (key.is_user())
      throw InvalidArgumentError("RadixSort: keys must be integers, floating-point or bool, not " + key.describe());
    variants.get({resolve_arch(o), false, 0});
  }

  bool onesweep(const std::string& arch) const { return arch_number(arch) >= 900 || key.size() >= 4; }

  TuSource generate(const VariantKey& k) const {
    TuBuilder b("radix_sort");
    b.include("<cub/device/dispatch/kernels/radix_sort.cuh>");
    b.include("<cub/device/dispatch/tuning/tuning_radix_sort.cuh>");
    const std::string kt = b.type(key), vt = keys_only ? "cub::NullType" : b.type(value);
    const bool one = onesweep(k.arch);
    b.body("using cucore_key = " + kt + ";\nusing cucore_value = " + vt + ";\nusing cucore_offset = " +
           unsigned_offset(k.wide) + ";\nconstexpr auto cucore_order = cub::SortOrder::" +
           (order == SortOrder::ascending ? "Ascending" : "Descending") +
           ";\nusing cucore_decomposer = cub::detail::identity_decomposer_t;\n"
           "using cucore_policy = cub::detail::radix::policy_hub<cucore_key, cucore_value, cucore_offset>::MaxPolicy;\n"
           "using cucore_active = cucore_policy::ActivePolicy;\n"
           "static_assert(bool(cucore_active::ONESWEEP) == " + (one ? "true" : "false") +
           ", \"cucore: CUB's choice of the onesweep algorithm differs from the host's rule\");\n");
    b.tuning({"cucore_active::SingleTilePolicy::BLOCK_THREADS", "cucore_active::SingleTilePolicy::ITEMS_PER_THREAD",
              "cucore_active::ONESWEEP", "cucore_active::ONESWEEP_RADIX_BITS",
              "cucore_active::OnesweepPolicy::BLOCK_THREADS", "cucore_active::OnesweepPolicy::ITEMS_PER_THREAD",
              "cucore_active::HistogramPolicy::BLOCK_THREADS", "cucore_active::ExclusiveSumPolicy::BLOCK_THREADS",
              "cucore_active::UpsweepPolicy::BLOCK_THREADS", "cucore_active::UpsweepPolicy::ITEMS_PER_THREAD",
              "cucore_active::AltUpsweepPolicy::BLOCK_THREADS", "cucore_active::AltUpsweepPolicy::ITEMS_PER_THREAD",
              "cucore_active::ScanPolicy::BLOCK_THREADS", "cucore_active::ScanPolicy::ITEMS_PER_THREAD",
              "cucore_active::DownsweepPolicy::BLOCK_THREADS", "cucore_active::DownsweepPolicy::ITEMS_PER_THREAD",
              "cucore_active::DownsweepPolicy::RADIX_BITS", "cucore_active::AltDownsweepPolicy::BLOCK_THREADS",
              "cucore_active::AltDownsweepPolicy::ITEMS_PER_THREAD", "cucore_active::AltDownsweepPolicy::RADIX_BITS",
              "cub::detail::subscription_factor", "sizeof(cub::GridEvenShare<cucore_offset>)"});
    const std::string ns = "cub::detail::radix_sort::";
    b.kernel(ns + "DeviceRadixSortSingleTileKernel<cucore_policy, cucore_order, cucore_key, cucore_value, "
                  "cucore_offset, cucore_decomposer>");
    if (one) {
      b.kernel(ns + "DeviceRadixSortHistogramKernel<cucore_policy, cucore_order, cucore_key, cucore_offset, "
                    "cucore_decomposer>");
      b.kernel(ns + "DeviceRadixSortExclusiveSumKernel<cucore_policy, cucore_offset>");
      b.kernel(ns + "DeviceRadixSortOnesweepKernel<cucore_policy, cucore_order, cucore_key, cucore_value, "
                    "cucore_offset, int, int, cucore_decomposer>");
    } else {
      for (const char* alt : {"false", "true"})
        b.kernel(ns + "DeviceRadixSortUpsweepKernel<cucore_policy, " + alt +
                 ", cucore_order, cucore_key, cucore_offset, cucore_decomposer>");
      b.kernel(ns + "RadixSortScanBinsKernel<cucore_policy, cucore_offset>");
      for (const char* alt : {"false", "true"})
        b.kernel(ns + "DeviceRadixSortDownsweepKernel<cucore_policy, " + alt +
                 ", cucore_order, cucore_key, cucore_value, cucore_offset, cucore_decomposer>");
    }
    return b.finish();
  }

  std::size_t value_size() const { return keys_only ? 1 : value.size(); }  // cub::NullType is 1 byte

  template <typename OffsetT>
  std::size_t onesweep_sort(const Variant& v, const DeviceFacts& dev, void* temp, std::size_t temp_bytes,
                            Buffers& keys, Buffers& values, std::uint64_t n, int begin_bit, int end_bit,
                            bool overwrite, StreamRef stream) const {
    const int bits = v.itune(kOnesweepBits), digits = 1 << bits;
    const int tile = v.itune(kOnesweepBlock) * v.itune(kOnesweepItems);
    const int portion_size = ((1 << 28) - 1) / tile * tile;
    const int num_passes = static_cast<int>(ceil_div(end_bit - begin_bit, bits));
    const auto num_portions = static_cast<OffsetT>(ceil_div(n, portion_size));
    const auto max_num_blocks = static_cast<int>(
        ceil_div(std::min<std::uint64_t>(n, static_cast<std::uint64_t>(portion_size)), tile));
    const bool no_tmp = overwrite || num_passes <= 1;
    const std::size_t sizes[5] = {
        static_cast<std::size_t>(num_portions) * num_passes * digits * sizeof(OffsetT),
        static_cast<std::size_t>(max_num_blocks) * digits * sizeof(int),
        no_tmp ? 0 : n * key.size(),
        no_tmp ? 0 : n * (keys_only ? 0 : value.size()),
        static_cast<std::size_t>(num_portions) * num_passes * sizeof(int)};
    void* parts[5];
    const std::size_t needed = alias_temporaries(temp, temp_bytes, sizes, parts, "RadixSort");
    if (!temp) return needed;
    auto* d_bins = static_cast<OffsetT*>(parts[0]);
    auto* d_lookback = static_cast<int*>(parts[1]);
    const auto keys_tmp2 = reinterpret_cast<CUdeviceptr>(parts[2]);
    const auto values_tmp2 = reinterpret_cast<CUdeviceptr>(parts[3]);
    auto* d_ctrs = static_cast<int*>(parts[4]);
    memset_zero_async(d_ctrs, static_cast<std::size_t>(num_portions) * num_passes * sizeof(int), stream);
    memset_zero_async(d_bins, static_cast<std::size_t>(num_passes) * digits * sizeof(OffsetT), stream);
    {
      const int histo_block = v.itune(kHistoBlock);
      const int blocks = v.occupancy(dev.ordinal, kHisto, histo_block, 0) * dev.sm_count;
      Args a;
      a.add(d_bins).add(keys.cur()).add(static_cast<OffsetT>(n)).add(begin_bit).add(end_bit).empty_struct();
      launch_kernel(stream, v.kernel(kHisto), blocks, histo_block, 0, a);
    }
    {
      Args a;
      a.add(d_bins);
      launch_kernel(stream, v.kernel(kSum), num_passes, v.itune(kSumBlock), 0, a);
    }
    const CUdeviceptr keys_tmp = keys.alt(), values_tmp = values.alt();
    if (!overwrite && num_passes % 2 == 0) {
      keys.b[1] = keys_tmp2;
      values.b[1] = values_tmp2;
    }
    for (int bit = begin_bit, pass = 0; bit < end_bit; bit += bits, ++pass) {
      const int num_bits = std::min(end_bit - bit, bits);
      for (OffsetT portion = 0; portion < num_portions; ++portion) {
        const int portion_items = static_cast<int>(
            std::min<std::uint64_t>(n - static_cast<std::uint64_t>(portion) * portion_size, portion_size));
        const int blocks = static_cast<int>(ceil_div(portion_items, tile));
        memset_zero_async(d_lookback, static_cast<std::size_t>(blocks) * digits * sizeof(int), stream);
        const std::uint64_t first = static_cast<std::uint64_t>(portion) * portion_size;
        Args a;
        a.add(d_lookback).add(d_ctrs + static_cast<std::size_t>(portion) * num_passes + pass);
        a.add(portion < num_portions - 1 ? d_bins + (static_cast<std::size_t>(portion + 1) * num_passes + pass) * digits
                                         : static_cast<OffsetT*>(nullptr));
        a.add(d_bins + (static_cast<std::size_t>(portion) * num_passes + pass) * digits);
        a.add(keys.alt()).add(keys.cur() + first * key.size());
        a.add(values.alt()).add(values.cur() + first * value_size());
        a.add(portion_items).add(bit).add(num_bits).empty_struct();
        launch_kernel(stream, v.kernel(kSweep), blocks, v.itune(kOnesweepBlock), 0, a);
      }
      if (!overwrite && pass == 0) {
        keys = num_passes % 2 == 0 ? Buffers{{keys_tmp, keys_tmp2}} : Buffers{{keys_tmp2, keys_tmp}};
        values = num_passes % 2 == 0 ? Buffers{{values_tmp, values_tmp2}} : Buffers{{values_tmp2, values_tmp}};
      }
      keys.selector ^= 1;
      values.selector ^= 1;
    }
    return temp_bytes;
  }

  template <typename OffsetT>
  struct PassConfig {
    std::size_t upsweep_kernel, downsweep_kernel;
    int up_block, up_tile, scan_block, scan_tile, down_block, down_tile;
    int radix_bits, radix_digits, max_downsweep_grid_size;
    GridEvenShare<OffsetT> even_share;
  };

  template <typename OffsetT>
  PassConfig<OffsetT> pass_config(const Variant& v, const DeviceFacts& dev, std::uint64_t n, bool alt) const {
    PassConfig<OffsetT> c;
    c.upsweep_kernel = alt ? kAltUp : kUp;
    c.downsweep_kernel = alt ? kAltDown : kDown;
    c.up_block = v.itune(alt ? kAltUpBlock : kUpBlock);
    c.up_tile = c.up_block * v.itune(alt ? kAltUpItems : kUpItems);
    c.scan_block = v.itune(kScanBlock);
    c.scan_tile = c.scan_block * v.itune(kScanItems);
    c.down_block = v.itune(alt ? kAltDownBlock : kDownBlock);
    c.down_tile = c.down_block * v.itune(alt ? kAltDownItems : kDownItems);
    c.radix_bits = v.itune(alt ? kAltDownBits : kDownBits);
    c.radix_digits = 1 << c.radix_bits;
    c.max_downsweep_grid_size =
        v.occupancy(dev.ordinal, c.downsweep_kernel, c.down_block, 0) * dev.sm_count * v.itune(kSubscription);
    c.even_share.dispatch_init(static_cast<OffsetT>(n), c.max_downsweep_grid_size, std::max(c.down_tile, c.up_tile));
    return c;
  }

  template <typename OffsetT>
  void pass(const Variant& v, const PassConfig<OffsetT>& c, CUdeviceptr keys_in, CUdeviceptr keys_out,
            CUdeviceptr values_in, CUdeviceptr values_out, OffsetT* spine, std::uint64_t n, int& current_bit,
            int end_bit, StreamRef stream) const {
    const int pass_bits = std::min(c.radix_bits, end_bit - current_bit);
    const int spine_length = c.even_share.grid_size * c.radix_digits;
    const auto even = std::as_bytes(std::span(&c.even_share, 1));
    Args up;
    up.add(keys_in).add(spine).add(static_cast<OffsetT>(n)).add(current_bit).add(pass_bits);
    up.bytes(even, alignof(GridEvenShare<OffsetT>)).empty_struct();
    launch_kernel(stream, v.kernel(c.upsweep_kernel), c.even_share.grid_size, c.up_block, 0, up);
    Args scan;
    scan.add(spine).add(spine_length);
    launch_kernel(stream, v.kernel(kScanBins), 1, c.scan_block, 0, scan);
    Args down;
    down.add(keys_in).add(keys_out).add(values_in).add(values_out).add(spine).add(static_cast<OffsetT>(n));
    down.add(current_bit).add(pass_bits).bytes(even, alignof(GridEvenShare<OffsetT>)).empty_struct();
    launch_kernel(stream, v.kernel(c.downsweep_kernel), c.even_share.grid_size, c.down_block, 0, down);
    current_bit += pass_bits;
  }

  template <typename OffsetT>
  std::size_t pass_sort(const Variant& v, const DeviceFacts& dev, void* temp, std::size_t temp_bytes, Buffers& keys,
                        Buffers& values, std::uint64_t n, int begin_bit, int end_bit, bool overwrite,
                        StreamRef stream) const {
    if (v.tuning(kEvenShareSize) != static_cast<long long>(sizeof(GridEvenShare<OffsetT>)))
      throw LogicError("RadixSort: cub::GridEvenShare's layout differs from cucore's mirror");
    const auto main = pass_config<OffsetT>(v, dev, n, false), alt = pass_config<OffsetT>(v, dev, n, true);
    const int max_grid_size = std::max(main.max_downsweep_grid_size, alt.max_downsweep_grid_size);
    const std::size_t spine_length = static_cast<std::size_t>(max_grid_size) * main.radix_digits + main.scan_tile;
    const std::size_t sizes[3] = {spine_length * sizeof(OffsetT), overwrite ? 0 : n * key.size(),
                                  (overwrite || keys_only) ? 0 : n * value.size()};
    void* parts[3];
    const std::size_t needed = alias_temporaries(temp, temp_bytes, sizes, parts, "RadixSort");
    if (!temp) return needed;
    const int num_bits = end_bit - begin_bit;
    int num_passes = static_cast<int>(ceil_div(num_bits, main.radix_bits));
    const bool odd = num_passes & 1;
    const int max_alt_passes = num_passes * main.radix_bits - num_bits;
    const int alt_end_bit = std::min(end_bit, begin_bit + max_alt_passes * alt.radix_bits);
    auto* spine = static_cast<OffsetT*>(parts[0]);
    const auto tmp_keys = reinterpret_cast<CUdeviceptr>(parts[1]), tmp_values = reinterpret_cast<CUdeviceptr>(parts[2]);
    Buffers keys_rest{{(overwrite || odd) ? keys.alt() : tmp_keys, overwrite ? keys.cur() : (odd ? tmp_keys : keys.alt())}};
    Buffers values_rest{
        {(overwrite || odd) ? values.alt() : tmp_values, overwrite ? values.cur() : (odd ? tmp_values : values.alt())}};
    int bit = begin_bit;
    pass<OffsetT>(v, bit < alt_end_bit ? alt : main, keys.cur(), keys_rest.cur(), values.cur(), values_rest.cur(), spine,
                  n, bit, end_bit, stream);
    while (bit < end_bit) {
      const int s = keys_rest.selector;
      pass<OffsetT>(v, bit < alt_end_bit ? alt : main, keys_rest.b[s], keys_rest.b[s ^ 1], values_rest.b[s],
                    values_rest.b[s ^ 1], spine, n, bit, end_bit, stream);
      keys_rest.selector ^= 1;
      values_rest.selector ^= 1;
    }
    if (!overwrite) num_passes = 1;  // the sorted data always ends up in the other buffer
    keys.selector = (keys.selector + num_passes) & 1;
    values.selector = (values.selector + num_passes) & 1;
    return temp_bytes;
  }

  std::size_t run(void* temp, std::size_t temp_bytes, Buffers& keys, Buffers& values, std::uint64_t n, int begin_bit,
                  int end_bit, bool overwrite, StreamRef stream) const {
    const int key_bits = static_cast<int>(key.size() * 8);
    if (end_bit < 0) end_bit = key_bits;
    if (begin_bit < 0 || begin_bit > end_bit || end_bit > key_bits)
      throw InvalidArgumentError("RadixSort: the bit range [" + std::to_string(begin_bit) + ", " +
                                  std::to_string(end_bit) + ") is not within the key's " + std::to_string(key_bits) +
                                  " bits");
    if (!keys_only && n > 0 && (values.b[0] == 0 || values.b[1] == 0))
      throw InvalidArgumentError("RadixSort: the object sorts key-value pairs: pass the value arrays");
    if (n > 0 && (keys.cur() == 0 || keys.alt() == 0))
      throw InvalidArgumentError("RadixSort: a key array is null");
    if (n == 0 || (begin_bit == end_bit && overwrite)) return temp ? temp_bytes : 1;
    const DeviceFacts& dev = call_device(stream);
    if (begin_bit == end_bit) {  // InvokeCopy
      if (!temp) return 1;
      memcpy_async(reinterpret_cast<void*>(keys.alt()), reinterpret_cast<void*>(keys.cur()), n * key.size(), stream);
      keys.selector ^= 1;
      if (!keys_only)
        memcpy_async(reinterpret_cast<void*>(values.alt()), reinterpret_cast<void*>(values.cur()), n * value.size(),
                     stream);
      values.selector ^= 1;
      return temp_bytes;
    }
    const bool wide = needs_wide(n);
    const Variant& v = variants.get({dev.arch, wide, 0});
    if (n <= static_cast<std::uint64_t>(v.itune(kSingleBlock)) * v.itune(kSingleItems)) {
      if (!temp) return 1;
      Args a;
      a.add(keys.cur()).add(keys.alt()).add(values.cur()).add(values.alt());
      add_offset(a, wide, n).add(begin_bit).add(end_bit).empty_struct();
      launch_kernel(stream, v.kernel(kSingle), 1, v.itune(kSingleBlock), 0, a);
      keys.selector ^= 1;
      values.selector ^= 1;
      return temp_bytes;
    }
    if (v.tuning(kOnesweep))
      return wide ? onesweep_sort<unsigned long long>(v, dev, temp, temp_bytes, keys, values, n, begin_bit, end_bit,
                                                      overwrite, stream)
                  : onesweep_sort<unsigned int>(v, dev, temp, temp_bytes, keys, values, n, begin_bit, end_bit,
                                                overwrite, stream);
    return wide ? pass_sort<unsigned long long>(v, dev, temp, temp_bytes, keys, values, n, begin_bit, end_bit,
                                                overwrite, stream)
                : pass_sort<unsigned int>(v, dev, temp, temp_bytes, keys, values, n, begin_bit, end_bit, overwrite,
                                          stream);
  }
};

}  // namespace detail

RadixSort::RadixSort(const Type& key_type, std::optional<Type> value_type, SortOrder order, const BuildOptions& options)
    : impl_(std::make_shared<detail::RadixSortImpl>(key_type, std::move(value_type), order, options)) {}

std::size_t RadixSort::operator()(void* temp, std::size_t temp_bytes, CUdeviceptr keys_in, CUdeviceptr keys_out,
                                  CUdeviceptr values_in, CUdeviceptr values_out, std::uint64_t num_items,
                                  int begin_bit, int end_bit, StreamRef stream) const {
  detail::Buffers keys{{keys_in, keys_out}}, values{{values_in, values_out}};
  return impl_->run(temp, temp_bytes, keys, values, num_items, begin_bit, end_bit, false, stream);
}

std::size_t RadixSort::operator()(void* temp, std::size_t temp_bytes, DoubleBuffer& keys, DoubleBuffer* values,
                                  std::uint64_t num_items, int begin_bit, int end_bit, StreamRef stream) const {
  detail::Buffers k{{keys.buffers[0], keys.buffers[1]}, keys.selector}, v;
  if (values) v = detail::Buffers{{values->buffers[0], values->buffers[1]}, values->selector};
  const std::size_t r = impl_->run(temp, temp_bytes, k, v, num_items, begin_bit, end_bit, true, stream);
  if (temp) {
    keys.selector = k.selector;
    if (values) values->selector = v.selector;
  }
  return r;
}

void RadixSort::operator()(CUdeviceptr keys_in, CUdeviceptr keys_out, CUdeviceptr values_in, CUdeviceptr values_out,
                           std::uint64_t num_items, StreamRef stream, int begin_bit, int end_bit,
                           const MemoryResource& mr) const {
  detail::with_temp_storage(stream, mr, [&](void* temp, std::size_t bytes) {
    return (*this)(temp, bytes, keys_in, keys_out, values_in, values_out, num_items, begin_bit, end_bit, stream);
  });
}

void RadixSort::operator()(DoubleBuffer& keys, DoubleBuffer* values, std::uint64_t num_items, StreamRef stream,
                           int begin_bit, int end_bit, const MemoryResource& mr) const {
  detail::with_temp_storage(stream, mr, [&](void* temp, std::size_t bytes) {
    return (*this)(temp, bytes, keys, values, num_items, begin_bit, end_bit, stream);
  });
}

void radix_sort(StreamRef stream, const Type& key_type, CUdeviceptr keys_in, CUdeviceptr keys_out,
                std::optional<Type> value_type, CUdeviceptr values_in, CUdeviceptr values_out,
                std::uint64_t num_items, SortOrder order, int begin_bit, int end_bit, const CallOptions& options) {
  const std::string key = "radix_sort|" + type_signature(key_type) + "|" +
                          (value_type ? type_signature(*value_type) : std::string("-")) + "|" +
                          std::to_string(static_cast<int>(order)) + "|" + options.build.arch + "|" +
                          std::to_string(reinterpret_cast<std::uintptr_t>(options.build.cache));
  auto obj = std::static_pointer_cast<const RadixSort>(detail::cached_build(
      key, [&] { return std::make_shared<const RadixSort>(key_type, value_type, order, options.build); }));
  (*obj)(keys_in, keys_out, values_in, values_out, num_items, stream, begin_bit, end_bit, options.memory_resource);
}

}  // namespace cucore::compute
