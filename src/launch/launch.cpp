// launch(): the hot path and its slow paths.
//
// Hot path (a plain launch): read the kernel's cached parameter layout (one
// acquire load), compare the count and each size, fill a CUlaunchConfig on the
// stack, check a thread-local "this thread has a context" flag, call
// cuLaunchKernelEx. No allocation, no lock, no lookup, no other driver call.
// Everything else (clusters, cooperative launches, the first launch on a
// thread, and explaining a refused launch) is out of line.
#include <cucore/launch.hpp>

#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <cstdint>
#include <climits>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "handles/graph_handles.hpp"
#include "launch/kernel_info.hpp"
#include "launch/launch_internal.hpp"
#include "loader/driver.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {
namespace detail {

void throw_bad_dimension(long long value, bool negative) {
  if (negative) throw InvalidArgumentError("LaunchConfig: a dimension is negative (" + std::to_string(value) + ")");
  throw InvalidArgumentError("LaunchConfig: a dimension does not fit in 32 bits");
}

void throw_closed_buffer(const Kernel& kernel, std::size_t index) {
  throw ClosedError("Buffer", (kernel ? kernel.name() : std::string("launch")) + ": argument " + std::to_string(index));
}

namespace {

std::string dims(const Dim3& d) {
  char buf[48];  // snprintf: GCC 12 misreads chains of string + (-Wrestrict)
  std::snprintf(buf, sizeof buf, "(%u, %u, %u)", d.x, d.y, d.z);
  return buf;
}

[[noreturn]] void bad_config(const std::string& what) { throw InvalidArgumentError("LaunchConfig: " + what); }

void check_dims(const char* field, const Dim3& d, bool required) {
  if (!d.is_set()) {
    if (required) bad_config(std::string(field) + " is not set (e.g. ." + field + " = 256)");
    return;
  }
  if (!d.x || !d.y || !d.z)
    bad_config(std::string(field) + " " + dims(d) + " has a zero dimension: each must be at least 1");
}

// ---- the calling thread's context ----
// A CUkernel launches in its stream's context (the current one for the special
// streams); a thread that never had a context gets the stream's made current
// on its first launch, as the runtime API would. After that the check is this
// flag; should the thread lose its context later, the launch's
// CUDA_ERROR_INVALID_CONTEXT brings us back here once.
thread_local bool t_context_ready = false;

[[gnu::noinline]] void ensure_thread_context(CUstream stream, bool after_failure) {
  const DriverTable& d = driver();
  if (is_special_stream(stream)) {
    ensure_current_context_slow();  // device 0's primary context when none is current
  } else {
    CUcontext current = nullptr;
    check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (!current || after_failure) {
      CUcontext ctx = nullptr;
      check(d.cuStreamGetCtx(stream, &ctx), "cuStreamGetCtx");
      if (ctx && ctx != current) check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    }
  }
  t_context_ready = true;
}

// The device a stream belongs to. Non-special streams are remembered per thread
// (one entry): cluster and cooperative launches repeat on one stream. Should a
// destroyed stream's handle come back on another device, a pre-check may judge
// by the wrong device; the driver still checks the launch itself.
thread_local CUstream t_last_stream = nullptr;
thread_local int t_last_stream_device = -1;

int stream_device(CUstream stream) {
  if (!is_special_stream(stream) && stream == t_last_stream) return t_last_stream_device;
  int device = StreamRef(stream).device().ordinal();
  if (!is_special_stream(stream)) {
    t_last_stream = stream;
    t_last_stream_device = device;
  }
  return device;
}

std::string cc_string(const Device& dev) {
  auto cc = dev.compute_capability();
  return std::to_string(cc.major) + "." + std::to_string(cc.minor);
}

// Clusters need compute capability 9.0 (cuda.core checks the same).
void check_cluster_support(CUstream stream) {
  Device dev(stream_device(stream));
  if (dev.compute_capability().major < 9)
    throw FeatureUnavailableError("thread block clusters (LaunchConfig.cluster) on device " +
                                      std::to_string(dev.ordinal()) + " (compute capability " + cc_string(dev) + ")",
                                  "compute capability 9.0 or newer");
}

// Max blocks per SM for this shape, or -1 when the occupancy API refuses (the
// launch will then fail on its own and be explained).
long long blocks_per_sm(KernelInfo& info, int device, std::uint64_t block, std::size_t shmem) {
  const DriverTable& d = driver();
  if (!d.cuOccupancyMaxActiveBlocksPerMultiprocessor || block > INT_MAX) return -1;
  Device dev(device);
  ScopedContext scope(dev.context().handle());
  CUfunction f = nullptr;
  if (!d.cuKernelGetFunction || d.cuKernelGetFunction(&f, info.handle) != CUDA_SUCCESS) return -1;
  int n = 0;
  if (d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, int(block), shmem) != CUDA_SUCCESS) return -1;
  return n;
}

// A cooperative grid must be resident all at once: at most occupancy × SMs
// blocks (the check cuda.core makes). The limit is kept for the last shape.
void check_cooperative(CUstream stream, const LaunchConfig& cfg, KernelInfo& info, const CUlaunchConfig& c) {
  const int device = stream_device(stream);
  Device dev(device);
  auto props = dev.properties();
  if (!props.cooperative_launch())
    throw FeatureUnavailableError("cooperative launches (LaunchConfig.is_cooperative) on device " +
                                      std::to_string(device),
                                  "a device with CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH");
  const std::uint64_t block = cfg.block.volume();
  const std::uint64_t grid = std::uint64_t(c.gridDimX) * c.gridDimY * c.gridDimZ;
  std::uint64_t max_blocks = 0;
  {
    std::lock_guard lock(info.mutex);
    const auto& k = info.cooperative;
    if (k.device == device && k.block == block && k.shmem == cfg.shmem_size) max_blocks = k.max_blocks;
  }
  const int sms = props.multiprocessor_count();
  long long per_sm = -1;
  if (max_blocks == 0) {
    per_sm = blocks_per_sm(info, device, block, cfg.shmem_size);
    if (per_sm < 0) return;  // let the driver refuse; launch_failed explains
    max_blocks = std::uint64_t(per_sm) * std::uint64_t(sms);
    std::lock_guard lock(info.mutex);
    info.cooperative = {device, block, cfg.shmem_size, max_blocks};
  }
  if (grid > max_blocks) {
    if (per_sm < 0) per_sm = sms ? static_cast<long long>(max_blocks / std::uint64_t(sms)) : 0;
    throw InvalidArgumentError(info.name + ": a cooperative launch of " + std::to_string(grid) +
                                " blocks exceeds what device " + std::to_string(device) + " runs at once: " +
                                std::to_string(per_sm) + " blocks per SM x " + std::to_string(sms) + " SMs = " +
                                std::to_string(max_blocks) + " (blocks of " + std::to_string(block) +
                                " threads, shmem_size " + std::to_string(cfg.shmem_size) +
                                "); use a grid of at most " + std::to_string(max_blocks) + " blocks");
  }
}

// The driver refused the launch: say which limit was crossed, when we can tell.
[[noreturn]] void explain_failure(CUresult r, CUstream stream, const LaunchConfig& cfg, KernelInfo& info,
                                  const CUlaunchConfig& c) {
  std::string problem;
  const bool config_error = r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ||
                            r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE || r == CUDA_ERROR_NOT_SUPPORTED ||
                            r == CUDA_ERROR_INVALID_CLUSTER_SIZE;
  if (config_error) {
    try {
      const int device = stream_device(stream);
      Device dev(device);
      auto props = dev.properties();
      const auto max_block = props.max_block_dim();
      const auto max_grid = props.max_grid_dim();
      const std::uint64_t threads = cfg.block.volume();
      const std::string on = " on device " + std::to_string(device);
      const Dim3& b = cfg.block;
      if (b.x > unsigned(max_block[0]) || b.y > unsigned(max_block[1]) || b.z > unsigned(max_block[2])) {
        problem = "block " + dims(b) + " exceeds the maximum block dimensions (" + std::to_string(max_block[0]) +
                  ", " + std::to_string(max_block[1]) + ", " + std::to_string(max_block[2]) + ")" + on;
      } else if (threads > std::uint64_t(props.max_threads_per_block())) {
        problem = "block of " + std::to_string(threads) + " threads exceeds the device limit of " +
                  std::to_string(props.max_threads_per_block()) + " threads per block" + on;
      } else if (int kmax = kernel_attribute(info, device, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, true);
                 threads > std::uint64_t(kmax)) {
        problem = "block of " + std::to_string(threads) + " threads exceeds this kernel's limit of " +
                  std::to_string(kmax) + " threads per block" + on + " (set by its register use or __launch_bounds__)";
      } else if (c.gridDimX > unsigned(max_grid[0]) || c.gridDimY > unsigned(max_grid[1]) ||
                 c.gridDimZ > unsigned(max_grid[2])) {
        problem = "grid of (" + std::to_string(c.gridDimX) + ", " + std::to_string(c.gridDimY) + ", " +
                  std::to_string(c.gridDimZ) + ") blocks exceeds the maximum grid dimensions (" +
                  std::to_string(max_grid[0]) + ", " + std::to_string(max_grid[1]) + ", " +
                  std::to_string(max_grid[2]) + ")" + on;
      } else if (int dyn = kernel_attribute(info, device, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, false);
                 cfg.shmem_size > std::size_t(dyn)) {
        const int optin = props.max_shared_memory_per_block_optin();
        const int stat = kernel_attribute(info, device, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, true);
        problem = "shmem_size of " + std::to_string(cfg.shmem_size) + " bytes exceeds the kernel's " +
                  "max_dynamic_shared_size_bytes of " + std::to_string(dyn) + on;
        if (cfg.shmem_size <= std::size_t(optin - stat))
          problem += "; raise it first: kernel.attributes(" + std::to_string(device) +
                     ").set_max_dynamic_shared_size_bytes(" + std::to_string(cfg.shmem_size) + ")";
        else
          problem += ", and the device allows this kernel at most " + std::to_string(optin - stat) + " bytes";
      } else if (cfg.cluster.is_set() && dev.compute_capability().major < 9) {
        throw FeatureUnavailableError("thread block clusters (LaunchConfig.cluster) on device " +
                                          std::to_string(device) + " (compute capability " + cc_string(dev) + ")",
                                      "compute capability 9.0 or newer");
      }
    } catch (const FeatureUnavailableError&) {
      throw;
    } catch (...) {
      // Could not tell (the context may be broken): report the driver's error.
    }
  }
  if (!problem.empty()) throw InvalidArgumentError(info.name + ": " + problem);
  throw CudaError(r, "cuLaunchKernelEx (kernel " + info.name + ")");
}

[[gnu::noinline]] void launch_failed(CUresult r, const CUlaunchConfig& c, const LaunchConfig& cfg, KernelInfo& info,
                                     void** args) {
  if (r == CUDA_ERROR_INVALID_CONTEXT) {
    // The thread lost its context since we last looked (or never had one we
    // knew of): make the stream's current and try once more.
    ensure_thread_context(c.hStream, true);
    r = driver().cuLaunchKernelEx(&c, reinterpret_cast<CUfunction>(info.handle), args, nullptr);
    if (r == CUDA_SUCCESS) return;
  }
  explain_failure(r, c.hStream, cfg, info, c);
}

[[gnu::noinline]] void prepare_special(const LaunchConfig& cfg, CUstream stream, KernelInfo& info,
                                       NativeLaunchConfig& native) {
  to_native(cfg, stream, native);  // validates: throws on a bad configuration
  if (cfg.cluster.is_set()) check_cluster_support(stream);
  if (cfg.is_cooperative) check_cooperative(stream, cfg, info, native.config);
}

[[noreturn, gnu::noinline, gnu::cold]] void throw_closed_stream(const KernelInfo& info) {
  throw_closed("Stream", ("launch (kernel " + info.name + ")").c_str());
}

// Adds the programmatic-stream-serialization attribute to a filled config.
[[gnu::noinline]] void allow_programmatic(NativeLaunchConfig& native) {
  CUlaunchConfig& c = native.config;
  CUlaunchAttribute& a = native.attrs[c.numAttrs];
  std::memset(&a, 0, sizeof a);
  a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  a.value.programmaticStreamSerializationAllowed = 1;
  c.attrs = native.attrs;
  ++c.numAttrs;
}

inline void submit(CUstream stream, const LaunchConfig& cfg, KernelInfo& info, void** args,
                   bool programmatic = false) {
  if (stream == closed_stream()) [[unlikely]]
    throw_closed_stream(info);
  const DriverTable& d = driver();
  auto launch_fn = d.cuLaunchKernelEx;
  if (!launch_fn) [[unlikely]]
    require(nullptr, 11060, "kernel launches (cuLaunchKernelEx)");
  if (!t_context_ready) [[unlikely]]
    ensure_thread_context(stream, false);

  NativeLaunchConfig native;  // left uninitialized: every field used is set below
  CUlaunchConfig& c = native.config;
  const Dim3& g = cfg.grid;
  const Dim3& b = cfg.block;
  // The plain case (every dimension set, no cluster, not cooperative) is
  // filled inline; anything else goes through the full validation.
  if (g.x && g.y && g.z && b.x && b.y && b.z && !cfg.cluster.is_set() && !cfg.is_cooperative &&
      cfg.shmem_size <= UINT_MAX) [[likely]] {
    c.gridDimX = g.x;
    c.gridDimY = g.y;
    c.gridDimZ = g.z;
    c.blockDimX = b.x;
    c.blockDimY = b.y;
    c.blockDimZ = b.z;
    c.sharedMemBytes = static_cast<unsigned>(cfg.shmem_size);
    c.hStream = stream;
    c.attrs = nullptr;
    c.numAttrs = 0;
  } else {
    prepare_special(cfg, stream, info, native);
  }
  if (programmatic) allow_programmatic(native);
  CUresult r = launch_fn(&c, reinterpret_cast<CUfunction>(info.handle), args, nullptr);
  if (r != CUDA_SUCCESS) [[unlikely]]
    launch_failed(r, c, cfg, info, args);
}

[[noreturn]] void throw_empty_kernel() { throw InvalidArgumentError("launch: the Kernel is empty"); }

inline KernelInfo& kernel_info(const Kernel& kernel) {
  KernelInfo* info = kernel.info();
  if (!info) [[unlikely]]
    throw_empty_kernel();
  return *info;
}

std::string layout_sizes(const KernelInfo& info) {
  std::string s;
  for (std::size_t i = 0; i < info.params.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(info.params[i].size);
  }
  return s;
}

[[noreturn]] void throw_count_mismatch(const KernelInfo& info, std::size_t got) {
  const std::size_t n = info.params.size();
  std::string msg = info.name + ": takes " + std::to_string(n) + (n == 1 ? " argument" : " arguments");
  if (n) msg += " (of " + layout_sizes(info) + " bytes)";
  throw InvalidArgumentError(msg + ", got " + std::to_string(got));
}

[[noreturn]] void throw_size_mismatch(const KernelInfo& info, std::size_t index, std::size_t got,
                                      const std::type_info* type) {
  std::string msg = info.name + ": parameter " + std::to_string(index) + " is " +
                    std::to_string(info.params[index].size) + " bytes, got " + std::to_string(got);
  if (type) msg += " (" + type_display_name(type) + ")";
  throw InvalidArgumentError(msg);
}

// The one argument check, shared by every form of launch (and so by the
// Python module): the count, then, when the caller knows them, each size
// (`arg(i)` gives argument i's size and type), against the kernel's layout.
// Nothing to check when the driver cannot tell the layout.
struct CountOnly {};
template <typename ArgAt>
inline void check_arguments(KernelInfo& info, std::size_t count, ArgAt arg) {
  const KernelInfo& l = info.layout();
  if (!l.params_known) [[unlikely]]
    return;
  if (count != l.params.size()) [[unlikely]]
    throw_count_mismatch(info, count);
  if constexpr (!std::is_same_v<ArgAt, CountOnly>) {
    const ParamInfo* p = l.params.data();
    for (std::size_t i = 0; i < count; ++i) {
      const auto [size, type] = arg(i);
      if (p[i].size != size) [[unlikely]]
        throw_size_mismatch(info, i, size, type);
    }
  }
}

}  // namespace

void to_native(const LaunchConfig& cfg, CUstream stream, NativeLaunchConfig& out) {
  validate(cfg);
  CUlaunchConfig& c = out.config;
  unsigned n = 0;
  if (cfg.cluster.is_set()) {
    c.gridDimX = cfg.grid.x * cfg.cluster.x;  // validate() checked these fit
    c.gridDimY = cfg.grid.y * cfg.cluster.y;
    c.gridDimZ = cfg.grid.z * cfg.cluster.z;
    CUlaunchAttribute& a = out.attrs[n++];
    std::memset(&a, 0, sizeof a);
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = cfg.cluster.x;
    a.value.clusterDim.y = cfg.cluster.y;
    a.value.clusterDim.z = cfg.cluster.z;
  } else {
    c.gridDimX = cfg.grid.x;
    c.gridDimY = cfg.grid.y;
    c.gridDimZ = cfg.grid.z;
  }
  c.blockDimX = cfg.block.x;
  c.blockDimY = cfg.block.y;
  c.blockDimZ = cfg.block.z;
  c.sharedMemBytes = static_cast<unsigned>(cfg.shmem_size);
  c.hStream = stream;
  if (cfg.is_cooperative) {
    CUlaunchAttribute& a = out.attrs[n++];
    std::memset(&a, 0, sizeof a);
    a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    a.value.cooperative = 1;
  }
  c.attrs = n ? out.attrs : nullptr;
  c.numAttrs = n;
}

KernelInfo& checked_kernel(const Kernel& kernel, const ArgDesc* descs, std::size_t count) {
  KernelInfo& info = kernel_info(kernel);
  check_arguments(info, count, [descs](std::size_t i) { return std::pair{descs[i].size, descs[i].type}; });
  return info;
}

void launch_checked(CUstream stream, const LaunchConfig& config, const Kernel& kernel, void** args,
                    const ArgDesc* descs, std::size_t count) {
  submit(stream, config, checked_kernel(kernel, descs, count), args);
}

void launch_unchecked(CUstream stream, const LaunchConfig& config, const Kernel& kernel, void** args) {
  submit(stream, config, kernel_info(kernel), args);
}

void keep_for_capture(CUstream stream, const Kernel& kernel, const PackedObject* objects, std::size_t count) {
  // Asked after the launch went in: a stream the driver took a launch on
  // answers. The legacy and per-thread streams are never captured themselves.
  if (!stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return;
  const DriverTable& d = driver();
  if (!d.cuStreamGetCaptureInfo) return;  // a driver before CUDA 12.3: nothing to ask, and no graph to give
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = nullptr;
  check(d.cuStreamGetCaptureInfo(stream, &status, nullptr, &graph, nullptr, nullptr, nullptr),
        "cuStreamGetCaptureInfo (keeping a captured launch's arguments)");
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !graph) [[likely]]
    return;
  std::vector<Owner> owners;
  owners.reserve(count + 1);
  for (std::size_t i = 0; i < count; ++i) owners.push_back(objects[i].share(objects[i].object));
  owners.push_back(std::make_shared<const Kernel>(kernel));  // its library, loaded until the graph goes
  retain_in_graph(graph, std::move(owners));
}

}  // namespace detail

using detail::KernelInfo;

void validate(const LaunchConfig& cfg) {
  detail::check_dims("grid", cfg.grid, true);
  detail::check_dims("block", cfg.block, true);
  detail::check_dims("cluster", cfg.cluster, false);
  if (cfg.cluster.is_set()) {
    const std::uint64_t gx = std::uint64_t(cfg.grid.x) * cfg.cluster.x, gy = std::uint64_t(cfg.grid.y) * cfg.cluster.y,
                        gz = std::uint64_t(cfg.grid.z) * cfg.cluster.z;
    if (gx > UINT_MAX || gy > UINT_MAX || gz > UINT_MAX)
      detail::bad_config("grid " + detail::dims(cfg.grid) + " clusters of " + detail::dims(cfg.cluster) +
                         " blocks is more blocks than a launch can have (32 bits per dimension)");
  }
  if (cfg.shmem_size > UINT_MAX)
    detail::bad_config("shmem_size of " + std::to_string(cfg.shmem_size) + " bytes does not fit in 32 bits");
}

void launch(StreamRef stream, const LaunchConfig& config, const Kernel& kernel, const KernelArgs& args) {
  KernelInfo& info = detail::kernel_info(kernel);
  const std::size_t n = args.size();
  const std::uint32_t* sizes = args.sizes();
  detail::check_arguments(info, n, [sizes](std::size_t i) {
    return std::pair{std::size_t{sizes[i]}, static_cast<const std::type_info*>(nullptr)};
  });
  // The pointer array on the stack (kernels with more than 64 parameters are rare).
  void* stack[64];
  std::vector<void*> heap;
  void** pointers = stack;
  if (n > 64) {
    heap.resize(n);
    pointers = heap.data();
  }
  std::byte* bytes = const_cast<std::byte*>(args.bytes());
  const std::uint32_t* offsets = args.offsets();
  for (std::size_t i = 0; i < n; ++i) pointers[i] = bytes + offsets[i];
  detail::submit(stream.handle(), config, info, pointers);
}

namespace detail {
void launch_programmatic(StreamRef stream, const LaunchConfig& config, const Kernel& kernel, const KernelArgs& args) {
  KernelInfo& info = kernel_info(kernel);
  check_arguments(info, args.size(), [&args](std::size_t i) {
    return std::pair{args.size_of(i), static_cast<const std::type_info*>(nullptr)};
  });
  submit(stream.handle(), config, info, const_cast<void**>(args.pointers()), true);
}
}  // namespace detail

void launch(StreamRef stream, const LaunchConfig& config, const Kernel& kernel, std::span<void* const> args) {
  KernelInfo& info = detail::kernel_info(kernel);
  detail::check_arguments(info, args.size(), detail::CountOnly{});
  for (std::size_t i = 0; i < args.size(); ++i)
    if (!args[i])
      throw InvalidArgumentError(info.name + ": kernelParams[" + std::to_string(i) +
                                  "] is null (each entry points at its argument's value)");
  detail::submit(stream.handle(), config, info, const_cast<void**>(args.data()));
}

// ---- KernelArgs ----

KernelArgs::KernelArgs(const KernelArgs& other) { *this = other; }

KernelArgs& KernelArgs::operator=(const KernelArgs& other) {
  if (this == &other) return *this;
  count_ = other.count_;
  used_ = other.used_;
  heap_ = other.heap_;
  if (heap_) {
    heap_bytes_ = other.heap_bytes_;
    heap_offsets_ = other.heap_offsets_;
    heap_sizes_ = other.heap_sizes_;
  } else {
    heap_bytes_.clear();
    heap_offsets_.clear();
    heap_sizes_.clear();
    std::memcpy(inline_bytes_, other.inline_bytes_, used_);
    std::memcpy(inline_offsets_, other.inline_offsets_, count_ * sizeof(std::uint32_t));
    std::memcpy(inline_sizes_, other.inline_sizes_, count_ * sizeof(std::uint32_t));
  }
  return *this;
}

KernelArgs::KernelArgs(KernelArgs&& other) noexcept { *this = std::move(other); }

KernelArgs& KernelArgs::operator=(KernelArgs&& other) noexcept {
  if (this == &other) return *this;
  count_ = other.count_;
  used_ = other.used_;
  heap_ = other.heap_;
  if (heap_) {
    heap_bytes_ = std::move(other.heap_bytes_);
    heap_offsets_ = std::move(other.heap_offsets_);
    heap_sizes_ = std::move(other.heap_sizes_);
  } else {
    std::memcpy(inline_bytes_, other.inline_bytes_, used_);
    std::memcpy(inline_offsets_, other.inline_offsets_, count_ * sizeof(std::uint32_t));
    std::memcpy(inline_sizes_, other.inline_sizes_, count_ * sizeof(std::uint32_t));
  }
  other.clear();
  return *this;
}

void KernelArgs::throw_closed(std::size_t index) {
  throw ClosedError("Buffer", "KernelArgs::push: argument " + std::to_string(index));
}

KernelArgs& KernelArgs::push_bytes(const void* data, std::size_t size, std::size_t alignment) {
  if (!data || size == 0) throw InvalidArgumentError("KernelArgs::push_bytes: an argument has at least one byte");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw InvalidArgumentError("KernelArgs::push_bytes: alignment must be a power of two, got " +
                                std::to_string(alignment));
  if (alignment > 16) alignment = 16;
  // A kernel's parameters total at most 32764 bytes; well past that is a mistake.
  const std::size_t offset = (std::size_t(used_) + alignment - 1) & ~(alignment - 1);
  if (offset + size > (std::size_t(1) << 20))
    throw InvalidArgumentError("KernelArgs: the pack would exceed 1 MiB (kernel parameters total at most 32 KB)");
  const std::size_t end = offset + size;
  if (!heap_ && (end > kInlineBytes || count_ + 1 > kInlineArgs)) {
    // Spill: from here on the pack lives on the heap.
    heap_bytes_.assign(inline_bytes_, inline_bytes_ + used_);
    heap_offsets_.assign(inline_offsets_, inline_offsets_ + count_);
    heap_sizes_.assign(inline_sizes_, inline_sizes_ + count_);
    heap_ = true;
  }
  if (heap_) {
    heap_bytes_.resize(end);
    std::memcpy(heap_bytes_.data() + offset, data, size);
    heap_offsets_.push_back(static_cast<std::uint32_t>(offset));
    heap_sizes_.push_back(static_cast<std::uint32_t>(size));
  } else {
    std::memcpy(inline_bytes_ + offset, data, size);
    inline_offsets_[count_] = static_cast<std::uint32_t>(offset);
    inline_sizes_[count_] = static_cast<std::uint32_t>(size);
  }
  used_ = static_cast<std::uint32_t>(end);
  ++count_;
  return *this;
}

void KernelArgs::clear() noexcept {
  count_ = used_ = 0;
  heap_ = false;
  heap_bytes_.clear();
  heap_offsets_.clear();
  heap_sizes_.clear();
}

std::size_t KernelArgs::size_of(std::size_t i) const {
  if (i >= count_) throw OutOfRangeError("KernelArgs: no argument " + std::to_string(i));
  return sizes()[i];
}

const void* KernelArgs::data(std::size_t i) const {
  if (i >= count_) throw OutOfRangeError("KernelArgs: no argument " + std::to_string(i));
  return bytes() + offsets()[i];
}

void* const* KernelArgs::pointers() const {
  void** out = inline_pointers_;
  if (count_ > kInlineArgs) {
    heap_pointers_.resize(count_);
    out = heap_pointers_.data();
  }
  for (std::size_t i = 0; i < count_; ++i) out[i] = const_cast<std::byte*>(bytes()) + offsets()[i];
  return out;
}

}  // namespace cucore
