// StridedMemoryView on the CPU: layouts, DLPack in and out (with ownership),
// foreign DLPack structs, views of Buffers and copies between views against
// the fake driver (whose "device memory" is host memory, so bytes really move).
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/strided_memory_view.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/fake_driver.hpp"
#include "common/message_of.hpp"

// A DLPack struct as another library declares it (PyTorch's ATen/dlpack.h
// puts these in the global namespace): the same layout, another type.
struct DLManagedTensorVersioned {
  cucore::dlpack::DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  std::uint64_t flags;
  cucore::dlpack::DLTensor dl_tensor;
};

using namespace cucore;
using cucore::test::FakeDriver;

namespace {

std::string message_of(const std::function<void()>& fn) { return test::message_of<std::invalid_argument>(fn); }

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(1.0f, 2.0f);  // never zero
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

constexpr dlpack::DLDevice kCpu{dlpack::kDLCPU, 0};

}  // namespace

TEST(StridedMemoryViewTest, LayoutFacts) {
  std::vector<float> data = random_floats(24, 1);
  const std::int64_t shape[] = {4, 6};
  StridedMemoryView c(data.data(), shape, {}, DataType::of<float>(), kCpu);
  EXPECT_EQ(c.ndim(), 2);
  EXPECT_EQ(c.size(), 24);
  EXPECT_EQ(std::vector<std::int64_t>(c.strides().begin(), c.strides().end()), (std::vector<std::int64_t>{6, 1}));
  EXPECT_TRUE(c.is_contiguous_c());
  EXPECT_FALSE(c.is_contiguous_f());
  EXPECT_EQ(c.span_bytes(), 24 * sizeof(float));
  EXPECT_EQ(c.device_id(), -1);
  EXPECT_FALSE(c.is_device_accessible());
  EXPECT_EQ(c.data_as<float>(), data.data());
  EXPECT_NE(message_of([&] { (void)c.data_as<int>(); }).find("not the requested type"), std::string::npos);

  const std::int64_t fstrides[] = {1, 4};
  StridedMemoryView f(data.data(), shape, fstrides, DataType::of<float>(), kCpu);
  EXPECT_TRUE(f.is_contiguous_f());
  EXPECT_FALSE(f.is_contiguous_c());
  // every other column: neither, and its span is what the last element reaches
  const std::int64_t sliced_shape[] = {4, 3}, sliced_strides[] = {6, 2};
  StridedMemoryView s(data.data(), sliced_shape, sliced_strides, DataType::of<float>(), kCpu);
  EXPECT_FALSE(s.is_contiguous_c());
  EXPECT_FALSE(s.is_contiguous_f());
  EXPECT_EQ(s.span_bytes(), (3 * 6 + 2 * 2 + 1) * sizeof(float));
  // extents of 1 take any stride
  const std::int64_t row[] = {1, 6}, row_strides[] = {999, 1};
  EXPECT_TRUE(is_contiguous_c(row, row_strides));
  EXPECT_TRUE(is_contiguous_f(std::span<const std::int64_t>(row), {}));

  EXPECT_NE(message_of([&] {
              const std::int64_t bad[] = {1};
              StridedMemoryView(data.data(), shape, bad, DataType::of<float>(), kCpu);
            }).find("strides has 1 entries for a shape of 2"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              const std::int64_t neg[] = {-1};
              StridedMemoryView(data.data(), neg, {}, DataType::of<float>(), kCpu);
            }).find("negative"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              StridedMemoryView(data.data(), shape, {}, DataType::of<float>(), {dlpack::kDLVulkan, 0});
            }).find("device type 7"),
            std::string::npos);
}

TEST(StridedMemoryViewTest, DLPackRoundTripKeepsEverythingAndTheOwner) {
  std::vector<float> data = random_floats(5 * 7, 2);
  const std::int64_t shape[] = {5, 4}, strides[] = {7, 1};  // a slice of a 5x7 array
  auto owner = std::make_shared<int>(42);
  StridedMemoryView v(data.data(), shape, strides, DataType::of<float>(), {dlpack::kDLCUDAHost, 0}, true);
  for (bool versioned : {true, false}) {
    {
      StridedMemoryView back;
      void (*release)(void*) = nullptr;
      void* tensor = nullptr;
      if (versioned) {
        auto* t = v.to_dlpack(owner);
        EXPECT_EQ(t->version.major, 1u);
        EXPECT_EQ(t->flags & dlpack::kDLFlagBitMaskReadOnly, dlpack::kDLFlagBitMaskReadOnly);
        back = StridedMemoryView::from_dlpack(t);
        tensor = t;
        release = [](void* p) {
          auto* m = static_cast<dlpack::DLManagedTensorVersioned*>(p);
          m->deleter(m);
        };
      } else {
        auto* t = v.to_dlpack_unversioned(owner);
        back = StridedMemoryView::from_dlpack(t);
        tensor = t;
        release = [](void* p) {
          auto* m = static_cast<dlpack::DLManagedTensor*>(p);
          m->deleter(m);
        };
      }
      EXPECT_EQ(owner.use_count(), 2) << "the exported tensor holds the owner";
      EXPECT_EQ(back.data(), data.data());
      EXPECT_EQ(std::vector<std::int64_t>(back.shape().begin(), back.shape().end()), (std::vector<std::int64_t>{5, 4}));
      EXPECT_EQ(std::vector<std::int64_t>(back.strides().begin(), back.strides().end()),
                (std::vector<std::int64_t>{7, 1}));
      EXPECT_EQ(back.dtype(), DataType::of<float>());
      EXPECT_EQ(back.device().device_type, dlpack::kDLCUDAHost);
      EXPECT_EQ(back.readonly(), versioned) << "0.x tensors carry no read-only flag";
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 4; ++j) EXPECT_EQ(back.data_as<float>()[i * 7 + j], data[i * 7 + j]);
      release(tensor);
    }
    EXPECT_EQ(owner.use_count(), 1) << "the deleter let the owner go";
  }
}

TEST(StridedMemoryViewTest, AdoptedTensorsAreReleasedOnceWithTheLastCopy) {
  static int released = 0;
  released = 0;
  std::vector<float> data = random_floats(16, 3);
  const std::int64_t shape[] = {16};
  StridedMemoryView v(data.data(), shape, {}, DataType::of<float>(), kCpu);
  auto* t = v.to_dlpack(std::shared_ptr<const void>(&released, [](const void*) { ++released; }));
  {
    StridedMemoryView a = StridedMemoryView::adopt_dlpack(t);
    StridedMemoryView b = a;
    EXPECT_EQ(b.data(), data.data());
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
  // A tensor it cannot read is released all the same.
  auto* bad = v.to_dlpack(std::shared_ptr<const void>(&released, [](const void*) { ++released; }));
  bad->version.major = 2;
  EXPECT_NE(message_of([&] { StridedMemoryView::adopt_dlpack(bad); }).find("DLPack version 2"), std::string::npos);
  EXPECT_EQ(released, 2);
}

TEST(StridedMemoryViewTest, ForeignDLPackStructsAreTakenAsTheyAre) {
  std::vector<float> data = random_floats(12, 4);
  const std::int64_t shape[] = {3, 4};
  StridedMemoryView v(data.data(), shape, {}, DataType::of<float>(), kCpu);
  auto* ours = v.to_dlpack();
  auto* theirs = reinterpret_cast<::DLManagedTensorVersioned*>(ours);  // as a library hands it over
  StridedMemoryView w = StridedMemoryView::adopt_dlpack(theirs);
  EXPECT_EQ(w.data(), data.data());
  EXPECT_EQ(w.shape()[1], 4);
  EXPECT_EQ(w.data_as<float>()[11], data[11]);
}

TEST(StridedMemoryViewTest, BufferViewsCopiesAndTheirRefusals) {
  FakeDriver fake;
  Device dev(0);
  Stream s = dev.create_stream();
  const std::size_t rows = 9, cols = 13;
  Buffer buf = dev.memory_resource().allocate(rows * cols * sizeof(float), s);
  const std::int64_t shape[] = {std::int64_t(rows), std::int64_t(cols)};
  StridedMemoryView dst = StridedMemoryView::from_buffer(buf, shape, {}, DataType::of<float>());
  EXPECT_EQ(dst.data(), buf.data());
  EXPECT_EQ(dst.device().device_type, dlpack::kDLCUDA);
  EXPECT_EQ(dst.device_id(), 0);

  std::vector<float> host = random_floats(rows * cols, 5);
  const std::vector<float> expect = host;  // what must arrive, whatever happens to `host`
  StridedMemoryView src(host.data(), shape, {}, DataType::of<float>(), kCpu);
  dst.copy_from(src, s);
  s.sync();
  std::vector<float> back(rows * cols, 0.0f);
  StridedMemoryView out(back.data(), shape, {}, DataType::of<float>(), kCpu);
  dst.copy_to(out, s);
  s.sync();
  for (std::size_t i = 0; i < expect.size(); ++i) ASSERT_EQ(back[i], expect[i]) << "element " << i;

  // A layout reaching past the buffer, mismatched shapes, gaps, read-only.
  const std::int64_t too_big[] = {std::int64_t(rows), std::int64_t(cols) + 1};
  EXPECT_NE(message_of([&] { StridedMemoryView::from_buffer(buf, too_big, {}, DataType::of<float>()); })
                .find("the buffer has " + std::to_string(rows * cols * 4)),
            std::string::npos);
  const std::int64_t other_shape[] = {std::int64_t(cols), std::int64_t(rows)};
  StridedMemoryView transposed(host.data(), other_shape, {}, DataType::of<float>(), kCpu);
  EXPECT_NE(message_of([&] { dst.copy_from(transposed, s); }).find("shapes differ"), std::string::npos);
  const std::int64_t half[] = {std::int64_t(rows), 6}, gap[] = {std::int64_t(cols), 2};
  StridedMemoryView strided(host.data(), half, gap, DataType::of<float>(), kCpu);
  StridedMemoryView dense(back.data(), half, {}, DataType::of<float>(), kCpu);
  EXPECT_NE(message_of([&] { dense.copy_from(strided, s); }).find("contiguous in the same order"), std::string::npos);
  StridedMemoryView ro(back.data(), shape, {}, DataType::of<float>(), kCpu, true);
  EXPECT_NE(message_of([&] { ro.copy_from(src, s); }).find("read-only"), std::string::npos);
  StridedMemoryView ints(host.data(), shape, {}, DataType::of<std::int16_t>(), kCpu);
  EXPECT_NE(message_of([&] { dst.copy_from(ints, s); }).find("item sizes differ"), std::string::npos);
  buf.close(s);
}
