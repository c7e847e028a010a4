#pragma once
// A headless OpenGL context for the graphics interop tests, made through EGL
// with no window system: EGL_EXT_device_enumeration lists the devices,
// EGL_EXT_platform_device opens a display on one (the one whose
// EGL_CUDA_DEVICE_NV is the CUDA device asked for, where the EGL
// implementation is NVIDIA's), and the context is made current surfaceless
// (EGL_KHR_surfaceless_context) or on a 1x1 pbuffer. Everything is loaded
// with dlopen and reached through eglGetProcAddress: no GL or EGL header and
// no link-time dependency, so the tests build where OpenGL is not installed.
//
// The loader libraries (libglvnd's libEGL.so.1 and libGLdispatch.so.0, with
// libOpenGL.so.0) come from $CUCORE_GL_LIBDIR when it is set (the GPU machine
// has the NVIDIA EGL vendor library but no loader: scripts/gl-carry fills
// .carry/gl), else from the system's library path. On a machine with Mesa,
// its software device makes a real GL context with no GPU, so the GL side of
// these helpers runs on the CPU machine too.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cucore::test {

// The GL enums the tests pass as integers (cucore takes them so).
inline constexpr unsigned kGlTexture2D = 0x0DE1;
inline constexpr unsigned kGlArrayBuffer = 0x8892;
inline constexpr unsigned kGlRgba32f = 0x8814;

class HeadlessGl {
 public:
  // A context current on this thread on the EGL device of CUDA device
  // `cuda_device` (a CUdevice; any device when none reports one, with
  // cuda_matched() false), or null with `why` saying what was missing.
  static std::unique_ptr<HeadlessGl> create(int cuda_device, std::string* why);
  ~HeadlessGl();  // releases the context and the display (never unloads the libraries)
  HeadlessGl(const HeadlessGl&) = delete;
  HeadlessGl& operator=(const HeadlessGl&) = delete;

  bool cuda_matched() const noexcept { return cuda_matched_; }
  // What was found: the libraries, each EGL device and its extensions, the
  // display's vendor and version, GL_VENDOR / GL_RENDERER / GL_VERSION.
  const std::string& description() const noexcept { return description_; }
  std::string gl_version() const;
  std::string gl_renderer() const;

  // A GL_ARRAY_BUFFER of `bytes` (glBufferData, GL_DYNAMIC_DRAW), filled from `data`.
  unsigned create_buffer(const void* data, std::size_t bytes);
  // glGetBufferSubData of the whole buffer.
  void read_buffer(unsigned buffer, void* out, std::size_t bytes);
  void delete_buffer(unsigned buffer);
  // A 2-D GL_RGBA32F texture of width x height texels (nearest filtering, one
  // level), filled from `rgba` (4 floats a texel, rows first).
  unsigned create_texture_rgba32f(int width, int height, const float* rgba);
  // glGetTexImage of level 0 as GL_RGBA / GL_FLOAT.
  void read_texture_rgba32f(unsigned texture, int width, int height, float* rgba);
  void delete_texture(unsigned texture);
  void finish();
  // glGetError: 0 when every GL call since the last check succeeded.
  unsigned error();

  struct Api;  // the entry points (headless_gl.cpp)

 private:
  HeadlessGl() = default;
  std::unique_ptr<Api> api_;
  void* display_ = nullptr;
  void* context_ = nullptr;
  void* surface_ = nullptr;
  bool cuda_matched_ = false;
  std::string description_;
};

}  // namespace cucore::test
