#pragma once
// Forward declarations of cucore's object model, for headers that only name
// the types (a function taking `const cucore::Stream&`, a member pointer to a
// Buffer): no <cuda.h>, no standard library, nothing to parse. Include the
// concept's own header (or <cucore/cucore.hpp>) where a type is used.
// tests/cpu/test_fwd.cpp checks that each name here is the class its header
// defines, and that this header stays this small.

namespace cucore {

// errors.hpp
class Error;
class RuntimeError;
class InvalidArgumentError;
class OutOfRangeError;
class OverflowError;
class LogicError;
class SystemError;
class CudaError;
class LibraryNotFoundError;
class FeatureUnavailableError;
class CompileError;
class ClosedError;

// device.hpp, context.hpp, stream.hpp, event.hpp
class Device;
class DeviceProperties;
class Context;
class ScopedContext;
class Stream;
class StreamRef;
struct StreamOptions;
class Event;
struct EventOptions;

// memory: buffer.hpp, device_span.hpp, memory.hpp, managed.hpp, adaptors.hpp
class Buffer;
template <typename T>
class DeviceSpan;
class MemoryResource;
class DeviceMemoryResource;
struct DeviceMemoryResourceOptions;
class PinnedMemoryResource;
struct PinnedMemoryResourceOptions;
class LegacyPinnedMemoryResource;
class ManagedMemoryResource;
struct ManagedMemoryResourceOptions;
class ManagedBuffer;
class StatisticsResourceAdaptor;
class LimitingResourceAdaptor;
struct Location;
struct CopyOptions;
class StridedMemoryView;
class TensorMapDescriptor;

// compiling and launching: program.hpp, object_code.hpp, linker.hpp, kernel.hpp, launch.hpp, program_cache.hpp
class Program;
struct ProgramOptions;
class ObjectCode;
class Linker;
struct LinkerOptions;
class Kernel;
template <typename Signature>
class TypedKernel;
struct Dim3;
struct LaunchConfig;
class KernelArgs;
class ProgramCache;
class InMemoryProgramCache;
class FileStreamProgramCache;
class TwoLevelProgramCache;

// green contexts: resources.hpp
class SMResource;
struct SMResourceOptions;
class WorkqueueResource;
struct WorkqueueResourceOptions;
class DeviceResources;
struct ContextOptions;

// interop: graphics.hpp, ipc.hpp
class GraphicsResource;
struct IPCBufferDescriptor;
struct IPCEventDescriptor;

namespace graph {  // graph.hpp
class Graph;
class GraphBuilder;
class GraphDefinition;
class GraphNode;
class GraphMemoryResource;
struct GraphCompleteOptions;
}  // namespace graph

namespace texture {  // texture.hpp
class OpaqueArray;
class MipmappedArray;
class ResourceDescriptor;
class TextureObject;
class SurfaceObject;
}  // namespace texture

}  // namespace cucore
