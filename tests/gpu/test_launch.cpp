// Load and launch on a real GPU: SAXPY checked element by element, templates
// through name expressions, dynamic shared memory past 48 KB, clusters,
// cooperative launches, occupancy, every argument check, launching from a
// thread with no current context, and kernels outliving their ObjectCode.
#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu.hpp"
#include "common/random.hpp"
#include "launch_kernels.hpp"
#include "loader/driver.hpp"

using namespace cucore;

namespace {

using test::random_floats;
ObjectCode compile_for(const Device& dev, const char* source, std::vector<std::string> names = {}) {
  return Program(source, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin, std::move(names));
}

// The test kernels, compiled once per process (and never unloaded: no driver
// call from a static destructor at exit).
const ObjectCode& kernels() {
  static const ObjectCode* code =
      new ObjectCode(compile_for(Device(0), test::kLaunchKernels, {"scale<float>", "scale<double>"}));
  return *code;
}

template <typename T>
Buffer upload(const std::vector<T>& host, StreamRef stream) {
  Buffer b = Device(0).memory_resource().allocate(host.size() * sizeof(T), stream);
  b.copy_from(std::span<const T>(host), stream);
  return b;
}

template <typename T>
std::vector<T> download(const Buffer& b, StreamRef stream) {
  std::vector<T> host(b.size() / sizeof(T));
  b.copy_to(std::span<T>(host), stream);
  stream.sync();
  return host;
}

void expect_saxpy(float a, const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& out) {
  ASSERT_EQ(out.size(), x.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = a * x[i] + y[i];
    if (std::fabs(out[i] - want) > 1e-4f * std::max(1.f, std::fabs(want))) {
      if (++bad <= 5) ADD_FAILURE() << "out[" << i << "] = " << out[i] << ", want " << want;
    }
  }
  EXPECT_EQ(bad, 0u);
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST(GpuLaunch, SaxpyOnRandomData) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  const int n = 1'000'003;  // not a multiple of the block
  auto x = random_floats(n, 1), y = random_floats(n, 2);
  Buffer bx = upload(x, stream), by = upload(y, stream);
  Buffer out = dev.memory_resource().allocate(n * sizeof(float), stream);
  Kernel saxpy = kernels().get_kernel("saxpy");
  launch(stream, {.grid = (n + 255) / 256, .block = 256}, saxpy, 3.0f, bx, by, out, n);
  expect_saxpy(3.0f, x, y, download<float>(out, stream));

  // The same through a TypedKernel (Buffers to pointers; the scalars of the
  // parameters' own types: a double for the float would not compile)...
  TypedKernel<void(float, const float*, const float*, float*, int)> typed(saxpy);
  out.fill(std::uint32_t(0), stream);
  launch(stream, {.grid = (n + 255) / 256, .block = 256}, typed, -2.0f, bx, by, out, n);
  expect_saxpy(-2.0f, x, y, download<float>(out, stream));

  // ...and through a KernelArgs pack built at run time.
  KernelArgs args;
  args.push(0.5f).push(bx).push(by).push(out).push(n);
  launch(stream, {.grid = (n + 255) / 256, .block = 256}, saxpy, args);
  expect_saxpy(0.5f, x, y, download<float>(out, stream));
}

TEST(GpuLaunch, StructsGoByValue) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  struct Affine {
    float a, b;
    int n;
  };
  const int n = 1000;
  auto x = random_floats(n, 3);
  Buffer bx = upload(x, stream);
  Buffer out = dev.memory_resource().allocate(n * sizeof(float), stream);
  Kernel affine = kernels().get_kernel("affine");
  ASSERT_EQ(affine.arguments_info().at(0).size, sizeof(Affine));
  launch(stream, {.grid = (n + 127) / 128, .block = 128}, affine, Affine{2.f, 1.f, n}, bx, out);
  auto h = download<float>(out, stream);
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(h[i], 2.f * x[i] + 1.f) << i;
}

TEST(GpuLaunch, TemplateThroughNameExpressions) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  const int n = 4096;
  auto xf = random_floats(n, 4);
  std::vector<double> xd(xf.begin(), xf.end());
  Buffer bf = upload(xf, stream), bd = upload(xd, stream);
  Kernel sf = kernels().get_kernel("scale<float>");
  Kernel sd = kernels().get_kernel("scale<double>");
  EXPECT_NE(sf.handle(), sd.handle());
  EXPECT_NE(sf.mangled_name(), "scale<float>");
  EXPECT_EQ(sd.arguments_info().at(1).size, 8u);
  launch(stream, {.grid = n / 256, .block = 256}, sf, bf, 2.0f, n);
  launch(stream, {.grid = n / 256, .block = 256}, sd, bd, 0.5, n);
  auto hf = download<float>(bf, stream);
  auto hd = download<double>(bd, stream);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(hf[i], xf[i] * 2.0f) << i;
    ASSERT_EQ(hd[i], double(xf[i]) * 0.5) << i;
  }
  EXPECT_EQ(message_of([&] { launch(stream, {.grid = 1, .block = 32}, sf, bf, 2.0, n); }),
            "scale<float>: parameter 1 is 4 bytes, got 8 (double)");
  std::string what = message_of([&] { kernels().get_kernel("scale<int>"); });
  EXPECT_NE(what.find("no kernel 'scale<int>'"), std::string::npos) << what;
  EXPECT_NE(what.find("saxpy"), std::string::npos) << what;
}

TEST(GpuLaunch, DynamicSharedMemoryAbove48KB) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  Kernel k = kernels().get_kernel("reverse_shared");
  const int optin = dev.properties().max_shared_memory_per_block_optin();
  const int per_block = 100 * 1024 / 4;  // 100 KB of floats
  const std::size_t shmem = per_block * sizeof(float);
  if (optin < int(shmem)) GTEST_SKIP() << "device allows only " << optin << " bytes per block";
  const int blocks = 8;
  auto in = random_floats(std::size_t(per_block) * blocks, 5);
  Buffer bin = upload(in, stream);
  Buffer out = dev.memory_resource().allocate(in.size() * sizeof(float), stream);
  LaunchConfig cfg{.grid = blocks, .block = 256, .shmem_size = shmem};
  // Not raised yet: refused before anything runs, with the way out named.
  EXPECT_LE(k.attributes().max_dynamic_shared_size_bytes(), 48 * 1024);
  std::string what = message_of([&] { launch(stream, cfg, k, bin, out, per_block); });
  EXPECT_NE(what.find("max_dynamic_shared_size_bytes"), std::string::npos) << what;
  EXPECT_NE(what.find("set_max_dynamic_shared_size_bytes(102400)"), std::string::npos) << what;
  k.attributes().set_max_dynamic_shared_size_bytes(int(shmem));
  EXPECT_EQ(k.attributes().max_dynamic_shared_size_bytes(), int(shmem));
  launch(stream, cfg, k, bin, out, per_block);
  auto h = download<float>(out, stream);
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < per_block; ++i)
      ASSERT_EQ(h[std::size_t(b) * per_block + i], in[std::size_t(b) * per_block + per_block - 1 - i]) << b << " " << i;
  EXPECT_THROW(k.attributes().set_max_dynamic_shared_size_bytes(optin + 1), std::invalid_argument);
}

TEST(GpuLaunch, ClusterLaunch) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  if (dev.compute_capability().major < 9) {
    // Below 9.0 the launch is refused up front.
    Kernel k = kernels().get_kernel("empty_kernel");
    EXPECT_THROW(launch(stream, {.grid = 2, .block = 32, .cluster = 2}, k), FeatureUnavailableError);
    return;
  }
  ObjectCode code = compile_for(dev, test::kClusterKernel);
  Kernel k = code.get_kernel("cluster_info");
  const unsigned clusters = 6, cluster = 2, blocks = clusters * cluster;
  Buffer out = dev.memory_resource().allocate(blocks * 8 * sizeof(unsigned), stream);
  out.fill(std::uint32_t(0xFFFFFFFF), stream);
  launch(stream, {.grid = clusters, .block = 64, .cluster = cluster}, k, out);
  auto h = download<unsigned>(out, stream);
  for (unsigned b = 0; b < blocks; ++b) {
    const unsigned* o = h.data() + 8 * b;
    EXPECT_EQ(o[0], b % cluster) << "rank of block " << b;
    EXPECT_EQ(o[1], cluster) << "cluster size seen by block " << b;
    EXPECT_EQ(o[2], b / cluster) << "cluster id of block " << b;
    EXPECT_EQ(o[3], clusters) << "cluster count seen by block " << b;
    EXPECT_EQ(o[4], blocks) << "grid size: the grid counts clusters";
  }
  // Occupancy for clusters.
  auto occ = k.occupancy();
  EXPECT_GE(occ.max_potential_cluster_size({.grid = clusters, .block = 64, .cluster = cluster}), 2);
  EXPECT_GE(occ.max_active_clusters({.grid = clusters, .block = 64, .cluster = cluster}, stream), 1);
}

TEST(GpuLaunch, CooperativeLaunch) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  ASSERT_TRUE(dev.properties().cooperative_launch());
  Stream stream = dev.create_stream();
  ObjectCode code = compile_for(dev, test::kCooperativeKernel);
  Kernel k = code.get_kernel("grid_exchange");
  const int block = 128;
  const int per_sm = k.occupancy().max_active_blocks_per_multiprocessor(block, 0);
  ASSERT_GT(per_sm, 0);
  const int grid = per_sm * dev.properties().multiprocessor_count();  // the whole device, at once
  Buffer data = dev.memory_resource().allocate(grid * sizeof(int), stream);
  Buffer out = dev.memory_resource().allocate(grid * sizeof(int), stream);
  data.fill(std::uint32_t(0), stream);
  out.fill(std::uint32_t(0), stream);
  launch(stream, {.grid = grid, .block = block, .is_cooperative = true}, k, data, out);
  auto h = download<int>(out, stream);
  for (int b = 0; b < grid; ++b) ASSERT_EQ(h[b], ((b + 1) % grid) * 3 + 1) << "block " << b;
  // One block more than fits at once: refused before launching.
  std::string what = message_of([&] { launch(stream, {.grid = grid + 1, .block = block, .is_cooperative = true}, k, data, out); });
  EXPECT_NE(what.find("cooperative launch of " + std::to_string(grid + 1) + " blocks exceeds"), std::string::npos)
      << what;
  stream.sync();
}

TEST(GpuLaunch, AttributesAndOccupancyAgree) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  auto props = dev.properties();
  const auto cc = dev.compute_capability();
  Kernel saxpy = kernels().get_kernel("saxpy");
  auto a = saxpy.attributes();
  EXPECT_EQ(a.device_id(), 0);
  EXPECT_GT(a.num_regs(), 0);
  EXPECT_LE(a.num_regs(), 255);
  EXPECT_EQ(a.binary_version(), cc.major * 10 + cc.minor);
  EXPECT_GT(a.ptx_version(), 0);
  EXPECT_GE(a.max_threads_per_block(), 32);
  EXPECT_LE(a.max_threads_per_block(), props.max_threads_per_block());
  EXPECT_EQ(a.shared_size_bytes(), 0);
  EXPECT_EQ(a.local_size_bytes(), 0);
  EXPECT_GT(a.max_dynamic_shared_size_bytes(), 0);
  EXPECT_LE(a.max_dynamic_shared_size_bytes(), props.max_shared_memory_per_block());  // not raised: 48 KB at most
  EXPECT_FALSE(a.cluster_size_must_be_set());
  EXPECT_EQ(saxpy.num_arguments(), 5u);
  const auto& info = saxpy.arguments_info();
  EXPECT_EQ(info[0], (ParamInfo{0, 4}));
  EXPECT_EQ(info[1], (ParamInfo{8, 8}));
  EXPECT_EQ(info[4].size, 4u);

  Kernel st = kernels().get_kernel("static_shared");
  EXPECT_EQ(st.attributes().shared_size_bytes(), 1024);
  EXPECT_LE(st.attributes().max_dynamic_shared_size_bytes(), props.max_shared_memory_per_block() - 1024);

  Kernel bounded = kernels().get_kernel("bounded");
  EXPECT_LE(bounded.attributes().max_threads_per_block(), 128);

  auto occ = saxpy.occupancy(dev);
  const int per_sm = occ.max_active_blocks_per_multiprocessor(256, 0);
  EXPECT_GT(per_sm, 0);
  EXPECT_LE(per_sm * 256, props.max_threads_per_multiprocessor());
  EXPECT_LE(per_sm, props.max_blocks_per_multiprocessor());
  auto best = occ.max_potential_block_size(0);
  EXPECT_GT(best.max_block_size, 0);
  EXPECT_LE(best.max_block_size, a.max_threads_per_block());
  EXPECT_EQ(best.max_block_size % props.warp_size(), 0);
  EXPECT_GT(best.min_grid_size, 0);
  auto limited = occ.max_potential_block_size(0, 64);
  EXPECT_LE(limited.max_block_size, 64);
  auto by_block = occ.max_potential_block_size([](int block) -> std::size_t { return std::size_t(block) * 4; });
  EXPECT_GT(by_block.max_block_size, 0);
  const std::size_t avail = occ.available_dynamic_shared_memory_per_block(1, 256);
  EXPECT_GE(avail, std::size_t(props.max_shared_memory_per_block()));
  EXPECT_LE(avail, std::size_t(props.max_shared_memory_per_multiprocessor()));
  // More blocks per SM leave less shared memory to each.
  EXPECT_LE(occ.available_dynamic_shared_memory_per_block(4, 256), avail);
  // Occupancy falls (or stays) as a block asks for more shared memory.
  EXPECT_LE(occ.max_active_blocks_per_multiprocessor(256, 32 * 1024), per_sm);
}

TEST(GpuLaunch, EveryArgumentCheck) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  Kernel saxpy = kernels().get_kernel("saxpy");
  Buffer b = dev.memory_resource().allocate(1024, stream);
  const float a = 1.f;
  const int n = 256;
  LaunchConfig ok{.grid = 1, .block = 256};
  // Count.
  EXPECT_EQ(message_of([&] { launch(stream, ok, saxpy, a, b, b, b); }),
            "saxpy: takes 5 arguments (of 4, 8, 8, 8, 4 bytes), got 4");
  EXPECT_EQ(message_of([&] { launch(stream, ok, saxpy, a, b, b, b, n, n); }),
            "saxpy: takes 5 arguments (of 4, 8, 8, 8, 4 bytes), got 6");
  // Sizes.
  EXPECT_EQ(message_of([&] { launch(stream, ok, saxpy, a, b, b, b, 4.0); }),
            "saxpy: parameter 4 is 4 bytes, got 8 (double)");
  EXPECT_EQ(message_of([&] { launch(stream, ok, saxpy, a, b, b, b, std::size_t(n)); }),
            "saxpy: parameter 4 is 4 bytes, got 8 (unsigned long)");
  EXPECT_EQ(message_of([&] { launch(stream, ok, saxpy, 3.0, b, b, b, n); }),
            "saxpy: parameter 0 is 4 bytes, got 8 (double)");
  // A closed buffer.
  Buffer closed = dev.memory_resource().allocate(1024, stream);
  closed.close();
  EXPECT_EQ(message_of([&] { launch(stream, ok, saxpy, a, closed, b, b, n); }),
            "Buffer has been closed (saxpy: argument 1)");
  // Configurations.
  EXPECT_THROW(launch(stream, {.grid = 0, .block = 256}, saxpy, a, b, b, b, n), std::invalid_argument);
  EXPECT_THROW(launch(stream, {.grid = 1, .block = {256, 0}}, saxpy, a, b, b, b, n), std::invalid_argument);
  EXPECT_THROW(launch(stream, {.grid = 1}, saxpy, a, b, b, b, n), std::invalid_argument);
  std::string what = message_of([&] { launch(stream, {.grid = 1, .block = {64, 32}}, saxpy, a, b, b, b, n); });
  EXPECT_NE(what.find("block of 2048 threads exceeds the device limit of 1024"), std::string::npos) << what;
  what = message_of([&] { launch(stream, {.grid = 1, .block = 2048}, saxpy, a, b, b, b, n); });
  EXPECT_NE(what.find("exceeds the maximum block dimensions"), std::string::npos) << what;
  what = message_of([&] { launch(stream, {.grid = {1, 70000}, .block = 32}, saxpy, a, b, b, b, n); });
  EXPECT_NE(what.find("exceeds the maximum grid dimensions"), std::string::npos) << what;
  Kernel bounded = kernels().get_kernel("bounded");
  what = message_of([&] { launch(stream, {.grid = 1, .block = 256}, bounded, b); });
  EXPECT_NE(what.find("exceeds this kernel's limit of"), std::string::npos) << what;
  // Nothing above broke the context: a good launch still works.
  launch(stream, {.grid = 1, .block = 128}, bounded, b);
  stream.sync();
}

TEST(GpuLaunch, FromAThreadWithNoCurrentContext) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();  // this thread's; the fresh thread below starts with none
  Stream stream = dev.create_stream();  // made here; used from a fresh thread
  const int n = 100'000;
  auto x = random_floats(n, 6), y = random_floats(n, 7);
  Buffer bx = upload(x, stream), by = upload(y, stream);
  Buffer out = dev.memory_resource().allocate(n * sizeof(float), stream);
  stream.sync();
  Kernel saxpy = kernels().get_kernel("saxpy");
  CUcontext before = reinterpret_cast<CUcontext>(1), after = nullptr;
  std::string error;
  std::thread t([&] {
    try {
      const auto& d = detail::driver();
      d.cuCtxGetCurrent(&before);  // a fresh thread: nothing current
      launch(stream, {.grid = (n + 255) / 256, .block = 256}, saxpy, 2.0f, bx, by, out, n);
      stream.sync();
      d.cuCtxGetCurrent(&after);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  ASSERT_EQ(error, "");
  EXPECT_EQ(before, nullptr) << "the thread was not fresh";
  EXPECT_EQ(after, stream.context().handle()) << "the stream's context was made current";
  expect_saxpy(2.0f, x, y, download<float>(out, stream));
}

TEST(GpuLaunch, KernelOutlivesItsObjectCode) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  Kernel saxpy;
  {
    ObjectCode code = compile_for(dev, test::kLaunchKernels);
    saxpy = code.get_kernel("saxpy");
    EXPECT_TRUE(code.is_loaded());
  }  // the ObjectCode is gone; the Kernel keeps its library loaded
  const int n = 5000;
  auto x = random_floats(n, 8), y = random_floats(n, 9);
  Buffer bx = upload(x, stream), by = upload(y, stream);
  Buffer out = dev.memory_resource().allocate(n * sizeof(float), stream);
  Kernel copy = saxpy;
  saxpy = Kernel();
  launch(stream, {.grid = (n + 255) / 256, .block = 256}, copy, 1.5f, bx, by, out, n);
  expect_saxpy(1.5f, x, y, download<float>(out, stream));
}

TEST(GpuLaunch, PtxLoadsToo) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  ObjectCode ptx = Program(test::kLaunchKernels, "c++", {.arch = "compute_" + dev.arch()}).compile(CodeType::ptx);
  EXPECT_EQ(ptx.code_type(), CodeType::ptx);
  EXPECT_FALSE(ptx.is_loaded());
  Kernel saxpy = ptx.get_kernel("saxpy");
  EXPECT_TRUE(ptx.is_loaded());
  auto names = ptx.kernel_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "saxpy"), names.end());
  const int n = 777;
  auto x = random_floats(n, 10), y = random_floats(n, 11);
  Buffer bx = upload(x, stream), by = upload(y, stream);
  Buffer out = dev.memory_resource().allocate(n * sizeof(float), stream);
  launch(stream, {.grid = (n + 255) / 256, .block = 256}, saxpy, 4.0f, bx, by, out, n);
  expect_saxpy(4.0f, x, y, download<float>(out, stream));
}

TEST(GpuLaunch, GetModuleFindsTheKernelsForLegacyCalls) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  ObjectCode code = compile_for(dev, test::kLaunchKernels);
  CUmodule module = code.get_module();
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(code.is_loaded());
  EXPECT_EQ(code.get_module(), module);  // the same library, the same context
  const auto& d = detail::driver();
  CUfunction f = nullptr;
  ASSERT_EQ(d.cuModuleGetFunction(&f, module, "saxpy"), CUDA_SUCCESS);
  ASSERT_NE(f, nullptr);
  CUfunction none = nullptr;
  EXPECT_EQ(d.cuModuleGetFunction(&none, module, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  // The function found by name is the kernel: launch it through the driver and check every element.
  const int n = 70001;
  auto x = random_floats(n, 41), y = random_floats(n, 42);
  Buffer bx = upload(x, stream), by = upload(y, stream);
  Buffer out = dev.memory_resource().allocate(n * sizeof(float), stream);
  float a = 2.5f;
  CUdeviceptr px = bx.handle(), py = by.handle(), po = out.handle();
  int count = n;
  void* args[] = {&a, &px, &py, &po, &count};
  CUlaunchConfig config{};
  config.gridDimX = (n + 255) / 256;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 256;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream.handle();
  ASSERT_EQ(d.cuLaunchKernelEx(&config, f, args, nullptr), CUDA_SUCCESS);
  expect_saxpy(a, x, y, download<float>(out, stream));
  // Empty: refused.
  EXPECT_THROW(ObjectCode().get_module(), std::invalid_argument);
}
