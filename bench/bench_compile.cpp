// NVRTC compile time of the SAXPY program: cucore's Program::compile against
// raw NVRTC calls (create, compile, get the cubin and the log, destroy) with the
// very same flags, through the same loaded NVRTC. Alternating, after warm-up;
// medians and the ratio (goal: <= 1.02). Runs on machines without a GPU.
#include <cucore/program.hpp>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "loader/toolkit.hpp"

namespace {

constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

// What a careful hand-written caller does: the same work as Program::compile
// for a cubin (including reading the log), nothing more.
std::size_t raw_compile(const std::vector<const char*>& argv) {
  const auto& t = cucore::detail::nvrtc();
  nvrtcProgram prog = nullptr;
  if (t.nvrtcCreateProgram(&prog, kSaxpy, "default_program", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    throw std::runtime_error("nvrtcCreateProgram");
  nvrtcResult r = t.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t log_size = 0;
  t.nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  t.nvrtcGetProgramLog(prog, log.data());
  if (r != NVRTC_SUCCESS) {
    t.nvrtcDestroyProgram(&prog);
    throw std::runtime_error("raw compile failed: " + log);
  }
  std::size_t size = 0;
  t.nvrtcGetCUBINSize(prog, &size);
  std::vector<char> cubin(size);
  t.nvrtcGetCUBIN(prog, cubin.data());
  t.nvrtcDestroyProgram(&prog);
  return cubin.size();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string arch = argc > 1 ? argv[1] : "sm_90";
  const int samples = argc > 2 ? std::atoi(argv[2]) : 15;
  try {
    const cucore::Program program(kSaxpy, "c++", {.arch = arch, .std = "c++17"});
    // The raw side gets exactly the flags cucore passes (toolkit include
    // paths included), so only the wrapping differs.
    const std::vector<std::string> flags = program.options().as_nvrtc_flags();
    std::vector<const char*> raw_argv;
    for (const auto& f : flags) raw_argv.push_back(f.c_str());

    auto [major, minor] = cucore::nvrtc_version();
    std::printf("NVRTC %d.%d, SAXPY to cubin for %s, flags:", major, minor, arch.c_str());
    for (const auto& f : flags) std::printf(" %s", f.c_str());
    std::printf("\n");
    if (program.compile(cucore::CodeType::cubin).code().size() != raw_compile(raw_argv))
      std::printf("note: cucore's and the raw cubin differ in size\n");

    std::size_t sink = 0;
    auto c = bench::compare(
        "NVRTC compile, SAXPY -> cubin", "raw NVRTC",
        [&] { sink += program.compile(cucore::CodeType::cubin).code().size(); }, [&] { sink += raw_compile(raw_argv); }, samples,
        /*inner=*/1, /*warmup=*/3);
    c.unit = "ms";
    c.cucore /= 1e6;
    c.peer /= 1e6;
    bench::report(c, 1.02);
    return sink ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_compile: %s\n", e.what());
    return 1;
  }
}
