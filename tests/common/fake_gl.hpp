#pragma once
// A fake of CUDA's OpenGL interop for the fake driver (fake_driver.hpp): a
// ledger of registered and mapped resources, the context each was registered
// in and the stream of each map and unmap, and what a real driver would refuse
// or fault on (a call outside the resource's context, an unregister while
// mapped, an unmap of what is not mapped). A buffer's mapped memory and an
// image's two levels (RGBA32F) are host memory filled with random bytes at
// registration. FakeGl::install(table) sets the graphics entries of a
// FakeDriver's table. Used by tests/cpu/test_graphics.cpp.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "loader/driver.hpp"

namespace cucore::test {

struct FakeGl {
  struct Resource {
    bool image = false;
    unsigned gl_name = 0, target = 0, flags = 0, map_flags = 0;
    CUcontext ctx = nullptr;
    bool mapped = false;
    std::vector<std::byte> data;    // buffer bytes, or level 0 of the image
    std::vector<std::byte> level1;  // the image's level 1
  };
  static inline std::size_t buffer_bytes = 4096;  // of each buffer registered from now on
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
    r.data = random_bytes(image ? kWidth * kHeight * kTexel : buffer_bytes, 1000u + name);
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

}  // namespace cucore::test
