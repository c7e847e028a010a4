// StridedMemoryView on the CPU: layouts, DLPack in and out (with ownership),
// foreign DLPack structs, views of Buffers and copies between views against
// the fake driver (whose "device memory" is host memory, so bytes really move).
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/strided_layout.hpp>
#include <cucore/strided_memory_view.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <span>
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

namespace {

// A DLTensor over `data` (float32 on the CPU) with these fields as given.
dlpack::DLTensor tensor_of(void* data, std::int32_t ndim, const std::int64_t* shape, const std::int64_t* strides,
                           std::uint64_t byte_offset = 0) {
  return {data, kCpu, ndim, DataType::of<float>().to_dlpack(), const_cast<std::int64_t*>(shape),
          const_cast<std::int64_t*>(strides), byte_offset};
}

// The importer and check_dltensor agree: both refuse `t`, saying `why`.
void expect_refused(const dlpack::DLTensor& t, const std::string& why) {
  EXPECT_NE(message_of([&] { (void)StridedMemoryView::from_dltensor(t); }).find(why), std::string::npos) << why;
  EXPECT_NE(message_of([&] { check_dltensor(t); }).find(why), std::string::npos) << why;
}

}  // namespace

TEST(StridedMemoryViewTest, DLPackTensorsAreCheckedBeforeTheirShapeIsRead) {
  std::vector<float> data = random_floats(16, 6);
  // A one-entry shape behind every claim of rank: reading past it is what
  // the checks must prevent (ASan sees it in the sanitizer build).
  const auto one = std::make_unique<std::int64_t[]>(1);
  one[0] = 16;
  for (std::int32_t ndim : {-1, -2147483647 - 1, 65, 1 << 20, 2147483647})
    expect_refused(tensor_of(data.data(), ndim, one.get(), nullptr), "ndim " + std::to_string(ndim) + " is out of range");
  expect_refused(tensor_of(data.data(), 2, nullptr, nullptr), "ndim is 2 but shape is null");
  // The byte offset, the element count and the strides' reach must not overflow.
  const std::int64_t four[] = {4};
  expect_refused(tensor_of(reinterpret_cast<void*>(std::uintptr_t(-16)), 1, four, nullptr, 64), "byte_offset 64 wraps");
  expect_refused(tensor_of(data.data(), 1, four, nullptr, ~std::uint64_t(0)), "wraps the data pointer");
  const std::int64_t huge[] = {std::int64_t(1) << 40, std::int64_t(1) << 40};
  expect_refused(tensor_of(data.data(), 2, huge, nullptr), "element count overflows");
  const std::int64_t bytes_too_many[] = {std::int64_t(1) << 62};
  expect_refused(tensor_of(data.data(), 1, bytes_too_many, nullptr), "size in bytes overflows");
  const std::int64_t two_by_two[] = {2, 2}, far[] = {INT64_MAX, 1}, far_back[] = {INT64_MIN, 1};
  expect_refused(tensor_of(data.data(), 2, two_by_two, far), "the strides reach beyond 64 bits");
  expect_refused(tensor_of(data.data(), 2, two_by_two, far_back), "the strides reach beyond 64 bits");
  const std::int64_t back_stride[] = {-4};
  expect_refused(tensor_of(reinterpret_cast<void*>(std::uintptr_t(8)), 1, four, back_stride),
                 "reaches outside the address space");
  const std::int64_t negative[] = {4, -1};
  expect_refused(tensor_of(data.data(), 2, negative, nullptr), "extent 1 is negative (-1)");
  dlpack::DLTensor no_size = tensor_of(data.data(), 1, four, nullptr);
  no_size.dtype.lanes = 0;
  expect_refused(no_size, "no size");
  dlpack::DLTensor rocm = tensor_of(data.data(), 1, four, nullptr);
  rocm.device = {dlpack::kDLROCM, 0};
  expect_refused(rocm, "device type 10");

  // What a producer may send is read exactly: 64 dimensions, null strides
  // (compact), negative strides, an empty tensor with strides that reach
  // nowhere, a byte offset.
  std::vector<std::int64_t> ones(64, 1);
  ones[63] = 16;
  const StridedMemoryView v64 = StridedMemoryView::from_dltensor(tensor_of(data.data(), 64, ones.data(), nullptr));
  EXPECT_EQ(v64.ndim(), 64);
  EXPECT_EQ(v64.size(), 16);
  EXPECT_EQ(v64.strides()[63], 1);
  std::vector<std::int64_t> ones65(65, 1);
  expect_refused(tensor_of(data.data(), 65, ones65.data(), nullptr), "ndim 65");
  const std::int64_t reversed[] = {-1};
  const StridedMemoryView r = StridedMemoryView::from_dltensor(tensor_of(data.data(), 1, four, reversed, 12));
  EXPECT_EQ(r.data(), data.data() + 3);
  EXPECT_EQ(r.strides()[0], -1);
  const std::int64_t empty[] = {0, std::int64_t(1) << 40}, wild[] = {INT64_MAX, INT64_MIN};
  const StridedMemoryView e = StridedMemoryView::from_dltensor(tensor_of(data.data(), 2, empty, wild));
  EXPECT_EQ(e.size(), 0);
  EXPECT_EQ(e.span_bytes(), 0u);
  EXPECT_NO_THROW(check_dltensor(tensor_of(data.data(), 0, nullptr, nullptr)));
  EXPECT_EQ(StridedMemoryView::from_dltensor(tensor_of(data.data(), 0, nullptr, nullptr)).size(), 1);

  // Managed tensors: null and foreign major versions are refused by the checks as by from_dlpack.
  EXPECT_NE(message_of([] { check_dlpack(static_cast<const dlpack::DLManagedTensor*>(nullptr)); }).find("null"),
            std::string::npos);
  dlpack::DLManagedTensorVersioned managed{};
  managed.version = {2, 0};
  managed.dl_tensor = tensor_of(data.data(), 1, four, nullptr);
  EXPECT_NE(message_of([&] { check_dlpack(&managed); }).find("DLPack version 2.0"), std::string::npos);
  managed.version = {dlpack::kMajor, 0};
  EXPECT_NO_THROW(check_dlpack(&managed));
  managed.dl_tensor.ndim = 1 << 20;
  EXPECT_NE(message_of([&] { check_dlpack(&managed); }).find("out of range"), std::string::npos);
}

TEST(StridedMemoryViewTest, LayoutsThatOverflowAreRefusedByTheConstructor) {
  std::vector<float> data = random_floats(8, 7);
  auto make = [&](std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, void* p = nullptr) {
    return [=, &data] { StridedMemoryView(p ? p : data.data(), shape, strides, DataType::of<float>(), kCpu); };
  };
  EXPECT_NE(message_of(make({-3}, {})).find("extent 0 is negative (-3)"), std::string::npos);
  EXPECT_NE(message_of(make({0, -1}, {})).find("extent 1 is negative"), std::string::npos) << "even when empty";
  EXPECT_NE(message_of(make({INT64_MAX, 2}, {})).find("element count overflows"), std::string::npos);
  EXPECT_NE(message_of(make({0, INT64_MAX, 2}, {})).find("element count overflows"), std::string::npos)
      << "the compact strides multiply the other extents";
  EXPECT_NE(message_of(make({std::int64_t(1) << 61}, {})).find("size in bytes overflows"), std::string::npos);
  EXPECT_NE(message_of(make({3, 3}, {INT64_MAX / 2 + 1, 1})).find("strides reach beyond 64 bits"), std::string::npos);
  EXPECT_NE(message_of(make({2}, {INT64_MAX / 4 + 1})).find("beyond 64 bits in bytes"), std::string::npos);
  EXPECT_NE(message_of(make({2}, {-1}, reinterpret_cast<void*>(std::uintptr_t(2))))
                .find("reaches outside the address space"),
            std::string::npos);
  EXPECT_NE(message_of(make({2}, {}, reinterpret_cast<void*>(~std::uintptr_t(0) - 6)))
                .find("reaches outside the address space"),
            std::string::npos);
  EXPECT_NE(message_of(make(std::vector<std::int64_t>(65, 1), {})).find("ndim 65 is more than 64"), std::string::npos);
  // The largest that fit are views whose arithmetic is exact.
  const StridedMemoryView top(reinterpret_cast<void*>(~std::uintptr_t(0) - 8), std::vector<std::int64_t>{2}, {},
                              DataType::of<float>(), kCpu);
  EXPECT_EQ(top.span_bytes(), 8u);
  const StridedMemoryView wide(data.data(), std::vector<std::int64_t>{std::int64_t(1) << 60}, {},
                               DataType::of<std::uint8_t>(), kCpu);
  EXPECT_EQ(wide.size(), std::int64_t(1) << 60);
  EXPECT_EQ(wide.span_bytes(), std::size_t(1) << 60);
}

// The constructor checks the usual layout in one pass and sends the rest to
// the layout functions: on random layouts at the edges of 64 bits, it accepts
// exactly what those functions accept, and a view's dense strides are theirs.
TEST(StridedMemoryViewTest, TheOnePassCheckAcceptsExactlyWhatTheLayoutFunctionsAccept) {
  std::mt19937_64 rng(20261203);
  const std::int64_t edges[] = {0, 1, 2, 3, 5, 7, (std::int64_t(1) << 20) + 1, std::int64_t(1) << 31,
                                (std::int64_t(1) << 40) - 3, std::int64_t(1) << 59, (std::int64_t(1) << 61) + 1,
                                INT64_MAX / 3, INT64_MAX};
  auto pick = [&] { return edges[rng() % std::size(edges)]; };
  const std::uintptr_t pointers[] = {0, 8, 4096, std::uintptr_t(1) << 47, ~std::uintptr_t(0) - 4095,
                                     ~std::uintptr_t(0) - 7};
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::size_t ndim = rng() % 5;
    std::vector<std::int64_t> shape(ndim), strides;
    for (auto& e : shape) e = rng() % 3 ? static_cast<std::int64_t>(1 + rng() % 9) : pick();
    if (rng() % 2) {
      strides.resize(ndim);
      for (auto& st : strides) {
        st = rng() % 3 ? static_cast<std::int64_t>(rng() % 17) - 8 : pick();
        if (rng() % 4 == 0) st = -st;
      }
    }
    const std::int64_t itemsize = std::int64_t(1) << (rng() % 4);
    const DataType dtype{dlpack::kDLUInt, static_cast<std::uint8_t>(8 * itemsize), 1};
    const std::uintptr_t data = pointers[rng() % std::size(pointers)] + (rng() % 2 ? 0 : 8);
    bool reference = true;  // what the layout functions and the address-space rule say
    try {
      (void)size_in_bytes(shape, itemsize);
      const ByteBounds b = byte_bounds(shape, strides, itemsize);
      const auto before = static_cast<std::uint64_t>(-(b.begin + 1)) + 1;
      if ((b.begin < 0 && before > data) || static_cast<std::uint64_t>(b.end) > ~std::uintptr_t(0) - data)
        reference = false;
    } catch (const std::exception&) {
      reference = false;
    }
    std::optional<StridedMemoryView> v;
    try {
      v.emplace(reinterpret_cast<void*>(data), shape, strides, dtype, kCpu);
    } catch (const std::invalid_argument&) {
    }
    ASSERT_EQ(v.has_value(), reference) << "trial " << trial << ", ndim " << ndim;
    (reference ? accepted : refused)++;
    if (!v) continue;
    std::vector<std::int64_t> want(strides);
    if (want.empty()) {
      want.resize(ndim);
      dense_strides(shape, LayoutOrder::c, want);
    }
    ASSERT_EQ(std::vector<std::int64_t>(v->strides().begin(), v->strides().end()), want) << "trial " << trial;
    ASSERT_EQ(std::vector<std::int64_t>(v->shape().begin(), v->shape().end()), shape) << "trial " << trial;
  }
  EXPECT_GT(accepted, 2000);
  EXPECT_GT(refused, 2000);
}

TEST(StridedMemoryViewTest, TypestrsAreReadAsNumPyWritesThem) {
  struct Case {
    const char* typestr;
    std::size_t itemsize;
    std::optional<DataType> dtype;
  };
  const Case cases[] = {
      {"<f4", 4, DataType::of<float>()},          {"<f8", 8, DataType::of<double>()},
      {"<f2", 2, DataType{dlpack::kDLFloat, 16, 1}}, {"|u1", 1, DataType::of<std::uint8_t>()},
      {"|i1", 1, DataType::of<std::int8_t>()},     {"<i8", 8, DataType::of<std::int64_t>()},
      {"=u2", 2, DataType::of<std::uint16_t>()},   {"|b1", 1, DataType::of<bool>()},
      {"<c8", 8, DataType{dlpack::kDLComplex, 64, 1}}, {"<c16", 16, DataType{dlpack::kDLComplex, 128, 1}},
      {">f4", 4, std::nullopt},  // the other byte order: no DLPack type
      {">u1", 1, DataType::of<std::uint8_t>()},  // one byte has no order
      {"|V16", 16, std::nullopt},  {"<U8", 8, std::nullopt}, {"<M8[ns]", 8, std::nullopt},
      {"<f16", 16, std::nullopt},  {"<i3", 3, std::nullopt}, {"|V65535", 65535, std::nullopt},
  };
  for (const Case& c : cases) {
    const TypeStr t = parse_typestr(c.typestr);
    EXPECT_EQ(t.itemsize, c.itemsize) << c.typestr;
    EXPECT_EQ(t.dtype, c.dtype) << c.typestr;
  }
  for (const char* bad : {"", "<", "<f", "f4", "xf4", "<4", "<f0", "<f4x", "<f4[ns]", "<M8[", "<f65536",
                          "<f99999999999999999999", "<f-4", "< f4"})
    EXPECT_NE(message_of([&] { (void)parse_typestr(bad); }).find(std::string("typestr '") + bad + "'"),
              std::string::npos)
        << bad;
}

TEST(StridedMemoryViewTest, ArrayInterfacesAreCheckedAndConvertedToElements) {
  std::vector<float> data = random_floats(24, 8);
  const std::int64_t shape[] = {4, 3}, byte_strides[] = {24, 8};  // every other column of a 4x6 array
  ArrayInterface a{reinterpret_cast<std::uintptr_t>(data.data()), true, "<f4", shape,
                   std::span<const std::int64_t>(byte_strides), {dlpack::kDLCUDA, 0}};
  const StridedMemoryView v = StridedMemoryView::from_array_interface(a);
  EXPECT_EQ(v.data(), data.data());
  EXPECT_TRUE(v.readonly());
  EXPECT_EQ(v.dtype(), DataType::of<float>());
  EXPECT_EQ(v.device().device_type, dlpack::kDLCUDA);
  EXPECT_EQ(std::vector<std::int64_t>(v.shape().begin(), v.shape().end()), (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(std::vector<std::int64_t>(v.strides().begin(), v.strides().end()), (std::vector<std::int64_t>{6, 2}));
  // No strides: C-contiguous. A type DLPack has none for: its bytes.
  ArrayInterface s{reinterpret_cast<std::uintptr_t>(data.data()), false, "|V12", shape, std::nullopt, kCpu};
  const StridedMemoryView structs = StridedMemoryView::from_array_interface(s);
  EXPECT_EQ(structs.dtype(), (DataType{dlpack::kDLUInt, 8, 12}));
  EXPECT_EQ(structs.itemsize(), 12u);
  EXPECT_EQ(std::vector<std::int64_t>(structs.strides().begin(), structs.strides().end()),
            (std::vector<std::int64_t>{3, 1}));

  auto refused = [&](ArrayInterface x) { return message_of([&] { (void)StridedMemoryView::from_array_interface(x); }); };
  ArrayInterface bad = a;
  bad.typestr = "xf4";
  EXPECT_NE(refused(bad).find("typestr 'xf4' has no byte order"), std::string::npos);
  bad = a;
  const std::int64_t uneven[] = {24, 6};
  bad.strides = std::span<const std::int64_t>(uneven);
  EXPECT_NE(refused(bad).find("stride 6 bytes is not a multiple of the itemsize (4)"), std::string::npos);
  const std::int64_t one_stride[] = {4};
  bad.strides = std::span<const std::int64_t>(one_stride);
  EXPECT_NE(refused(bad).find("strides has 1 entries for a shape of 2"), std::string::npos);
  bad = a;
  const std::int64_t minus[] = {-1, 3};
  bad.shape = minus;
  EXPECT_NE(refused(bad).find("extent 0 is negative"), std::string::npos);
  bad = a;
  const std::int64_t far[] = {INT64_MAX - 3, 8};
  bad.strides = std::span<const std::int64_t>(far);
  EXPECT_NE(refused(bad).find("beyond 64 bits"), std::string::npos);
  bad = a;
  const std::vector<std::int64_t> deep(65, 1);
  bad.shape = deep;
  bad.strides = std::nullopt;
  EXPECT_NE(refused(bad).find("ndim 65"), std::string::npos);
}

TEST(StridedMemoryViewTest, CopiesAndMovesKeepEveryExtentAndStrideInlineOrNot) {
  // Up to kInlineNdim dimensions live in the view itself, more on the heap:
  // both survive copies, moves and assignments between the two kinds.
  std::vector<float> data(4096, 1.0f);
  const std::int64_t small_shape[] = {2, 3, 4}, small_strides[] = {24, 8, 2};
  std::vector<std::int64_t> big_shape(kInlineNdim + 3, 1), big_strides(kInlineNdim + 3, 0);
  for (std::size_t i = 0; i < big_shape.size(); ++i) {
    big_shape[i] = std::int64_t(i % 3 + 1);
    big_strides[i] = std::int64_t(big_shape.size() - i);
  }
  const StridedMemoryView small(data.data(), small_shape, small_strides, DataType::of<float>(), kCpu);
  const StridedMemoryView big(data.data(), big_shape, big_strides, DataType::of<float>(), kCpu);
  auto expect_layout = [](const StridedMemoryView& v, std::span<const std::int64_t> shape,
                          std::span<const std::int64_t> strides, const char* what) {
    ASSERT_EQ(v.ndim(), int(shape.size())) << what;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      EXPECT_EQ(v.shape()[i], shape[i]) << what << ": extent " << i;
      EXPECT_EQ(v.strides()[i], strides[i]) << what << ": stride " << i;
    }
  };
  StridedMemoryView a = small, b = big;
  expect_layout(a, small_shape, small_strides, "a copy of a small view");
  expect_layout(b, big_shape, big_strides, "a copy of a big view");
  a = big;
  expect_layout(a, big_shape, big_strides, "a small view assigned a big one");
  b = small;
  expect_layout(b, small_shape, small_strides, "a big view assigned a small one");
  StridedMemoryView c = std::move(a), d = std::move(b);
  expect_layout(c, big_shape, big_strides, "a moved big view");
  expect_layout(d, small_shape, small_strides, "a moved small view");
  c = std::move(d);
  expect_layout(c, small_shape, small_strides, "a big view move-assigned a small one");
  expect_layout(small, small_shape, small_strides, "the original small view");
  expect_layout(big, big_shape, big_strides, "the original big view");
}

TEST(StridedMemoryViewTest, AForeignRefRidesInTheExportUntilItsDeleter) {
  static int released = 0;
  static void* released_object = nullptr;
  auto release = [](void* o) noexcept {
    ++released;
    released_object = o;
  };
  std::vector<float> data = random_floats(4096, 9);
  int keep_me = 0;
  for (int ndim : {0, 2, kInlineNdim, kInlineNdim + 2}) {
    std::vector<std::int64_t> shape(static_cast<std::size_t>(ndim), 2), strides(static_cast<std::size_t>(ndim));
    for (int i = ndim; i-- > 0;) strides[std::size_t(i)] = i + 1 == ndim ? 1 : strides[std::size_t(i) + 1] * 3;
    const StridedMemoryView v(data.data(), shape, strides, DataType::of<float>(), {dlpack::kDLCUDAHost, 0}, true);
    for (bool versioned : {true, false}) {
      released = 0;
      released_object = nullptr;
      const ForeignRef ref{&keep_me, release};
      dlpack::DLTensor t{};
      std::function<void()> drop;
      if (versioned) {
        auto* m = v.to_dlpack(ref);
        EXPECT_EQ(m->flags & dlpack::kDLFlagBitMaskReadOnly, dlpack::kDLFlagBitMaskReadOnly);
        t = m->dl_tensor;
        drop = [m] { m->deleter(m); };
      } else {
        auto* m = v.to_dlpack_unversioned(ref);
        t = m->dl_tensor;
        drop = [m] { m->deleter(m); };
      }
      EXPECT_EQ(released, 0) << "ndim " << ndim << ": the export keeps the reference";
      EXPECT_EQ(t.data, data.data());
      EXPECT_EQ(t.ndim, ndim);
      EXPECT_EQ(t.device.device_type, dlpack::kDLCUDAHost);
      EXPECT_EQ(DataType::from_dlpack(t.dtype), DataType::of<float>());
      for (int i = 0; i < ndim; ++i) {
        EXPECT_EQ(t.shape[i], shape[std::size_t(i)]) << "ndim " << ndim << ", extent " << i;
        EXPECT_EQ(t.strides[i], strides[std::size_t(i)]) << "ndim " << ndim << ", stride " << i;
      }
      if (ndim) {
        EXPECT_NE(t.shape, v.shape().data()) << "the export has its own copy of the shape";
      }
      drop();
      EXPECT_EQ(released, 1) << "ndim " << ndim << ": released once, by the deleter";
      EXPECT_EQ(released_object, &keep_me);
    }
    // The non-owning form points into the view itself.
    dlpack::DLTensor n{};
    n.byte_offset = 99;
    v.describe(n);
    EXPECT_EQ(n.byte_offset, 0u);
    EXPECT_EQ(n.data, data.data());
    EXPECT_EQ(n.ndim, ndim);
    if (ndim) {
      EXPECT_EQ(n.shape, v.shape().data());
      EXPECT_EQ(n.strides, v.strides().data());
    } else {
      EXPECT_EQ(n.shape, static_cast<std::int64_t*>(nullptr));
    }
    EXPECT_EQ(n.device.device_type, dlpack::kDLCUDAHost);
  }
}

namespace {

// A resource with fixed answers; `reports` says whether they are its word
// for every allocation (MemoryResource::Impl::reports_memory_kind).
class FlagsImpl final : public MemoryResource::Impl {
 public:
  FlagsImpl(bool device, bool host, bool managed, int id, bool reports)
      : device_(device), host_(host), managed_(managed), id_(id), reports_(reports) {}
  CUdeviceptr allocate(std::size_t, StreamRef) override { throw std::logic_error("not used"); }
  void deallocate(CUdeviceptr, std::size_t, StreamRef) override {}
  bool is_device_accessible() const noexcept override { return device_; }
  bool is_host_accessible() const noexcept override { return host_; }
  int device_id() const noexcept override { return id_; }
  bool is_managed() const noexcept override { return managed_; }
  bool reports_memory_kind() const noexcept override { return reports_; }

 private:
  bool device_, host_, managed_;
  int id_;
  bool reports_;
};

}  // namespace

TEST(StridedMemoryViewTest, ABuffersDLPackDeviceIsItsResourcesWordWhereItHasOne) {
  FakeDriver fake;
  static int queries = 0;
  static int managed_answer = 0;
  fake.table.cuPointerGetAttributes = [](unsigned n, CUpointer_attribute* attrs, void** values, CUdeviceptr) {
    ++queries;
    for (unsigned i = 0; i < n; ++i) {
      if (attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) *static_cast<int*>(values[i]) = 0;
      if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *static_cast<unsigned*>(values[i]) = CU_MEMORYTYPE_DEVICE;
      if (attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED) *static_cast<int*>(values[i]) = managed_answer;
    }
    return CUDA_SUCCESS;
  };
  std::vector<std::byte> memory(64);
  auto device_of = [&](bool device, bool host, bool managed, int id, bool reports) {
    Buffer b = Buffer::from_handle(memory.data(), memory.size(),
                                   MemoryResource(std::make_shared<FlagsImpl>(device, host, managed, id, reports)));
    return dlpack_device_of(b);
  };
  struct Case {
    bool device, host, managed;
    int id;
    dlpack::DLDevice want;
  };
  const Case cases[] = {
      {true, false, false, 3, {dlpack::kDLCUDA, 3}},       {true, true, false, 1, {dlpack::kDLCUDAHost, 0}},
      {true, true, true, 2, {dlpack::kDLCUDAManaged, 0}}, {false, true, false, -1, {dlpack::kDLCPU, 0}},
      {true, false, false, -1, {dlpack::kDLCUDA, 0}},
  };
  for (const Case& c : cases) {
    queries = 0;
    const dlpack::DLDevice got = device_of(c.device, c.host, c.managed, c.id, true);
    EXPECT_EQ(got.device_type, c.want.device_type) << "device " << c.device << " host " << c.host << " managed "
                                                   << c.managed;
    EXPECT_EQ(got.device_id, c.want.device_id) << "device " << c.device << " host " << c.host;
    EXPECT_EQ(queries, 0) << "a resource that reports its memory's kind is taken at its word";
  }
  // One that does not: the driver says whether the memory is managed.
  for (int answer : {0, 1}) {
    managed_answer = answer;
    queries = 0;
    const dlpack::DLDevice got = device_of(true, false, false, 0, false);
    EXPECT_EQ(queries, 1);
    EXPECT_EQ(got.device_type, answer ? dlpack::kDLCUDAManaged : dlpack::kDLCUDA) << "the driver's answer " << answer;
  }
  // A Buffer's DLPack export (what Buffer.__dlpack__ hands out): its bytes, 1-D
  // int8, at the device given, holding `keep` until the deleter runs.
  queries = 0;
  Buffer b = Buffer::from_handle(memory.data(), memory.size(),
                                 MemoryResource(std::make_shared<FlagsImpl>(true, true, false, 0, true)));
  const std::int64_t n = std::int64_t(memory.size());
  static int released = 0;
  int token = 0;
  const ForeignRef keep{&token, [](void* o) noexcept { released += o != nullptr; }};
  auto check = [&](const dlpack::DLTensor& d, dlpack::DLDevice want) {
    EXPECT_EQ(d.data, memory.data());
    EXPECT_EQ(d.ndim, 1);
    EXPECT_EQ(d.shape[0], n);
    EXPECT_EQ(d.strides[0], 1);
    EXPECT_EQ(d.byte_offset, 0u);
    EXPECT_EQ(d.device.device_type, want.device_type);
    EXPECT_EQ(d.device.device_id, want.device_id);
    EXPECT_EQ(DataType::from_dlpack(d.dtype), DataType::of<std::int8_t>());
  };
  released = 0;
  auto* t = buffer_to_dlpack(b, dlpack_device_of(b), keep);
  check(t->dl_tensor, {dlpack::kDLCUDAHost, 0});
  EXPECT_EQ(t->version.major, dlpack::kMajor);
  EXPECT_EQ(t->flags, 0u) << "a Buffer's export is writable";
  EXPECT_EQ(released, 0);
  t->deleter(t);
  EXPECT_EQ(released, 1) << "the deleter drops what the export keeps";
  auto* u = buffer_to_dlpack_unversioned(b, {dlpack::kDLCPU, 0}, keep);
  check(u->dl_tensor, {dlpack::kDLCPU, 0});
  u->deleter(u);
  EXPECT_EQ(released, 2);
  EXPECT_EQ(queries, 0);
  // The export of a closed Buffer is refused, and `keep` is dropped at once.
  b.close();
  EXPECT_THROW(buffer_to_dlpack(b, {dlpack::kDLCUDA, 0}, keep), ClosedError);
  EXPECT_EQ(released, 3);
}
