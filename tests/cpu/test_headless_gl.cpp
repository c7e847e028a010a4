// The headless OpenGL helper of the graphics interop tests
// (tests/common/headless_gl.hpp), on whatever EGL this machine has: with
// Mesa's software device a real GL context with no GPU, so the buffer and
// texture round trips the GPU tests build on are checked here. Without EGL
// (or without a device platform) they skip, saying what was missing.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/headless_gl.hpp"
#include "common/random.hpp"

using cucore::test::HeadlessGl;

namespace {
std::unique_ptr<HeadlessGl> make_gl() {
  std::string why;
  auto gl = HeadlessGl::create(0, &why);
  if (!gl) std::printf("no headless GL: %s\n", why.c_str());
  return gl;
}
}  // namespace

TEST(HeadlessGl, ABufferHoldsWhatWasGivenAndReadsBackWhole) {
  auto gl = make_gl();
  if (!gl) GTEST_SKIP() << "no headless EGL/OpenGL on this machine (see the line above)";
  std::printf("%s\n", gl->description().c_str());
  const auto data = cucore::test::random_floats(1 << 16, 11);
  const unsigned b = gl->create_buffer(data.data(), data.size() * sizeof(float));
  ASSERT_NE(b, 0u);
  std::vector<float> back(data.size(), 0.f);
  gl->read_buffer(b, back.data(), back.size() * sizeof(float));
  EXPECT_EQ(gl->error(), 0u);
  for (std::size_t i = 0; i < data.size(); ++i) ASSERT_EQ(back[i], data[i]) << "element " << i;
  gl->delete_buffer(b);
  EXPECT_EQ(gl->error(), 0u);
}

TEST(HeadlessGl, AnRgba32fTextureHoldsEveryTexelItWasGiven) {
  auto gl = make_gl();
  if (!gl) GTEST_SKIP() << "no headless EGL/OpenGL on this machine (see the line above)";
  const int w = 37, h = 19;  // odd sizes: rows are not padded
  const auto data = cucore::test::random_floats(static_cast<std::size_t>(w * h * 4), 12);
  const unsigned t = gl->create_texture_rgba32f(w, h, data.data());
  ASSERT_NE(t, 0u);
  EXPECT_EQ(gl->error(), 0u);
  std::vector<float> back(data.size(), 0.f);
  gl->read_texture_rgba32f(t, w, h, back.data());
  EXPECT_EQ(gl->error(), 0u);
  for (std::size_t i = 0; i < data.size(); ++i) ASSERT_EQ(back[i], data[i]) << "float " << i;
  gl->delete_texture(t);
}
