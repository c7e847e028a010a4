// Compiling, caching and loading algorithm builds; the dispatch helpers.
#include "compute/engine.hpp"

#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/linker.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <unordered_map>

#include "cache/program_key.hpp"
#include "cache/single_flight.hpp"
#include "files/regular_file.hpp"
#include "hashing/hashing.hpp"
#include "launch/launch_internal.hpp"
#include "loader/driver.hpp"
#include "loader/toolkit.hpp"

namespace cucore::compute::detail {

namespace {

// Each blob prefixed by its 64-bit length, so no two lists share a digest.
std::string sha256_of(const std::vector<std::vector<std::byte>>& blobs) {
  ::cucore::detail::Sha256 h;
  for (const auto& b : blobs) {
    const std::uint64_t n = b.size();
    h.update(&n, sizeof n);
    h.update(b.data(), b.size());
  }
  return h.digest();
}

template <typename T>
bool read_at(std::span<const std::byte> b, std::uint64_t off, T& v) {
  if (off > b.size() || sizeof(T) > b.size() - off) return false;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return true;
}

}  // namespace

std::string sha256_hex(const std::vector<std::vector<std::byte>>& blobs) {
  return ::cucore::detail::to_hex(sha256_of(blobs));
}

namespace {

// Whether every header `code` includes is the toolkit's (angled relative names
// and no include path): then make_program_cache_key names the build as
// Program::compile's own key would, the compiler's identity standing for the
// headers. An operator whose source includes its own headers needs
// Program::compile's key, which reads them.
bool toolkit_only(const std::string& code) {
  const cucore::detail::IncludeScan& scan = cucore::detail::code_includes(code);
  return scan.unfollowable.empty() &&
         std::all_of(scan.directives.begin(), scan.directives.end(),
                     [](const cucore::detail::IncludeDirective& d) { return d.angled && !d.name.starts_with('/'); });
}

// The TU's LTO-IR linked (with the user's LTO-IR) by nvJitLink, told that the
// host reads the tuning table alone, so the device variables nothing uses go:
// under NVRTC every constant of the CCCL headers is a device variable (some
// 1300 for a reduce: 5x the cubin, each one the driver's to place and relocate
// when the module enters a context, 5-8 ms at the first launch on an H200).
ObjectCode link_tu(const ObjectCode& ltoir, const TuSource& tu, const std::string& name, const std::string& arch) {
  std::vector<ObjectCode> inputs{ltoir};
  for (std::size_t i = 0; i < tu.ltoirs.size(); ++i)
    inputs.push_back(ObjectCode::from_ltoir(tu.ltoirs[i], "operator " + std::to_string(i)));
  Linker linker(std::move(inputs),
                LinkerOptions{.name = name, .arch = arch, .link_time_optimization = true, .variables_used = {"cucore_tuning"}});
  ObjectCode linked = linker.link(CodeType::cubin);
  std::vector<std::byte> bytes(linked.code().begin(), linked.code().end());
  return ObjectCode::from_bytes(std::move(bytes), CodeType::cubin, name, ltoir.symbol_mapping());
}

}  // namespace

CompiledCode compile_tu(const TuSource& tu, const std::string& arch, ProgramCache* cache) {
  ProgramCache& c = cache ? *cache : default_program_cache();
  ProgramOptions o;
  o.name = "cucore_compute_" + tu.name;
  o.arch = arch;
  o.std = "c++17";
  // NVRTC's JIT mode refuses host functions; CUB's unannotated helpers become device ones.
  o.device_as_default_execution_space = true;
  const ProgramOptions plain = o;
  o.relocatable_device_code = true;
  o.link_time_optimization = true;
  const Program program(tu.code, "c++", o);
  // Asked only when something must be built: finding nvJitLink loads it (~5 ms).
  auto linker = [&] { return !tu.ltoirs.empty() || cucore::detail::nvjitlink_available(); };
  constexpr std::string_view kRecipe = "cucore.compute linked 2:";
  // A TU whose includes are all the toolkit's is keyed by its text alone (the
  // compiler's identity names CCCL): a warm start reads one entry.
  const bool text_keyed = toolkit_only(tu.code);
  const std::string text_key =
      text_keyed ? make_program_cache_key(tu.code, "c++", program.options(), CodeType::cubin, tu.kernels,
                                          std::string(kRecipe) + sha256_of(tu.ltoirs))
                 : std::string();
  // Links run once per key in the process, as Program::compile's compiles:
  // objects built at once from one source (threads making the same algorithm)
  // wait for the first one's link.
  auto link_once = [&](const std::string& key, std::uint64_t landed_before, auto&& ltoir) {
    return cucore::detail::single_flight(c, key, CodeType::cubin, landed_before, [&](std::string& k) {
      ObjectCode linked = link_tu(ltoir(), tu, o.name, arch);
      c.put(k, linked);
      return linked;
    });
  };
  ObjectCode obj;
  const std::uint64_t landed_before = cucore::detail::flights_landed();
  if (auto hit = text_keyed ? c.get(text_key, CodeType::cubin) : std::nullopt) {
    obj = *hit;
  } else if (!linker()) {
    // Without nvJitLink, NVRTC's plain cubin (variables and all), under its own key.
    obj = Program(tu.code, "c++", plain).compile(CodeType::cubin, tu.kernels, &c);
  } else if (text_keyed) {
    obj = link_once(text_key, landed_before, [&] { return program.compile(CodeType::ltoir, tu.kernels); });
  } else {
    // An operator that includes its own headers: its LTO-IR goes through the
    // header-aware cache, and the linked cubin is keyed by that LTO-IR's bytes,
    // which follow every header it read.
    const ObjectCode ltoir = program.compile(CodeType::ltoir, tu.kernels, &c);
    std::vector<std::vector<std::byte>> blobs{{ltoir.code().begin(), ltoir.code().end()}};
    blobs.insert(blobs.end(), tu.ltoirs.begin(), tu.ltoirs.end());
    const std::string key = make_program_cache_key(tu.code, "c++", program.options(), CodeType::cubin, tu.kernels,
                                                   std::string(kRecipe) + "of the LTO-IR " + sha256_of(blobs));
    const std::uint64_t before_link = cucore::detail::flights_landed();
    if (auto linked = c.get(key, CodeType::cubin))
      obj = *linked;
    else
      obj = link_once(key, before_link, [&] { return ltoir; });
  }
  return {obj, read_tuning(obj.code(), tu.tuning_count)};
}

std::vector<long long> read_tuning(std::span<const std::byte> b, std::size_t expected_count) {
  auto fail = [](const std::string& why) -> std::vector<long long> {
    throw RuntimeError("cucore.compute: the compiled kernels' tuning table (cucore_tuning) " + why);
  };
  unsigned char ident[6];
  if (b.size() < 64 || !read_at(b, 0, ident) || std::memcmp(ident, "\x7f" "ELF\x02\x01", 6) != 0)
    return fail("is unreadable: not a 64-bit little-endian ELF cubin");
  std::uint64_t shoff;
  std::uint16_t shentsize, shnum;
  read_at(b, 0x28, shoff);
  read_at(b, 0x3A, shentsize);
  read_at(b, 0x3C, shnum);
  if (shentsize < 64) return fail("is unreadable: bad section headers");
  struct Section {
    std::uint32_t type = 0, link = 0;
    std::uint64_t offset = 0, size = 0;
  };
  std::vector<Section> sections(shnum);
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + std::uint64_t(i) * shentsize;
    Section& s = sections[i];
    if (!read_at(b, h + 4, s.type) || !read_at(b, h + 24, s.offset) || !read_at(b, h + 32, s.size) ||
        !read_at(b, h + 40, s.link))
      return fail("is unreadable: truncated section headers");
    if (s.type != 8 /*NOBITS*/ && (s.offset > b.size() || s.size > b.size() - s.offset))
      return fail("is unreadable: a section lies outside the file");
  }
  for (const Section& symtab : sections) {
    if (symtab.type != 2 /*SYMTAB*/ || symtab.link >= sections.size()) continue;
    const Section& strtab = sections[symtab.link];
    for (std::uint64_t off = 0; off + 24 <= symtab.size; off += 24) {
      std::uint32_t name = 0;
      std::uint16_t shndx = 0;
      std::uint64_t value = 0, size = 0;
      read_at(b, symtab.offset + off, name);
      read_at(b, symtab.offset + off + 6, shndx);
      read_at(b, symtab.offset + off + 8, value);
      read_at(b, symtab.offset + off + 16, size);
      static constexpr char kName[] = "cucore_tuning";
      if (name >= strtab.size || strtab.size - name < sizeof kName ||
          std::memcmp(b.data() + strtab.offset + name, kName, sizeof kName) != 0)
        continue;
      if (shndx >= sections.size() || sections[shndx].type == 8) return fail("has no initialized data");
      const Section& data = sections[shndx];
      if (size != expected_count * sizeof(long long))
        return fail("has " + std::to_string(size / sizeof(long long)) + " entries, expected " +
                    std::to_string(expected_count));
      if (value > data.size || size > data.size - value) return fail("lies outside its section");
      std::vector<long long> t(expected_count);
      std::memcpy(t.data(), b.data() + data.offset + value, size);
      return t;
    }
  }
  return fail("is missing from the cubin");
}

// ---------------------------------------------------------------- variants

Variant::Variant(CompiledCode code, std::vector<std::string> kernel_names)
    : code_(std::move(code.code)),
      names_(std::move(kernel_names)),
      tuning_(std::move(code.tuning)),
      loaded_(new std::once_flag[names_.size()]),
      kernels_(names_.size()) {}

const Kernel& Variant::kernel(std::size_t i) const {
  if (i >= names_.size())
    throw OutOfRangeError("cucore.compute: kernel " + std::to_string(i) + " of " + std::to_string(names_.size()));
  // call_once: a failed load (no device) throws and leaves the flag unset for a retry.
  std::call_once(loaded_[i], [&] { kernels_[i] = code_.get_kernel(names_[i]); });
  return kernels_[i];
}

int Variant::occupancy(int device, std::size_t kernel, int block_threads, std::size_t smem) const {
  const auto key = std::make_tuple(device, kernel, block_threads, smem);
  {
    std::lock_guard lock(mutex_);
    if (auto it = occupancy_.find(key); it != occupancy_.end()) return it->second;
  }
  const int occ = this->kernel(kernel).occupancy(device).max_active_blocks_per_multiprocessor(block_threads, smem);
  std::lock_guard lock(mutex_);
  occupancy_[key] = occ;
  return occ;
}

const Variant& Variants::get(const VariantKey& key) const {
  std::shared_future<std::shared_ptr<const Variant>> future;
  std::promise<std::shared_ptr<const Variant>> promise;
  bool builder = false;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = variants_.find(key);
    if (it == variants_.end()) {
      future = promise.get_future().share();
      id = ++next_id_;
      variants_.emplace(key, Entry{future, id});
      builder = true;
    } else {
      future = it->second.future;
    }
  }
  if (builder) {
    try {
      TuSource tu = generate_(key);
      auto v = std::make_shared<const Variant>(compile_tu(tu, key.arch, cache_), tu.kernels);
      promise.set_value(std::move(v));
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard lock(mutex_);
      if (auto it = variants_.find(key); it != variants_.end() && it->second.id == id)
        variants_.erase(it);  // the next call retries
    }
  }
  return *future.get();
}

// ---------------------------------------------------------------- devices

const DeviceFacts& device_facts(int ordinal) {
  static std::mutex m;
  static std::unordered_map<int, std::unique_ptr<DeviceFacts>> facts;
  std::lock_guard lock(m);
  auto& slot = facts[ordinal];
  if (!slot) {
    Device d(ordinal);
    auto p = d.properties();
    auto f = std::make_unique<DeviceFacts>();
    f->ordinal = ordinal;
    f->arch = "sm_" + d.arch();
    f->sm_count = p.multiprocessor_count();
    f->max_grid_dim_x = p.max_grid_dim()[0];
    f->max_shared_memory_per_block = p.max_shared_memory_per_block();
    slot = std::move(f);
  }
  return *slot;
}

const DeviceFacts& call_device(StreamRef stream) {
  // Closed first: a closed stream's handle is a sentinel no driver call may see.
  if (stream.is_closed()) cucore::detail::throw_closed("Stream", "a compute call");
  const auto& d = cucore::detail::driver();
  CUcontext current = nullptr;
  cucore::detail::check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  CUstream h = stream.handle();
  const bool special = h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
  int ordinal;
  if (special) {
    if (!current) Device(0).set_current();
    ordinal = Device().ordinal();
  } else {
    CUdevice dev = 0;
    if (d.cuStreamGetDevice && d.cuStreamGetDevice(h, &dev) == CUDA_SUCCESS)  // one call, no context switch
      ordinal = static_cast<int>(dev);
    else
      ordinal = stream.device().ordinal();
    if (!current) Device(ordinal).set_current();
  }
  return device_facts(ordinal);
}

std::string resolve_arch(const BuildOptions& options) {
  if (!options.arch.empty()) {
    if (options.arch.rfind("sm_", 0) != 0 || options.arch.size() < 5)
      throw InvalidArgumentError("BuildOptions.arch must look like \"sm_90\", got \"" + options.arch + "\"");
    return options.arch;
  }
  try {
    return "sm_" + Device().arch();
  } catch (const std::exception& e) {
    throw InvalidArgumentError(std::string("BuildOptions.arch is empty and there is no usable device to build for (") +
                                e.what() + "): set arch, e.g. \"sm_90\"");
  }
}

// ---------------------------------------------------------------- dispatch helpers

std::size_t alias_temporaries(void* temp, std::size_t temp_bytes, std::span<const std::size_t> sizes,
                              std::span<void*> out, const char* algorithm) {
  constexpr std::size_t kAlign = 256;
  std::size_t needed = 0;
  std::vector<std::size_t> offsets(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    offsets[i] = needed;
    needed += (sizes[i] + kAlign - 1) & ~(kAlign - 1);
  }
  needed += kAlign - 1;
  if (!temp) return needed;
  if (temp_bytes < needed)
    throw InvalidArgumentError(std::string(algorithm) + ": temporary storage of " + std::to_string(temp_bytes) +
                                " bytes is too small: " + std::to_string(needed) + " bytes are needed");
  auto base = (reinterpret_cast<std::uintptr_t>(temp) + kAlign - 1) & ~std::uintptr_t(kAlign - 1);
  for (std::size_t i = 0; i < sizes.size(); ++i) out[i] = reinterpret_cast<void*>(base + offsets[i]);
  return needed;
}

void memset_zero_async(void* ptr, std::size_t bytes, StreamRef stream) {
  if (bytes == 0) return;
  const auto& d = cucore::detail::driver();
  const auto p = reinterpret_cast<CUdeviceptr>(ptr);
  if (p % 4 == 0 && bytes % 4 == 0)
    cucore::detail::check(d.cuMemsetD32Async(p, 0, bytes / 4, stream.handle()), "cuMemsetD32Async");
  else
    cucore::detail::check(d.cuMemsetD8Async(p, 0, bytes, stream.handle()), "cuMemsetD8Async");
}

void memcpy_async(void* dst, const void* src, std::size_t bytes, StreamRef stream) {
  if (bytes == 0) return;
  cucore::detail::check(cucore::detail::driver().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                                                               reinterpret_cast<CUdeviceptr>(src), bytes,
                                                               stream.handle()),
                        "cuMemcpyAsync");
}

void launch_kernel(StreamRef stream, const Kernel& kernel, Dim3 grid, int block_threads, std::size_t smem,
                   const Args& args, bool programmatic) {
  const LaunchConfig config{.grid = grid, .block = block_threads, .shmem_size = smem};
  if (programmatic)
    cucore::detail::launch_programmatic(stream, config, kernel, args.pack());
  else
    launch(stream, config, kernel, args.pack());
}

void with_temp_storage(StreamRef stream, const MemoryResource& mr,
                       const std::function<std::size_t(void*, std::size_t)>& fn) {
  const std::size_t bytes = fn(nullptr, 0);
  MemoryResource m = mr ? mr : MemoryResource(Device(call_device(stream).ordinal).memory_resource());
  Buffer temp = m.allocate(bytes, stream);
  fn(temp.data(), bytes);
}

// ---------------------------------------------------------------- one-shot cache

namespace {
struct Registry {
  struct Entry {
    std::shared_future<std::shared_ptr<const void>> future;
    std::uint64_t id;
  };
  std::mutex mutex;
  std::unordered_map<std::string, Entry> entries;
  std::uint64_t next_id = 0;
  BuildCacheStats stats;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: objects may be used during static destruction
  return *r;
}
}  // namespace

std::shared_ptr<const void> cached_build(const std::string& key,
                                         const std::function<std::shared_ptr<const void>()>& build) {
  Registry& r = registry();
  std::shared_future<std::shared_ptr<const void>> future;
  std::promise<std::shared_ptr<const void>> promise;
  bool builder = false;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(r.mutex);
    auto it = r.entries.find(key);
    if (it == r.entries.end()) {
      future = promise.get_future().share();
      id = ++r.next_id;
      r.entries.emplace(key, Registry::Entry{future, id});
      builder = true;
      ++r.stats.builds;
    } else {
      future = it->second.future;
      if (future.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        ++r.stats.hits;
      else
        ++r.stats.waits;
    }
  }
  if (builder) {
    try {
      promise.set_value(build());
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard lock(r.mutex);
      if (auto it = r.entries.find(key); it != r.entries.end() && it->second.id == id) r.entries.erase(it);
    }
  }
  return future.get();
}

}  // namespace cucore::compute::detail

namespace cucore::compute {

BuildCacheStats build_cache_stats() {
  auto& r = detail::registry();
  std::lock_guard lock(r.mutex);
  BuildCacheStats s = r.stats;
  s.entries = r.entries.size();
  return s;
}

void clear_build_cache() {
  auto& r = detail::registry();
  std::lock_guard lock(r.mutex);
  r.entries.clear();
}

std::string cccl_version() {
  static const std::string version = [] {
    auto dir = pathfinder::cccl_include_dir();
    if (!dir) return std::string("unknown (no CCCL headers found)");
    std::string text;
    try {  // never blocks on a FIFO in its place
      text = cucore::detail::read_text_file(std::filesystem::path(*dir) / "cuda" / "std" / "__cccl" / "version.h");
    } catch (const cucore::detail::FileError&) {
    }
    const std::string define = "#define CCCL_VERSION ";
    for (std::size_t at = text.find(define); at != std::string::npos; at = text.find(define, at + 1)) {
      if (at != 0 && text[at - 1] != '\n') continue;  // at the start of a line
      const long v = std::strtol(text.c_str() + at + define.size(), nullptr, 10);  // MMMmmmppp
      return std::to_string(v / 1000000) + "." + std::to_string(v / 1000 % 1000) + "." + std::to_string(v % 1000);
    }
    return std::string("unknown");
  }();
  return version;
}

}  // namespace cucore::compute
