// A templated kernel compiled with a name expression, cached on disk: the
// first run compiles scale<float> with NVRTC and stores the cubin in a
// FileStreamProgramCache; every later run (another process) loads it from the
// disk. Then a TypedKernel launch over DeviceSpans on random data, every
// element checked. Without a GPU it compiles for sm_90 and stops (exit 0).
#include <cucore/cucore.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {
constexpr const char* kSource = R"(
template <typename T>
__global__ void scale(const T* in, T* out, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}
)";
}  // namespace

int main() try {
  using namespace cucore;
  bool gpu = false;
  try {
    gpu = Device::count() > 0;
  } catch (const Error&) {  // no driver on this machine
  }
  const std::string arch = gpu ? "sm_" + Device(0).arch() : "sm_90";
  const Program program(kSource, "c++", {.arch = arch});
  FileStreamProgramCache cache(std::filesystem::temp_directory_path() / "cucore-example-cached-template");
  const auto before = cache.stats();
  // The cache's key covers the source, the options, the target and the name
  // expressions: a hit gives the same cubin with the same lowered names.
  ObjectCode code = program.compile(CodeType::cubin, {"scale<float>"}, &cache);
  const auto after = cache.stats();
  std::printf("scale<float> for %s: %s\n", arch.c_str(), after.hits > before.hits ? "from the disk cache" : "compiled");
  if (!gpu) {
    std::puts("cached_template: no GPU here; the kernel compiles");
    return 0;
  }
  Device dev(0);
  dev.set_current();
  Stream stream = dev.create_stream();
  const int n = 1 << 20;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  std::vector<float> host(n), got(n);
  for (auto& v : host) v = dist(rng);

  MemoryResource mr = dev.memory_resource();
  Buffer in = mr.allocate<float>(n, stream), out = mr.allocate<float>(n, stream);
  in.copy_from(host, stream);
  TypedKernel<void(const float*, float*, float, int)> scale(code.get_kernel("scale<float>"));
  launch(stream, {.grid = (n + 255) / 256, .block = 256}, scale, std::as_const(in).as<float>(), out.as<float>(),
         0.5f, n);
  out.copy_to(got, stream);
  stream.sync();
  for (int i = 0; i < n; ++i)
    if (got[i] != host[i] * 0.5f) {
      std::printf("cached_template: element %d is %g, want %g\n", i, got[i], host[i] * 0.5f);
      return 1;
    }
  std::printf("cached_template: all %d elements right\n", n);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cached_template: %s\n", e.what());
  return 1;
}
