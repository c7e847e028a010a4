#pragma once
// The machinery every algorithm shares: compiling a generated translation unit
// through the program cache, reading its compile-time facts back from the
// cubin, building per-architecture variants once (single flight), and the
// host-side helpers of CUB's dispatch (temporary storage layout, occupancy,
// launches, memset).
#include <cucore/compute/build.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/object_code.hpp>
#include <cucore/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <tuple>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "compute/codegen.hpp"

namespace cucore {
class ProgramCache;
}

namespace cucore::compute::detail {

// A compiled (not yet loaded) translation unit.
struct CompiledCode {
  ObjectCode code;  // cubin with the name expressions' lowered names
  std::vector<long long> tuning;
};

// Compiles `tu` for `arch` through `cache` (nullptr: the default cache): NVRTC
// LTO-IR linked (with the user's LTO-IR) by nvJitLink, which leaves out the
// device variables nothing reads, keyed by the TU's text when it includes only
// the toolkit's headers, else by the LTO-IR (which Program::compile's
// header-aware key made); without nvJitLink, NVRTC's plain cubin.
// Needs no GPU. Throws CompileError with the compiler's log.
CompiledCode compile_tu(const TuSource& tu, const std::string& arch, ProgramCache* cache);

// The `cucore_tuning` table of a cubin (std::runtime_error when absent).
std::vector<long long> read_tuning(std::span<const std::byte> cubin, std::size_t expected_count);

// A compiled variant: kernels in the TU's order (each looked up on its first
// use, so a build for another architecture needs no device and a call that
// runs one kernel asks the driver for that one only) plus the tuning table,
// with the occupancy figures the dispatch asks for cached per device.
class Variant {
 public:
  Variant(CompiledCode code, std::vector<std::string> kernel_names);
  const Kernel& kernel(std::size_t i) const;
  long long tuning(std::size_t i) const { return tuning_.at(i); }
  int itune(std::size_t i) const { return static_cast<int>(tuning_.at(i)); }
  const ObjectCode& code() const noexcept { return code_; }
  // cuOccupancyMaxActiveBlocksPerMultiprocessor, asked once per (device, kernel, block, smem).
  int occupancy(int device, std::size_t kernel, int block_threads, std::size_t smem) const;

 private:
  ObjectCode code_;
  std::vector<std::string> names_;
  std::vector<long long> tuning_;
  mutable std::unique_ptr<std::once_flag[]> loaded_;  // one per kernel
  mutable std::vector<Kernel> kernels_;               // each set under its flag
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<int, std::size_t, int, std::size_t>, int> occupancy_;
};

// What selects a variant of one algorithm object: the architecture, 64-bit
// offsets (num_items beyond 32 bits) and an algorithm-specific flavour.
struct VariantKey {
  std::string arch;
  bool wide = false;
  int flavor = 0;
  friend bool operator<(const VariantKey& a, const VariantKey& b) {
    return std::tie(a.arch, a.wide, a.flavor) < std::tie(b.arch, b.wide, b.flavor);
  }
};

// Builds each variant of one algorithm object once, on first use; concurrent
// callers wait for the one build. A failed build is not kept (the next call retries).
class Variants {
 public:
  using Generator = std::function<TuSource(const VariantKey&)>;
  Variants(Generator generate, ProgramCache* cache) : generate_(std::move(generate)), cache_(cache) {}
  // Compiles (once) the variant for `key`; its kernels load on first use.
  const Variant& get(const VariantKey& key) const;
  TuSource source(const VariantKey& key) const { return generate_(key); }

 private:
  Generator generate_;
  ProgramCache* cache_;
  mutable std::mutex mutex_;
  struct Entry {
    std::shared_future<std::shared_ptr<const Variant>> future;
    std::uint64_t id;
  };
  mutable std::map<VariantKey, Entry> variants_;
  mutable std::uint64_t next_id_ = 0;
};

// The device a call runs on and its facts (cached per process).
struct DeviceFacts {
  int ordinal = 0;
  std::string arch;  // "sm_90"
  int sm_count = 0;
  int max_grid_dim_x = 0;
  int max_shared_memory_per_block = 0;
};
const DeviceFacts& device_facts(int ordinal);
// The stream's device, with a current context on this thread (memsets need one).
const DeviceFacts& call_device(StreamRef stream);
// The architecture to build for at construction: options.arch, else the current device's.
std::string resolve_arch(const BuildOptions& options);

// CUB's AliasTemporaries: 256-byte aligned sub-allocations of one blob. Returns
// the bytes needed; with a blob, fills `out` and checks it is big enough
// (std::invalid_argument naming `algorithm` when not).
std::size_t alias_temporaries(void* temp, std::size_t temp_bytes, std::span<const std::size_t> sizes,
                              std::span<void*> out, const char* algorithm);

void memset_zero_async(void* ptr, std::size_t bytes, StreamRef stream);
void memcpy_async(void* dst, const void* src, std::size_t bytes, StreamRef stream);

// A kernel argument pack, built parameter by parameter.
class Args {
 public:
  template <typename T>
  Args& add(const T& v) {
    args_.push(v);
    return *this;
  }
  Args& bytes(std::span<const std::byte> b, std::size_t alignment) {
    args_.push_bytes(b.data(), b.size(), alignment);
    return *this;
  }
  Args& empty_struct() {  // a stateless function object (1 byte)
    args_.push(std::uint8_t{0});
    return *this;
  }
  const KernelArgs& pack() const noexcept { return args_; }

 private:
  KernelArgs args_;
};

// `programmatic`: with programmatic stream serialization (PDL), as CUB launches
// on compute capability 9.0+; the kernel then waits (griddepcontrol.wait)
// before touching what earlier work in the stream writes or reads.
void launch_kernel(StreamRef stream, const Kernel& kernel, Dim3 grid, int block_threads, std::size_t smem,
                   const Args& args, bool programmatic = false);

// Runs `fn` with temporary storage: the caller's (temp != nullptr), else
// allocated from `mr` (empty: the device's pool) on `stream` after asking `fn`
// for the size (fn(nullptr, 0) returns it). The memory is freed stream-ordered.
void with_temp_storage(StreamRef stream, const MemoryResource& mr,
                       const std::function<std::size_t(void*, std::size_t)>& fn);

// The one-shot functions' per-process cache: `key` -> object, built once.
std::shared_ptr<const void> cached_build(const std::string& key,
                                         const std::function<std::shared_ptr<const void>()>& build);

// SHA-256 (hex) over length-prefixed blobs.
std::string sha256_hex(const std::vector<std::vector<std::byte>>& blobs);

// The byte layout helpers shared by the dispatchers.
inline std::size_t ceil_div(std::uint64_t a, std::uint64_t b) { return static_cast<std::size_t>((a + b - 1) / b); }

}  // namespace cucore::compute::detail
