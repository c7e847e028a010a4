#pragma once
// The process that gets checkpointed (tests/gpu/test_checkpoint.cpp and
// bench/bench_ipc.cpp): it holds `bytes` of pseudo-random data on GPU 0
// (each 32-bit word a hash of its index and a seed, written and checked by
// kernels, so gigabytes need no host copy) and keeps launching a kernel that
// counts its runs. On command it checks every word on the GPU and reports the
// mismatches and the count.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/child_process.hpp"

namespace cucore::test::checkpoint_worker {

inline constexpr const char* kKernels = R"(
__device__ unsigned mix(unsigned long long i, unsigned seed) {
  unsigned long long z = i * 0x9E3779B97F4A7C15ull + seed;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (unsigned)(z ^ (z >> 31)) | 1u;  // never zero
}
extern "C" __global__ void fill(unsigned* data, unsigned long long n, unsigned seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    data[i] = mix(i, seed);
}
extern "C" __global__ void verify(const unsigned* data, unsigned long long n, unsigned seed,
                                  unsigned long long* mismatches) {
  unsigned long long bad = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    bad += data[i] != mix(i, seed);
  if (bad) atomicAdd(mismatches, bad);
}
extern "C" __global__ void tick(unsigned long long* count) { atomicAdd(count, 1ull); }
)";

struct Ready {
  int pid = 0;
  int ok = 0;
  char error[256] = {};
};
struct Status {
  unsigned long long mismatches = ~0ull;
  unsigned long long ticks = 0;  // kernel runs, counted on the GPU
};
enum Command : char { verify = 'v', quit = 'q' };

inline int run(int socket, const std::vector<std::string>& args) {
  const std::size_t bytes = std::stoull(args.at(0));
  const unsigned seed = static_cast<unsigned>(std::stoul(args.at(1)));
  const unsigned long long words = bytes / 4;
  Ready ready;
  ready.pid = static_cast<int>(getpid());
  try {
    Device dev(0);
    dev.set_current();
    ObjectCode code = Program(kKernels, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
    Kernel fill = code.get_kernel("fill"), check = code.get_kernel("verify"), tick = code.get_kernel("tick");
    Stream s = dev.create_stream();
    DeviceMemoryResource mr(dev);
    Buffer data = mr.allocate(bytes, s);
    Buffer ticks = mr.allocate(sizeof(unsigned long long), s), bad = mr.allocate(sizeof(unsigned long long), s);
    ticks.fill(std::uint8_t{0}, s);
    auto* ticks_ptr = reinterpret_cast<unsigned long long*>(ticks.handle());
    auto* bad_ptr = reinterpret_cast<unsigned long long*>(bad.handle());
    auto* words_ptr = reinterpret_cast<unsigned*>(data.handle());
    LaunchConfig grid{.grid = static_cast<unsigned>(4 * dev.properties().multiprocessor_count()), .block = 256};
    launch(s, grid, fill, words_ptr, words, seed);
    s.sync();
    ready.ok = 1;
    send_value(socket, ready);
    for (;;) {
      launch(s, LaunchConfig{.grid = 1, .block = 1}, tick, ticks_ptr);
      s.sync();
      pollfd p{socket, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) continue;
      char cmd = recv_value<char>(socket);
      if (cmd == quit) break;
      Status st;
      bad.fill(std::uint8_t{0}, s);
      launch(s, grid, check, static_cast<const unsigned*>(words_ptr), words, seed, bad_ptr);
      bad.copy_to(std::span(&st.mismatches, 1), s);
      ticks.copy_to(std::span(&st.ticks, 1), s);
      s.sync();
      send_value(socket, st);
    }
    data.close(s);
    s.sync();
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(ready.error, sizeof ready.error, "%s", e.what());
    if (!ready.ok) send_value(socket, ready);
    throw;
  }
}

}  // namespace cucore::test::checkpoint_worker
