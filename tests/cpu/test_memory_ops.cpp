// Textures and surfaces, managed-memory operations, batched copies, virtual
// memory and pool peer access against the fake driver: the arguments each
// driver call receives, the checks made before any call, the release order of
// the boxes, and that failures leave nothing behind.
#include <cucore/copy_batch.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/launch.hpp>
#include <cucore/managed.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>
#include <cucore/texture.hpp>
#include <cucore/virtual_memory.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/fake_driver.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

namespace {

// What the fakes below saw, in call order.
std::vector<std::string> g_calls;
std::string hexs(std::uintptr_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}

template <typename F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no std::invalid_argument (expected one naming '" << needle << "')";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// ---- textures ----

CUDA_ARRAY3D_DESCRIPTOR g_last_array_desc;
CUDA_TEXTURE_DESC g_last_tex_desc;
CUDA_RESOURCE_DESC g_last_res_desc;
CUDA_MEMCPY3D g_last_copy;
unsigned g_next_handle = 0x1000;

void install_texture_fakes(FakeDriver& fake) {
  g_calls.clear();
  fake.table.cuArray3DCreate = [](CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR* d) {
    g_last_array_desc = *d;
    *a = reinterpret_cast<CUarray>(std::uintptr_t(g_next_handle += 0x10));
    g_calls.push_back("create array " + hexs(reinterpret_cast<std::uintptr_t>(*a)));
    return CUDA_SUCCESS;
  };
  fake.table.cuArrayDestroy = [](CUarray a) {
    g_calls.push_back("destroy array " + hexs(reinterpret_cast<std::uintptr_t>(a)));
    return CUDA_SUCCESS;
  };
  fake.table.cuMipmappedArrayCreate = [](CUmipmappedArray* a, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned levels) {
    g_last_array_desc = *d;
    *a = reinterpret_cast<CUmipmappedArray>(std::uintptr_t(g_next_handle += 0x10));
    g_calls.push_back("create mipmap levels=" + std::to_string(levels));
    return CUDA_SUCCESS;
  };
  fake.table.cuMipmappedArrayGetLevel = [](CUarray* a, CUmipmappedArray m, unsigned level) {
    *a = reinterpret_cast<CUarray>(reinterpret_cast<std::uintptr_t>(m) + 1 + level);
    return CUDA_SUCCESS;
  };
  fake.table.cuMipmappedArrayDestroy = [](CUmipmappedArray) {
    g_calls.push_back("destroy mipmap");
    return CUDA_SUCCESS;
  };
  fake.table.cuTexObjectCreate = [](CUtexObject* t, const CUDA_RESOURCE_DESC* r, const CUDA_TEXTURE_DESC* d,
                                    const CUDA_RESOURCE_VIEW_DESC*) {
    g_last_res_desc = *r;
    g_last_tex_desc = *d;
    *t = 0xabc0 + (g_next_handle += 1);
    g_calls.push_back("create texture");
    return CUDA_SUCCESS;
  };
  fake.table.cuTexObjectDestroy = [](CUtexObject) {
    g_calls.push_back("destroy texture");
    return CUDA_SUCCESS;
  };
  fake.table.cuSurfObjectCreate = [](CUsurfObject* s, const CUDA_RESOURCE_DESC* r) {
    g_last_res_desc = *r;
    *s = 0x5000 + (g_next_handle += 1);
    g_calls.push_back("create surface");
    return CUDA_SUCCESS;
  };
  fake.table.cuSurfObjectDestroy = [](CUsurfObject) {
    g_calls.push_back("destroy surface");
    return CUDA_SUCCESS;
  };
  fake.table.cuMemcpy3DAsync = [](const CUDA_MEMCPY3D* c, CUstream) {
    g_last_copy = *c;
    g_calls.push_back("copy3d");
    return CUDA_SUCCESS;
  };
}

}  // namespace

TEST(TextureTest, ArgumentsAreCheckedBeforeTheDriver) {
  FakeDriver fake;
  install_texture_fakes(fake);
  Device dev(0);
  using namespace texture;
  expect_invalid([&] { dev.create_opaque_array({.shape = {}, .format = ArrayFormat::float32}); }, "shape");
  expect_invalid([&] { dev.create_opaque_array({.shape = {4, 4, 4, 4}}); }, "shape rank must be 1, 2, or 3, got 4");
  expect_invalid([&] { dev.create_opaque_array({.shape = {4, 0}}); }, "shape[1] must be >= 1, got 0");
  expect_invalid([&] { dev.create_opaque_array({.shape = {4}, .num_channels = 3}); }, "num_channels");
  expect_invalid([&] { dev.create_mipmapped_array({.shape = {4}, .num_levels = 0}); }, "num_levels");
  EXPECT_TRUE(g_calls.empty()) << g_calls.front();

  OpaqueArray plain = dev.create_opaque_array({.shape = {8, 4}, .format = ArrayFormat::uint8});
  expect_invalid([&] { dev.create_surface_object(ResourceDescriptor::from_opaque_array(plain)); },
                 "is_surface_load_store");
  expect_invalid(
      [&] {
        dev.create_texture_object(ResourceDescriptor::from_opaque_array(plain),
                                  {.filter_mode = FilterMode::linear});
      },
      "normalized_float");
  std::vector<std::byte> wrong(31);
  expect_invalid([&] { plain.copy_from(std::span<const std::byte>(wrong), Stream::legacy_default()); },
                 "the array holds 32 bytes");
  EXPECT_EQ(parse_array_format("int16"), ArrayFormat::int16);
  expect_invalid([] { parse_array_format("float64"); }, "float64");
  EXPECT_EQ(g_calls.size(), 1u);  // only the array
}

TEST(TextureTest, DescriptorsReachTheDriverAsGiven) {
  FakeDriver fake;
  install_texture_fakes(fake);
  Device dev(0);
  using namespace texture;
  OpaqueArray a = dev.create_opaque_array(
      {.shape = {64, 32}, .format = ArrayFormat::float32, .num_channels = 2, .is_surface_load_store = true});
  EXPECT_EQ(g_last_array_desc.Width, 64u);
  EXPECT_EQ(g_last_array_desc.Height, 32u);
  EXPECT_EQ(g_last_array_desc.Depth, 0u);
  EXPECT_EQ(g_last_array_desc.Format, CU_AD_FORMAT_FLOAT);
  EXPECT_EQ(g_last_array_desc.NumChannels, 2u);
  EXPECT_EQ(g_last_array_desc.Flags, unsigned(CUDA_ARRAY3D_SURFACE_LDST));
  EXPECT_EQ(a.element_bytes(), 8u);
  EXPECT_EQ(a.size_bytes(), 64u * 32 * 8);

  TextureObject t = dev.create_texture_object(
      ResourceDescriptor::from_opaque_array(a),
      {.address_mode = {AddressMode::wrap, AddressMode::mirror, AddressMode::border},
       .filter_mode = FilterMode::linear,
       .normalized_coords = true,
       .border_color = std::array<float, 4>{1.f, 2.f, 3.f, 4.f}});
  EXPECT_EQ(g_last_res_desc.resType, CU_RESOURCE_TYPE_ARRAY);
  EXPECT_EQ(g_last_res_desc.res.array.hArray, a.handle());
  EXPECT_EQ(g_last_tex_desc.addressMode[0], CU_TR_ADDRESS_MODE_WRAP);
  EXPECT_EQ(g_last_tex_desc.addressMode[1], CU_TR_ADDRESS_MODE_MIRROR);
  EXPECT_EQ(g_last_tex_desc.addressMode[2], CU_TR_ADDRESS_MODE_BORDER);
  EXPECT_EQ(g_last_tex_desc.filterMode, CU_TR_FILTER_MODE_LINEAR);
  // A float texture reads floats: no READ_AS_INTEGER; normalized coordinates on.
  EXPECT_EQ(g_last_tex_desc.flags, unsigned(CU_TRSF_NORMALIZED_COORDINATES));
  EXPECT_EQ(g_last_tex_desc.borderColor[3], 4.f);
  EXPECT_NE(t.handle(), 0u);
  EXPECT_EQ(t.kernel_argument(), t.handle());

  // An integer format read as its element type asks for integer reads.
  OpaqueArray ints = dev.create_opaque_array({.shape = {16}, .format = ArrayFormat::int32});
  TextureObject ti = dev.create_texture_object(ResourceDescriptor::from_opaque_array(ints));
  EXPECT_EQ(g_last_tex_desc.flags, unsigned(CU_TRSF_READ_AS_INTEGER));
  EXPECT_EQ(g_last_array_desc.Height, 0u);

  // Copies: the whole array, dense rows.
  std::vector<std::byte> host(a.size_bytes());
  a.copy_from(std::span<const std::byte>(host), Stream::legacy_default());
  EXPECT_EQ(g_last_copy.dstMemoryType, CU_MEMORYTYPE_ARRAY);
  EXPECT_EQ(g_last_copy.dstArray, a.handle());
  EXPECT_EQ(g_last_copy.srcMemoryType, CU_MEMORYTYPE_HOST);
  EXPECT_EQ(g_last_copy.srcHost, host.data());
  EXPECT_EQ(g_last_copy.WidthInBytes, 64u * 8);
  EXPECT_EQ(g_last_copy.srcPitch, 64u * 8);
  EXPECT_EQ(g_last_copy.Height, 32u);
  EXPECT_EQ(g_last_copy.Depth, 1u);
  a.copy_to(std::span<std::byte>(host), Stream::legacy_default());
  EXPECT_EQ(g_last_copy.srcMemoryType, CU_MEMORYTYPE_ARRAY);
  EXPECT_EQ(g_last_copy.dstHost, host.data());
}

TEST(TextureTest, ObjectsKeepTheirArraysAlive) {
  FakeDriver fake;
  install_texture_fakes(fake);
  Device dev(0);
  using namespace texture;
  {
    OpaqueArray a = dev.create_opaque_array({.shape = {8, 8}, .is_surface_load_store = true});
    TextureObject t = dev.create_texture_object(ResourceDescriptor::from_opaque_array(a));
    SurfaceObject s = dev.create_surface_object(ResourceDescriptor::from_opaque_array(a));
    a.close();
    EXPECT_TRUE(a.is_closed());
    EXPECT_THROW((void)a.shape(), ClosedError);
    t.close();
    EXPECT_THROW((void)t.kernel_argument(), ClosedError);
    ASSERT_EQ(g_calls.back(), "destroy texture");  // the surface still holds the array
    EXPECT_EQ(s.resource().array().shape()[0], 8u);
  }
  ASSERT_EQ(g_calls.size(), 6u);
  EXPECT_EQ(g_calls[4], "destroy surface");
  EXPECT_EQ(g_calls[5].rfind("destroy array", 0), 0u) << g_calls[5];

  g_calls.clear();
  {
    OpaqueArray level;
    {
      MipmappedArray m = dev.create_mipmapped_array({.shape = {64, 16}, .num_levels = 3});
      EXPECT_THROW((void)m.get_level(3), std::out_of_range);
      level = m.get_level(2);
    }
    EXPECT_EQ(level.shape(), (std::vector<std::size_t>{16, 4}));
    EXPECT_EQ(g_calls, (std::vector<std::string>{"create mipmap levels=3"}));  // the level keeps the mipmap
  }
  // A level never destroys its array: the mipmap does, once.
  EXPECT_EQ(g_calls, (std::vector<std::string>{"create mipmap levels=3", "destroy mipmap"}));
}

TEST(TextureTest, LaunchPassesTheHandle) {
  FakeDriver fake;
  install_texture_fakes(fake);
  static unsigned long long seen = 0;
  fake.table.cuKernelGetParamInfo = [](CUkernel, size_t i, size_t* offset, size_t* size) {
    if (i >= 1) return CUDA_ERROR_INVALID_VALUE;
    *offset = 0;
    if (size) *size = 8;
    return CUDA_SUCCESS;
  };
  fake.table.cuLaunchKernelEx = [](const CUlaunchConfig*, CUfunction, void** args, void**) {
    std::memcpy(&seen, args[0], 8);
    return CUDA_SUCCESS;
  };
  Device dev(0);
  dev.set_current();
  texture::OpaqueArray a = dev.create_opaque_array({.shape = {4}});
  texture::TextureObject t = dev.create_texture_object(texture::ResourceDescriptor::from_opaque_array(a));
  Kernel k = Kernel::from_handle(reinterpret_cast<CUkernel>(std::uintptr_t(0x40)));
  launch(Stream::legacy_default(), {.grid = 1, .block = 1}, k, t);
  EXPECT_EQ(seen, t.handle());
  KernelArgs args;
  args.push(t);
  seen = 0;
  launch(Stream::legacy_default(), {.grid = 1, .block = 1}, k, args);
  EXPECT_EQ(seen, t.handle());
  t.close();
  EXPECT_THROW(launch(Stream::legacy_default(), {.grid = 1, .block = 1}, k, t), ClosedError);
}

// ---- managed memory ----

namespace {
std::vector<CUmemLocation> g_locs;
std::vector<std::size_t> g_loc_idx;
std::vector<CUdeviceptr> g_ptrs;
std::vector<std::size_t> g_sizes;

void record_batch(CUdeviceptr* p, size_t* s, size_t n) {
  g_ptrs.assign(p, p + n);
  g_sizes.assign(s, s + n);
}

void install_managed_fakes(FakeDriver& fake) {
  g_calls.clear();
  fake.table.cuPointerGetAttributes = [](unsigned n, CUpointer_attribute* attrs, void** values, CUdeviceptr) {
    for (unsigned i = 0; i < n; ++i) {
      if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *static_cast<unsigned*>(values[i]) = CU_MEMORYTYPE_DEVICE;
      if (attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED) *static_cast<int*>(values[i]) = 1;
      if (attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) *static_cast<int*>(values[i]) = 0;
    }
    return CUDA_SUCCESS;
  };
  fake.table.cuMemAdvise = [](CUdeviceptr p, size_t n, CUmem_advise a, CUmemLocation l) {
    g_calls.push_back("advise " + std::to_string(a) + " " + hexs(p) + "+" + std::to_string(n) + " type " +
                      std::to_string(l.type) + " id " + std::to_string(l.id));
    return CUDA_SUCCESS;
  };
  fake.table.cuMemPrefetchAsync = [](CUdeviceptr p, size_t n, CUmemLocation l, unsigned, CUstream) {
    g_calls.push_back("prefetch " + hexs(p) + "+" + std::to_string(n) + " type " + std::to_string(l.type) + " id " +
                      std::to_string(l.id));
    return CUDA_SUCCESS;
  };
  fake.table.cuMemPrefetchBatchAsync = [](CUdeviceptr* p, size_t* s, size_t n, CUmemLocation* l, size_t* idx,
                                          size_t nl, unsigned long long flags, CUstream) {
    record_batch(p, s, n);
    g_locs.assign(l, l + nl);
    g_loc_idx.assign(idx, idx + nl);
    g_calls.push_back("prefetch_batch flags " + std::to_string(flags));
    return CUDA_SUCCESS;
  };
  fake.table.cuMemDiscardBatchAsync = [](CUdeviceptr* p, size_t* s, size_t n, unsigned long long, CUstream) {
    record_batch(p, s, n);
    g_calls.push_back("discard_batch");
    return CUDA_SUCCESS;
  };
  fake.table.cuMemDiscardAndPrefetchBatchAsync = [](CUdeviceptr* p, size_t* s, size_t n, CUmemLocation* l,
                                                    size_t* idx, size_t nl, unsigned long long, CUstream) {
    record_batch(p, s, n);
    g_locs.assign(l, l + nl);
    g_loc_idx.assign(idx, idx + nl);
    g_calls.push_back("discard_prefetch_batch");
    return CUDA_SUCCESS;
  };
}

// Managed-looking buffers over host memory the test owns (never freed by cucore).
struct HostBlocks {
  std::vector<std::vector<std::byte>> blocks;
  std::vector<ManagedBuffer> buffers;
  explicit HostBlocks(std::vector<std::size_t> sizes) {
    for (std::size_t s : sizes) {
      blocks.emplace_back(s);
      buffers.push_back(ManagedBuffer::from_handle(reinterpret_cast<CUdeviceptr>(blocks.back().data()), s));
    }
  }
  std::vector<const Buffer*> pointers() const {
    std::vector<const Buffer*> p;
    for (const auto& b : buffers) p.push_back(&b);
    return p;
  }
};
}  // namespace

TEST(ManagedTest, AdviceAndPrefetchGoToTheDriverWithTheirLocations) {
  FakeDriver fake;
  install_managed_fakes(fake);
  HostBlocks h({4096});
  ManagedBuffer& b = h.buffers[0];
  const std::string range = hexs(b.handle()) + "+4096";
  b.set_read_mostly(true);
  b.set_preferred_location(Location::device(0));
  b.set_preferred_location(Location::host_numa(3));
  b.set_preferred_location(std::nullopt);
  b.add_accessed_by(Location::host());
  b.remove_accessed_by(Location::device(0));
  b.prefetch(Location::device(0), Stream::per_thread_default());
  const std::vector<std::string> want = {
      "advise " + std::to_string(CU_MEM_ADVISE_SET_READ_MOSTLY) + " " + range + " type 2 id 0",
      "advise " + std::to_string(CU_MEM_ADVISE_SET_PREFERRED_LOCATION) + " " + range + " type 1 id 0",
      "advise " + std::to_string(CU_MEM_ADVISE_SET_PREFERRED_LOCATION) + " " + range + " type 3 id 3",
      "advise " + std::to_string(CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION) + " " + range + " type 2 id 0",
      "advise " + std::to_string(CU_MEM_ADVISE_SET_ACCESSED_BY) + " " + range + " type 2 id 0",
      "advise " + std::to_string(CU_MEM_ADVISE_UNSET_ACCESSED_BY) + " " + range + " type 1 id 0",
      "prefetch " + range + " type 1 id 0",
  };
  EXPECT_EQ(g_calls, want);
  expect_invalid([&] { b.add_accessed_by(Location::host_numa(1)); }, "NUMA");
  b.close();
  EXPECT_THROW(b.set_read_mostly(false), ClosedError);
  EXPECT_EQ(g_calls.size(), want.size());
}

TEST(ManagedTest, QueriesReadTheDriversAnswers) {
  FakeDriver fake;
  install_managed_fakes(fake);
  static int read_mostly = 1;
  fake.table.cuDeviceGetCount = [](int* n) { *n = 2; return CUDA_SUCCESS; };
  FakeDriver::device_count = 2;
  fake.table.cuMemRangeGetAttribute = [](void* data, size_t size, CUmem_range_attribute a, CUdeviceptr, size_t) {
    switch (a) {
      case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: *static_cast<int*>(data) = read_mostly; break;
      case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
        *static_cast<CUmemLocationType*>(data) = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        break;
      case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: *static_cast<int*>(data) = 5; break;
      case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        if (size != 3 * sizeof(int)) return CUDA_ERROR_INVALID_VALUE;  // devices + host
        int ids[3] = {1, CU_DEVICE_CPU, CU_DEVICE_INVALID};
        std::memcpy(data, ids, sizeof ids);
        break;
      }
      default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  };
  HostBlocks h({256});
  EXPECT_TRUE(h.buffers[0].read_mostly());
  read_mostly = 0;
  EXPECT_FALSE(h.buffers[0].read_mostly());
  EXPECT_EQ(h.buffers[0].preferred_location(), Location::host_numa(5));
  EXPECT_EQ(h.buffers[0].accessed_by(), (std::vector<Location>{Location::device(1), Location::host()}));
  FakeDriver::device_count = 1;
}

TEST(ManagedTest, BatchesGroupLocationsIntoRuns) {
  FakeDriver fake;
  install_managed_fakes(fake);
  HostBlocks h({64, 128, 256, 512});
  auto ptrs = h.pointers();
  std::vector<Location> locs = {Location::device(0), Location::device(0), Location::host(), Location::device(0)};
  prefetch_batch(Stream::per_thread_default(), ptrs, locs);
  ASSERT_EQ(g_ptrs.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(g_ptrs[i], h.buffers[i].handle());
    EXPECT_EQ(g_sizes[i], h.buffers[i].size());
  }
  ASSERT_EQ(g_loc_idx, (std::vector<std::size_t>{0, 2, 3}));
  EXPECT_EQ(g_locs[0].type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(g_locs[1].type, CU_MEM_LOCATION_TYPE_HOST);
  EXPECT_EQ(g_locs[2].type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(g_calls.back(), "prefetch_batch flags 0");

  Location one = Location::host();
  discard_prefetch_batch(Stream::per_thread_default(), ptrs, std::span<const Location>(&one, 1));
  EXPECT_EQ(g_loc_idx, (std::vector<std::size_t>{0}));
  discard_batch(Stream::per_thread_default(), ptrs);
  EXPECT_EQ(g_calls.back(), "discard_batch");
  h.buffers[1].discard(Stream::per_thread_default());
  EXPECT_EQ(g_ptrs, (std::vector<CUdeviceptr>{h.buffers[1].handle()}));

  const std::size_t calls = g_calls.size();
  expect_invalid([&] { prefetch_batch(Stream::per_thread_default(), ptrs, std::span(locs).first(2)); },
                 "2 locations for 4 buffers");
  expect_invalid([&] { discard_batch(Stream::legacy_default(), ptrs); }, "legacy default stream");
  h.buffers[2].close();
  expect_invalid([&] { discard_batch(Stream::per_thread_default(), ptrs); }, "buffer 2 is closed");
  EXPECT_EQ(g_calls.size(), calls);
}

TEST(ManagedTest, OldDriversGetFeatureUnavailable) {
  FakeDriver fake;
  install_managed_fakes(fake);
  fake.table.version = 12080;
  fake.table.cuMemDiscardBatchAsync = nullptr;
  HostBlocks h({64});
  try {
    h.buffers[0].discard(Stream::per_thread_default());
    FAIL() << "no FeatureUnavailableError";
  } catch (const FeatureUnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("13.0"), std::string::npos) << e.what();
  }
}

// ---- batched copies ----

namespace {
std::vector<CUmemcpyAttributes> g_attrs;
}

TEST(CopyBatchTest, CopiesEveryBufferAndGroupsOptions) {
  FakeDriver fake;
  fake.table.cuMemcpyBatchAsync = [](CUdeviceptr* dst, CUdeviceptr* src, size_t* sizes, size_t n,
                                     CUmemcpyAttributes* attrs, size_t* idx, size_t na, CUstream) {
    for (size_t i = 0; i < n; ++i)
      std::memcpy(reinterpret_cast<void*>(dst[i]), reinterpret_cast<const void*>(src[i]), sizes[i]);
    g_attrs.assign(attrs, attrs + na);
    g_loc_idx.assign(idx, idx + na);
    return CUDA_SUCCESS;
  };
  constexpr std::size_t kCount = 37;
  std::mt19937 rng(14);
  std::vector<std::vector<std::uint32_t>> src(kCount), dst(kCount);
  std::vector<Buffer> sb, db;
  for (std::size_t i = 0; i < kCount; ++i) {
    src[i].resize(1 + rng() % 300);
    for (auto& x : src[i]) x = rng() | 1u;
    dst[i].assign(src[i].size(), 0);
    sb.push_back(Buffer::from_handle(src[i].data(), src[i].size() * 4));
    db.push_back(Buffer::from_handle(dst[i].data(), dst[i].size() * 4));
  }
  std::vector<const Buffer*> s;
  std::vector<Buffer*> d;
  for (std::size_t i = 0; i < kCount; ++i) {
    s.push_back(&sb[i]);
    d.push_back(&db[i]);
  }
  copy_batch(Stream::per_thread_default(), s, d);
  for (std::size_t i = 0; i < kCount; ++i) ASSERT_EQ(dst[i], src[i]) << "copy " << i;
  ASSERT_EQ(g_attrs.size(), 1u);
  EXPECT_EQ(g_attrs[0].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);

  std::vector<CopyOptions> opts(kCount);
  for (std::size_t i = 20; i < kCount; ++i) opts[i].overlap_mode = MemcpyOverlapMode::prefer_overlap_with_compute;
  opts[30].src_access_order = MemcpySrcAccessOrder::any;
  copy_batch(Stream::per_thread_default(), s, d, opts);
  EXPECT_EQ(g_loc_idx, (std::vector<std::size_t>{0, 20, 30, 31}));
  EXPECT_EQ(g_attrs[1].flags, unsigned(CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE));
  EXPECT_EQ(g_attrs[2].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_ANY);

  std::vector<std::uint32_t> small(1);
  Buffer smaller = Buffer::from_handle(small.data(), 4);
  d[5] = &smaller;
  g_attrs.clear();
  expect_invalid([&] { copy_batch(Stream::per_thread_default(), s, d); }, "copy 5");
  expect_invalid([&] { copy_batch(Stream::per_thread_default(), s, std::span(d).first(3)); }, "3 destinations");
  expect_invalid([&] { copy_batch(Stream::legacy_default(), s, std::span(d).first(kCount)); }, "legacy");
  expect_invalid([&] { copy_batch(Stream::per_thread_default(), s, d, std::span(opts).first(2)); }, "2 options");
  EXPECT_TRUE(g_attrs.empty());
}

// ---- virtual memory ----

namespace {
constexpr std::size_t kGran = 2 << 20;
std::map<CUdeviceptr, std::size_t> g_reserved;  // reservations alive
std::map<CUdeviceptr, std::pair<std::size_t, CUmemGenericAllocationHandle>> g_mapped;
std::map<CUmemGenericAllocationHandle, int> g_handle_refs;  // created/retained minus released
std::map<CUmemGenericAllocationHandle, int> g_handle_maps;  // live mappings per handle
CUdeviceptr g_next_va = 0x7f0000000000;
bool g_honour_hint = true;
int g_fail_map_after = -1;  // fail the n-th cuMemMap from now (0: the next)
std::vector<std::string> g_vmm_problems;

void install_vmm_fakes(FakeDriver& fake) {
  g_reserved.clear();
  g_mapped.clear();
  g_handle_refs.clear();
  g_handle_maps.clear();
  g_vmm_problems.clear();
  g_honour_hint = true;
  g_fail_map_after = -1;
  fake.table.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) {
    switch (a) {
      case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *v = 1; break;
      default: *v = 0;
    }
    return CUDA_SUCCESS;
  };
  fake.table.cuMemGetAllocationGranularity = [](size_t* g, const CUmemAllocationProp* p,
                                                CUmemAllocationGranularity_flags) {
    if (p->location.type != CU_MEM_LOCATION_TYPE_DEVICE || p->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
      return CUDA_ERROR_INVALID_VALUE;
    *g = kGran;
    return CUDA_SUCCESS;
  };
  fake.table.cuMemCreate = [](CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp*,
                              unsigned long long) {
    if (size % kGran) return CUDA_ERROR_INVALID_VALUE;
    static CUmemGenericAllocationHandle next = 100;
    *h = ++next;
    g_handle_refs[*h] = 1;
    return CUDA_SUCCESS;
  };
  fake.table.cuMemRelease = [](CUmemGenericAllocationHandle h) {
    if (--g_handle_refs[h] < 0) g_vmm_problems.push_back("release of dead handle");
    return CUDA_SUCCESS;
  };
  fake.table.cuMemRetainAllocationHandle = [](CUmemGenericAllocationHandle* h, void* addr) {
    auto it = g_mapped.find(reinterpret_cast<CUdeviceptr>(addr));
    if (it == g_mapped.end()) return CUDA_ERROR_INVALID_VALUE;
    *h = it->second.second;
    ++g_handle_refs[*h];
    return CUDA_SUCCESS;
  };
  fake.table.cuMemAddressReserve = [](CUdeviceptr* p, size_t size, size_t, CUdeviceptr hint, unsigned long long) {
    if (size % kGran) return CUDA_ERROR_INVALID_VALUE;
    bool free_at_hint = hint != 0;
    for (const auto& [a, s] : g_reserved)
      if (hint < a + s && a < hint + size) free_at_hint = false;
    if (free_at_hint && g_honour_hint) {
      *p = hint;
    } else {
      *p = g_next_va;
      g_next_va += size + 64 * kGran;  // leave gaps: the hint after a block is free
    }
    g_reserved[*p] = size;
    return CUDA_SUCCESS;
  };
  fake.table.cuMemAddressFree = [](CUdeviceptr p, size_t size) {
    auto it = g_reserved.find(p);
    if (it == g_reserved.end() || it->second != size) {
      g_vmm_problems.push_back("cuMemAddressFree of a range never reserved: " + hexs(p));
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (const auto& [a, m] : g_mapped)
      if (a >= p && a < p + size) g_vmm_problems.push_back("reservation freed while mapped: " + hexs(a));
    g_reserved.erase(it);
    return CUDA_SUCCESS;
  };
  fake.table.cuMemMap = [](CUdeviceptr p, size_t size, size_t, CUmemGenericAllocationHandle h, unsigned long long) {
    if (g_fail_map_after == 0) {
      g_fail_map_after = -1;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (g_fail_map_after > 0) --g_fail_map_after;
    bool inside = false;
    for (const auto& [a, s] : g_reserved)
      if (p >= a && p + size <= a + s) inside = true;
    if (!inside || g_handle_refs[h] <= 0) return CUDA_ERROR_INVALID_VALUE;
    g_mapped[p] = {size, h};
    ++g_handle_maps[h];
    return CUDA_SUCCESS;
  };
  fake.table.cuMemUnmap = [](CUdeviceptr p, size_t size) {
    auto it = g_mapped.find(p);
    if (it == g_mapped.end() || it->second.first != size) {
      g_vmm_problems.push_back("cuMemUnmap of a range not mapped as one: " + hexs(p));
      return CUDA_ERROR_INVALID_VALUE;
    }
    --g_handle_maps[it->second.second];
    g_mapped.erase(it);
    return CUDA_SUCCESS;
  };
  fake.table.cuMemSetAccess = [](CUdeviceptr p, size_t, const CUmemAccessDesc* d, size_t n) {
    if (!g_mapped.count(p)) return CUDA_ERROR_INVALID_VALUE;
    if (n != 1 || d[0].location.type != CU_MEM_LOCATION_TYPE_DEVICE || d[0].location.id != 0 ||
        d[0].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  };
}

// Physical memory still held: a handle with references or mappings.
std::string vmm_leaks() {
  std::string out;
  for (const auto& [h, r] : g_handle_refs)
    if (r != 0 || g_handle_maps[h] != 0)
      out += "handle " + std::to_string(h) + " refs " + std::to_string(r) + " maps " +
             std::to_string(g_handle_maps[h]) + "; ";
  if (!g_reserved.empty()) out += std::to_string(g_reserved.size()) + " reservations left; ";
  for (const auto& p : g_vmm_problems) out += p + "; ";
  return out;
}

// Physical memory alive (mapped somewhere) per handle: released handles whose
// mappings remain are fine.
bool handles_alive_only_through_mappings() {
  for (const auto& [h, r] : g_handle_refs)
    if (r != 0) return false;
  return true;
}
}  // namespace

TEST(VirtualMemoryTest, AllocateMapsOnceAndFreesEverything) {
  FakeDriver fake;
  install_vmm_fakes(fake);
  VirtualMemoryResource vmr(0);
  EXPECT_EQ(vmr.granularity(), kGran);
  {
    Buffer b = vmr.allocate(kGran + 1, Stream::legacy_default());
    EXPECT_EQ(b.size(), kGran + 1);
    ASSERT_EQ(g_mapped.size(), 1u);
    EXPECT_EQ(g_mapped.begin()->second.first, 2 * kGran);
    EXPECT_TRUE(handles_alive_only_through_mappings());  // the handle is released once mapped
    EXPECT_TRUE(b.is_device_accessible());
    EXPECT_EQ(b.device_id(), 0);
  }
  EXPECT_EQ(vmm_leaks(), "");
}

TEST(VirtualMemoryTest, GrowsInPlaceWhenTheAddressesAfterAreFree) {
  FakeDriver fake;
  install_vmm_fakes(fake);
  VirtualMemoryResource vmr(0);
  {
    Buffer b = vmr.allocate(kGran, Stream::legacy_default());
    const CUdeviceptr p = b.handle();
    vmr.modify_allocation(b, kGran + 100);  // fast path: one more granule right after
    EXPECT_EQ(b.handle(), p);
    EXPECT_EQ(b.size(), kGran + 100);
    EXPECT_EQ(g_mapped.size(), 2u);
    EXPECT_EQ(g_mapped.count(p + kGran), 1u);
    vmr.modify_allocation(b, kGran + 200);  // inside the mapped granule: no driver work
    EXPECT_EQ(g_mapped.size(), 2u);
    EXPECT_EQ(b.size(), kGran + 200);
    vmr.modify_allocation(b, 10);  // never shrinks
    EXPECT_EQ(b.size(), kGran + 200);
    EXPECT_TRUE(handles_alive_only_through_mappings());
  }
  EXPECT_EQ(vmm_leaks(), "");
}

TEST(VirtualMemoryTest, MovesWhenTheAddressesAfterAreTakenAndLeaksNothing) {
  FakeDriver fake;
  install_vmm_fakes(fake);
  VirtualMemoryResource vmr(0);
  {
    Buffer b = vmr.allocate(kGran, Stream::legacy_default());
    vmr.modify_allocation(b, 2 * kGran);  // in place: two mappings
    const CUdeviceptr p = b.handle();
    g_honour_hint = false;
    vmr.modify_allocation(b, 5 * kGran);
    EXPECT_NE(b.handle(), p);
    EXPECT_EQ(b.size(), 5 * kGran);
    // The old range is gone; the new one maps both old chunks and one new one.
    ASSERT_EQ(g_mapped.size(), 3u);
    EXPECT_EQ(g_mapped.begin()->first, b.handle());
    EXPECT_EQ(g_reserved.size(), 1u);
    EXPECT_EQ(g_reserved.begin()->second, 5 * kGran);
    EXPECT_TRUE(handles_alive_only_through_mappings());
  }
  EXPECT_EQ(vmm_leaks(), "");
}

TEST(VirtualMemoryTest, AFailedGrowLeavesTheBufferAsItWas) {
  FakeDriver fake;
  install_vmm_fakes(fake);
  VirtualMemoryResource vmr(0);
  {
    Buffer b = vmr.allocate(kGran, Stream::legacy_default());
    const CUdeviceptr p = b.handle();
    g_fail_map_after = 0;  // in place, the map fails
    EXPECT_THROW(vmr.modify_allocation(b, 3 * kGran), CudaError);
    EXPECT_EQ(b.handle(), p);
    EXPECT_EQ(b.size(), kGran);
    EXPECT_EQ(g_mapped.size(), 1u);
    EXPECT_EQ(g_reserved.size(), 1u);
    g_honour_hint = false;
    g_fail_map_after = 1;  // moving: the old chunk maps, the new one fails
    EXPECT_THROW(vmr.modify_allocation(b, 3 * kGran), CudaError);
    EXPECT_EQ(b.handle(), p);
    EXPECT_EQ(g_mapped.size(), 1u);
    EXPECT_EQ(g_reserved.size(), 1u);
    EXPECT_TRUE(handles_alive_only_through_mappings());
    std::vector<std::byte> host(16);
    Buffer other = Buffer::from_handle(host.data(), host.size());
    expect_invalid([&] { vmr.modify_allocation(other, 3 * kGran); }, "not allocated by this resource");
  }
  EXPECT_EQ(vmm_leaks(), "");
}

TEST(VirtualMemoryTest, UnsupportedOptionsAreRefused) {
  FakeDriver fake;
  install_vmm_fakes(fake);
  EXPECT_THROW(VirtualMemoryResource(0, {.handle_type = VirtualMemoryHandleType::fabric}), FeatureUnavailableError);
  EXPECT_THROW(VirtualMemoryResource(0, {.gpu_direct_rdma = true}), FeatureUnavailableError);
  expect_invalid([] { VirtualMemoryResource(0, {.addr_align = 3 << 20}); }, "power of two");
  expect_invalid([] { VirtualMemoryResource(0, {.peers = {0}}); }, "owning device");
  EXPECT_THROW(VirtualMemoryResource(0, {.peers = {4}}), std::out_of_range);
  VirtualMemoryResource none(0, {.handle_type = VirtualMemoryHandleType::none});
  EXPECT_THROW((void)none.granularity(), CudaError);  // the fake only knows posix_fd: the prop reaches the driver
}

// ---- peer access on pools ----

namespace {
std::map<int, CUmemAccess_flags> g_pool_access;
int g_set_access_calls = 0;
}  // namespace

TEST(PeerAccessTest, PoolsGrantAndRevokeInOneCall) {
  FakeDriver fake;
  FakeDriver::device_count = 3;
  g_pool_access.clear();
  g_set_access_calls = 0;
  fake.table.cuDeviceCanAccessPeer = [](int* v, CUdevice dev, CUdevice peer) {
    *v = (dev == 1 && peer == 0) || (dev == 0 && peer == 1);  // 0 and 1 share; 2 reaches no one
    return CUDA_SUCCESS;
  };
  fake.table.cuMemPoolGetAccess = [](CUmemAccess_flags* f, CUmemoryPool, CUmemLocation* l) {
    *f = g_pool_access.count(l->id) ? g_pool_access[l->id] : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
  };
  fake.table.cuMemPoolSetAccess = [](CUmemoryPool, const CUmemAccessDesc* d, size_t n) {
    ++g_set_access_calls;
    for (size_t i = 0; i < n; ++i) g_pool_access[d[i].location.id] = d[i].flags;
    return CUDA_SUCCESS;
  };
  DeviceMemoryResource mr(0);
  EXPECT_TRUE(mr.peer_accessible_by().empty());
  EXPECT_TRUE(Device(0).can_access_peer(Device(1)));
  EXPECT_FALSE(Device(0).can_access_peer(Device(2)));
  EXPECT_TRUE(Device(0).can_access_peer(Device(0)));

  const int one_and_owner[] = {1, 0};
  mr.set_peer_accessible_by(one_and_owner);
  EXPECT_EQ(g_set_access_calls, 1);
  EXPECT_EQ(mr.peer_accessible_by(), (std::vector<int>{1}));
  EXPECT_EQ(g_pool_access.count(0), 0u);  // the owner is never touched

  const int two[] = {2};
  expect_invalid([&] { mr.update_peer_access(two, {}); }, "device 2 cannot access device 0");
  EXPECT_EQ(g_set_access_calls, 1);
  mr.set_peer_accessible_by(one_and_owner);  // nothing to change: no call
  EXPECT_EQ(g_set_access_calls, 1);
  mr.set_peer_accessible_by({});
  EXPECT_EQ(g_set_access_calls, 2);
  EXPECT_EQ(g_pool_access[1], CU_MEM_ACCESS_FLAGS_PROT_NONE);
  EXPECT_TRUE(mr.peer_accessible_by().empty());
  FakeDriver::device_count = 1;
}
