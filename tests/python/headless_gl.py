"""A headless OpenGL context through EGL's device platform, with ctypes only.

The Python twin of tests/common/headless_gl.{hpp,cpp}, for tests/python/test_graphics.py
and scripts/gl-probe: libglvnd's libEGL.so.1 (with libGLdispatch.so.0 and
libOpenGL.so.0) is loaded from $CUCORE_GL_LIBDIR when set (the GPU machine has
NVIDIA's EGL vendor library but no loader; scripts/gl-carry fills .carry/gl),
else from the system. EGL_EXT_device_enumeration lists the devices, the one
whose EGL_CUDA_DEVICE_NV is the CUDA device asked for is opened with
EGL_EXT_platform_device (any device where none is NVIDIA's: Mesa's software
device gives a real GL context on a machine with no GPU), the context is
made current surfaceless (EGL_KHR_surfaceless_context) or on a 1x1 pbuffer,
and every GL call goes through eglGetProcAddress. No GL headers, no PyOpenGL.
"""
import ctypes
import os

# egl.h / eglext.h / gl.h values.
EGL_NONE = 0x3038
EGL_VENDOR, EGL_VERSION, EGL_EXTENSIONS = 0x3053, 0x3054, 0x3055
EGL_SURFACE_TYPE, EGL_PBUFFER_BIT = 0x3033, 0x0001
EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT = 0x3040, 0x0008
EGL_RED_SIZE, EGL_GREEN_SIZE, EGL_BLUE_SIZE, EGL_ALPHA_SIZE = 0x3024, 0x3023, 0x3022, 0x3021
EGL_WIDTH, EGL_HEIGHT = 0x3057, 0x3056
EGL_OPENGL_API = 0x30A2
EGL_PLATFORM_DEVICE_EXT = 0x313F
EGL_CUDA_DEVICE_NV = 0x323A
EGL_DRM_DEVICE_FILE_EXT = 0x3233

GL_VENDOR, GL_RENDERER, GL_VERSION = 0x1F00, 0x1F01, 0x1F02
GL_ARRAY_BUFFER = 0x8892
GL_DYNAMIC_DRAW = 0x88E8
GL_TEXTURE_2D = 0x0DE1
GL_TEXTURE_MIN_FILTER, GL_TEXTURE_MAG_FILTER, GL_NEAREST = 0x2801, 0x2800, 0x2600
GL_TEXTURE_MAX_LEVEL = 0x813D
GL_RGBA, GL_FLOAT, GL_RGBA32F, GL_RGBA8, GL_UNSIGNED_BYTE = 0x1908, 0x1406, 0x8814, 0x8058, 0x1401
GL_PACK_ALIGNMENT, GL_UNPACK_ALIGNMENT = 0x0D05, 0x0CF5


class GLUnavailable(RuntimeError):
    """No headless GL context could be made; the message says what was missing and what was found."""


def _has(ext_list, name):
    return bool(ext_list) and name in ext_list.decode(errors="replace").split()


def _open(name, tried):
    libdir = os.environ.get("CUCORE_GL_LIBDIR", "")
    if libdir:
        path = os.path.join(libdir, name)
        try:
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            tried.append(f"{path} (loaded)")
            return lib
        except OSError as e:
            tried.append(f"{path}: {e}")
    try:
        lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        tried.append(f"{name} (loaded from the system)")
        return lib
    except OSError as e:
        tried.append(f"{name}: {e}")
        return None


def loaded_paths(names=("libEGL", "libGLdispatch", "libOpenGL", "libEGL_nvidia", "libEGL_mesa", "libnvidia-egl")):
    """The files this process has mapped whose names start with one of `names` (what was really loaded)."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if "/" in line else ""
                if any(os.path.basename(path).startswith(n) for n in names):
                    found.add(path)
    except OSError:
        pass
    return sorted(found)


class HeadlessGL:
    """A GL context current on the calling thread. create() makes one or raises GLUnavailable."""

    def __init__(self):
        self.description = []
        self.cuda_matched = False
        self._dpy = self._ctx = self._surface = None

    @classmethod
    def create(cls, cuda_device=0, require_cuda=False):
        gl = cls()
        try:
            gl._create(cuda_device, require_cuda)
        except GLUnavailable:
            gl.close()
            raise
        return gl

    def _fail(self, what):
        raise GLUnavailable(f"{what} [{'; '.join(self.description)}]")

    def _fn(self, name, restype, *argtypes):
        addr = self._egl.eglGetProcAddress(name.encode())
        if not addr:
            self._fail(f"eglGetProcAddress gave no address for {name}")
        return ctypes.CFUNCTYPE(restype, *argtypes)(addr)

    def _create(self, cuda_device, require_cuda):
        tried = []
        _open("libGLdispatch.so.0", tried)  # libEGL's dependency, found by soname once loaded
        _open("libOpenGL.so.0", tried)
        egl = _open("libEGL.so.1", tried)
        self.description.append("libraries: " + ", ".join(tried))
        if egl is None:
            self._fail("no libEGL.so.1 (set CUCORE_GL_LIBDIR to a folder holding libglvnd's loader)")
        self._egl = egl
        vp, cp, i32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32
        egl.eglGetProcAddress.restype, egl.eglGetProcAddress.argtypes = vp, [cp]
        egl.eglQueryString.restype, egl.eglQueryString.argtypes = cp, [vp, i32]
        egl.eglGetError.restype, egl.eglGetError.argtypes = i32, []
        egl.eglInitialize.restype, egl.eglInitialize.argtypes = ctypes.c_uint, [vp, ctypes.POINTER(i32), ctypes.POINTER(i32)]
        egl.eglTerminate.restype, egl.eglTerminate.argtypes = ctypes.c_uint, [vp]
        egl.eglBindAPI.restype, egl.eglBindAPI.argtypes = ctypes.c_uint, [ctypes.c_uint]
        egl.eglChooseConfig.restype = ctypes.c_uint
        egl.eglChooseConfig.argtypes = [vp, ctypes.POINTER(i32), ctypes.POINTER(vp), i32, ctypes.POINTER(i32)]
        egl.eglCreateContext.restype, egl.eglCreateContext.argtypes = vp, [vp, vp, vp, ctypes.POINTER(i32)]
        egl.eglDestroyContext.restype, egl.eglDestroyContext.argtypes = ctypes.c_uint, [vp, vp]
        egl.eglCreatePbufferSurface.restype = vp
        egl.eglCreatePbufferSurface.argtypes = [vp, vp, ctypes.POINTER(i32)]
        egl.eglDestroySurface.restype, egl.eglDestroySurface.argtypes = ctypes.c_uint, [vp, vp]
        egl.eglMakeCurrent.restype, egl.eglMakeCurrent.argtypes = ctypes.c_uint, [vp, vp, vp, vp]

        client = egl.eglQueryString(None, EGL_EXTENSIONS)
        self.description.append("client extensions: " + (client.decode() if client else "(none)"))
        if not _has(client, "EGL_EXT_platform_device") or not (
            _has(client, "EGL_EXT_device_enumeration") or _has(client, "EGL_EXT_device_base")
        ):
            self._fail("EGL has no EGL_EXT_device_enumeration / EGL_EXT_platform_device (no EGL vendor library?)")
        query_devices = self._fn("eglQueryDevicesEXT", ctypes.c_uint, i32, ctypes.POINTER(vp), ctypes.POINTER(i32))
        query_string = self._fn("eglQueryDeviceStringEXT", cp, vp, i32)
        platform_display = self._fn("eglGetPlatformDisplayEXT", vp, ctypes.c_uint, vp, ctypes.POINTER(i32))
        addr = egl.eglGetProcAddress(b"eglQueryDeviceAttribEXT")
        query_attrib = (
            ctypes.CFUNCTYPE(ctypes.c_uint, vp, i32, ctypes.POINTER(ctypes.c_ssize_t))(addr) if addr else None
        )
        devices = (vp * 16)()
        count = i32(0)
        if not query_devices(16, devices, ctypes.byref(count)) or count.value <= 0:
            self._fail(f"eglQueryDevicesEXT found no EGL device (error {egl.eglGetError():#x})")
        chosen, any_cuda = None, False
        self.devices = []
        for i in range(count.value):
            ext = query_string(devices[i], EGL_EXTENSIONS)
            info = {"index": i, "extensions": ext.decode() if ext else "", "cuda_device": None, "drm_file": None}
            if query_attrib is not None and _has(ext, "EGL_NV_device_cuda"):
                any_cuda = True
                cu = ctypes.c_ssize_t(-1)
                if query_attrib(devices[i], EGL_CUDA_DEVICE_NV, ctypes.byref(cu)):
                    info["cuda_device"] = cu.value
                    if cu.value == cuda_device and chosen is None:
                        chosen = devices[i]
                        self.cuda_matched = True
            if _has(ext, "EGL_EXT_device_drm"):
                f = query_string(devices[i], EGL_DRM_DEVICE_FILE_EXT)
                info["drm_file"] = f.decode() if f else None
            self.devices.append(info)
            self.description.append(
                f"device {i}: {info['extensions'] or '(no extensions)'}"
                + (f" (CUDA device {info['cuda_device']})" if info["cuda_device"] is not None else "")
                + (f" ({info['drm_file']})" if info["drm_file"] else "")
            )
        if chosen is None:
            if any_cuda or require_cuda:
                self._fail(f"no EGL device is CUDA device {cuda_device}")
            chosen = devices[0]  # no NVIDIA device (Mesa's software device): GL only
        dpy = platform_display(EGL_PLATFORM_DEVICE_EXT, chosen, None)
        if not dpy:
            self._fail(f"eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT) failed (error {egl.eglGetError():#x})")
        major, minor = i32(0), i32(0)
        if not egl.eglInitialize(dpy, ctypes.byref(major), ctypes.byref(minor)):
            self._fail(f"eglInitialize failed (error {egl.eglGetError():#x})")
        self._dpy = dpy
        vendor = egl.eglQueryString(dpy, EGL_VENDOR)
        version = egl.eglQueryString(dpy, EGL_VERSION)
        dext = egl.eglQueryString(dpy, EGL_EXTENSIONS)
        self.egl_vendor = vendor.decode() if vendor else "?"
        self.description.append(f"display: {self.egl_vendor} EGL {version.decode() if version else '?'}")
        if not egl.eglBindAPI(EGL_OPENGL_API):
            self._fail(f"eglBindAPI(EGL_OPENGL_API) failed (error {egl.eglGetError():#x})")
        attribs = (i32 * 13)(EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,
                             EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8, EGL_BLUE_SIZE, 8, EGL_ALPHA_SIZE, 8, EGL_NONE)
        config, n = vp(), i32(0)
        if not egl.eglChooseConfig(dpy, attribs, ctypes.byref(config), 1, ctypes.byref(n)) or n.value < 1:
            if not _has(dext, "EGL_KHR_no_config_context"):
                self._fail(f"no EGL config with a pbuffer and OpenGL (error {egl.eglGetError():#x})")
            config = vp()  # EGL_NO_CONFIG_KHR
        none = (i32 * 1)(EGL_NONE)
        self._ctx = egl.eglCreateContext(dpy, config, None, none)
        if not self._ctx:
            self._fail(f"eglCreateContext failed (error {egl.eglGetError():#x})")
        if _has(dext, "EGL_KHR_surfaceless_context"):
            if not egl.eglMakeCurrent(dpy, None, None, self._ctx):
                self._fail(f"eglMakeCurrent (surfaceless) failed (error {egl.eglGetError():#x})")
            self.description.append("surfaceless")
        else:
            if not config.value:
                self._fail("neither a pbuffer config nor EGL_KHR_surfaceless_context")
            pb = (i32 * 5)(EGL_WIDTH, 1, EGL_HEIGHT, 1, EGL_NONE)
            self._surface = egl.eglCreatePbufferSurface(dpy, config, pb)
            if not self._surface:
                self._fail(f"eglCreatePbufferSurface failed (error {egl.eglGetError():#x})")
            if not egl.eglMakeCurrent(dpy, self._surface, self._surface, self._ctx):
                self._fail(f"eglMakeCurrent (pbuffer) failed (error {egl.eglGetError():#x})")
            self.description.append("1x1 pbuffer")
        u, i, sz, isz = ctypes.c_uint, ctypes.c_int, ctypes.c_ssize_t, ctypes.c_ssize_t
        pu = ctypes.POINTER(u)
        self.glGenBuffers = self._fn("glGenBuffers", None, i, pu)
        self.glBindBuffer = self._fn("glBindBuffer", None, u, u)
        self.glBufferData = self._fn("glBufferData", None, u, sz, vp, u)
        self.glGetBufferSubData = self._fn("glGetBufferSubData", None, u, isz, sz, vp)
        self.glDeleteBuffers = self._fn("glDeleteBuffers", None, i, pu)
        self.glGenTextures = self._fn("glGenTextures", None, i, pu)
        self.glBindTexture = self._fn("glBindTexture", None, u, u)
        self.glTexParameteri = self._fn("glTexParameteri", None, u, u, i)
        self.glPixelStorei = self._fn("glPixelStorei", None, u, i)
        self.glTexImage2D = self._fn("glTexImage2D", None, u, i, i, i, i, i, u, u, vp)
        self.glGetTexImage = self._fn("glGetTexImage", None, u, i, u, u, vp)
        self.glDeleteTextures = self._fn("glDeleteTextures", None, i, pu)
        self.glFinish = self._fn("glFinish", None)
        self.glGetError = self._fn("glGetError", u)
        self.glGetString = self._fn("glGetString", cp, u)
        self.gl_vendor = self._string(GL_VENDOR)
        self.gl_renderer = self._string(GL_RENDERER)
        self.gl_version = self._string(GL_VERSION)
        self.description.append(f"GL: {self.gl_vendor} / {self.gl_renderer} / {self.gl_version}")
        if self.gl_version == "?":
            self._fail("the context gives no GL_VERSION")

    def _string(self, name):
        s = self.glGetString(name)
        return s.decode() if s else "?"

    def close(self):
        """Releases the context and the display (the libraries stay loaded)."""
        if self._dpy:
            egl = self._egl
            egl.eglMakeCurrent(self._dpy, None, None, None)
            if self._ctx:
                egl.eglDestroyContext(self._dpy, self._ctx)
            if self._surface:
                egl.eglDestroySurface(self._dpy, self._surface)
            egl.eglTerminate(self._dpy)
        self._dpy = self._ctx = self._surface = None

    # ---- GL objects ---------------------------------------------------------------

    def error(self):
        """glGetError: 0 when every GL call since the last check succeeded."""
        return self.glGetError()

    def finish(self):
        self.glFinish()

    def create_buffer(self, data):
        """A GL_ARRAY_BUFFER holding the bytes of `data` (bytes-like); its GL name."""
        mv = memoryview(data).cast("B")
        buf = (ctypes.c_char * len(mv)).from_buffer_copy(mv)
        name = ctypes.c_uint(0)
        self.glGenBuffers(1, ctypes.byref(name))
        self.glBindBuffer(GL_ARRAY_BUFFER, name.value)
        self.glBufferData(GL_ARRAY_BUFFER, len(mv), ctypes.cast(buf, ctypes.c_void_p), GL_DYNAMIC_DRAW)
        self.glBindBuffer(GL_ARRAY_BUFFER, 0)
        return name.value

    def read_buffer(self, name, nbytes):
        """glGetBufferSubData of the first `nbytes`, as bytes."""
        out = ctypes.create_string_buffer(nbytes)
        self.glBindBuffer(GL_ARRAY_BUFFER, name)
        self.glGetBufferSubData(GL_ARRAY_BUFFER, 0, nbytes, ctypes.cast(out, ctypes.c_void_p))
        self.glBindBuffer(GL_ARRAY_BUFFER, 0)
        return out.raw

    def delete_buffer(self, name):
        n = ctypes.c_uint(name)
        self.glDeleteBuffers(1, ctypes.byref(n))

    def create_texture(self, width, height, data, internal_format=GL_RGBA32F, gl_type=GL_FLOAT):
        """A 2-D texture (one level, nearest filtering) filled with `data` (RGBA rows first); its GL name."""
        mv = memoryview(data).cast("B")
        buf = (ctypes.c_char * len(mv)).from_buffer_copy(mv)
        name = ctypes.c_uint(0)
        self.glGenTextures(1, ctypes.byref(name))
        self.glBindTexture(GL_TEXTURE_2D, name.value)
        self.glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST)
        self.glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST)
        self.glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAX_LEVEL, 0)
        self.glPixelStorei(GL_UNPACK_ALIGNMENT, 4)
        self.glTexImage2D(GL_TEXTURE_2D, 0, internal_format, width, height, 0, GL_RGBA, gl_type,
                          ctypes.cast(buf, ctypes.c_void_p))
        self.glBindTexture(GL_TEXTURE_2D, 0)
        return name.value

    def read_texture(self, name, nbytes, gl_type=GL_FLOAT):
        """glGetTexImage of level 0 as GL_RGBA of `gl_type`, as bytes."""
        out = ctypes.create_string_buffer(nbytes)
        self.glBindTexture(GL_TEXTURE_2D, name)
        self.glPixelStorei(GL_PACK_ALIGNMENT, 4)
        self.glGetTexImage(GL_TEXTURE_2D, 0, GL_RGBA, gl_type, ctypes.cast(out, ctypes.c_void_p))
        self.glBindTexture(GL_TEXTURE_2D, 0)
        return out.raw

    def delete_texture(self, name):
        n = ctypes.c_uint(name)
        self.glDeleteTextures(1, ctypes.byref(n))
