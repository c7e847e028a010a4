// cucore::compute on a machine without a GPU: every algorithm's generated
// translation unit compiles with NVRTC for sm_90 (for real) across the type
// families; builds are keyed by operator, type, iterator and architecture; the
// tuning table is read back from the cubin; bad input fails before compiling.
#include <cucore/compute.hpp>
#include <cucore/errors.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/counting_cache.hpp"
#include "common/run_command.hpp"
#include "compute/codegen.hpp"
#include "compute/engine.hpp"
#include "compute/histogram_scale.hpp"

using namespace cucore;
using namespace cucore::compute;

namespace {

// One cache for the suite, so each distinct build compiles once.
InMemoryProgramCache& cache() {
  static InMemoryProgramCache c;
  return c;
}
BuildOptions sm90() { return BuildOptions{.arch = "sm_90", .cache = &cache()}; }

template <typename T>
Iterator ptr() {
  return Iterator::pointer(static_cast<const T*>(nullptr));
}

struct Pair {
  int key;
  float weight;
};
Type pair_type() {
  return Type::user<Pair>("Pair", "struct Pair { int key; float weight; };");
}

// Entries added to the suite's cache by `fn`.
std::size_t added(const std::function<void()>& fn) {
  const std::size_t before = cache().entry_count();
  fn();
  return cache().entry_count() - before;
}

}  // namespace

// Operator keys digest the LTO-IR blobs, each after its 64-bit length: the
// value is fixed (a change would orphan every cached build).
TEST(ComputeBuild, LtoirDigestIsSha256OverLengthPrefixedBlobs) {
  auto bytes = [](std::string_view s) {
    std::vector<std::byte> v(s.size());
    std::memcpy(v.data(), s.data(), s.size());
    return v;
  };
  EXPECT_EQ(compute::detail::sha256_hex({bytes("\x01\x02\x03"), {}, bytes("hello")}),
            "091a6561f8a98de7d511ca62300c3e531cb01de3b804d31ae16ae13bcf04ba6f");
  EXPECT_NE(compute::detail::sha256_hex({bytes("ab"), bytes("c")}),
            compute::detail::sha256_hex({bytes("a"), bytes("bc")}));
}

TEST(ComputeBuild, ReduceKeysDifferByOperatorTypeIteratorAndArch) {
  auto plus_i32 = [] { Reduce(ptr<int>(), ptr<int>(), OpKind::plus, Type::int32(), {.build = sm90()}); };
  EXPECT_EQ(added(plus_i32), 1u);
  EXPECT_EQ(added(plus_i32), 0u) << "an identical build must hit the cache";
  EXPECT_EQ(added([] { Reduce(ptr<int>(), ptr<int>(), OpKind::maximum, Type::int32(), {.build = sm90()}); }), 1u)
      << "another operator";
  EXPECT_EQ(added([] {
              Reduce(Iterator::pointer(Type::float16(), 0), Iterator::pointer(Type::float16(), 0), OpKind::plus,
                     Type::float16(), {.build = sm90()});
            }),
            1u)
      << "another type (float16)";
  EXPECT_EQ(added([] { Reduce(Iterator::counting(Value(5)), ptr<int>(), OpKind::plus, Type::int32(), {.build = sm90()}); }),
            1u)
      << "another iterator";
  EXPECT_EQ(added([] {
              Reduce(ptr<int>(), ptr<int>(), OpKind::plus, Type::int32(),
                     {.build = {.arch = "sm_80", .cache = &cache()}});
            }),
            1u)
      << "another architecture";
}

TEST(ComputeBuild, ReduceKeysFollowTheOperatorsSourceAndItsHeaders) {
  // A source operator is keyed by its text and by the headers it includes
  // (the generated code's own includes are the toolkit's; a user's are read).
  char tmpl[] = "/tmp/cucore-compute-op-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path header = std::filesystem::path(tmpl) / "op.h";
  auto write_op = [&](int k) {
    std::ofstream(header, std::ios::trunc) << "__device__ int cucore_test_op(int a, int b) { return a + b + " << k
                                           << "; }\n";
  };
  auto build = [&](const std::string& callable, const std::string& preamble) {
    return added([&] {
      Reduce(ptr<int>(), ptr<int>(), Op::source(callable, preamble), Type::int32(), {.build = sm90()});
    });
  };
  const int k = static_cast<int>(std::random_device{}() % 100000);
  const std::string lambda = "[](int a, int b) { return a + b + " + std::to_string(k) + "; }";
  EXPECT_EQ(build(lambda, ""), 1u);
  EXPECT_EQ(build(lambda, ""), 0u) << "the same operator source must hit";
  EXPECT_EQ(build("[](int a, int b) { return a * b + " + std::to_string(k) + "; }", ""), 1u)
      << "another operator source";
  const std::string include = "#include \"" + header.string() + "\"";
  // An operator with its own headers is stored twice: its LTO-IR (keyed with
  // the headers' digests) and the cubin linked from it (keyed by that LTO-IR).
  write_op(k);
  EXPECT_EQ(build("cucore_test_op", include), 2u);
  EXPECT_EQ(build("cucore_test_op", include), 0u) << "an unchanged header must hit";
  write_op(k + 1);
  EXPECT_EQ(build("cucore_test_op", include), 2u) << "an edited header the operator includes must miss";
  std::filesystem::remove_all(tmpl);
}

// The child half of AWarmBuildInAFreshProcessLoadsNoCompiler (disabled: only
// the parent runs it).
TEST(ComputeBuild, DISABLED_WarmBuildChild) {
  const char* dir = std::getenv("CUCORE_COMPUTE_WARM_BUILD_CACHE");
  if (!dir) GTEST_SKIP() << "runs as the child of AWarmBuildInAFreshProcessLoadsNoCompiler";
  FileStreamProgramCache disk(dir);
  Reduce(ptr<int>(), ptr<int>(), OpKind::plus, Type::int32(), {.build = {.arch = "sm_90", .cache = &disk}});
  EXPECT_EQ(disk.stats().misses, 0u);
  EXPECT_GE(disk.stats().hits, 1u);
  // Loading either compiler costs a fresh process milliseconds (nvJitLink ~5 ms).
  for (const char* so : {"libnvrtc.so.13", "libnvrtc.so", "libnvJitLink.so.13", "libnvJitLink.so"})
    EXPECT_EQ(dlopen(so, RTLD_LAZY | RTLD_NOLOAD), nullptr) << so << " was loaded by a build the disk cache holds";
}

TEST(ComputeBuild, AWarmBuildInAFreshProcessLoadsNoCompiler) {
  const auto dir = std::filesystem::temp_directory_path() / ("cucore-warm-build-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  {
    FileStreamProgramCache disk(dir);
    Reduce(ptr<int>(), ptr<int>(), OpKind::plus, Type::int32(), {.build = {.arch = "sm_90", .cache = &disk}});
    ASSERT_EQ(disk.stats().misses, 1u);
  }
  const auto child = cucore::test::run_own_test("ComputeBuild.DISABLED_WarmBuildChild",
                                                "CUCORE_COMPUTE_WARM_BUILD_CACHE='" + dir.string() + "'");
  EXPECT_EQ(child.status, 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << child.out;
  std::filesystem::remove_all(dir);
}

// Objects built at once from one source (threads each making the same
// algorithm) link once: the others wait for the first one's link, as
// Program::compile's compiles do. The wrapped cache counts the puts: one per link.
TEST(ComputeBuild, ThreadsBuildingOneAlgorithmAtOnceLinkOnce) {
  InMemoryProgramCache memory;
  test::CountingCache counting(memory);
  constexpr int kThreads = 6;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&] {
      start.arrive_and_wait();
      try {
        UnaryTransform(ptr<std::int16_t>(), Iterator::pointer(Type::int16(), 0),
                       Op::source("[](short v) { return (short)(v * 3 - 1); }"), {.arch = "sm_90", .cache = &counting});
      } catch (...) {
        ++errors;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(counting.puts.load(), 1) << "each thread linked the same kernels";
  EXPECT_EQ(memory.entry_count(), 1u);
}

TEST(ComputeBuild, ReduceUserStructWithSourceOperatorAndGpuToGpuDeterminism) {
  const Type pair = pair_type();
  EXPECT_NO_THROW(Reduce(Iterator::pointer(pair, 0), Iterator::pointer(pair, 0),
                         Op::source("heavier", "__device__ Pair heavier(Pair a, Pair b) { return a.weight < b.weight ? b : a; }"),
                         pair, {.determinism = Determinism::gpu_to_gpu, .build = sm90()}));
}

TEST(ComputeBuild, ScansCompile) {
  EXPECT_NO_THROW(InclusiveScan(ptr<double>(), ptr<double>(), OpKind::plus, std::nullopt, sm90()));
  EXPECT_NO_THROW(ExclusiveScan(ptr<std::int8_t>(), ptr<std::int64_t>(), Op::source("[](long long a, long long b) { return a + b; }"),
                                Type::int64(), sm90()));
}

TEST(ComputeBuild, TransformsOverIteratorsCompile) {
  // bfloat16 out of a zip of a reversed pointer and a transformed counting iterator.
  const Iterator zipped = Iterator::zip(
      {Iterator::reverse(ptr<float>(), 100),
       Iterator::transform(Iterator::counting(Value(std::int64_t{7})), Op::source("[](long long i) { return i % 3; }"),
                           Type::int32())});
  EXPECT_NO_THROW(UnaryTransform(zipped, Iterator::pointer(Type::bfloat16(), 0),
                                 Op::source("[](auto z) { return __float2bfloat16(z.f0 * z.f1); }"), sm90()));
  EXPECT_NO_THROW(BinaryTransform(ptr<float>(), Iterator::constant(Value(2.0)), Iterator::discard(Type::float64()),
                                  OpKind::multiplies, sm90()));
}

TEST(ComputeBuild, RadixSortsCompile) {
  EXPECT_NO_THROW(RadixSort(Type::float32(), Type::uint32(), SortOrder::ascending, sm90()));
  EXPECT_NO_THROW(RadixSort(Type::float16(), std::nullopt, SortOrder::descending, sm90()));
}

TEST(ComputeBuild, HistogramsCompile) {
  EXPECT_NO_THROW(HistogramEven(ptr<float>(), Type::int32(), Type::float32(), 257, sm90()));
  EXPECT_NO_THROW(HistogramEven(ptr<std::uint8_t>(), Type::uint32(), Type::int32(), 17, sm90()));
  // Integer levels (both bin computations), 64-bit counters, and more bins
  // than shared memory holds (privatized bins in global memory).
  EXPECT_NO_THROW(HistogramEven(ptr<std::int64_t>(), Type::uint64(), Type::int64(), 1001, sm90()));
  EXPECT_NO_THROW(HistogramEven(ptr<std::uint32_t>(), Type::int32(), Type::uint32(), 257, sm90()));
}

// The host half of histogram_even's integer bins: the fast form (multiply-high
// by a magic number) is offered exactly when every (sample - lower) * bins
// fits 32 bits, and then gives CUB's quotient for every sample in range,
// checked here with the device's formula on the host at random and extreme
// samples, ranges and bin counts, including the boundary of the fast form.
template <typename T>
void check_histogram_scale(T lower, T upper, int bins, std::uint64_t seed) {
  __extension__ using u128 = unsigned __int128;
  SCOPED_TRACE(std::to_string(static_cast<long long>(lower)) + ".." + std::to_string(static_cast<long long>(upper)) +
               ", " + std::to_string(bins) + " bins");
  const auto bytes = compute::detail::histogram_scale(Type::of<T>(), bins + 1, Value(upper), Value(lower), sizeof(T));
  compute::detail::HistogramScale<T> st;
  ASSERT_EQ(bytes.size(), sizeof st);
  std::memcpy(&st, bytes.data(), sizeof st);
  EXPECT_EQ(st.max, upper);
  EXPECT_EQ(st.min, lower);
  EXPECT_EQ(st.scale0, static_cast<T>(bins));
  EXPECT_EQ(st.scale1, static_cast<T>(upper - lower));
  const std::uint64_t range = static_cast<std::uint64_t>(upper) - static_cast<std::uint64_t>(lower);
  const bool fits = static_cast<u128>(range - 1) * static_cast<u128>(bins) <= 0xffffffffu;
  ASSERT_EQ(st.fast, fits ? 1u : 0u);
  if (!st.fast) return;
  EXPECT_EQ(st.bins, static_cast<std::uint32_t>(bins));
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> offsets = {0, range - 1, range / 2, range / 3};
  for (int i = 0; i < 20000; ++i) offsets.push_back(rng() % range);
  for (std::uint64_t k = 1; k <= static_cast<std::uint64_t>(bins) && k < 4000; ++k) {
    // Samples at each bin edge and just below it, where a wrong quotient shows first.
    const std::uint64_t edge = static_cast<std::uint64_t>((static_cast<u128>(k) * range + bins - 1) / bins);
    if (edge < range) offsets.push_back(edge);
    if (edge > 0 && edge - 1 < range) offsets.push_back(edge - 1);
  }
  for (std::uint64_t off : offsets) {
    const T c = static_cast<T>(static_cast<std::uint64_t>(lower) + off);
    // The device's arithmetic, as generated: 32-bit numerator, multiply-high.
    const std::uint32_t n = static_cast<std::uint32_t>(c) - static_cast<std::uint32_t>(st.min);
    const std::uint32_t p = n * st.bins;
    const auto fast = static_cast<std::uint64_t>((static_cast<u128>(st.magic) * p) >> 64);
    const auto exact = static_cast<std::uint64_t>(static_cast<u128>(off) * bins / range);
    ASSERT_EQ(fast, exact) << "sample offset " << off;
  }
}

TEST(ComputeHistogram, FastIntegerBinsMatchCubsDivision) {
  check_histogram_scale<std::int32_t>(0, 1 << 20, 256, 1);
  check_histogram_scale<std::int32_t>(-1000, 999983, 256, 2);
  check_histogram_scale<std::int32_t>(-7, -6, 1, 3);
  check_histogram_scale<std::int32_t>(-7, -5, 3, 4);
  check_histogram_scale<std::int32_t>(INT32_MIN, INT32_MIN + 16777259, 255, 5);
  check_histogram_scale<std::uint32_t>(5, 5 + 16843010u, 255, 6);  // (range - 1) * bins == 2^32 - 1
  check_histogram_scale<std::uint32_t>(5, 5 + 16843011u, 255, 7);  // one more: CUB's division
  check_histogram_scale<std::uint32_t>(0, 0xffffffffu, 1, 8);
  check_histogram_scale<std::uint32_t>(1, 0xffffffffu, 1, 9);
  check_histogram_scale<std::int64_t>(-3000000000ll, -2999000001ll, 97, 10);
  check_histogram_scale<std::int64_t>(-(1ll << 40), (1ll << 40) + 12345, 1000, 11);  // too wide
  check_histogram_scale<std::uint64_t>(1ull << 60, (1ull << 60) + 4095, 64, 12);
  check_histogram_scale<std::uint64_t>(0, 1ull << 32, 1, 13);  // range 2^32, one bin
  std::mt19937_64 rng(14);
  for (int i = 0; i < 200; ++i) {
    const int bins = 1 + static_cast<int>(rng() % 3000);
    const std::int64_t lower = static_cast<std::int64_t>(rng() % 4000000000ull) - 2000000000ll;
    const std::int64_t range = 1 + static_cast<std::int64_t>(rng() % (i % 2 ? 5000000ull : 0xffffffffull / bins + 2));
    check_histogram_scale<std::int64_t>(lower, lower + range, bins, 100 + i);
  }
  check_histogram_scale<std::int32_t>(10, 10, 4, 15);  // an empty range: no fast form
}

TEST(ComputeBuild, LtoIrOperatorIsLinkedWithNvJitLink) {
  // The operator comes as LTO-IR (compiled here by NVRTC), in cuda.compute's RawOp ABI.
  const std::string op_src = R"(extern "C" __device__ void absmax(void* a, void* b, void* out) {
    int x = *static_cast<int*>(a), y = *static_cast<int*>(b);
    x = x < 0 ? -x : x; y = y < 0 ? -y : y;
    *static_cast<int*>(out) = x < y ? y : x;
  })";
  ObjectCode ltoir = Program(op_src, "c++", {.arch = "sm_90", .relocatable_device_code = true}).compile(CodeType::ltoir);
  std::vector<std::byte> bytes(ltoir.code().begin(), ltoir.code().end());
  const Op op = Op::ltoir("absmax", bytes);
  EXPECT_EQ(added([&] { Reduce(ptr<int>(), ptr<int>(), op, Type::int32(), {.build = sm90()}); }), 1u);
  // The same symbol from another LTO-IR module is another build.
  std::string other = op_src;
  other.replace(other.find("x < y ? y : x"), 13, "x < y ? x : y");
  ObjectCode ltoir2 = Program(other, "c++", {.arch = "sm_90", .relocatable_device_code = true}).compile(CodeType::ltoir);
  const Op op2 = Op::ltoir("absmax", std::vector<std::byte>(ltoir2.code().begin(), ltoir2.code().end()));
  EXPECT_EQ(added([&] { Reduce(ptr<int>(), ptr<int>(), op2, Type::int32(), {.build = sm90()}); }), 1u);
}

TEST(ComputeBuild, OperatorThatDoesNotCompileReportsTheLog) {
  try {
    Reduce(ptr<int>(), ptr<int>(), Op::source("[](int a, int b) { return a + undefined_name; }"), Type::int32(),
           {.build = sm90()});
    FAIL() << "no CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("undefined_name"), std::string::npos) << e.log();
  }
}

TEST(ComputeBuild, MismatchedTypesFailBeforeCompiling) {
  const std::size_t before = cache().entry_count();
  const Type pair = pair_type();
  EXPECT_THROW(Reduce(ptr<int>(), Iterator::pointer(pair, 0), OpKind::plus, Type::int32(), {.build = sm90()}),
               std::invalid_argument);
  EXPECT_THROW(Reduce(ptr<int>(), Iterator::counting(Value(1)), OpKind::plus, Type::int32(), {.build = sm90()}),
               std::invalid_argument)
      << "a counting iterator is not writable";
  EXPECT_THROW(RadixSort(pair, std::nullopt, SortOrder::ascending, sm90()), std::invalid_argument);
  EXPECT_THROW(HistogramEven(Iterator::pointer(pair, 0), Type::int32(), Type::int32(), 10, sm90()),
               std::invalid_argument);
  EXPECT_THROW(HistogramEven(ptr<int>(), Type::float32(), Type::int32(), 10, sm90()), std::invalid_argument);
  EXPECT_THROW(HistogramEven(ptr<int>(), Type::int32(), Type::int32(), 1, sm90()), std::invalid_argument);
  EXPECT_THROW(Reduce(ptr<int>(), ptr<int>(), OpKind::plus, Type::int32(), {.build = {.arch = "90"}}),
               std::invalid_argument);
  EXPECT_EQ(cache().entry_count(), before) << "nothing may be compiled for invalid input";
}

TEST(ComputeBuild, DescriptionsValidateTheirInput) {
  EXPECT_THROW(Type::user("not an identifier", "", 4, 4), std::invalid_argument);
  EXPECT_THROW(Type::user("S", "struct S { char c[3]; };", 3, 2), std::invalid_argument);
  const std::int32_t four = 4;
  EXPECT_THROW(Value(Type::int64(), std::as_bytes(std::span(&four, 1))), std::invalid_argument);
  EXPECT_THROW(Op::source("  "), std::invalid_argument);
  EXPECT_THROW(Op::ltoir("f", {}), std::invalid_argument);
  EXPECT_THROW(Iterator::counting(Value(true)), std::invalid_argument);
  EXPECT_THROW(Iterator::zip({ptr<int>()}), std::invalid_argument);
  EXPECT_THROW(Iterator::constant(Value(1)).with_pointer(0), std::invalid_argument);
  EXPECT_THROW(Iterator::counting(Value(1)).pointer_value(), std::invalid_argument);
}

TEST(ComputeBuild, IteratorStateIsLaidOutAsTheGeneratedStruct) {
  const Iterator p = ptr<double>().with_pointer(0x1000);
  EXPECT_EQ(p.pointer_value(), 0x1000u);
  const Iterator r = Iterator::reverse(Iterator::pointer(Type::int16(), 0x2000), 10);
  ASSERT_EQ(r.state().size(), 16u);  // {const short* it; long long last;}
  long long last;
  std::memcpy(&last, r.state().data() + 8, 8);
  EXPECT_EQ(last, 9);
  const Iterator z = Iterator::zip({Iterator::counting(Value(std::int8_t{3})), ptr<double>()});
  ASSERT_EQ(z.state().size(), 16u);  // {counting<int8_t> (1 byte), pad, const double*}
  EXPECT_EQ(z.state_alignment(), 8u);
  EXPECT_EQ(static_cast<int>(z.state()[0]), 3);
  EXPECT_EQ(z.value_type().size(), 16u);  // {int8_t f0; double f1;}
  EXPECT_EQ(r.with_pointer(0x3000).signature(), r.signature());
  EXPECT_NE(Iterator::counting(Value(1)).signature(), Iterator::counting(Value(1u)).signature());
}

TEST(ComputeBuild, TuningTableIsReadBackFromTheCubin) {
  compute::detail::TuBuilder b("tuning_test");
  b.tuning({"7", "-3", "1LL << 40"});
  b.kernel("cucore_dummy");
  b.body("__global__ void cucore_dummy() {}\n");
  const compute::detail::TuSource tu = b.finish();
  const compute::detail::CompiledCode c = compute::detail::compile_tu(tu, "sm_90", &cache());
  ASSERT_EQ(c.tuning.size(), 3u);
  EXPECT_EQ(c.tuning[0], 7);
  EXPECT_EQ(c.tuning[1], -3);
  EXPECT_EQ(c.tuning[2], 1LL << 40);
  // Damaged or foreign cubins are refused with a message, never read out of bounds.
  auto bytes = c.code.code();
  EXPECT_THROW(compute::detail::read_tuning(bytes, 4), std::runtime_error);
  EXPECT_THROW(compute::detail::read_tuning(bytes.first(40), 3), std::runtime_error);
  std::vector<std::byte> mangled(bytes.begin(), bytes.end());
  for (std::size_t i = 0; i + 13 <= mangled.size(); ++i)
    if (std::memcmp(mangled.data() + i, "cucore_tuning", 13) == 0) mangled[i] = std::byte{'X'};
  EXPECT_THROW(compute::detail::read_tuning(mangled, 3), std::runtime_error);
}

namespace {
// The defined data symbols (STT_OBJECT) of a 64-bit ELF cubin, by name.
std::vector<std::string> data_symbols(std::span<const std::byte> b) {
  auto at = [&](std::uint64_t off, auto& v) {
    if (off + sizeof v > b.size()) throw std::runtime_error("truncated cubin");
    std::memcpy(&v, b.data() + off, sizeof v);
  };
  std::uint64_t shoff = 0;
  std::uint16_t shentsize = 0, shnum = 0;
  at(0x28, shoff);
  at(0x3A, shentsize);
  at(0x3C, shnum);
  std::vector<std::string> names;
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + std::uint64_t(i) * shentsize;
    std::uint32_t type = 0, link = 0;
    std::uint64_t off = 0, size = 0;
    at(h + 4, type);
    at(h + 24, off);
    at(h + 32, size);
    at(h + 40, link);
    if (type != 2) continue;  // SHT_SYMTAB
    std::uint64_t stroff = 0;
    at(shoff + std::uint64_t(link) * shentsize + 24, stroff);
    for (std::uint64_t e = off; e + 24 <= off + size; e += 24) {
      std::uint32_t name = 0;
      unsigned char info = 0;
      std::uint16_t shndx = 0;
      at(e, name);
      at(e + 4, info);
      at(e + 6, shndx);
      if ((info & 0xf) == 1 && shndx != 0)
        names.emplace_back(reinterpret_cast<const char*>(b.data() + stroff + name));
    }
  }
  return names;
}

// A cache that keeps what is put into it and never hits.
struct Recording final : ProgramCache {
  std::vector<ObjectCode> puts;
  std::optional<ObjectCode> get(std::string_view) override { return std::nullopt; }
  void put(std::string_view, const ObjectCode& code) override { puts.push_back(code); }
  bool erase(std::string_view) override { return false; }
  void clear() override { puts.clear(); }
  std::size_t size_bytes() const override { return 0; }
  CacheStats stats() const override { return {}; }
};
}  // namespace

TEST(ComputeBuild, CubinHoldsNoDeviceVariableButTheTuningTable) {
  // NVRTC makes every constant of the CCCL headers a device variable (some
  // 1300 for a reduce); the build links them away, so a process loading the
  // cubin has none to place and relocate.
  Recording cache;
  Reduce(ptr<int>(), ptr<int>(), OpKind::plus, Type::int32(), {.build = {.arch = "sm_90", .cache = &cache}});
  ASSERT_EQ(cache.puts.size(), 1u);
  const std::vector<std::string> names = data_symbols(cache.puts[0].code());
  std::string listed;
  for (std::size_t i = 0; i < names.size() && i < 5; ++i) listed += " " + names[i];
  EXPECT_EQ(names, std::vector<std::string>{"cucore_tuning"}) << names.size() << " data symbols:" << listed << " ...";
}

TEST(ComputeBuild, CcclVersionComesFromTheHeaders) {
  const std::string v = cccl_version();
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  EXPECT_NE(v.find_first_of("0123456789"), std::string::npos) << v;
}
