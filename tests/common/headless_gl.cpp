#include "common/headless_gl.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cucore::test {

namespace {

// EGL's and GL's values, as egl.h, eglext.h and gl.h define them.
using EGLBoolean = unsigned int;
using EGLint = std::int32_t;
using EGLenum = unsigned int;
using EGLDisplay = void*;
using EGLConfig = void*;
using EGLContext = void*;
using EGLSurface = void*;
using EGLDeviceEXT = void*;
using EGLAttrib = std::intptr_t;
constexpr EGLint kEglNone = 0x3038;
constexpr EGLint kEglVendor = 0x3053;
constexpr EGLint kEglVersion = 0x3054;
constexpr EGLint kEglExtensions = 0x3055;
constexpr EGLint kEglSurfaceType = 0x3033;
constexpr EGLint kEglPbufferBit = 0x0001;
constexpr EGLint kEglRenderableType = 0x3040;
constexpr EGLint kEglOpenglBit = 0x0008;
constexpr EGLint kEglRedSize = 0x3024, kEglGreenSize = 0x3023, kEglBlueSize = 0x3022, kEglAlphaSize = 0x3021;
constexpr EGLint kEglWidth = 0x3057, kEglHeight = 0x3056;
constexpr EGLenum kEglOpenglApi = 0x30A2;
constexpr EGLenum kEglPlatformDeviceExt = 0x313F;
constexpr EGLint kEglCudaDeviceNv = 0x323A;
constexpr EGLint kEglDrmDeviceFileExt = 0x3233;

constexpr unsigned kGlVendor = 0x1F00, kGlRenderer = 0x1F01, kGlVersion = 0x1F02;
constexpr unsigned kGlDynamicDraw = 0x88E8;
constexpr unsigned kGlTextureMinFilter = 0x2801, kGlTextureMagFilter = 0x2800, kGlNearest = 0x2600;
constexpr unsigned kGlTextureMaxLevel = 0x813D;
constexpr unsigned kGlRgba = 0x1908, kGlFloat = 0x1406;
constexpr unsigned kGlPackAlignment = 0x0D05, kGlUnpackAlignment = 0x0CF5;

bool has_extension(const char* list, const char* name) {
  if (!list) return false;
  const std::size_t n = std::strlen(name);
  for (const char* p = list; (p = std::strstr(p, name)) != nullptr; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  return false;
}

// dlopen of `name` from $CUCORE_GL_LIBDIR when set (falling back to the
// system's), else the system's; what was tried goes to `tried`.
void* open_library(const char* name, std::string& tried) {
  if (const char* dir = std::getenv("CUCORE_GL_LIBDIR"); dir && *dir) {
    const std::string path = std::string(dir) + "/" + name;
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      tried += path + " (loaded); ";
      return h;
    }
    tried += path + ": " + dlerror() + "; ";
  }
  if (void* h = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) {
    tried += std::string(name) + " (loaded from the system); ";
    return h;
  }
  tried += std::string(name) + ": " + dlerror() + "; ";
  return nullptr;
}

}  // namespace

struct HeadlessGl::Api {
  // EGL 1.4 core, from libEGL.so.1 itself.
  void* (*eglGetProcAddress)(const char*) = nullptr;
  const char* (*eglQueryString)(EGLDisplay, EGLint) = nullptr;
  EGLint (*eglGetError)() = nullptr;
  EGLBoolean (*eglInitialize)(EGLDisplay, EGLint*, EGLint*) = nullptr;
  EGLBoolean (*eglTerminate)(EGLDisplay) = nullptr;
  EGLBoolean (*eglBindAPI)(EGLenum) = nullptr;
  EGLBoolean (*eglChooseConfig)(EGLDisplay, const EGLint*, EGLConfig*, EGLint, EGLint*) = nullptr;
  EGLContext (*eglCreateContext)(EGLDisplay, EGLConfig, EGLContext, const EGLint*) = nullptr;
  EGLBoolean (*eglDestroyContext)(EGLDisplay, EGLContext) = nullptr;
  EGLSurface (*eglCreatePbufferSurface)(EGLDisplay, EGLConfig, const EGLint*) = nullptr;
  EGLBoolean (*eglDestroySurface)(EGLDisplay, EGLSurface) = nullptr;
  EGLBoolean (*eglMakeCurrent)(EGLDisplay, EGLSurface, EGLSurface, EGLContext) = nullptr;
  // The device extensions.
  EGLBoolean (*eglQueryDevicesEXT)(EGLint, EGLDeviceEXT*, EGLint*) = nullptr;
  const char* (*eglQueryDeviceStringEXT)(EGLDeviceEXT, EGLint) = nullptr;
  EGLBoolean (*eglQueryDeviceAttribEXT)(EGLDeviceEXT, EGLint, EGLAttrib*) = nullptr;
  EGLDisplay (*eglGetPlatformDisplayEXT)(EGLenum, void*, const EGLint*) = nullptr;
  // GL, through eglGetProcAddress (EGL_KHR_client_get_all_proc_addresses).
  void (*glGenBuffers)(int, unsigned*) = nullptr;
  void (*glBindBuffer)(unsigned, unsigned) = nullptr;
  void (*glBufferData)(unsigned, std::intptr_t, const void*, unsigned) = nullptr;
  void (*glGetBufferSubData)(unsigned, std::intptr_t, std::intptr_t, void*) = nullptr;
  void (*glDeleteBuffers)(int, const unsigned*) = nullptr;
  void (*glGenTextures)(int, unsigned*) = nullptr;
  void (*glBindTexture)(unsigned, unsigned) = nullptr;
  void (*glTexParameteri)(unsigned, unsigned, int) = nullptr;
  void (*glPixelStorei)(unsigned, int) = nullptr;
  void (*glTexImage2D)(unsigned, int, int, int, int, int, unsigned, unsigned, const void*) = nullptr;
  void (*glGetTexImage)(unsigned, int, unsigned, unsigned, void*) = nullptr;
  void (*glDeleteTextures)(int, const unsigned*) = nullptr;
  void (*glFinish)() = nullptr;
  unsigned (*glGetError)() = nullptr;
  const unsigned char* (*glGetString)(unsigned) = nullptr;
};

namespace {
template <typename F>
bool load(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}
template <typename F>
bool proc(const HeadlessGl::Api& a, const char* name, F& fn) {
  fn = reinterpret_cast<F>(a.eglGetProcAddress(name));
  return fn != nullptr;
}
std::string egl_error(const HeadlessGl::Api& a) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", static_cast<unsigned>(a.eglGetError()));
  return buf;
}
}  // namespace

std::unique_ptr<HeadlessGl> HeadlessGl::create(int cuda_device, std::string* why) {
  std::unique_ptr<HeadlessGl> gl(new HeadlessGl);
  gl->api_ = std::make_unique<Api>();
  Api& a = *gl->api_;
  std::string& d = gl->description_;
  auto fail = [&](const std::string& what) {
    if (why) *why = what + " [" + d + "]";
    return nullptr;
  };
  std::string tried;
  // libglvnd's libEGL needs libGLdispatch; loaded first (RTLD_GLOBAL) it is found by soname.
  open_library("libGLdispatch.so.0", tried);
  open_library("libOpenGL.so.0", tried);
  void* egl = open_library("libEGL.so.1", tried);
  d = "libraries: " + tried;
  if (!egl) return fail("no libEGL.so.1 (set CUCORE_GL_LIBDIR to a folder holding libglvnd's loader)");
  if (!load(egl, "eglGetProcAddress", a.eglGetProcAddress) || !load(egl, "eglQueryString", a.eglQueryString) ||
      !load(egl, "eglGetError", a.eglGetError) || !load(egl, "eglInitialize", a.eglInitialize) ||
      !load(egl, "eglTerminate", a.eglTerminate) || !load(egl, "eglBindAPI", a.eglBindAPI) ||
      !load(egl, "eglChooseConfig", a.eglChooseConfig) || !load(egl, "eglCreateContext", a.eglCreateContext) ||
      !load(egl, "eglDestroyContext", a.eglDestroyContext) ||
      !load(egl, "eglCreatePbufferSurface", a.eglCreatePbufferSurface) ||
      !load(egl, "eglDestroySurface", a.eglDestroySurface) || !load(egl, "eglMakeCurrent", a.eglMakeCurrent))
    return fail("libEGL.so.1 lacks an EGL 1.4 entry point");
  const char* client = a.eglQueryString(nullptr, kEglExtensions);
  d += "client extensions: " + std::string(client ? client : "(none)") + "; ";
  if (!has_extension(client, "EGL_EXT_platform_device") ||
      !(has_extension(client, "EGL_EXT_device_enumeration") || has_extension(client, "EGL_EXT_device_base")))
    return fail("EGL has no EGL_EXT_device_enumeration / EGL_EXT_platform_device (no EGL vendor library found?)");
  if (!proc(a, "eglQueryDevicesEXT", a.eglQueryDevicesEXT) ||
      !proc(a, "eglQueryDeviceStringEXT", a.eglQueryDeviceStringEXT) ||
      !proc(a, "eglGetPlatformDisplayEXT", a.eglGetPlatformDisplayEXT))
    return fail("EGL's device entry points are missing");
  proc(a, "eglQueryDeviceAttribEXT", a.eglQueryDeviceAttribEXT);  // (EGL_EXT_device_query; needed for the CUDA match)

  EGLDeviceEXT devices[16] = {};
  EGLint count = 0;
  if (!a.eglQueryDevicesEXT(16, devices, &count) || count <= 0)
    return fail("eglQueryDevicesEXT found no EGL device (error " + egl_error(a) + ")");
  EGLDeviceEXT chosen = nullptr;
  bool any_cuda = false;
  for (EGLint i = 0; i < count; ++i) {
    const char* ext = a.eglQueryDeviceStringEXT(devices[i], kEglExtensions);
    d += "device " + std::to_string(i) + ": " + std::string(ext ? ext : "(no extensions)");
    if (a.eglQueryDeviceAttribEXT && has_extension(ext, "EGL_NV_device_cuda")) {
      any_cuda = true;
      EGLAttrib cu = -1;
      if (a.eglQueryDeviceAttribEXT(devices[i], kEglCudaDeviceNv, &cu)) {
        d += " (CUDA device " + std::to_string(cu) + ")";
        if (cu == cuda_device && !chosen) {
          chosen = devices[i];
          gl->cuda_matched_ = true;
        }
      }
    }
    if (has_extension(ext, "EGL_EXT_device_drm"))
      if (const char* f = a.eglQueryDeviceStringEXT(devices[i], kEglDrmDeviceFileExt)) d += " (" + std::string(f) + ")";
    d += "; ";
  }
  if (!chosen) {
    if (any_cuda) return fail("no EGL device is CUDA device " + std::to_string(cuda_device));
    chosen = devices[0];  // no NVIDIA device at all (Mesa's software device): GL only
  }
  EGLDisplay dpy = a.eglGetPlatformDisplayEXT(kEglPlatformDeviceExt, chosen, nullptr);
  if (!dpy) return fail("eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT) failed (error " + egl_error(a) + ")");
  EGLint major = 0, minor = 0;
  if (!a.eglInitialize(dpy, &major, &minor)) return fail("eglInitialize failed (error " + egl_error(a) + ")");
  gl->display_ = dpy;
  const char* vendor = a.eglQueryString(dpy, kEglVendor);
  const char* version = a.eglQueryString(dpy, kEglVersion);
  const char* dext = a.eglQueryString(dpy, kEglExtensions);
  d += "display: " + std::string(vendor ? vendor : "?") + " EGL " + (version ? version : "?") + "; ";
  if (!a.eglBindAPI(kEglOpenglApi)) return fail("eglBindAPI(EGL_OPENGL_API) failed (error " + egl_error(a) + ")");
  const EGLint config_attribs[] = {kEglSurfaceType, kEglPbufferBit, kEglRenderableType, kEglOpenglBit,
                                   kEglRedSize,     8,              kEglGreenSize,      8,
                                   kEglBlueSize,    8,              kEglAlphaSize,      8,
                                   kEglNone};
  EGLConfig config = nullptr;
  EGLint configs = 0;
  const bool no_config = has_extension(dext, "EGL_KHR_no_config_context");
  if (!a.eglChooseConfig(dpy, config_attribs, &config, 1, &configs) || configs < 1) {
    if (!no_config) return fail("no EGL config with a pbuffer and OpenGL (error " + egl_error(a) + ")");
    config = nullptr;  // EGL_NO_CONFIG_KHR
  }
  const EGLint context_attribs[] = {kEglNone};
  gl->context_ = a.eglCreateContext(dpy, config, nullptr, context_attribs);
  if (!gl->context_) return fail("eglCreateContext failed (error " + egl_error(a) + ")");
  if (has_extension(dext, "EGL_KHR_surfaceless_context")) {
    if (!a.eglMakeCurrent(dpy, nullptr, nullptr, gl->context_))
      return fail("eglMakeCurrent (surfaceless) failed (error " + egl_error(a) + ")");
    d += "surfaceless; ";
  } else {
    if (!config) return fail("neither a pbuffer config nor EGL_KHR_surfaceless_context");
    const EGLint pbuffer[] = {kEglWidth, 1, kEglHeight, 1, kEglNone};
    gl->surface_ = a.eglCreatePbufferSurface(dpy, config, pbuffer);
    if (!gl->surface_) return fail("eglCreatePbufferSurface failed (error " + egl_error(a) + ")");
    if (!a.eglMakeCurrent(dpy, gl->surface_, gl->surface_, gl->context_))
      return fail("eglMakeCurrent (pbuffer) failed (error " + egl_error(a) + ")");
    d += "1x1 pbuffer; ";
  }
  if (!proc(a, "glGenBuffers", a.glGenBuffers) || !proc(a, "glBindBuffer", a.glBindBuffer) ||
      !proc(a, "glBufferData", a.glBufferData) || !proc(a, "glGetBufferSubData", a.glGetBufferSubData) ||
      !proc(a, "glDeleteBuffers", a.glDeleteBuffers) || !proc(a, "glGenTextures", a.glGenTextures) ||
      !proc(a, "glBindTexture", a.glBindTexture) || !proc(a, "glTexParameteri", a.glTexParameteri) ||
      !proc(a, "glPixelStorei", a.glPixelStorei) || !proc(a, "glTexImage2D", a.glTexImage2D) ||
      !proc(a, "glGetTexImage", a.glGetTexImage) || !proc(a, "glDeleteTextures", a.glDeleteTextures) ||
      !proc(a, "glFinish", a.glFinish) || !proc(a, "glGetError", a.glGetError) ||
      !proc(a, "glGetString", a.glGetString))
    return fail("eglGetProcAddress gave no address for a GL entry point");
  auto str = [&](unsigned name) {
    const unsigned char* s = a.glGetString(name);
    return s ? std::string(reinterpret_cast<const char*>(s)) : std::string("?");
  };
  d += "GL: " + str(kGlVendor) + " / " + str(kGlRenderer) + " / " + str(kGlVersion);
  if (a.glGetString(kGlVersion) == nullptr) return fail("the context gives no GL_VERSION");
  return gl;
}

HeadlessGl::~HeadlessGl() {
  if (!api_ || !display_) return;
  Api& a = *api_;
  a.eglMakeCurrent(display_, nullptr, nullptr, nullptr);
  if (context_) a.eglDestroyContext(display_, context_);
  if (surface_) a.eglDestroySurface(display_, surface_);
  a.eglTerminate(display_);
}

std::string HeadlessGl::gl_version() const {
  const unsigned char* s = api_->glGetString(kGlVersion);
  return s ? reinterpret_cast<const char*>(s) : "";
}
std::string HeadlessGl::gl_renderer() const {
  const unsigned char* s = api_->glGetString(kGlRenderer);
  return s ? reinterpret_cast<const char*>(s) : "";
}

unsigned HeadlessGl::create_buffer(const void* data, std::size_t bytes) {
  unsigned b = 0;
  api_->glGenBuffers(1, &b);
  api_->glBindBuffer(kGlArrayBuffer, b);
  api_->glBufferData(kGlArrayBuffer, static_cast<std::intptr_t>(bytes), data, kGlDynamicDraw);
  api_->glBindBuffer(kGlArrayBuffer, 0);
  return b;
}

void HeadlessGl::read_buffer(unsigned buffer, void* out, std::size_t bytes) {
  api_->glBindBuffer(kGlArrayBuffer, buffer);
  api_->glGetBufferSubData(kGlArrayBuffer, 0, static_cast<std::intptr_t>(bytes), out);
  api_->glBindBuffer(kGlArrayBuffer, 0);
}

void HeadlessGl::delete_buffer(unsigned buffer) { api_->glDeleteBuffers(1, &buffer); }

unsigned HeadlessGl::create_texture_rgba32f(int width, int height, const float* rgba) {
  unsigned t = 0;
  api_->glGenTextures(1, &t);
  api_->glBindTexture(kGlTexture2D, t);
  api_->glTexParameteri(kGlTexture2D, kGlTextureMinFilter, static_cast<int>(kGlNearest));
  api_->glTexParameteri(kGlTexture2D, kGlTextureMagFilter, static_cast<int>(kGlNearest));
  api_->glTexParameteri(kGlTexture2D, kGlTextureMaxLevel, 0);  // one level: complete without mipmaps
  api_->glPixelStorei(kGlUnpackAlignment, 4);
  api_->glTexImage2D(kGlTexture2D, 0, static_cast<int>(kGlRgba32f), width, height, 0, kGlRgba, kGlFloat, rgba);
  api_->glBindTexture(kGlTexture2D, 0);
  return t;
}

void HeadlessGl::read_texture_rgba32f(unsigned texture, int /*width*/, int /*height*/, float* rgba) {
  api_->glBindTexture(kGlTexture2D, texture);
  api_->glPixelStorei(kGlPackAlignment, 4);
  api_->glGetTexImage(kGlTexture2D, 0, kGlRgba, kGlFloat, rgba);
  api_->glBindTexture(kGlTexture2D, 0);
}

void HeadlessGl::delete_texture(unsigned texture) { api_->glDeleteTextures(1, &texture); }
void HeadlessGl::finish() { api_->glFinish(); }
unsigned HeadlessGl::error() { return api_->glGetError(); }

}  // namespace cucore::test
