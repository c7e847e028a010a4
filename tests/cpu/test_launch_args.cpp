// Loading, argument packing, validation and launch configuration against the
// fake driver: what reaches cuLaunchKernelEx is captured and checked byte for
// byte, and every refusal is checked to happen before any launch.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/device_span.hpp>
#include <cucore/errors.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>
#include <cucore/object_code.hpp>
#include <cucore/tensor_map.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/fake_driver.hpp"
#include "common/message_of.hpp"
#include "handles/box_allocator.hpp"
#include "handles/graph_handles.hpp"
#include "launch/launch_internal.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

// ---- allocation counting (for the hot path's "no heap allocation") ----
namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<long> g_allocations{0};
}  // namespace

// Replacing the global allocator: GCC sees malloc'd memory freed by `delete`
// through these very functions and warns, wrongly.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (g_count_allocations.load(std::memory_order_relaxed)) ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The aligned forms too: boxes (make_box) come from them when not recycled.
void* operator new(std::size_t n, std::align_val_t al) {
  if (g_count_allocations.load(std::memory_order_relaxed)) ++g_allocations;
  const auto a = static_cast<std::size_t>(al);
  if (void* p = std::aligned_alloc(a, (n + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

// ---- the fake library: a few kernels with known parameter layouts ----
struct FakeKernel {
  const char* name;
  std::uintptr_t handle;
  std::vector<std::size_t> sizes;
};

const std::vector<FakeKernel>& fake_kernels() {
  static const std::vector<FakeKernel> k = {
      {"saxpy", 0x6001, {4, 8, 8, 8, 4}},        // (float, const float*, const float*, float*, int)
      {"_Z5scaleIfEvPT_S0_i", 0x6002, {8, 4, 4}},  // scale<float>(float*, float, int)
      {"empty", 0x6003, {}},
      {"with_struct", 0x6004, {24, 8}},  // (struct of 24 bytes, double*)
      {"many", 0x6005, std::vector<std::size_t>(20, 8)},
      {"tma", 0x6006, {128, 8}},  // (const __grid_constant__ CUtensorMap, float*)
  };
  return k;
}

const FakeKernel* find_kernel(CUkernel h) {
  for (const auto& k : fake_kernels())
    if (k.handle == reinterpret_cast<std::uintptr_t>(h)) return &k;
  return nullptr;
}

CUlibrary fake_library() { return reinterpret_cast<CUlibrary>(0x5000); }

struct Captured {
  CUlaunchConfig config{};
  std::vector<CUlaunchAttribute> attrs;
  std::vector<std::vector<std::byte>> params;
  CUkernel kernel = nullptr;
};

std::vector<Captured> g_launches;
std::atomic<int> g_loads{0}, g_unloads{0}, g_param_queries{0}, g_set_attributes{0};
std::string g_loaded_ptx;  // what cuLibraryLoadData read, as a C string, for PTX
int g_set_dynamic_smem = -1;
int g_max_blocks_per_sm = 2;
CUresult g_launch_result = CUDA_SUCCESS;
thread_local CUcontext t_seen_context = nullptr;

void install(FakeDriver& fake) {
  g_launches.clear();
  g_loads = g_unloads = g_param_queries = g_set_attributes = 0;
  g_loaded_ptx.clear();
  g_set_dynamic_smem = -1;
  g_max_blocks_per_sm = 2;
  g_launch_result = CUDA_SUCCESS;
  auto& t = fake.table;
  t.cuLibraryLoadData = [](CUlibrary* lib, const void* code, CUjit_option*, void**, unsigned, CUlibraryOption*,
                           void**, unsigned) {
    ++g_loads;
    const char* c = static_cast<const char*>(code);
    if (c[0] == '/' || c[0] == '.') g_loaded_ptx = c;  // PTX text: read as a C string, as the driver does
    *lib = fake_library();
    return CUDA_SUCCESS;
  };
  t.cuLibraryUnload = [](CUlibrary lib) {
    if (lib == fake_library()) ++g_unloads;
    return CUDA_SUCCESS;
  };
  t.cuLibraryGetKernel = [](CUkernel* k, CUlibrary, const char* name) {
    for (const auto& fk : fake_kernels())
      if (std::strcmp(fk.name, name) == 0) {
        *k = reinterpret_cast<CUkernel>(fk.handle);
        return CUDA_SUCCESS;
      }
    return CUDA_ERROR_NOT_FOUND;
  };
  t.cuLibraryGetKernelCount = [](unsigned* n, CUlibrary) {
    *n = unsigned(fake_kernels().size());
    return CUDA_SUCCESS;
  };
  t.cuLibraryEnumerateKernels = [](CUkernel* ks, unsigned n, CUlibrary) {
    for (unsigned i = 0; i < n && i < fake_kernels().size(); ++i)
      ks[i] = reinterpret_cast<CUkernel>(fake_kernels()[i].handle);
    return CUDA_SUCCESS;
  };
  t.cuKernelGetName = [](const char** name, CUkernel k) {
    const FakeKernel* fk = find_kernel(k);
    if (!fk) return CUDA_ERROR_INVALID_HANDLE;
    *name = fk->name;
    return CUDA_SUCCESS;
  };
  t.cuKernelGetParamInfo = [](CUkernel k, size_t i, size_t* offset, size_t* size) {
    ++g_param_queries;
    const FakeKernel* fk = find_kernel(k);
    if (!fk) return CUDA_ERROR_INVALID_HANDLE;
    if (i >= fk->sizes.size()) return CUDA_ERROR_INVALID_VALUE;
    size_t off = 0;
    for (size_t j = 0; j < i; ++j) off = (off + fk->sizes[j] + 7) / 8 * 8;
    *offset = off;
    if (size) *size = fk->sizes[i];
    return CUDA_SUCCESS;
  };
  t.cuKernelGetAttribute = [](int* v, CUfunction_attribute a, CUkernel, CUdevice) {
    switch (a) {
      case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = g_set_dynamic_smem >= 0 ? g_set_dynamic_smem : 49152; break;
      case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = 1024; break;
      case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 16; break;
      case CU_FUNC_ATTRIBUTE_BINARY_VERSION: case CU_FUNC_ATTRIBUTE_PTX_VERSION: *v = 90; break;
      default: *v = 0;
    }
    return CUDA_SUCCESS;
  };
  t.cuKernelSetAttribute = [](CUfunction_attribute a, int v, CUkernel, CUdevice) {
    ++g_set_attributes;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) g_set_dynamic_smem = v;
    return CUDA_SUCCESS;
  };
  t.cuKernelGetFunction = [](CUfunction* f, CUkernel k) {
    *f = reinterpret_cast<CUfunction>(k);
    return CUDA_SUCCESS;
  };
  t.cuOccupancyMaxActiveBlocksPerMultiprocessor = [](int* n, CUfunction, int block, size_t) {
    *n = block <= 1024 ? g_max_blocks_per_sm : 0;
    return CUDA_SUCCESS;
  };
  t.cuLaunchKernelEx = [](const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
    if (extra) return CUDA_ERROR_INVALID_VALUE;
    CUcontext current = nullptr;
    cucore::detail::g_driver.load()->cuCtxGetCurrent(&current);
    t_seen_context = current;
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (g_launch_result != CUDA_SUCCESS) return g_launch_result;
    // Refuse what a real device would.
    const unsigned threads = c->blockDimX * c->blockDimY * c->blockDimZ;
    const int dyn = g_set_dynamic_smem >= 0 ? g_set_dynamic_smem : 49152;
    if (threads > 1024 || c->blockDimX > 1024 || c->blockDimY > 1024 || c->blockDimZ > 64 ||
        c->sharedMemBytes > unsigned(dyn))
      return CUDA_ERROR_INVALID_VALUE;
    const FakeKernel* fk = find_kernel(reinterpret_cast<CUkernel>(f));
    if (!fk) return CUDA_ERROR_INVALID_HANDLE;
    Captured cap;
    cap.config = *c;
    cap.attrs.assign(c->attrs, c->attrs + c->numAttrs);
    cap.kernel = reinterpret_cast<CUkernel>(f);
    for (size_t i = 0; i < fk->sizes.size(); ++i) {
      const auto* p = static_cast<const std::byte*>(params[i]);
      cap.params.emplace_back(p, p + fk->sizes[i]);
    }
    g_launches.push_back(std::move(cap));
    return CUDA_SUCCESS;
  };
}

template <typename T>
T as(const std::vector<std::byte>& bytes) {
  T v{};
  EXPECT_EQ(bytes.size(), sizeof(T));
  std::memcpy(&v, bytes.data(), std::min(bytes.size(), sizeof(T)));
  return v;
}

std::vector<std::byte> fake_cubin() {
  std::vector<std::byte> b(64, std::byte{0});
  const char magic[] = "\x7f" "ELF";
  std::memcpy(b.data(), magic, 4);
  return b;
}

CUstream fake_stream() { return reinterpret_cast<CUstream>(0x7000); }

using test::message_of;

class LaunchArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    install(fake);
    code = ObjectCode::from_cubin(fake_cubin(), "fake.cubin", {{"scale<float>", "_Z5scaleIfEvPT_S0_i"}});
  }
  FakeDriver fake;
  ObjectCode code;
};

}  // namespace

// ---- Dim3 and LaunchConfig ----

TEST(LaunchConfigTest, DimensionsFromOneTwoOrThreeValues) {
  const int n = 1000;
  LaunchConfig a{.grid = (n + 255) / 256, .block = 256};
  EXPECT_EQ(a.grid, (Dim3{4, 1, 1}));
  EXPECT_EQ(a.block.volume(), 256u);
  EXPECT_FALSE(a.cluster.is_set());
  std::size_t big = 7;
  long y = 3;
  LaunchConfig b{.grid = {2, 3}, .block = {big, y, 2}, .cluster = 2, .shmem_size = 128, .is_cooperative = true};
  EXPECT_EQ(b.grid, (Dim3{2u, 3u, 1u}));
  EXPECT_EQ(b.block, (Dim3{7, 3, 2}));
  EXPECT_EQ(b.cluster, (Dim3{2, 1, 1}));
  EXPECT_NO_THROW(validate(a));
  EXPECT_NO_THROW(validate(b));
  constexpr Dim3 c{1, 2, 3};
  static_assert(c.volume() == 6);
}

TEST(LaunchConfigTest, BadDimensionsAreRefused) {
  EXPECT_THROW(Dim3(-1), std::invalid_argument);
  EXPECT_THROW(Dim3(1, -2), std::invalid_argument);
  EXPECT_THROW(Dim3(std::size_t(1) << 33), std::invalid_argument);
  EXPECT_NE(message_of([] { validate(LaunchConfig{.block = 256}); }).find("grid is not set"), std::string::npos);
  EXPECT_NE(message_of([] { validate(LaunchConfig{.grid = 4}); }).find("block is not set"), std::string::npos);
  EXPECT_NE(message_of([] { validate(LaunchConfig{.grid = 0, .block = 256}); }).find("zero dimension"),
            std::string::npos);
  EXPECT_NE(message_of([] { validate(LaunchConfig{.grid = 4, .block = {32, 0}}); }).find("block (32, 0, 1)"),
            std::string::npos);
  EXPECT_THROW(validate(LaunchConfig{.grid = 4, .block = 32, .cluster = {2, 0, 1}}), std::invalid_argument);
  EXPECT_THROW(validate(LaunchConfig{.grid = 0x80000000u, .block = 32, .cluster = 2}), std::invalid_argument);
  EXPECT_THROW(validate(LaunchConfig{.grid = 1, .block = 32, .shmem_size = std::size_t(1) << 33}),
               std::invalid_argument);
}

// ---- loading ----

TEST_F(LaunchArgsTest, LoadsLazilyOnceAndUnloadsAfterTheLastKernel) {
  EXPECT_FALSE(code.is_loaded());
  EXPECT_EQ(g_loads, 0);
  Kernel k1 = code.get_kernel("saxpy");
  Kernel k2 = code.get_kernel("saxpy");
  Kernel k3 = code.get_kernel("empty");
  EXPECT_TRUE(code.is_loaded());
  EXPECT_EQ(g_loads, 1);
  EXPECT_EQ(code.library_handle(), static_cast<void*>(fake_library()));
  EXPECT_EQ(k1.handle(), reinterpret_cast<CUkernel>(0x6001));
  EXPECT_EQ(k1.info(), k2.info()) << "one KernelInfo per symbol";
  EXPECT_EQ(k1.name(), "saxpy");
  code = ObjectCode();  // the ObjectCode goes; its kernels keep the library
  EXPECT_EQ(g_unloads, 0);
  k1 = Kernel();
  k2 = Kernel();
  EXPECT_EQ(g_unloads, 0);
  k3 = Kernel();
  EXPECT_EQ(g_unloads, 1);
}

TEST_F(LaunchArgsTest, KernelOutlivesItsObjectCodeAndStillLaunches) {
  Kernel k;
  {
    ObjectCode scoped = ObjectCode::from_cubin(fake_cubin());
    k = scoped.get_kernel("empty");
  }
  code = ObjectCode();
  EXPECT_EQ(g_unloads, 0);
  launch(fake_stream(), {.grid = 1, .block = 1}, k);
  ASSERT_EQ(g_launches.size(), 1u);
  k = Kernel();
  EXPECT_EQ(g_unloads, 1);
}

TEST_F(LaunchArgsTest, PtxIsLoadedAsACString) {
  ObjectCode ptx = ObjectCode::from_ptx(std::string(".version 8.0\n.target sm_90\n"));
  (void)ptx.library_handle();
  EXPECT_EQ(g_loaded_ptx, ".version 8.0\n.target sm_90\n");
}

TEST_F(LaunchArgsTest, LtoIrMustBeLinkedFirst) {
  ObjectCode lto = ObjectCode::from_ltoir(fake_cubin(), "k.ltoir");
  std::string what = message_of([&] { lto.get_kernel("saxpy"); });
  EXPECT_NE(what.find("LTO-IR"), std::string::npos) << what;
  EXPECT_NE(what.find("link it first"), std::string::npos) << what;
  EXPECT_THROW(lto.get_kernel("saxpy"), std::invalid_argument) << "the failure is remembered";
  EXPECT_EQ(g_loads, 0);
  EXPECT_FALSE(lto.is_loaded());
}

TEST_F(LaunchArgsTest, NameExpressionsMapToLoweredNames) {
  Kernel k = code.get_kernel("scale<float>");
  EXPECT_EQ(k.handle(), reinterpret_cast<CUkernel>(0x6002));
  EXPECT_EQ(k.name(), "scale<float>");
  EXPECT_EQ(k.mangled_name(), "_Z5scaleIfEvPT_S0_i");
  EXPECT_EQ(code.get_kernel("_Z5scaleIfEvPT_S0_i").info(), k.info());
}

TEST_F(LaunchArgsTest, UnknownKernelListsTheKernelsThereAre) {
  std::string what = message_of([&] { code.get_kernel("saxpi"); });
  EXPECT_NE(what.find("no kernel 'saxpi'"), std::string::npos) << what;
  EXPECT_NE(what.find("saxpy"), std::string::npos) << what;
  EXPECT_NE(what.find("void scale<float>(float*, float, int)"), std::string::npos) << what;
  EXPECT_NE(what.find("name expressions: scale<float>"), std::string::npos) << what;
  EXPECT_THROW(code.get_kernel("saxpi"), std::invalid_argument);
  auto names = code.kernel_names();
  EXPECT_EQ(names.size(), fake_kernels().size());
  EXPECT_THROW(ObjectCode().get_kernel("x"), std::invalid_argument);
}

// ---- parameter layout ----

TEST_F(LaunchArgsTest, ArgumentsInfoIsReadOnce) {
  Kernel k = code.get_kernel("saxpy");
  EXPECT_EQ(k.num_arguments(), 5u);
  const auto& info = k.arguments_info();
  ASSERT_EQ(info.size(), 5u);
  EXPECT_EQ(info[0], (ParamInfo{0, 4}));
  EXPECT_EQ(info[1], (ParamInfo{8, 8}));
  EXPECT_EQ(info[4], (ParamInfo{32, 4}));
  const int queries = g_param_queries;
  EXPECT_EQ(queries, 6) << "five parameters and the one past the end";
  float a = 1;
  launch(fake_stream(), {.grid = 1, .block = 1}, k, a, nullptr, nullptr, nullptr, 1);
  EXPECT_EQ(g_param_queries, queries);
  EXPECT_EQ(code.get_kernel("empty").num_arguments(), 0u);
}

TEST_F(LaunchArgsTest, OldDriverLeavesLaunchesUnchecked) {
  fake.table.cuKernelGetParamInfo = nullptr;
  Kernel k = code.get_kernel("saxpy");
  EXPECT_THROW(k.arguments_info(), FeatureUnavailableError);
  float a = 2;
  int n = 3;
  launch(fake_stream(), {.grid = 1, .block = 1}, k, a, nullptr, nullptr, nullptr, n);
  EXPECT_EQ(g_launches.size(), 1u);
}

// ---- packing ----

TEST_F(LaunchArgsTest, PacksScalarsBuffersPointersAndStructs) {
  Kernel saxpy = code.get_kernel("saxpy");
  std::vector<float> xs(4), ys(4), out(4);
  Buffer x = Buffer::from_handle(xs.data(), 16);
  Buffer y = Buffer::from_handle(ys.data(), 16);
  float* raw_out = out.data();
  launch(fake_stream(), {.grid = 7, .block = 128, .shmem_size = 512}, saxpy, 3.5f, x, y, raw_out, 42);
  ASSERT_EQ(g_launches.size(), 1u);
  const Captured& c = g_launches[0];
  EXPECT_EQ(c.kernel, saxpy.handle());
  EXPECT_EQ(c.config.gridDimX, 7u);
  EXPECT_EQ(c.config.gridDimY, 1u);
  EXPECT_EQ(c.config.blockDimX, 128u);
  EXPECT_EQ(c.config.sharedMemBytes, 512u);
  EXPECT_EQ(c.config.hStream, fake_stream());
  EXPECT_EQ(c.config.numAttrs, 0u);
  ASSERT_EQ(c.params.size(), 5u);
  EXPECT_EQ(as<float>(c.params[0]), 3.5f);
  EXPECT_EQ(as<CUdeviceptr>(c.params[1]), x.handle());
  EXPECT_EQ(as<CUdeviceptr>(c.params[2]), y.handle());
  EXPECT_EQ(as<float*>(c.params[3]), raw_out);
  EXPECT_EQ(as<int>(c.params[4]), 42);

  struct Params {
    double a;
    int b[4];
  };
  static_assert(sizeof(Params) == 24);
  Kernel ws = code.get_kernel("with_struct");
  Params p{2.5, {1, 2, 3, 4}};
  double* d = nullptr;
  launch(fake_stream(), {.grid = {2, 3, 4}, .block = {8, 8}}, ws, p, d);
  ASSERT_EQ(g_launches.size(), 2u);
  const Captured& c2 = g_launches[1];
  EXPECT_EQ(c2.config.gridDimZ, 4u);
  EXPECT_EQ(c2.config.blockDimY, 8u);
  Params q = as<Params>(c2.params[0]);
  EXPECT_EQ(q.a, 2.5);
  EXPECT_EQ(q.b[3], 4);
  EXPECT_EQ(as<double*>(c2.params[1]), nullptr);
}

TEST_F(LaunchArgsTest, TensorMapsGoByValue) {
  Kernel tma = code.get_kernel("tma");
  TensorMapDescriptor map;
  auto* bytes = reinterpret_cast<unsigned char*>(&map.handle());
  for (int i = 0; i < 128; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  float* out = nullptr;
  launch(fake_stream(), {.grid = 1, .block = 32}, tma, map, out);
  KernelArgs args;
  args.push(map).push(out);
  launch(fake_stream(), {.grid = 1, .block = 32}, tma, args);
  ASSERT_EQ(g_launches.size(), 2u);
  for (const Captured& c : g_launches) {
    ASSERT_EQ(c.params[0].size(), 128u);
    EXPECT_EQ(std::memcmp(c.params[0].data(), bytes, 128), 0);
  }
}

TEST_F(LaunchArgsTest, HotPathDoesNotAllocate) {
  Kernel saxpy = code.get_kernel("saxpy");
  std::vector<float> xs(4);
  Buffer x = Buffer::from_handle(xs.data(), 16);
  float a = 1;
  int n = 4;
  LaunchConfig cfg{.grid = 1, .block = 32};
  launch(fake_stream(), cfg, saxpy, a, x, x, x, n);  // first launch: reads the layout
  // A fake that allocates nothing itself, so every allocation counted is launch()'s.
  static std::atomic<int> launches{0};
  launches = 0;
  fake.table.cuLaunchKernelEx = [](const CUlaunchConfig* c, CUfunction, void** params, void**) {
    if (!c || !params || !params[0] || !params[4]) return CUDA_ERROR_INVALID_VALUE;
    ++launches;
    return CUDA_SUCCESS;
  };
  g_allocations = 0;
  g_count_allocations = true;
  for (int i = 0; i < 50; ++i) launch(fake_stream(), cfg, saxpy, a, x, x, x, n);
  KernelArgs args;
  args.push(a).push(x).push(x).push(x).push(n);
  for (int i = 0; i < 50; ++i) launch(fake_stream(), cfg, saxpy, args);
  g_count_allocations = false;
  EXPECT_EQ(launches.load(), 100);
  EXPECT_EQ(g_allocations.load(), 0);
}

// Allocating a Buffer and freeing it (on a Stream, whose share its box
// holds, or a StreamRef; closed, dropped or moved) mallocs nothing once the
// thread's box memory is warm: the box comes from make_box.
TEST(BufferHotPath, AllocateAndFreeDoNotAllocate) {
  if (CUCORE_ASAN) GTEST_SKIP() << "under AddressSanitizer boxes come from the heap (box_allocator.hpp)";
  FakeDriver fake;
  // A resource that allocates nothing itself, so every allocation counted is the Buffer's.
  struct Bump final : MemoryResource::Impl {
    CUdeviceptr next = 0x100000;
    int allocated = 0, freed = 0;
    CUdeviceptr allocate(std::size_t n, StreamRef) override {
      ++allocated;
      const CUdeviceptr p = next;
      next += (n + 255) / 256 * 256;
      return p;
    }
    void deallocate(CUdeviceptr, std::size_t, StreamRef) override { ++freed; }
    bool is_device_accessible() const noexcept override { return true; }
    bool is_host_accessible() const noexcept override { return false; }
    int device_id() const noexcept override { return 0; }
  };
  auto impl = std::make_shared<Bump>();
  MemoryResource mr(impl);
  Stream s = Device(0).create_stream();
  auto cycle = [&](int i) {
    Buffer a = mr.allocate(64 + static_cast<std::size_t>(i), s);
    Buffer b = mr.allocate(128, StreamRef(s));
    Buffer moved = std::move(b);
    a.close();
    if (i % 2) moved.close(s);  // else dropped
  };
  cycle(0);  // warms the thread's box memory
  const int allocated = impl->allocated, freed = impl->freed;
  g_allocations = 0;
  g_count_allocations = true;
  for (int i = 1; i <= 100; ++i) cycle(i);
  g_count_allocations = false;
  EXPECT_EQ(g_allocations.load(), 0);
  EXPECT_EQ(impl->allocated - allocated, 200);
  EXPECT_EQ(impl->freed - freed, 200);
}

// ---- validation ----

TEST_F(LaunchArgsTest, CountAndSizeMismatchesNameTheParameter) {
  Kernel saxpy = code.get_kernel("saxpy");
  float a = 1;
  float* p = nullptr;
  std::string what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, a, p, p, p); });
  EXPECT_EQ(what, "saxpy: takes 5 arguments (of 4, 8, 8, 8, 4 bytes), got 4");
  what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, a, p, p, p, 4.0); });
  EXPECT_EQ(what, "saxpy: parameter 4 is 4 bytes, got 8 (double)");
  what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, 3.0, p, p, p, 4); });
  EXPECT_EQ(what, "saxpy: parameter 0 is 4 bytes, got 8 (double)");
  what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, a, 1, p, p, 4); });
  EXPECT_EQ(what, "saxpy: parameter 1 is 8 bytes, got 4 (int)");
  EXPECT_TRUE(g_launches.empty()) << "nothing reaches the driver";
  Buffer closed = Buffer::from_handle(CUdeviceptr(0x1000), 16);
  closed.close();
  what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, a, closed, p, p, 4); });
  EXPECT_EQ(what, "Buffer has been closed (saxpy: argument 1)");
  EXPECT_THROW(launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, a, closed, p, p, 4), ClosedError);
  EXPECT_THROW(launch(fake_stream(), {.grid = 1, .block = 1}, Kernel(), a), std::invalid_argument);
  EXPECT_TRUE(g_launches.empty());
}

TEST_F(LaunchArgsTest, ZeroSizedConfigurationsNeverLaunch) {
  Kernel k = code.get_kernel("empty");
  EXPECT_THROW(launch(fake_stream(), {.grid = 0, .block = 32}, k), std::invalid_argument);
  EXPECT_THROW(launch(fake_stream(), {.grid = 4, .block = {32, 0, 1}}, k), std::invalid_argument);
  EXPECT_THROW(launch(fake_stream(), {.block = 32}, k), std::invalid_argument);
  EXPECT_THROW(launch(fake_stream(), {.grid = 4}, k), std::invalid_argument);
  EXPECT_TRUE(g_launches.empty());
}

TEST_F(LaunchArgsTest, RefusedLaunchesAreExplained) {
  Kernel k = code.get_kernel("empty");
  std::string what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = {64, 32}}, k); });
  EXPECT_NE(what.find("empty: block of 2048 threads exceeds the device limit of 1024"), std::string::npos) << what;
  what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = 2048}, k); });
  EXPECT_NE(what.find("block (2048, 1, 1) exceeds the maximum block dimensions"), std::string::npos) << what;
  what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = {1, 1, 65}}, k); });
  EXPECT_NE(what.find("exceeds the maximum block dimensions (1024, 1024, 64)"), std::string::npos) << what;
  what = message_of([&] { launch(fake_stream(), {.grid = 1, .block = 32, .shmem_size = 100 * 1024}, k); });
  EXPECT_NE(what.find("shmem_size of 102400 bytes exceeds the kernel's max_dynamic_shared_size_bytes of 49152"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("set_max_dynamic_shared_size_bytes(102400)"), std::string::npos) << what;
  // Raised, it launches.
  k.attributes().set_max_dynamic_shared_size_bytes(100 * 1024);
  EXPECT_EQ(k.attributes().max_dynamic_shared_size_bytes(), 100 * 1024);
  launch(fake_stream(), {.grid = 1, .block = 32, .shmem_size = 100 * 1024}, k);
  EXPECT_EQ(g_launches.size(), 1u);
  // Beyond what the device allows: said before the driver is asked.
  what = message_of([&] { k.attributes().set_max_dynamic_shared_size_bytes(300 * 1024); });
  EXPECT_NE(what.find("allows this kernel (231424 = the opt-in maximum 232448 minus 1024 static)"), std::string::npos)
      << what;
  // Other driver errors are CudaErrors that name the kernel.
  g_launch_result = CUDA_ERROR_LAUNCH_FAILED;
  try {
    launch(fake_stream(), {.grid = 1, .block = 32}, k);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_LAUNCH_FAILED);
    EXPECT_NE(e.call().find("kernel empty"), std::string::npos) << e.call();
  }
}

TEST_F(LaunchArgsTest, ClusterGridCountsClusters) {
  Kernel k = code.get_kernel("empty");
  launch(fake_stream(), {.grid = {4, 2}, .block = 64, .cluster = {2, 1, 1}}, k);
  ASSERT_EQ(g_launches.size(), 1u);
  const Captured& c = g_launches[0];
  EXPECT_EQ(c.config.gridDimX, 8u);
  EXPECT_EQ(c.config.gridDimY, 2u);
  ASSERT_EQ(c.attrs.size(), 1u);
  EXPECT_EQ(c.attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(c.attrs[0].value.clusterDim.x, 2u);
  EXPECT_EQ(c.attrs[0].value.clusterDim.y, 1u);
  EXPECT_EQ(c.attrs[0].value.clusterDim.z, 1u);
}

TEST_F(LaunchArgsTest, ClustersNeedComputeCapability9) {
  fake.table.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) {
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 8 : 1;
    return CUDA_SUCCESS;
  };
  Kernel k = code.get_kernel("empty");
  CUstream s = reinterpret_cast<CUstream>(0x7100);  // not the stream a previous test cached
  std::string what = message_of([&] { launch(s, {.grid = 2, .block = 64, .cluster = 2}, k); });
  EXPECT_NE(what.find("thread block clusters"), std::string::npos) << what;
  EXPECT_NE(what.find("compute capability 9.0"), std::string::npos) << what;
  EXPECT_THROW(launch(s, {.grid = 2, .block = 64, .cluster = 2}, k), FeatureUnavailableError);
  EXPECT_TRUE(g_launches.empty());
}

TEST_F(LaunchArgsTest, CooperativeGridMustFitOnTheDevice) {
  Kernel k = code.get_kernel("empty");
  g_max_blocks_per_sm = 2;  // 2 x 132 SMs = 264 blocks at once
  launch(fake_stream(), {.grid = 264, .block = 256, .is_cooperative = true}, k);
  ASSERT_EQ(g_launches.size(), 1u);
  ASSERT_EQ(g_launches[0].attrs.size(), 1u);
  EXPECT_EQ(g_launches[0].attrs[0].id, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  EXPECT_EQ(g_launches[0].attrs[0].value.cooperative, 1);
  std::string what = message_of([&] { launch(fake_stream(), {.grid = 265, .block = 256, .is_cooperative = true}, k); });
  EXPECT_NE(what.find("cooperative launch of 265 blocks exceeds"), std::string::npos) << what;
  EXPECT_NE(what.find("2 blocks per SM x 132 SMs = 264"), std::string::npos) << what;
  EXPECT_EQ(g_launches.size(), 1u);
  // Cluster and cooperative together: two attributes.
  launch(fake_stream(), {.grid = 4, .block = 32, .cluster = 2, .is_cooperative = true}, k);
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(g_launches[1].attrs.size(), 2u);
}

// cucore.compute's launches with programmatic stream serialization (PDL):
// the attribute on top of any other, the arguments exactly as launch() sends
// them, and the same refusals before anything is launched.
TEST_F(LaunchArgsTest, ProgrammaticLaunchAddsTheAttribute) {
  Kernel saxpy = code.get_kernel("saxpy");
  const float a = 2.5f;
  const int n = 77;
  KernelArgs args;
  args.push(a).push(CUdeviceptr(0x1000)).push(CUdeviceptr(0x2000)).push(CUdeviceptr(0x3000)).push(n);
  cucore::detail::launch_programmatic(fake_stream(), {.grid = 3, .block = 128}, saxpy, args);
  ASSERT_EQ(g_launches.size(), 1u);
  const Captured& c = g_launches[0];
  EXPECT_EQ(c.config.gridDimX, 3u);
  EXPECT_EQ(c.config.blockDimX, 128u);
  ASSERT_EQ(c.attrs.size(), 1u);
  EXPECT_EQ(c.attrs[0].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(c.attrs[0].value.programmaticStreamSerializationAllowed, 1);
  ASSERT_EQ(c.params.size(), 5u);
  EXPECT_EQ(as<float>(c.params[0]), a);
  EXPECT_EQ(as<CUdeviceptr>(c.params[2]), CUdeviceptr(0x2000));
  EXPECT_EQ(as<int>(c.params[4]), n);
  // A plain launch of the same pack has no attribute.
  launch(fake_stream(), {.grid = 3, .block = 128}, saxpy, args);
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_TRUE(g_launches[1].attrs.empty());
  // With a cluster: both attributes.
  cucore::detail::launch_programmatic(fake_stream(), {.grid = 2, .block = 64, .cluster = 2}, saxpy, args);
  ASSERT_EQ(g_launches.size(), 3u);
  ASSERT_EQ(g_launches[2].attrs.size(), 2u);
  EXPECT_EQ(g_launches[2].attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(g_launches[2].attrs[1].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  // Wrong argument sizes are refused before the driver sees anything.
  KernelArgs bad;
  bad.push(1.0).push(CUdeviceptr(0)).push(CUdeviceptr(0)).push(CUdeviceptr(0)).push(n);
  const std::string what =
      message_of([&] { cucore::detail::launch_programmatic(fake_stream(), {.grid = 1, .block = 1}, saxpy, bad); });
  EXPECT_EQ(what, "saxpy: parameter 0 is 4 bytes, got 8");
  EXPECT_EQ(g_launches.size(), 3u);
}

// ---- context ----

TEST_F(LaunchArgsTest, FreshThreadGetsTheStreamsContext) {
  Kernel k = code.get_kernel("empty");
  std::string error;
  CUcontext seen = nullptr;
  std::thread t([&] {
    try {
      CUcontext before = reinterpret_cast<CUcontext>(1);
      cucore::detail::g_driver.load()->cuCtxGetCurrent(&before);
      if (before) error = "the fresh thread already had a context";
      launch(fake_stream(), {.grid = 1, .block = 1}, k);
      seen = t_seen_context;
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(seen, reinterpret_cast<CUcontext>(0x1000)) << "the stream's context (the fake's primary)";
  EXPECT_EQ(g_launches.size(), 1u);
}

TEST_F(LaunchArgsTest, LostContextIsRestoredOnce) {
  Kernel k = code.get_kernel("empty");
  launch(fake_stream(), {.grid = 1, .block = 1}, k);  // this thread now has a context
  fake.table.cuCtxSetCurrent(nullptr);                // someone takes it away
  launch(fake_stream(), {.grid = 1, .block = 1}, k);  // refused once, then relaunched
  EXPECT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(t_seen_context, reinterpret_cast<CUcontext>(0x1000));
}

// ---- type-erased and typed launches ----

TEST_F(LaunchArgsTest, KernelArgsPacksAtRunTime) {
  Kernel saxpy = code.get_kernel("saxpy");
  std::vector<float> xs(4);
  Buffer x = Buffer::from_handle(xs.data(), 16);
  KernelArgs args;
  args.push(2.0f).push(x).push(x).push(static_cast<float*>(nullptr)).push(9);
  EXPECT_EQ(args.size(), 5u);
  EXPECT_EQ(args.size_of(0), 4u);
  EXPECT_EQ(args.size_of(1), 8u);
  launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, args);
  ASSERT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(as<float>(g_launches[0].params[0]), 2.0f);
  EXPECT_EQ(as<CUdeviceptr>(g_launches[0].params[1]), x.handle());
  EXPECT_EQ(as<int>(g_launches[0].params[4]), 9);

  KernelArgs wrong;
  wrong.push(2.0).push(x).push(x).push(x).push(9);
  EXPECT_EQ(message_of([&] { launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, wrong); }),
            "saxpy: parameter 0 is 4 bytes, got 8");
  KernelArgs copy = args;  // copies carry their own storage
  args.clear();
  launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, copy);
  EXPECT_EQ(as<int>(g_launches[1].params[4]), 9);
  KernelArgs moved = std::move(copy);
  EXPECT_EQ(copy.size(), 0u);
  void* const* ptrs = moved.pointers();
  EXPECT_EQ(*static_cast<const float*>(ptrs[0]), 2.0f);

  // More than the inline storage holds spills to the heap and still works.
  Kernel many = code.get_kernel("many");
  KernelArgs big;
  for (std::int64_t i = 0; i < 20; ++i) big.push(i * 10);
  KernelArgs big_copy = big;
  launch(fake_stream(), {.grid = 1, .block = 1}, many, big_copy);
  ASSERT_EQ(g_launches.size(), 3u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(as<std::int64_t>(g_launches[2].params[i]), i * 10);
}

TEST_F(LaunchArgsTest, RawPointerArrayChecksTheCount) {
  Kernel saxpy = code.get_kernel("saxpy");
  float a = 1;
  float* p = nullptr;
  int n = 5;
  void* params[] = {&a, &p, &p, &p, &n};
  launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, std::span<void* const>(params));
  ASSERT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(as<int>(g_launches[0].params[4]), 5);
  std::vector<void*> four(params, params + 4);
  EXPECT_EQ(message_of([&] { launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, four); }),
            "saxpy: takes 5 arguments (of 4, 8, 8, 8, 4 bytes), got 4");
}

// A launch on a stream being captured: the graph being built keeps a share of
// every Buffer the launch packed, and of the kernel, until the driver lets go
// of the graph (a user object), so a Buffer dropped before the graph runs is
// not freed under it. A launch on a stream not being captured keeps nothing.
namespace {
CUgraph g_capture_graph = nullptr;  // the graph "being captured" on every stream, or none
std::vector<std::pair<void*, CUhostFn>> g_user_objects;
std::vector<std::pair<CUgraph, unsigned>> g_retained;  // (graph, flags)
}  // namespace

TEST_F(LaunchArgsTest, ACapturedLaunchKeepsItsBuffersAndKernelUntilTheGraphGoes) {
  g_capture_graph = nullptr;
  g_user_objects.clear();
  g_retained.clear();
  fake.table.cuStreamGetCaptureInfo = [](CUstream, CUstreamCaptureStatus* st, cuuint64_t*, CUgraph* g,
                                         const CUgraphNode**, const CUgraphEdgeData**, size_t*) {
    *st = g_capture_graph ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    if (g) *g = g_capture_graph;
    return CUDA_SUCCESS;
  };
  fake.table.cuUserObjectCreate = [](CUuserObject* o, void* ptr, CUhostFn destroy, unsigned refs, unsigned) {
    if (refs != 1) return CUDA_ERROR_INVALID_VALUE;
    g_user_objects.emplace_back(ptr, destroy);
    *o = reinterpret_cast<CUuserObject>(0x8000 + g_user_objects.size());
    return CUDA_SUCCESS;
  };
  fake.table.cuUserObjectRelease = [](CUuserObject, unsigned) { return CUDA_SUCCESS; };
  fake.table.cuGraphRetainUserObject = [](CUgraph g, CUuserObject, unsigned n, unsigned flags) {
    if (n != 1) return CUDA_ERROR_INVALID_VALUE;
    g_retained.emplace_back(g, flags);
    return CUDA_SUCCESS;
  };
  Stream s;
  DeviceMemoryResource mr = Device(0).memory_resource();
  using Saxpy = TypedKernel<void(float, const float*, const float*, float*, int)>;
  {
    Kernel k = code.get_kernel("saxpy");
    Buffer x = mr.allocate(64, s), y = mr.allocate(64, s), out = mr.allocate(64, s);
    launch(s, {.grid = 1, .block = 32}, k, 2.0f, x, y, out, 16);  // not captured: nothing kept
    EXPECT_TRUE(g_user_objects.empty());
    g_capture_graph = reinterpret_cast<CUgraph>(0x9000);
    launch(s, {.grid = 1, .block = 32}, k, 2.0f, x, y, out, 16);
    const Saxpy typed(k);
    launch(s, {.grid = 1, .block = 32}, typed, 2.0f, x, y, out, 16);
    float* raw = nullptr;
    launch(s, {.grid = 1, .block = 32}, code.get_kernel("scale<float>"), raw, 1.0f, 4);  // nothing to keep
  }
  code = ObjectCode();
  // The variadic and the typed launch each gave the graph one user object.
  ASSERT_EQ(g_user_objects.size(), 2u);
  ASSERT_EQ(g_retained.size(), 2u);
  for (auto [g, flags] : g_retained) {
    EXPECT_EQ(g, reinterpret_cast<CUgraph>(0x9000));
    EXPECT_EQ(flags, unsigned(CU_GRAPH_USER_OBJECT_MOVE));
  }
  // The Buffers, the kernel and its library outlived their owners' scope.
  EXPECT_EQ(FakeDriver::pool_frees.load(), 0);
  EXPECT_EQ(g_unloads.load(), 0);
  const auto& first = *static_cast<const std::vector<std::shared_ptr<const void>>*>(g_user_objects[0].first);
  EXPECT_EQ(first.size(), 4u);  // x, y, out and the kernel
  g_user_objects[0].second(g_user_objects[0].first);  // the driver lets go of the first
  cucore::detail::drain_releases_for_testing();
  EXPECT_EQ(FakeDriver::pool_frees.load(), 0);  // the second still holds them
  EXPECT_EQ(g_unloads.load(), 0);
  g_user_objects[1].second(g_user_objects[1].first);
  cucore::detail::drain_releases_for_testing();
  s.sync();
  EXPECT_EQ(FakeDriver::pool_frees.load(), 3);
  EXPECT_EQ(g_unloads.load(), 1);
  g_capture_graph = nullptr;
}

TEST_F(LaunchArgsTest, TypedKernelConvertsAtCompileTime) {
  using Saxpy = TypedKernel<void(float, const float*, const float*, float*, int)>;
  Saxpy saxpy(code.get_kernel("saxpy"));
  std::vector<float> xs(4);
  Buffer x = Buffer::from_handle(xs.data(), 16);
  float* out = xs.data() + 1;
  launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, 2.5f, x, x, out, 7);  // a Buffer to const float*
  ASSERT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(as<float>(g_launches[0].params[0]), 2.5f);
  EXPECT_EQ(as<CUdeviceptr>(g_launches[0].params[1]), x.handle());
  EXPECT_EQ(as<float*>(g_launches[0].params[3]), out);
  EXPECT_EQ(as<int>(g_launches[0].params[4]), 7);
  // A signature that does not match the kernel is refused once, up front.
  using Wrong = TypedKernel<void(double, const float*, const float*, float*, int)>;
  EXPECT_EQ(message_of([&] { Wrong w(code.get_kernel("saxpy")); }),
            "saxpy: parameter 0 is 4 bytes, the TypedKernel signature says 8 (double)");
  using Short = TypedKernel<void(float)>;
  EXPECT_NE(message_of([&] { Short s(code.get_kernel("saxpy")); }).find("takes 5 parameters"), std::string::npos);
}

// A DeviceSpan goes to a kernel as its pointer, on every path: the untyped
// launch (checked against the parameter's size), a TypedKernel (const kept),
// a KernelArgs pack.
TEST_F(LaunchArgsTest, DeviceSpansGoAsTheirPointers) {
  std::vector<float> xs(8), ys(8), outs(8);
  Buffer x = Buffer::from_handle(xs.data(), 32), y = Buffer::from_handle(ys.data(), 32);
  Buffer out = Buffer::from_handle(outs.data(), 32);
  const Buffer& cx = x;
  DeviceSpan<const float> in = cx.as<float>();
  DeviceSpan<const float> in2 = y.as<float>().subspan(2);  // a DeviceSpan<float> converts to const
  DeviceSpan<float> o = out.as<float>().last(5);
  Kernel saxpy = code.get_kernel("saxpy");
  launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, 1.5f, in, in2, o, 5);
  ASSERT_EQ(g_launches.size(), 1u);
  ASSERT_EQ(g_launches[0].params[1].size(), sizeof(CUdeviceptr));
  EXPECT_EQ(as<const float*>(g_launches[0].params[1]), xs.data());
  EXPECT_EQ(as<const float*>(g_launches[0].params[2]), ys.data() + 2);
  EXPECT_EQ(as<float*>(g_launches[0].params[3]), outs.data() + 3);
  // The untyped launch checks a span's size as any argument's: a span for the int.
  EXPECT_EQ(message_of([&] { launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, 1.5f, in, in2, o, o); }),
            "saxpy: parameter 4 is 4 bytes, got 8 (float*)");

  TypedKernel<void(float, const float*, const float*, float*, int)> typed(saxpy);
  launch(fake_stream(), {.grid = 1, .block = 1}, typed, 2.5f, in, x.as<float>(), o.first(2), 2);
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(as<float>(g_launches[1].params[0]), 2.5f);
  EXPECT_EQ(as<const float*>(g_launches[1].params[1]), xs.data());
  EXPECT_EQ(as<const float*>(g_launches[1].params[2]), xs.data());
  EXPECT_EQ(as<float*>(g_launches[1].params[3]), outs.data() + 3);
  EXPECT_EQ(as<int>(g_launches[1].params[4]), 2);

  KernelArgs args;
  args.push(1.0f).push(in).push(in2).push(o).push(3);
  EXPECT_EQ(args.size_of(1), sizeof(CUdeviceptr));
  launch(fake_stream(), {.grid = 1, .block = 1}, saxpy, args);
  ASSERT_EQ(g_launches.size(), 3u);
  EXPECT_EQ(as<const float*>(g_launches[2].params[2]), ys.data() + 2);
  EXPECT_EQ(as<float*>(g_launches[2].params[3]), outs.data() + 3);
}

// What must not compile is checked here at compile time.
template <typename... A>
concept launchable = requires(StreamRef s, const LaunchConfig& c, const Kernel& k, A&&... a) {
  launch(s, c, k, std::forward<A>(a)...);
};
template <typename... A>
concept typed_launchable =
    requires(StreamRef s, const LaunchConfig& c, const TypedKernel<void(float, float*)>& k, A&&... a) {
      launch(s, c, k, std::forward<A>(a)...);
    };
static_assert(launchable<float, Buffer&, const Buffer&, int>);
static_assert(launchable<KernelArgs&>);
static_assert(launchable<std::span<void* const>>);
static_assert(typed_launchable<float, Buffer&>);
static_assert(typed_launchable<float, float*>);
static_assert(!typed_launchable<float>, "too few arguments");
static_assert(!typed_launchable<float, float*, int>, "too many arguments");
// Each argument's rule (a refusal is a static_assert in launch, tests/compile_fail
// checks the messages): detail::typed_argument<Param, Arg as forwarded>.
using detail::typed_argument;
static_assert(!typed_argument<float*, int*>, "a pointer of the wrong type does not convert");
static_assert(typed_argument<float*, Buffer&> && typed_argument<double*, Buffer&> && typed_argument<void*, Buffer>,
              "a Buffer has no element type: any pointer");
static_assert(typed_argument<const float*, Buffer&> && typed_argument<const float*, const Buffer&>);
static_assert(!typed_argument<float*, const Buffer&> && !typed_argument<void*, const Buffer&>,
              "a const Buffer binds only to pointer-to-const");
static_assert(!typed_argument<int, Buffer&>, "a Buffer goes to a pointer");
static_assert(typed_argument<float*, DeviceSpan<float>> && typed_argument<const float*, DeviceSpan<float>&>);
static_assert(typed_argument<const float*, const DeviceSpan<const float>&> && typed_argument<const void*, DeviceSpan<const float>>);
static_assert(typed_argument<void*, DeviceSpan<float>>);
static_assert(!typed_argument<float*, DeviceSpan<const float>> && !typed_argument<void*, DeviceSpan<const float>>,
              "a DeviceSpan<const T> binds only to const T*");
static_assert(!typed_argument<double*, DeviceSpan<float>> && !typed_argument<const int*, DeviceSpan<const float>>,
              "a span's element type is the pointee's");
static_assert(!typed_argument<unsigned long long, DeviceSpan<float>>, "a span goes to a pointer");
static_assert(typed_argument<float, float> && typed_argument<double, float> && typed_argument<long, int> &&
                  typed_argument<int, bool> && typed_argument<std::int64_t, std::uint32_t> &&
                  typed_argument<int, short&> && typed_argument<float, const float&>,
              "exact types and conversions that keep every value");
static_assert(!typed_argument<float, double> && !typed_argument<int, std::size_t> &&
                  !typed_argument<std::int32_t, std::int64_t> && !typed_argument<int, float> &&
                  !typed_argument<float, int> && !typed_argument<double, int> && !typed_argument<unsigned, int> &&
                  !typed_argument<bool, int> && !typed_argument<bool, float*>,
              "narrowing (C++'s list-initialization rule) is refused");
static_assert(typed_argument<const float*, float*> && !typed_argument<float*, const float*>);

// ---- attributes and occupancy ----

TEST_F(LaunchArgsTest, AttributesAndOccupancy) {
  Kernel k = code.get_kernel("saxpy");
  auto attrs = k.attributes(0);
  EXPECT_EQ(attrs.device_id(), 0);
  EXPECT_EQ(attrs.num_regs(), 16);
  EXPECT_EQ(attrs.max_threads_per_block(), 1024);
  EXPECT_EQ(attrs.binary_version(), 90);
  EXPECT_EQ(attrs.shared_size_bytes(), 1024);
  EXPECT_THROW(attrs.set_max_dynamic_shared_size_bytes(-1), std::invalid_argument);
  EXPECT_THROW(attrs.set_preferred_shared_memory_carveout(101), std::invalid_argument);
  EXPECT_THROW(k.attributes(5), std::out_of_range);
  auto occ = k.occupancy();
  EXPECT_EQ(occ.max_active_blocks_per_multiprocessor(256, 0), 2);
  EXPECT_THROW(occ.max_active_blocks_per_multiprocessor(0, 0), std::invalid_argument);
}
