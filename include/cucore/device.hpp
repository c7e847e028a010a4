#pragma once
// A GPU. Device is a cheap value (an ordinal and a pointer to process-wide
// per-device state); it works in the device's primary context, the one the
// runtime API, PyTorch and CuPy use, so streams and pointers pass between them.
#include <cuda.h>

#include <array>
#include <compare>
#include <cstddef>
#include <string>
#include <vector>

#include <cucore/resources.hpp>

namespace cucore {

class Context;
class Stream;
class Event;
class DeviceMemoryResource;
namespace graph {
class GraphBuilder;
}
struct StreamOptions;
struct EventOptions;

namespace detail {
struct DeviceState;
}
namespace system {
class Device;
}
namespace texture {
class OpaqueArray;
class MipmappedArray;
class ResourceDescriptor;
class TextureObject;
class SurfaceObject;
struct OpaqueArrayOptions;
struct MipmappedArrayOptions;
struct TextureObjectOptions;
}  // namespace texture

struct ComputeCapability {
  int major = 0;
  int minor = 0;
  friend auto operator<=>(const ComputeCapability&, const ComputeCapability&) = default;
};

// Named accessors for the device's attributes; each is read from the driver
// once and then served from a cache.
class DeviceProperties {
 public:
  // Any attribute by its CUdevice_attribute, cached.
  int attribute(CUdevice_attribute attr) const;

  int multiprocessor_count() const { return attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT); }
  int max_threads_per_block() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK); }
  int max_threads_per_multiprocessor() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR); }
  int max_blocks_per_multiprocessor() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR); }
  std::array<int, 3> max_block_dim() const;
  std::array<int, 3> max_grid_dim() const;
  int warp_size() const { return attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE); }
  int max_shared_memory_per_block() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK); }
  int max_shared_memory_per_block_optin() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN); }
  int max_shared_memory_per_multiprocessor() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR); }
  int max_registers_per_block() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK); }
  int max_registers_per_multiprocessor() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR); }
  int total_constant_memory() const { return attribute(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY); }
  int l2_cache_size() const { return attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE); }
  int max_persisting_l2_cache_size() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE); }
  int clock_rate() const { return attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE); }                // kHz
  int memory_clock_rate() const { return attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE); }  // kHz
  int global_memory_bus_width() const { return attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH); }  // bits
  std::size_t total_memory() const;                                                           // bytes
  int compute_capability_major() const { return attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR); }
  int compute_capability_minor() const { return attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR); }
  bool cooperative_launch() const { return attribute(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0; }
  bool cluster_launch() const { return attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0; }
  bool unified_addressing() const { return attribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) != 0; }
  bool managed_memory() const { return attribute(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) != 0; }
  bool concurrent_managed_access() const { return attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) != 0; }
  bool memory_pools_supported() const { return attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0; }
  bool integrated() const { return attribute(CU_DEVICE_ATTRIBUTE_INTEGRATED) != 0; }
  bool can_map_host_memory() const { return attribute(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) != 0; }
  bool ecc_enabled() const { return attribute(CU_DEVICE_ATTRIBUTE_ECC_ENABLED) != 0; }
  int async_engine_count() const { return attribute(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT); }
  int pci_bus_id() const { return attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID); }
  int pci_device_id() const { return attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID); }
  int pci_domain_id() const { return attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID); }

 private:
  friend class Device;
  explicit DeviceProperties(detail::DeviceState* s) : state_(s) {}
  detail::DeviceState* state_;
};

class Device {
 public:
  // The device current on this thread (its context's device), else device 0.
  Device();
  // Throws std::out_of_range naming the device count when `ordinal` is not a device.
  explicit Device(int ordinal);

  static int count();  // 0 when the driver reports no device; throws when there is no driver
  static std::vector<Device> all();
  static Device current();  // same as Device()

  int ordinal() const noexcept { return ordinal_; }
  int device_id() const noexcept { return ordinal_; }  // cuda.core's name
  CUdevice handle() const;
  std::string name() const;
  std::array<unsigned char, 16> uuid() const;
  std::string uuid_string() const;  // "GPU-xxxxxxxx-xxxx-..." as nvidia-smi prints it
  std::string pci_bus_id() const;   // "0000:3B:00.0"
  ComputeCapability compute_capability() const;
  std::string arch() const;  // "90"
  DeviceProperties properties() const { return DeviceProperties(state_); }

  // Retains the primary context (once per process) and makes it current on
  // this thread; returns it.
  Context set_current() const;
  Context context() const;  // the primary context, retained on first use
  void sync() const;        // waits for all work in the primary context

  Stream create_stream(const StreamOptions& options) const;
  Stream create_stream() const;
  // A graph builder (graph.hpp) capturing a new stream of this device.
  graph::GraphBuilder create_graph_builder() const;
  Event create_event(const EventOptions& options) const;
  Event create_event() const;
  DeviceMemoryResource memory_resource() const;  // the device's default pool
  // The device's SMs (and workqueues), to split for green contexts.
  DeviceResources resources() const { return DeviceResources(ordinal_, nullptr); }
  // A green context on SM groups of this device (resources.hpp); not made current.
  Context create_context(const ContextOptions& options) const;
  bool can_access_peer(const Device& peer) const;
  // Textures and surfaces (texture.hpp), made in this device's primary context.
  texture::OpaqueArray create_opaque_array(const texture::OpaqueArrayOptions& options) const;
  texture::MipmappedArray create_mipmapped_array(const texture::MipmappedArrayOptions& options) const;
  texture::TextureObject create_texture_object(const texture::ResourceDescriptor& resource) const;
  texture::TextureObject create_texture_object(const texture::ResourceDescriptor& resource,
                                               const texture::TextureObjectOptions& options) const;
  texture::SurfaceObject create_surface_object(const texture::ResourceDescriptor& resource) const;
  // The same GPU as NVML sees it (system.hpp), found by UUID.
  system::Device to_system_device() const;

  friend bool operator==(const Device& a, const Device& b) noexcept { return a.ordinal_ == b.ordinal_; }

 private:
  int ordinal_ = 0;
  detail::DeviceState* state_ = nullptr;
};

}  // namespace cucore
