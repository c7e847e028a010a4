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
#include "common/fake_gl.hpp"
#include "common/message_of.hpp"

using namespace cucore;
using cucore::test::FakeDriver;
using cucore::test::FakeGl;
using cucore::test::message_of;

namespace {

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
  ASSERT_EQ(buf.size(), FakeGl::buffer_bytes);
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
