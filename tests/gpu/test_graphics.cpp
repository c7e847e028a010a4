// OpenGL interop on a real GPU, with a headless GL context made through EGL
// on the EGL device of CUDA device 0 (tests/common/headless_gl.hpp; the GL
// loader libraries from $CUCORE_GL_LIBDIR, which scripts/gpu-check points at
// .carry/gl when it is there): a GL buffer of random floats read through the
// mapped Buffer and written by CUDA (copies and a kernel) then read back by
// GL; a GL_RGBA32F texture read through the mapped array into device memory
// and written through it; every misuse refused; and a resource dropped while
// mapped unmapped and then unregistered, each once and with no failure.
// Without a GPU or without headless EGL the tests skip, saying what was
// missing (scripts/gl-probe prints what EGL finds); under CUCORE_REQUIRE_GPU=1
// they fail instead.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/graphics.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/log.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>
#include <cucore/texture.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/gpu.hpp"
#include "common/headless_gl.hpp"
#include "common/random.hpp"
#include "loader/driver.hpp"

using namespace cucore;
using test::HeadlessGl;
using test::random_floats;

namespace {

// A GL context current on this thread on CUDA device 0's EGL device, or why not.
std::unique_ptr<HeadlessGl> gl_for_device0(std::string& why) {
  auto gl = HeadlessGl::create(0, &why);
  if (gl && !gl->cuda_matched()) {
    why = "EGL offers no NVIDIA device (no EGL_NV_device_cuda): " + gl->description();
    gl.reset();
  }
  return gl;
}

}  // namespace

// Skips (fails under CUCORE_REQUIRE_GPU=1) without a GPU or without headless EGL.
#define CUCORE_REQUIRE_GL(gl)                                                             \
  CUCORE_REQUIRE_GPU();                                                                   \
  Device(0).set_current();                                                                \
  std::string gl##_why;                                                                   \
  auto gl = gl_for_device0(gl##_why);                                                     \
  if (!gl) {                                                                              \
    if (::cucore::test::gpu_required_by_environment()) FAIL() << "no headless GL: " << gl##_why; \
    GTEST_SKIP() << "needs headless EGL/OpenGL: " << gl##_why;                            \
  }

namespace {

// The real driver's table with the graphics entry points logged in call order
// ("map", "unmap", "unregister", with a failure's code), for as long as it is installed.
class GraphicsCalls {
 public:
  GraphicsCalls() {
    real_ = &detail::driver();
    table_ = *real_;
    {
      std::lock_guard lock(mutex_);
      log_.clear();
    }
    table_.cuGraphicsMapResources = [](unsigned n, CUgraphicsResource* r, CUstream s) {
      return note("map", real_->cuGraphicsMapResources(n, r, s));
    };
    table_.cuGraphicsUnmapResources = [](unsigned n, CUgraphicsResource* r, CUstream s) {
      return note("unmap", real_->cuGraphicsUnmapResources(n, r, s));
    };
    table_.cuGraphicsUnregisterResource = [](CUgraphicsResource r) {
      return note("unregister", real_->cuGraphicsUnregisterResource(r));
    };
    detail::set_driver_table_for_testing(&table_);
  }
  ~GraphicsCalls() { detail::set_driver_table_for_testing(nullptr); }
  GraphicsCalls(const GraphicsCalls&) = delete;
  GraphicsCalls& operator=(const GraphicsCalls&) = delete;
  static std::vector<std::string> log() {
    std::lock_guard lock(mutex_);
    return log_;
  }

 private:
  static CUresult note(const char* what, CUresult r) {
    std::lock_guard lock(mutex_);
    log_.push_back(r == CUDA_SUCCESS ? std::string(what) : std::string(what) + " failed: " + result_name(r));
    return r;
  }
  static inline const detail::DriverTable* real_ = nullptr;
  static inline std::mutex mutex_;
  static inline std::vector<std::string> log_;
  detail::DriverTable table_;
};

// Release failures reported while it lives (a failed unmap or unregister in a destructor).
class ReleaseFailures {
 public:
  ReleaseFailures() {
    previous_ = set_log_handler([this](LogLevel level, std::string_view message) {
      if (level == LogLevel::release_failure) {
        std::lock_guard lock(mutex_);
        seen_.emplace_back(message);
      }
    });
  }
  ~ReleaseFailures() { set_log_handler(previous_); }
  std::vector<std::string> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  LogHandler previous_;
  std::mutex mutex_;
  std::vector<std::string> seen_;
};

void expect_equal(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && ++bad <= 5) ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i];
  EXPECT_EQ(bad, 0u) << what << ": elements that differ";
}

constexpr const char* kAffineKernel = R"(
extern "C" __global__ void affine(float a, float b, const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + b;
}
)";

}  // namespace

TEST(GraphicsGpu, ABufferIsReadAndWrittenThroughItsMappedBuffer) {
  CUCORE_REQUIRE_GL(gl);
  std::printf("%s\n", gl->description().c_str());
  Device dev(0);
  Stream s = dev.create_stream();
  const std::size_t n = (std::size_t(1) << 20) + 3;  // 4 MiB and a bit
  const auto initial = random_floats(n, 101);
  const unsigned vbo = gl->create_buffer(initial.data(), n * sizeof(float));
  ASSERT_EQ(gl->error(), 0u);
  gl->finish();

  GraphicsResource r = GraphicsResource::from_gl_buffer(vbo);
  ASSERT_NE(r.handle(), nullptr);
  EXPECT_EQ(r.device_id(), 0);
  Buffer& mapped = r.map(s);
  EXPECT_TRUE(r.is_mapped());
  ASSERT_EQ(mapped.size(), n * sizeof(float));
  EXPECT_NE(mapped.handle(), 0u);
  EXPECT_TRUE(mapped.is_device_accessible());
  EXPECT_EQ(mapped.device_id(), 0);

  // GL's data, read by CUDA through the mapped Buffer (into device memory, then here).
  Buffer copy = dev.memory_resource().allocate(mapped.size(), s);
  copy.copy_from(mapped, s);
  std::vector<float> got(n, 0.f);
  copy.copy_to(std::span<float>(got), s);
  s.sync();
  expect_equal(got, initial, "GL buffer read through the mapped Buffer");

  // CUDA writes the mapped memory (a copy of random data); GL reads it after the unmap.
  const auto written = random_floats(n, 102);
  mapped.copy_from(std::span<const float>(written), s);
  r.unmap(s);
  EXPECT_TRUE(mapped.is_closed());
  EXPECT_FALSE(r.is_mapped());
  s.sync();
  std::vector<float> from_gl(n, 0.f);
  gl->read_buffer(vbo, from_gl.data(), n * sizeof(float));
  ASSERT_EQ(gl->error(), 0u);
  expect_equal(from_gl, written, "GL buffer after CUDA's copy into the mapped Buffer");

  // Mapped again: a kernel writes it (out = 3 x + 0.5 over device data), read back by GL.
  ObjectCode code = Program(kAffineKernel, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
  Kernel affine = code.get_kernel("affine");
  const auto x = random_floats(n, 103);
  Buffer bx = dev.memory_resource().allocate(n * sizeof(float), s);
  bx.copy_from(std::span<const float>(x), s);
  Buffer& again = r.map(s);
  launch(s, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256}, affine, 3.0f, 0.5f, bx, again,
         static_cast<int>(n));
  again.close();  // the Buffer's close unmaps, as cuda.core's
  EXPECT_FALSE(r.is_mapped());
  s.sync();
  gl->read_buffer(vbo, from_gl.data(), n * sizeof(float));
  ASSERT_EQ(gl->error(), 0u);
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = 3.0f * x[i] + 0.5f;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (std::fabs(from_gl[i] - want[i]) > 1e-5f * std::max(1.f, std::fabs(want[i])) && ++bad <= 5)
      ADD_FAILURE() << "GL buffer after the kernel [" << i << "] = " << from_gl[i] << ", want " << want[i];
  EXPECT_EQ(bad, 0u);

  r.close();
  EXPECT_TRUE(r.is_closed());
  gl->delete_buffer(vbo);
  EXPECT_EQ(gl->error(), 0u);
}

TEST(GraphicsGpu, AnRgba32fTextureMapsAsAnArrayHoldingEveryTexel) {
  CUCORE_REQUIRE_GL(gl);
  Device dev(0);
  Stream s = dev.create_stream();
  const int w = 257, h = 129;  // odd sizes: no row is padded to a power of two
  const std::size_t floats = static_cast<std::size_t>(w) * h * 4;
  const auto texels = random_floats(floats, 201);
  const unsigned tex = gl->create_texture_rgba32f(w, h, texels.data());
  ASSERT_EQ(gl->error(), 0u);
  gl->finish();

  GraphicsResource r = GraphicsResource::from_gl_image(tex, test::kGlTexture2D);
  EXPECT_EQ(r.kind(), GraphicsResource::Kind::image);
  texture::OpaqueArray& a = r.map_array(s);
  EXPECT_TRUE(r.is_mapped());
  ASSERT_EQ(a.shape(), (std::vector<std::size_t>{static_cast<std::size_t>(w), static_cast<std::size_t>(h)}));
  EXPECT_EQ(a.format(), texture::ArrayFormat::float32);
  EXPECT_EQ(a.num_channels(), 4u);
  EXPECT_EQ(a.device_id(), 0);
  ASSERT_EQ(a.size_bytes(), floats * sizeof(float));
  EXPECT_NE(a.handle(), nullptr);

  // The mapped array copied into device memory (cuMemcpy3DAsync), then here: every texel.
  Buffer dbuf = dev.memory_resource().allocate(a.size_bytes(), s);
  a.copy_to(dbuf, s);
  std::vector<float> got(floats, 0.f);
  dbuf.copy_to(std::span<float>(got), s);
  s.sync();
  expect_equal(got, texels, "texture read through the mapped array");

  // Written through the mapped array from device memory; GL reads it after the unmap.
  const auto written = random_floats(floats, 202);
  dbuf.copy_from(std::span<const float>(written), s);
  a.copy_from(dbuf, s);
  r.unmap(s);
  EXPECT_TRUE(a.is_closed());
  EXPECT_FALSE(r.is_mapped());
  s.sync();
  std::vector<float> from_gl(floats, 0.f);
  gl->read_texture_rgba32f(tex, w, h, from_gl.data());
  ASSERT_EQ(gl->error(), 0u);
  expect_equal(from_gl, written, "texture after CUDA's copy into the mapped array");

  // mapped_array(0, 0) is another OpaqueArray over the same level, keeping the mapping while it lives.
  r.map_array(s);
  std::optional<texture::OpaqueArray> level0 = r.mapped_array(0, 0);
  EXPECT_EQ(level0->handle(), r.mapped_image()->handle());
  EXPECT_THROW(r.mapped_array(0, 5), CudaError);  // no level 5
  r.close();
  EXPECT_TRUE(r.is_closed());
  level0->copy_to(std::span<float>(got), s);  // still mapped: the array holds the mapping
  s.sync();
  expect_equal(got, written, "the level held past close()");
  level0.reset();  // unmapped, then unregistered
  gl->delete_texture(tex);
  EXPECT_EQ(gl->error(), 0u);
}

TEST(GraphicsGpu, MisuseIsRefusedWithCudaCoresErrors) {
  CUCORE_REQUIRE_GL(gl);
  Device dev(0);
  Stream s = dev.create_stream();
  const auto data = random_floats(4096, 301);
  const unsigned vbo = gl->create_buffer(data.data(), data.size() * sizeof(float));
  GraphicsResource r = GraphicsResource::from_gl_buffer(vbo, GraphicsRegisterFlags::write_discard);
  EXPECT_THROW(
      try { r.unmap(); } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "GraphicsResource is not mapped");
        throw;
      },
      Error);
  Buffer& mapped = r.map(s);
  EXPECT_THROW(
      try { r.map(s); } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "GraphicsResource is already mapped");
        throw;
      },
      Error);
  EXPECT_THROW(r.map_array(s), std::invalid_argument);  // a buffer has no array
  // The driver refuses new map flags while mapped.
  EXPECT_THROW(r.set_map_flags(GraphicsMapFlags::read_only), CudaError);
  r.unmap();
  // The mapped Buffer after the unmap: closed, every use refused.
  EXPECT_TRUE(mapped.is_closed());
  EXPECT_EQ(mapped.handle(), 0u);
  std::vector<float> host(data.size());
  EXPECT_THROW(mapped.copy_to(std::span<float>(host), s), ClosedError);
  r.set_map_flags(GraphicsMapFlags::read_only);  // accepted while unmapped
  r.close();
  r.close();  // idempotent
  EXPECT_THROW(r.map(s), ClosedError);
  EXPECT_THROW(r.unmap(), ClosedError);
  EXPECT_THROW(r.set_map_flags(GraphicsMapFlags::none), ClosedError);
  // GL's name 0, which is no buffer: the driver's CudaError.
  EXPECT_THROW(GraphicsResource::from_gl_buffer(0), CudaError);
  gl->delete_buffer(vbo);
}

TEST(GraphicsGpu, AResourceDroppedWhileMappedIsUnmappedThenUnregisteredOnce) {
  CUCORE_REQUIRE_GL(gl);
  Device dev(0);
  const auto data = random_floats(1 << 16, 401);
  const unsigned vbo = gl->create_buffer(data.data(), data.size() * sizeof(float));
  const unsigned tex = gl->create_texture_rgba32f(64, 64, random_floats(64 * 64 * 4, 402).data());
  ReleaseFailures failures;
  {
    GraphicsCalls calls;
    {
      std::optional<Stream> s(dev.create_stream());
      auto r = std::make_unique<GraphicsResource>(GraphicsResource::from_gl_buffer(vbo));
      std::shared_ptr<const detail::BufferBox> held = r->map(*s).box();  // the mapping held elsewhere too
      r.reset();   // the resource goes while mapped
      s.reset();   // and its stream
      EXPECT_EQ(calls.log(), (std::vector<std::string>{"map"}));
      held.reset();  // the last holder: unmap on the kept stream, then unregister
    }
    EXPECT_EQ(calls.log(), (std::vector<std::string>{"map", "unmap", "unregister"}));
  }
  {
    GraphicsCalls calls;
    {
      std::optional<Stream> s(dev.create_stream());
      auto r = std::make_unique<GraphicsResource>(GraphicsResource::from_gl_image(tex, test::kGlTexture2D));
      r->map_array(*s);
      r.reset();  // mapped, and nothing else holds it: unmapped, then unregistered
    }
    EXPECT_EQ(calls.log(), (std::vector<std::string>{"map", "unmap", "unregister"}));
  }
  {
    // close() while mapped: unmap, then unregister.
    GraphicsCalls calls;
    Stream s = dev.create_stream();
    GraphicsResource r = GraphicsResource::from_gl_buffer(vbo);
    Buffer& b = r.map(s);
    r.close();
    EXPECT_TRUE(b.is_closed());
    EXPECT_EQ(calls.log(), (std::vector<std::string>{"map", "unmap", "unregister"}));
  }
  EXPECT_TRUE(failures.seen().empty()) << failures.seen().front();
  // GL still owns sound objects: the data it was given is there.
  std::vector<float> back(data.size(), 0.f);
  gl->read_buffer(vbo, back.data(), back.size() * sizeof(float));
  EXPECT_EQ(gl->error(), 0u);
  expect_equal(back, data, "GL buffer after the interop");
  gl->delete_buffer(vbo);
  gl->delete_texture(tex);
}
