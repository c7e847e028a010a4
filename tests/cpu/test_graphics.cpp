// GraphicsResource against the fake driver, with a fake of CUDA's GL interop
// (a ledger of registered and mapped resources, their contexts and streams):
// the flags reach the driver as cuda.core parses them; the mapped Buffer is
// the mapped pointer and closing it unmaps; a mapped image is an OpaqueArray
// over the mapped CUDA array; misuse is refused before the driver is asked;
// and in every order of dropping its holders a resource is unmapped once, on
// the mapping's stream and in its context, before it is unregistered once.
// The same behaviour on the real driver, with an OpenGL context made through
// headless EGL: tests/gpu/test_graphics.cpp.
#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/graphics.hpp>
#include <cucore/stream.hpp>
#include <cucore/texture.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/fake_driver.hpp"
#include "common/message_of.hpp"

using namespace cucore;
using cucore::test::FakeDriver;
using cucore::test::message_of;

namespace {

// The fake interop: a registered resource is a heap cell of its own; a
// buffer's mapped memory and an image's (one 2-D float4 level and a second,
// half-size level) are host memory filled with random bytes at registration.
struct FakeGl {
  struct Resource {
    bool image = false;
    unsigned gl_name = 0, target = 0, flags = 0, map_flags = 0;
    CUcontext ctx = nullptr;
    bool mapped = false;
    std::vector<std::byte> data;    // buffer bytes, or level 0 of the image
    std::vector<std::byte> level1;  // the image's level 1
  };
  static constexpr std::size_t kBufferBytes = 4096;
  static constexpr std::size_t kWidth = 16, kHeight = 8, kTexel = 16;  // RGBA32F

  static inline std::mutex mutex;
  static inline std::map<CUgraphicsResource, Resource> live;
  static inline std::vector<std::string> log;         // "register 1", "map 1 on 0x..", "unmap 1 on 0x..", "unregister 1"
  static inline std::vector<std::string> violations;  // what a real driver would refuse or fault on
  static inline int next_name = 1;
  static inline CUresult fail_next_unmap = CUDA_SUCCESS;
  static inline CUresult fail_next_map = CUDA_SUCCESS;
  static inline CUresult fail_next_pointer = CUDA_SUCCESS;

  static void reset() {
    std::lock_guard lock(mutex);
    for (auto& [h, r] : live) delete reinterpret_cast<int*>(h);
    live.clear();
    log.clear();
    violations.clear();
    next_name = 1;
    fail_next_unmap = fail_next_map = fail_next_pointer = CUDA_SUCCESS;
  }
  static int id(CUgraphicsResource h) { return *reinterpret_cast<int*>(h); }
  static std::string hex(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
  }
  static CUcontext current() {
    CUcontext c = nullptr;
    detail::driver().cuCtxGetCurrent(&c);
    return c;
  }
  static std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> v(n);
    for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
    return v;
  }
  // Under `mutex`: the live resource `h` used by `call` in its own context, else a violation.
  static Resource* use(CUgraphicsResource h, const char* call) {
    auto it = live.find(h);
    if (it == live.end()) {
      violations.push_back(std::string(call) + " of a resource that is not registered");
      return nullptr;
    }
    if (current() != it->second.ctx) {
      violations.push_back(std::string(call) + " of resource " + std::to_string(id(h)) +
                           " outside the context it was registered in");
      return nullptr;
    }
    return &it->second;
  }
  static CUresult reg(CUgraphicsResource* out, bool image, unsigned name, unsigned target, unsigned flags) {
    std::lock_guard lock(mutex);
    if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
    if (name == 0) return CUDA_ERROR_INVALID_VALUE;
    auto* h = reinterpret_cast<CUgraphicsResource>(new int(next_name++));
    Resource r;
    r.image = image;
    r.gl_name = name;
    r.target = target;
    r.flags = flags;
    r.ctx = current();
    r.data = random_bytes(image ? kWidth * kHeight * kTexel : kBufferBytes, 1000u + name);
    if (image) r.level1 = random_bytes(kWidth / 2 * kHeight / 2 * kTexel, 2000u + name);
    live.emplace(h, std::move(r));
    log.push_back("register " + std::to_string(id(h)));
    *out = h;
    return CUDA_SUCCESS;
  }
  // The resource whose image level `array` is, with its level, under `mutex`.
  static const std::vector<std::byte>* image_level(CUarray array, std::size_t* width, std::size_t* height) {
    for (auto& [h, r] : live) {
      if (!r.image || !r.mapped) continue;
      if (reinterpret_cast<CUarray>(r.data.data()) == array) {
        *width = kWidth;
        *height = kHeight;
        return &r.data;
      }
      if (reinterpret_cast<CUarray>(r.level1.data()) == array) {
        *width = kWidth / 2;
        *height = kHeight / 2;
        return &r.level1;
      }
    }
    return nullptr;
  }

  static void install(detail::DriverTable& t) {
    reset();
    t.cuGraphicsGLRegisterBuffer = [](CUgraphicsResource* r, unsigned name, unsigned flags) {
      return reg(r, false, name, 0, flags);
    };
    t.cuGraphicsGLRegisterImage = [](CUgraphicsResource* r, unsigned name, unsigned target, unsigned flags) {
      return reg(r, true, name, target, flags);
    };
    t.cuGraphicsUnregisterResource = [](CUgraphicsResource h) {
      std::lock_guard lock(mutex);
      Resource* r = use(h, "cuGraphicsUnregisterResource");
      if (!r) return CUDA_ERROR_INVALID_HANDLE;
      if (r->mapped) violations.push_back("resource " + std::to_string(id(h)) + " unregistered while mapped");
      log.push_back("unregister " + std::to_string(id(h)));
      live.erase(h);
      delete reinterpret_cast<int*>(h);
      return CUDA_SUCCESS;
    };
    t.cuGraphicsMapResources = [](unsigned n, CUgraphicsResource* hs, CUstream s) {
      std::lock_guard lock(mutex);
      if (n != 1) violations.push_back("cuGraphicsMapResources of " + std::to_string(n) + " resources");
      Resource* r = use(hs[0], "cuGraphicsMapResources");
      if (!r) return CUDA_ERROR_INVALID_HANDLE;
      if (r->mapped) return CUDA_ERROR_ALREADY_MAPPED;
      if (CUresult f = std::exchange(fail_next_map, CUDA_SUCCESS); f != CUDA_SUCCESS) return f;
      r->mapped = true;
      log.push_back("map " + std::to_string(id(hs[0])) + " on " + hex(s));
      return CUDA_SUCCESS;
    };
    t.cuGraphicsUnmapResources = [](unsigned n, CUgraphicsResource* hs, CUstream s) {
      std::lock_guard lock(mutex);
      if (n != 1) violations.push_back("cuGraphicsUnmapResources of " + std::to_string(n) + " resources");
      Resource* r = use(hs[0], "cuGraphicsUnmapResources");
      if (!r) return CUDA_ERROR_INVALID_HANDLE;
      if (!r->mapped) {
        violations.push_back("resource " + std::to_string(id(hs[0])) + " unmapped when not mapped");
        return CUDA_ERROR_NOT_MAPPED;
      }
      if (CUresult f = std::exchange(fail_next_unmap, CUDA_SUCCESS); f != CUDA_SUCCESS) return f;
      r->mapped = false;
      log.push_back("unmap " + std::to_string(id(hs[0])) + " on " + hex(s));
      return CUDA_SUCCESS;
    };
    t.cuGraphicsResourceGetMappedPointer = [](CUdeviceptr* p, size_t* n, CUgraphicsResource h) {
      std::lock_guard lock(mutex);
      Resource* r = use(h, "cuGraphicsResourceGetMappedPointer");
      if (!r) return CUDA_ERROR_INVALID_HANDLE;
      if (!r->mapped) return CUDA_ERROR_NOT_MAPPED;
      if (r->image) return CUDA_ERROR_NOT_MAPPED_AS_POINTER;
      if (CUresult f = std::exchange(fail_next_pointer, CUDA_SUCCESS); f != CUDA_SUCCESS) return f;
      *p = reinterpret_cast<CUdeviceptr>(r->data.data());
      *n = r->data.size();
      return CUDA_SUCCESS;
    };
    t.cuGraphicsSubResourceGetMappedArray = [](CUarray* a, CUgraphicsResource h, unsigned index, unsigned level) {
      std::lock_guard lock(mutex);
      Resource* r = use(h, "cuGraphicsSubResourceGetMappedArray");
      if (!r) return CUDA_ERROR_INVALID_HANDLE;
      if (!r->mapped) return CUDA_ERROR_NOT_MAPPED;
      if (!r->image) return CUDA_ERROR_NOT_MAPPED_AS_ARRAY;
      if (index != 0 || level > 1) return CUDA_ERROR_INVALID_VALUE;
      *a = reinterpret_cast<CUarray>(level == 0 ? r->data.data() : r->level1.data());
      return CUDA_SUCCESS;
    };
    t.cuGraphicsResourceSetMapFlags = [](CUgraphicsResource h, unsigned flags) {
      std::lock_guard lock(mutex);
      Resource* r = use(h, "cuGraphicsResourceSetMapFlags");
      if (!r) return CUDA_ERROR_INVALID_HANDLE;
      if (r->mapped) return CUDA_ERROR_ALREADY_MAPPED;
      r->map_flags = flags;
      return CUDA_SUCCESS;
    };
    t.cuArray3DGetDescriptor = [](CUDA_ARRAY3D_DESCRIPTOR* d, CUarray a) {
      std::lock_guard lock(mutex);
      std::size_t w = 0, h = 0;
      if (!image_level(a, &w, &h)) return CUDA_ERROR_INVALID_HANDLE;
      *d = CUDA_ARRAY3D_DESCRIPTOR{};
      d->Width = w;
      d->Height = h;
      d->Depth = 0;
      d->Format = CU_AD_FORMAT_FLOAT;
      d->NumChannels = 4;
      d->Flags = CUDA_ARRAY3D_SURFACE_LDST;
      return CUDA_SUCCESS;
    };
    // Copies out of a mapped level into host (or fake device) memory, row by row.
    t.cuMemcpy3DAsync = [](const CUDA_MEMCPY3D* c, CUstream) {
      std::lock_guard lock(mutex);
      std::size_t w = 0, h = 0;
      const auto* level = c->srcMemoryType == CU_MEMORYTYPE_ARRAY ? image_level(c->srcArray, &w, &h) : nullptr;
      if (!level) {
        violations.push_back("cuMemcpy3DAsync from something other than a mapped image level");
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (c->WidthInBytes != w * kTexel || c->Height != h || c->Depth != 1) {
        violations.push_back("cuMemcpy3DAsync of a region other than the whole level");
        return CUDA_ERROR_INVALID_VALUE;
      }
      auto* dst = static_cast<std::byte*>(c->dstMemoryType == CU_MEMORYTYPE_HOST
                                              ? c->dstHost
                                              : reinterpret_cast<void*>(c->dstDevice));
      for (std::size_t y = 0; y < h; ++y)
        std::memcpy(dst + y * c->dstPitch, level->data() + y * c->WidthInBytes, c->WidthInBytes);
      return CUDA_SUCCESS;
    };
  }

  // Nothing registered or mapped is left and nothing was refused.
  static std::string problems() {
    std::lock_guard lock(mutex);
    std::string out;
    for (const auto& v : violations) out += "violation: " + v + "\n";
    for (const auto& [h, r] : live) out += "resource " + std::to_string(id(h)) + " never unregistered\n";
    return out;
  }
  static std::vector<std::string> calls() {
    std::lock_guard lock(mutex);
    return log;
  }
};

class Graphics : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeGl::install(fake.table);
    previous = Device(0).set_current();
  }
  void TearDown() override {
    EXPECT_EQ(FakeGl::problems(), "");
    FakeGl::reset();
  }
  FakeDriver fake;
  Context previous;
};

std::string on(const Stream& s) { return " on " + FakeGl::hex(s.handle()); }

// Runs `body(order)` once per permutation of 0..n-1.
void for_each_order(int n, const std::function<void(const std::vector<int>&)>& body) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  do body(order);
  while (std::next_permutation(order.begin(), order.end()));
}

}  // namespace

TEST(GraphicsFlags, ParseAsCudaCoreNamesThem) {
  EXPECT_EQ(parse_graphics_register_flag("none"), GraphicsRegisterFlags::none);
  EXPECT_EQ(static_cast<unsigned>(parse_graphics_register_flag("read_only")), 1u);
  EXPECT_EQ(static_cast<unsigned>(parse_graphics_register_flag("write_discard")), 2u);
  EXPECT_EQ(static_cast<unsigned>(parse_graphics_register_flag("surface_load_store")), 4u);
  EXPECT_EQ(static_cast<unsigned>(parse_graphics_register_flag("texture_gather")), 8u);
  EXPECT_EQ(static_cast<unsigned>(GraphicsRegisterFlags::surface_load_store | GraphicsRegisterFlags::read_only), 5u);
  EXPECT_EQ(message_of<std::invalid_argument>([] { parse_graphics_register_flag("bogus"); }),
            "Unknown register flag 'bogus'. Valid flags: none, read_only, surface_load_store, texture_gather, "
            "write_discard");
  EXPECT_EQ(std::string(graphics_register_flag_names()),
            "none, read_only, surface_load_store, texture_gather, write_discard");
  EXPECT_EQ(static_cast<unsigned>(parse_graphics_map_flag("read_only")), 1u);
  EXPECT_EQ(static_cast<unsigned>(parse_graphics_map_flag("write_discard")), 2u);
  EXPECT_EQ(message_of<std::invalid_argument>([] { parse_graphics_map_flag("surface_load_store"); }),
            "Unknown map flag 'surface_load_store'. Valid flags: none, read_only, write_discard");
}

TEST_F(Graphics, ABufferIsRegisteredInTheCurrentContextWithItsFlags) {
  GraphicsResource r = GraphicsResource::from_gl_buffer(7, GraphicsRegisterFlags::write_discard |
                                                               GraphicsRegisterFlags::read_only);
  ASSERT_NE(r.handle(), nullptr);
  {
    std::lock_guard lock(FakeGl::mutex);
    const auto& fr = FakeGl::live.at(r.handle());
    EXPECT_EQ(fr.gl_name, 7u);
    EXPECT_EQ(fr.flags, 3u);
    EXPECT_EQ(fr.ctx, Device(0).context().handle());
    EXPECT_FALSE(fr.image);
  }
  EXPECT_FALSE(r.is_closed());
  EXPECT_FALSE(r.is_mapped());
  EXPECT_EQ(r.kind(), GraphicsResource::Kind::buffer);
  EXPECT_EQ(r.device_id(), 0);
  GraphicsResource img = GraphicsResource::from_gl_image(9, 0x0DE1 /* GL_TEXTURE_2D */);
  {
    std::lock_guard lock(FakeGl::mutex);
    const auto& fi = FakeGl::live.at(img.handle());
    EXPECT_EQ(fi.gl_name, 9u);
    EXPECT_EQ(fi.target, 0x0DE1u);
    EXPECT_EQ(fi.flags, 0u);
    EXPECT_TRUE(fi.image);
  }
  EXPECT_EQ(img.kind(), GraphicsResource::Kind::image);
  r.close();
  EXPECT_TRUE(r.is_closed());
  EXPECT_EQ(r.handle(), nullptr);
  r.close();  // idempotent
  img.close();
  EXPECT_EQ(FakeGl::calls(), (std::vector<std::string>{"register 1", "register 2", "unregister 1", "unregister 2"}));
}

TEST_F(Graphics, ARefusedRegistrationIsTheDriversCudaError) {
  try {
    GraphicsResource::from_gl_buffer(0);
    FAIL() << "no error";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_NE(std::string(e.what()).find("cuGraphicsGLRegisterBuffer"), std::string::npos) << e.what();
  }
  detail::driver().cuCtxSetCurrent(nullptr);  // no CUDA context current: the driver refuses
  try {
    GraphicsResource::from_gl_image(3, 0x0DE1);
    FAIL() << "no error";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_CONTEXT);
  }
  EXPECT_TRUE(FakeGl::calls().empty());
}

TEST_F(Graphics, TheMappedBufferIsTheMappedMemoryAndClosingItUnmapsOnItsStream) {
  Stream s = Device(0).create_stream();
  GraphicsResource r = GraphicsResource::from_gl_buffer(5);
  Buffer& buf = r.map(s);
  EXPECT_TRUE(r.is_mapped());
  std::vector<std::byte> expect;
  {
    std::lock_guard lock(FakeGl::mutex);
    expect = FakeGl::live.at(r.handle()).data;
  }
  ASSERT_EQ(buf.size(), FakeGl::kBufferBytes);
  EXPECT_EQ(buf.handle(), reinterpret_cast<CUdeviceptr>(FakeGl::live.at(r.handle()).data.data()));
  EXPECT_FALSE(buf.memory_resource());  // never freed by cucore: the unmap is its release
  EXPECT_EQ(buf.stream(), StreamRef(s));
  EXPECT_EQ(r.mapped_buffer().get(), &buf);
  std::vector<std::byte> got(buf.size());
  buf.copy_to(std::span<std::byte>(got), s);
  EXPECT_EQ(got, expect);  // every byte of the GL buffer, read through the mapped Buffer
  // Writing through the Buffer writes the GL buffer.
  auto fresh = FakeGl::random_bytes(buf.size(), 77);
  buf.copy_from(std::span<const std::byte>(fresh), s);
  {
    std::lock_guard lock(FakeGl::mutex);
    EXPECT_EQ(FakeGl::live.at(r.handle()).data, fresh);
  }
  buf.close();
  EXPECT_TRUE(buf.is_closed());
  EXPECT_EQ(buf.handle(), 0u);
  EXPECT_FALSE(r.is_mapped());
  EXPECT_EQ(FakeGl::calls(), (std::vector<std::string>{"register 1", "map 1" + on(s), "unmap 1" + on(s)}));
  // Mapped again, unmapped by the resource on another stream.
  Stream other = Device(0).create_stream();
  Buffer& again = r.map(s);
  EXPECT_NE(&again, nullptr);
  r.unmap(other);
  EXPECT_TRUE(again.is_closed());
  EXPECT_FALSE(r.is_mapped());
  r.close();
  EXPECT_EQ(FakeGl::calls(), (std::vector<std::string>{"register 1", "map 1" + on(s), "unmap 1" + on(s),
                                                       "map 1" + on(s), "unmap 1" + on(other), "unregister 1"}));
}

TEST_F(Graphics, TheMappedImageIsAnOpaqueArrayOverTheMappedArray) {
  Stream s = Device(0).create_stream();
  GraphicsResource r = GraphicsResource::from_gl_image(4, 0x0DE1, GraphicsRegisterFlags::surface_load_store);
  texture::OpaqueArray& a = r.map_array(s);
  EXPECT_TRUE(r.is_mapped());
  EXPECT_EQ(a.shape(), (std::vector<std::size_t>{FakeGl::kWidth, FakeGl::kHeight}));
  EXPECT_EQ(a.format(), texture::ArrayFormat::float32);
  EXPECT_EQ(a.num_channels(), 4u);
  EXPECT_TRUE(a.is_surface_load_store());
  EXPECT_EQ(a.device_id(), 0);
  EXPECT_EQ(a.size_bytes(), FakeGl::kWidth * FakeGl::kHeight * FakeGl::kTexel);
  std::vector<std::byte> expect0, expect1;
  {
    std::lock_guard lock(FakeGl::mutex);
    expect0 = FakeGl::live.at(r.handle()).data;
    expect1 = FakeGl::live.at(r.handle()).level1;
  }
  std::vector<std::byte> got(a.size_bytes());
  a.copy_to(std::span<std::byte>(got), s);
  EXPECT_EQ(got, expect0);
  // Level 1 as its own array, which keeps the mapping while it lives.
  std::optional<texture::OpaqueArray> level1 = r.mapped_array(0, 1);
  EXPECT_EQ(level1->shape(), (std::vector<std::size_t>{FakeGl::kWidth / 2, FakeGl::kHeight / 2}));
  std::vector<std::byte> got1(level1->size_bytes());
  level1->copy_to(std::span<std::byte>(got1), s);
  EXPECT_EQ(got1, expect1);
  try {
    r.mapped_array(1, 0);
    FAIL() << "no error";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
  }
  r.unmap();
  EXPECT_TRUE(a.is_closed());
  EXPECT_FALSE(r.is_mapped());
  EXPECT_EQ(FakeGl::calls().back(), "map 1" + on(s));  // level 1 still holds the mapping
  EXPECT_EQ(message_of<Error>([&] { r.map_array(s); }).rfind("GraphicsResource is already mapped: ", 0), 0u);
  level1.reset();  // the last holder: unmaps on the mapping's stream
  EXPECT_EQ(FakeGl::calls().back(), "unmap 1" + on(s));
  // Mapped again; closing the array unmaps.
  texture::OpaqueArray& b = r.map_array(s);
  b.close();
  EXPECT_FALSE(r.is_mapped());
  EXPECT_EQ(FakeGl::calls().back(), "unmap 1" + on(s));
  r.close();
  EXPECT_EQ(FakeGl::calls().back(), "unregister 1");
}

TEST_F(Graphics, MisuseIsRefusedBeforeTheDriverIsAsked) {
  Stream s = Device(0).create_stream();
  GraphicsResource r = GraphicsResource::from_gl_buffer(5);
  GraphicsResource img = GraphicsResource::from_gl_image(6, 0x0DE1);
  EXPECT_EQ(message_of<Error>([&] { r.unmap(); }), "GraphicsResource is not mapped");
  EXPECT_EQ(message_of<Error>([&] { r.unmap(s); }), "GraphicsResource is not mapped");
  EXPECT_EQ(message_of<Error>([&] { img.mapped_array(); }), "GraphicsResource is not mapped");
  EXPECT_NE(message_of<std::invalid_argument>([&] { img.map(s); }).find("map_array() maps it"), std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] { r.map_array(s); }).find("map() maps it"), std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] { r.mapped_array(); }).find("no CUDA array"), std::string::npos);
  r.map(s);
  EXPECT_EQ(message_of<Error>([&] { r.map(s); }), "GraphicsResource is already mapped");
  const auto calls = FakeGl::calls();
  EXPECT_EQ(std::count_if(calls.begin(), calls.end(), [](const std::string& c) { return c.rfind("map ", 0) == 0; }),
            1);
  // A closed stream is refused too.
  r.unmap();
  Stream dead = Device(0).create_stream();
  dead.close();
  EXPECT_NE(message_of<ClosedError>([&] { r.map(dead); }).find("Stream has been closed"), std::string::npos);
  // A closed resource: ClosedError naming the operation, for every use.
  r.close();
  EXPECT_EQ(message_of<ClosedError>([&] { r.map(s); }), "GraphicsResource has been closed (map)");
  EXPECT_EQ(message_of<ClosedError>([&] { r.unmap(); }), "GraphicsResource has been closed (unmap)");
  EXPECT_EQ(message_of<ClosedError>([&] { r.unmap(s); }), "GraphicsResource has been closed (unmap)");
  EXPECT_EQ(message_of<ClosedError>([&] { r.set_map_flags(GraphicsMapFlags::read_only); }),
            "GraphicsResource has been closed (set_map_flags)");
  EXPECT_EQ(message_of<ClosedError>([&] { r.kind(); }), "GraphicsResource has been closed (kind)");
  img.close();
  EXPECT_EQ(message_of<ClosedError>([&] { img.map_array(s); }), "GraphicsResource has been closed (map_array)");
  EXPECT_EQ(message_of<ClosedError>([&] { img.mapped_array(); }), "GraphicsResource has been closed (mapped_array)");
  GraphicsResource never;
  EXPECT_TRUE(never.is_closed());
  EXPECT_FALSE(never.is_mapped());
  EXPECT_EQ(never.handle(), nullptr);
  EXPECT_EQ(message_of<ClosedError>([&] { never.map(s); }), "GraphicsResource has been closed (map)");
  never.close();
}

TEST_F(Graphics, MapFlagsReachTheDriverAndAreRefusedWhileMapped) {
  Stream s = Device(0).create_stream();
  GraphicsResource r = GraphicsResource::from_gl_buffer(5);
  r.set_map_flags(GraphicsMapFlags::write_discard);
  {
    std::lock_guard lock(FakeGl::mutex);
    EXPECT_EQ(FakeGl::live.at(r.handle()).map_flags, 2u);
  }
  r.map(s);
  try {
    r.set_map_flags(GraphicsMapFlags::read_only);
    FAIL() << "no error";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_ALREADY_MAPPED);
  }
  r.close();
}

TEST_F(Graphics, ARefusedMapLeavesItUnmappedAndARefusedUnmapLeavesItMapped) {
  Stream s = Device(0).create_stream();
  GraphicsResource r = GraphicsResource::from_gl_buffer(5);
  FakeGl::fail_next_map = CUDA_ERROR_UNKNOWN;
  EXPECT_THROW(r.map(s), CudaError);
  EXPECT_FALSE(r.is_mapped());
  // The pointer refused after the map: the mapping is undone.
  FakeGl::fail_next_pointer = CUDA_ERROR_INVALID_HANDLE;
  EXPECT_THROW(r.map(s), CudaError);
  EXPECT_FALSE(r.is_mapped());
  EXPECT_EQ(FakeGl::calls(), (std::vector<std::string>{"register 1", "map 1" + on(s), "unmap 1" + on(s)}));
  Buffer& buf = r.map(s);
  FakeGl::fail_next_unmap = CUDA_ERROR_UNKNOWN;
  EXPECT_THROW(buf.close(), CudaError);
  EXPECT_FALSE(buf.is_closed());
  EXPECT_TRUE(r.is_mapped());
  FakeGl::fail_next_unmap = CUDA_ERROR_UNKNOWN;
  EXPECT_THROW(r.unmap(), CudaError);
  EXPECT_TRUE(r.is_mapped());
  FakeGl::fail_next_unmap = CUDA_ERROR_UNKNOWN;
  EXPECT_THROW(r.close(), CudaError);
  EXPECT_FALSE(r.is_closed());
  r.close();
  EXPECT_TRUE(r.is_closed());
  EXPECT_TRUE(buf.is_closed());
  EXPECT_EQ(FakeGl::calls().back(), "unregister 1");
}

// Dropped while mapped, in every order of its holders (the resource, a share
// of the mapped Buffer's box held elsewhere, the stream it was mapped on), on
// a thread with no current context: one unmap on the mapping's stream in the
// resource's context, then one unregister.
TEST_F(Graphics, ABufferResourceDroppedWhileMappedIsUnmappedThenUnregisteredInEveryOrder) {
  for_each_order(3, [&](const std::vector<int>& order) {
    FakeGl::reset();
    std::optional<Stream> s(Device(0).create_stream());
    const std::string on_s = on(*s);
    std::optional<GraphicsResource> r(GraphicsResource::from_gl_buffer(5));
    std::shared_ptr<const detail::BufferBox> held = r->map(*s).box();
    std::thread([&] {
      EXPECT_EQ(FakeGl::current(), nullptr);
      for (int i : order) {
        if (i == 0) r.reset();
        if (i == 1) held.reset();
        if (i == 2) s.reset();
      }
      EXPECT_EQ(FakeGl::current(), nullptr);  // put back as it was
    }).join();
    EXPECT_EQ(FakeGl::calls(), (std::vector<std::string>{"register 1", "map 1" + on_s, "unmap 1" + on_s,
                                                         "unregister 1"}));
    EXPECT_EQ(FakeGl::problems(), "");
    EXPECT_EQ(FakeDriver::ledger_problems(), "");  // the stream outlived the unmap on it
  });
}

TEST_F(Graphics, AnImageResourceDroppedWhileMappedIsUnmappedThenUnregisteredInEveryOrder) {
  for_each_order(3, [&](const std::vector<int>& order) {
    FakeGl::reset();
    std::optional<Stream> s(Device(0).create_stream());
    const std::string on_s = on(*s);
    std::optional<GraphicsResource> r(GraphicsResource::from_gl_image(8, 0x0DE1));
    r->map_array(*s);
    std::optional<texture::OpaqueArray> level = r->mapped_array(0, 1);
    std::thread([&] {
      for (int i : order) {
        if (i == 0) r.reset();
        if (i == 1) level.reset();
        if (i == 2) s.reset();
      }
    }).join();
    EXPECT_EQ(FakeGl::calls(), (std::vector<std::string>{"register 1", "map 1" + on_s, "unmap 1" + on_s,
                                                         "unregister 1"}));
    EXPECT_EQ(FakeGl::problems(), "");
    EXPECT_EQ(FakeDriver::ledger_problems(), "");
  });
}

TEST_F(Graphics, ClosingAResourceWhoseMappingIsHeldElsewhereUnregistersAfterTheLastHolder) {
  Stream s = Device(0).create_stream();
  GraphicsResource r = GraphicsResource::from_gl_buffer(5);
  GraphicsResource copy = r;  // one resource
  std::shared_ptr<const detail::BufferBox> held = r.map(s).box();
  Stream other = Device(0).create_stream();
  r.close(other);
  EXPECT_TRUE(r.is_closed());
  EXPECT_TRUE(copy.is_closed());
  EXPECT_FALSE(r.is_mapped());
  EXPECT_EQ(FakeGl::calls().back(), "map 1" + on(s));  // the held box keeps it mapped
  held.reset();
  EXPECT_EQ(FakeGl::calls(), (std::vector<std::string>{"register 1", "map 1" + on(s), "unmap 1" + on(s),
                                                       "unregister 1"}));
}
