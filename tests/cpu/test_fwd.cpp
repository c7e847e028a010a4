// <cucore/fwd.hpp>: each name it declares is the class its header defines
// (a name that were not would be an incomplete type here, or a second,
// different declaration, and this file would not compile), and the header
// stays free of anything to parse.
#include <cucore/fwd.hpp>
// A header over fwd.hpp alone: names the types, uses none.
namespace user {
void enqueue(const cucore::Stream& stream, cucore::Buffer& out, const cucore::Kernel& kernel);
cucore::DeviceSpan<const float> view(const cucore::Buffer& b);
}  // namespace user

#include <cucore/cucore.hpp>
#include <cucore/graphics.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>

namespace {
template <typename... T>
constexpr bool all_complete = ((sizeof(T) > 0) && ...);
}  // namespace

static_assert(all_complete<cucore::Error, cucore::RuntimeError, cucore::InvalidArgumentError, cucore::OutOfRangeError,
                           cucore::OverflowError, cucore::LogicError, cucore::SystemError, cucore::CudaError,
                           cucore::LibraryNotFoundError, cucore::FeatureUnavailableError, cucore::CompileError,
                           cucore::ClosedError>);
static_assert(all_complete<cucore::Device, cucore::DeviceProperties, cucore::Context, cucore::ScopedContext,
                           cucore::Stream, cucore::StreamRef, cucore::StreamOptions, cucore::Event,
                           cucore::EventOptions>);
static_assert(all_complete<cucore::Buffer, cucore::DeviceSpan<float>, cucore::MemoryResource,
                           cucore::DeviceMemoryResource, cucore::DeviceMemoryResourceOptions,
                           cucore::PinnedMemoryResource, cucore::PinnedMemoryResourceOptions,
                           cucore::LegacyPinnedMemoryResource, cucore::ManagedMemoryResource,
                           cucore::ManagedMemoryResourceOptions, cucore::ManagedBuffer,
                           cucore::StatisticsResourceAdaptor, cucore::LimitingResourceAdaptor, cucore::Location,
                           cucore::CopyOptions, cucore::StridedMemoryView, cucore::TensorMapDescriptor>);
static_assert(all_complete<cucore::Program, cucore::ProgramOptions, cucore::ObjectCode, cucore::Linker,
                           cucore::LinkerOptions, cucore::Kernel, cucore::TypedKernel<void(float*)>, cucore::Dim3,
                           cucore::LaunchConfig, cucore::KernelArgs, cucore::ProgramCache,
                           cucore::InMemoryProgramCache, cucore::FileStreamProgramCache,
                           cucore::TwoLevelProgramCache>);
static_assert(all_complete<cucore::SMResource, cucore::SMResourceOptions, cucore::WorkqueueResource,
                           cucore::WorkqueueResourceOptions, cucore::DeviceResources, cucore::ContextOptions,
                           cucore::GraphicsResource, cucore::IPCBufferDescriptor, cucore::IPCEventDescriptor>);
static_assert(all_complete<cucore::graph::Graph, cucore::graph::GraphBuilder, cucore::graph::GraphDefinition,
                           cucore::graph::GraphNode, cucore::graph::GraphMemoryResource,
                           cucore::graph::GraphCompleteOptions>);
static_assert(all_complete<cucore::texture::OpaqueArray, cucore::texture::MipmappedArray,
                           cucore::texture::ResourceDescriptor, cucore::texture::TextureObject,
                           cucore::texture::SurfaceObject>);

// The header itself includes nothing: no #include line, so a TU of it alone
// parses only these declarations.
TEST(Fwd, TheHeaderIncludesNothing) {
  const std::filesystem::path header =
      std::filesystem::path(CUCORE_TEST_DATA_DIR).parent_path().parent_path() / "include/cucore/fwd.hpp";
  std::ifstream in(header);
  ASSERT_TRUE(in) << header;
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(line.rfind("#include", 0), std::string::npos) << "fwd.hpp:" << lines << ": " << line;
  }
  EXPECT_GT(lines, 50);
}
