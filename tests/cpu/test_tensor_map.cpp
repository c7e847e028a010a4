// TMA tensor maps on the CPU: the driver arguments cucore derives from a view
// (innermost first, byte strides), every rule checked before the driver is
// called, and the calls themselves against the fake driver.
#include <cucore/errors.hpp>
#include <cucore/tensor_map.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/fake_driver.hpp"
#include "common/message_of.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

namespace {

std::string message_of(const std::function<void()>& fn) { return test::message_of<std::invalid_argument>(fn); }

constexpr dlpack::DLDevice kGpu{dlpack::kDLCUDA, 0};

// A view at a chosen (never dereferenced) device address.
StridedMemoryView view_at(std::uintptr_t address, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                          DataType dtype = DataType::of<float>(), dlpack::DLDevice device = kGpu) {
  return StridedMemoryView(reinterpret_cast<void*>(address), shape, strides, dtype, device);
}

struct EncodeCall {
  int calls = 0;
  CUtensorMapDataType type{};
  cuuint32_t rank = 0;
  void* address = nullptr;
  std::vector<cuuint64_t> dims, strides;
  std::vector<cuuint32_t> box, element_strides;
  CUtensorMapSwizzle swizzle{};
  CUtensorMapL2promotion l2{};
  CUtensorMapFloatOOBfill oob{};
};
EncodeCall g_encode;
int g_replaced = 0;
void* g_replaced_with = nullptr;

void install_tensor_map_entries(FakeDriver& fake) {
  g_encode = {};
  g_replaced = 0;
  g_replaced_with = nullptr;
  fake.table.cuTensorMapEncodeTiled = [](CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                         const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                         const cuuint32_t* es, CUtensorMapInterleave, CUtensorMapSwizzle swizzle,
                                         CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    CUcontext current = nullptr;
    cucore::detail::g_driver.load()->cuCtxGetCurrent(&current);
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (reinterpret_cast<std::uintptr_t>(map) % 64 != 0) return CUDA_ERROR_INVALID_VALUE;
    ++g_encode.calls;
    g_encode.type = type;
    g_encode.rank = rank;
    g_encode.address = address;
    g_encode.dims.assign(dims, dims + rank);
    g_encode.strides.assign(strides, strides + rank - 1);
    g_encode.box.assign(box, box + rank);
    g_encode.element_strides.assign(es, es + rank);
    g_encode.swizzle = swizzle;
    g_encode.l2 = l2;
    g_encode.oob = oob;
    // The "descriptor": the address in the first word, then a pattern.
    std::memset(map, 0, sizeof *map);
    std::memcpy(map, &address, sizeof address);
    reinterpret_cast<unsigned char*>(map)[127] = 0xA5;
    return CUDA_SUCCESS;
  };
  fake.table.cuTensorMapReplaceAddress = [](CUtensorMap* map, void* address) {
    ++g_replaced;
    g_replaced_with = address;
    std::memcpy(map, &address, sizeof address);
    return CUDA_SUCCESS;
  };
}

}  // namespace

TEST(TensorMapTest, EncodingIsInnermostFirstWithByteStrides) {
  // A 300 x 200 float array inside rows of 208 floats (padded), tiles of 32 x 16.
  auto v = view_at(0x10000, {300, 200}, {208, 1});
  TiledEncoding e = encode_tiled(v, {.box_dim = {32, 16}});
  EXPECT_EQ(e.data_type, TensorMapDataType::float32);
  EXPECT_EQ(e.rank, 2u);
  EXPECT_EQ(e.global_address, reinterpret_cast<void*>(0x10000));
  EXPECT_EQ(e.global_dim[0], 200u);
  EXPECT_EQ(e.global_dim[1], 300u);
  EXPECT_EQ(e.global_strides[0], 208u * 4);
  EXPECT_EQ(e.box_dim[0], 16u);
  EXPECT_EQ(e.box_dim[1], 32u);
  EXPECT_EQ(e.element_strides[0], 1u);
  EXPECT_EQ(e.element_strides[1], 1u);

  // Rank 3, half precision, explicit element strides, C-contiguous strides filled in.
  auto h = view_at(0x20000, {4, 6, 64}, {}, {dlpack::kDLFloat, 16, 1});
  TiledEncoding e3 = encode_tiled(h, {.box_dim = {2, 3, 16}, .element_strides = {1, 3, 2}});
  EXPECT_EQ(e3.data_type, TensorMapDataType::float16);
  EXPECT_EQ(e3.global_dim[0], 64u);
  EXPECT_EQ(e3.global_dim[2], 4u);
  EXPECT_EQ(e3.global_strides[0], 64u * 2);
  EXPECT_EQ(e3.global_strides[1], 6u * 64 * 2);
  EXPECT_EQ(e3.box_dim[0], 16u);
  EXPECT_EQ(e3.box_dim[2], 2u);
  EXPECT_EQ(e3.element_strides[0], 2u);
  EXPECT_EQ(e3.element_strides[1], 3u);
  EXPECT_EQ(e3.element_strides[2], 1u);
  // Types: bfloat16 and int32 map; an explicit data_type of the same width is taken.
  EXPECT_EQ(encode_tiled(view_at(0x100, {64}, {}, {dlpack::kDLBfloat, 16, 1}), {.box_dim = {8}}).data_type,
            TensorMapDataType::bfloat16);
  EXPECT_EQ(encode_tiled(view_at(0x100, {64}, {}, DataType::of<float>()),
                         {.box_dim = {8}, .data_type = TensorMapDataType::tfloat32})
                .data_type,
            TensorMapDataType::tfloat32);
}

TEST(TensorMapTest, EveryRuleIsCheckedBeforeTheDriver) {
  FakeDriver fake;
  install_tensor_map_entries(fake);
  auto good = view_at(0x10000, {64, 64}, {});
  struct Case {
    StridedMemoryView view;
    TensorMapOptions options;
    const char* expect;
  };
  const Case cases[] = {
      {view_at(0x10000, {}, {}), {.box_dim = {}}, "rank 0"},
      {view_at(0x10000, {2, 2, 2, 2, 2, 4}, {}), {.box_dim = {1, 1, 1, 1, 1, 4}}, "rank 6"},
      {view_at(0x10008, {64, 64}, {}), {.box_dim = {8, 8}}, "0x10008 is not 16-byte aligned"},
      {view_at(0x10000, {64, 64}, {1, 64}), {.box_dim = {8, 8}}, "innermost dimension 1 must be contiguous"},
      {view_at(0x10000, {64, 60}, {61, 1}), {.box_dim = {8, 8}}, "244 bytes; it must be a multiple of 16"},
      {good, {.box_dim = {8}}, "box_dim has 1 entries for a view of rank 2"},
      {good, {.box_dim = {0, 8}}, "box_dim[0] is 0"},
      {good, {.box_dim = {8, 257}}, "box_dim[1] is 257"},
      {good, {.box_dim = {8, 6}}, "24 bytes) must be a multiple of 16"},
      {good, {.box_dim = {8, 32}, .swizzle = TensorMapSwizzle::swizzle_64b}, "exceeds the 64-byte swizzle span"},
      {good, {.box_dim = {8, 8}, .element_strides = {1, 9}}, "element_strides[1] is 9"},
      {good, {.box_dim = {8, 8}, .element_strides = {1}}, "element_strides has 1 entries"},
      {good, {.box_dim = {8, 8}, .interleave = TensorMapInterleave::interleave_16b}, "rank 3 or more"},
      {view_at(0x10000, {64, 64}, {}, DataType::of<std::int32_t>()),
       {.box_dim = {8, 8}, .oob_fill = TensorMapOOBFill::nan_request_zero_fma}, "floating-point data type"},
      {good, {.box_dim = {8, 8}, .data_type = TensorMapDataType::float64}, "8-byte elements but the view has 4"},
      {view_at(0x10000, {64, 64}, {}, {dlpack::kDLComplex, 64, 1}), {.box_dim = {8, 8}}, "no TMA data type"},
      {view_at(0x10000, {64, 64}, {}, DataType::of<float>(), {dlpack::kDLCPU, 0}), {.box_dim = {8, 8}},
       "not device-accessible"},
      {view_at(0x10000, {0, 64}, {}), {.box_dim = {8, 8}}, "extent of dimension 0 is 0"},
  };
  for (const Case& c : cases) {
    const std::string msg = message_of([&] { TensorMapDescriptor::tiled(c.view, c.options); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "expected '" << c.expect << "', got: " << msg;
  }
  EXPECT_EQ(g_encode.calls, 0) << "a refused map never reaches the driver";
}

TEST(TensorMapTest, TiledCallsTheDriverInAContextAndReplacesAddresses) {
  FakeDriver fake;
  install_tensor_map_entries(fake);
  auto v = view_at(0x40000, {128, 96}, {});
  TensorMapDescriptor m = TensorMapDescriptor::tiled(
      v, {.box_dim = {64, 32}, .swizzle = TensorMapSwizzle::swizzle_128b,
          .l2_promotion = TensorMapL2Promotion::l2_128b, .oob_fill = TensorMapOOBFill::nan_request_zero_fma});
  ASSERT_EQ(g_encode.calls, 1);
  EXPECT_EQ(g_encode.type, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(g_encode.address, reinterpret_cast<void*>(0x40000));
  EXPECT_EQ(g_encode.dims, (std::vector<cuuint64_t>{96, 128}));
  EXPECT_EQ(g_encode.strides, (std::vector<cuuint64_t>{96 * 4}));
  EXPECT_EQ(g_encode.box, (std::vector<cuuint32_t>{32, 64}));
  EXPECT_EQ(g_encode.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(g_encode.l2, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  EXPECT_EQ(g_encode.oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(&m.handle())[127], 0xA5);

  // Copies are the same 128 bytes (what launch passes by value).
  TensorMapDescriptor copy = m;
  EXPECT_EQ(std::memcmp(&copy, &m, sizeof m), 0);

  EXPECT_NE(message_of([&] { m.replace_address(reinterpret_cast<void*>(0x40004)); }).find("16-byte aligned"),
            std::string::npos);
  EXPECT_EQ(g_replaced, 0);
  m.replace_address(view_at(0x80000, {128, 96}, {}));
  EXPECT_EQ(g_replaced, 1);
  EXPECT_EQ(g_replaced_with, reinterpret_cast<void*>(0x80000));
  void* now = nullptr;
  std::memcpy(&now, &m.handle(), sizeof now);
  EXPECT_EQ(now, reinterpret_cast<void*>(0x80000));

  // A driver without TMA.
  fake.table.cuTensorMapEncodeTiled = nullptr;
  EXPECT_THROW(TensorMapDescriptor::tiled(v, {.box_dim = {64, 32}}), FeatureUnavailableError);
}
