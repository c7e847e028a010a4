// StridedMemoryView and TMA tensor maps on a real GPU: views of device,
// pinned and managed Buffers report their DLPack device; DLPack export and
// import keep the pointer; copies between host and device views move every
// element; and a kernel loading tiles with cp.async.bulk.tensor through a
// TensorMapDescriptor copies a random 2-D array exactly, before and after
// replace_address.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/strided_memory_view.hpp>
#include <cucore/tensor_map.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/gpu.hpp"
#include "common/random.hpp"

using namespace cucore;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(GpuStridedMemoryView, DevicePinnedAndManagedBuffersRoundTripThroughDLPack) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  Stream s = dev.create_stream();
  const std::int64_t rows = 37, cols = 53;
  const std::size_t bytes = rows * cols * sizeof(float);
  std::vector<float> host = test::random_floats(rows * cols, 11);
  const std::vector<float> expect = host;  // a copy: a copy in the wrong direction cannot pass
  const std::int64_t shape[] = {rows, cols};
  StridedMemoryView host_view(host.data(), shape, {}, DataType::of<float>(), {dlpack::kDLCPU, 0});

  struct Kind {
    MemoryResource mr;
    dlpack::DLDeviceType expect;
  };
  std::vector<Kind> kinds = {{dev.memory_resource(), dlpack::kDLCUDA},
                             {PinnedMemoryResource(), dlpack::kDLCUDAHost},
                             {ManagedMemoryResource(), dlpack::kDLCUDAManaged}};
  for (const Kind& k : kinds) {
    Buffer b = k.mr.allocate(bytes, s);
    StridedMemoryView v = StridedMemoryView::from_buffer(b, shape, {}, DataType::of<float>());
    EXPECT_EQ(v.device().device_type, k.expect);
    EXPECT_EQ(dlpack_device_of(b).device_type, k.expect);
    v.copy_from(host_view, s);
    auto* t = v.to_dlpack();
    StridedMemoryView back = StridedMemoryView::adopt_dlpack(t);
    EXPECT_EQ(back.data(), b.data()) << "DLPack export is zero-copy";
    std::vector<float> out(host.size(), 0.0f);
    StridedMemoryView out_view(out.data(), shape, {}, DataType::of<float>(), {dlpack::kDLCPU, 0});
    back.copy_to(out_view, s);
    s.sync();
    for (std::size_t i = 0; i < expect.size(); ++i)
      ASSERT_EQ(out[i], expect[i]) << "element " << i << " of a " << int(k.expect) << " buffer";
    b.close(s);
  }
}

TEST(GpuTensorMap, TmaTileCopyIsExactAndFollowsReplaceAddress) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  if (dev.compute_capability().major < 9) GTEST_SKIP() << "TMA needs compute capability 9.0";
  dev.set_current();
  Stream s = dev.create_stream();
  const int rows = 300, cols = 200;  // not multiples of the 32 x 16 box: edge tiles are partial
  const std::size_t bytes = std::size_t(rows) * cols * sizeof(float);
  const std::int64_t shape[] = {rows, cols};
  std::vector<float> a = test::random_floats(std::size_t(rows) * cols, 21);
  std::vector<float> b = test::random_floats(std::size_t(rows) * cols, 22);
  Buffer src_a = dev.memory_resource().allocate(bytes, s), src_b = dev.memory_resource().allocate(bytes, s);
  Buffer out = dev.memory_resource().allocate(bytes, s);
  src_a.copy_from(std::span<const float>(a), s);
  src_b.copy_from(std::span<const float>(b), s);

  const std::string source = read_file(std::string(CUCORE_TEST_DATA_DIR) + "/tma_tile_copy.cu");
  ASSERT_FALSE(source.empty());
  ObjectCode code = Program(source, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
  Kernel k = code.get_kernel("tma_tile_copy");

  auto view_a = StridedMemoryView::from_buffer(src_a, shape, {}, DataType::of<float>());
  TensorMapDescriptor map = TensorMapDescriptor::tiled(view_a, {.box_dim = {32, 16}});
  const LaunchConfig config{.grid = {(cols + 15) / 16, (rows + 31) / 32}, .block = 128};
  for (int round = 0; round < 2; ++round) {
    out.fill(std::uint8_t{0}, s);
    launch(s, config, k, map, out, rows, cols);
    std::vector<float> got(a.size());
    out.copy_to(std::span<float>(got), s);
    s.sync();
    const std::vector<float>& want = round == 0 ? a : b;
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "round " << round << ", row " << i / cols << ", column " << i % cols;
    map.replace_address(StridedMemoryView::from_buffer(src_b, shape, {}, DataType::of<float>()));
  }
  src_a.close(s);
  src_b.close(s);
  out.close(s);
}
