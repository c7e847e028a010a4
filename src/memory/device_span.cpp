// DeviceSpan's out-of-line parts (device_span.hpp): its errors, and the
// copies and fills that Buffer's typed and range copies share with it.
#include <cucore/device_span.hpp>

#include <cucore/errors.hpp>

#include <stdexcept>
#include <string>
#include <string_view>

#include "errors/demangle.hpp"
#include "loader/driver.hpp"
#include "runtime/stream_context.hpp"

namespace cucore::detail {

namespace {
std::string span_name(const std::type_info& type) { return "DeviceSpan<" + demangle(type.name()) + ">"; }
std::string elements(std::size_t n) { return std::to_string(n) + (n == 1 ? " element" : " elements"); }
}  // namespace

void throw_span_out_of_range(const char* operation, std::size_t offset, std::size_t count, std::size_t size,
                             const std::type_info& type) {
  const std::string op = span_name(type) + "::" + operation;
  const std::string of = "a span of " + elements(size);
  if (std::string(operation) == "subspan") {
    if (offset > size)
      throw OutOfRangeError(op + ": offset " + std::to_string(offset) + " is beyond " + of);
    throw OutOfRangeError(op + ": " + elements(count) + " from offset " + std::to_string(offset) +
                            " run beyond " + of);
  }
  throw OutOfRangeError(op + ": " + elements(count) + " asked of " + of);
}

void throw_allocate_overflow(std::size_t count, std::size_t element_size, const std::type_info& type) {
  throw OverflowError("MemoryResource::allocate<" + demangle(type.name()) + ">: " + std::to_string(count) +
                            " elements of " + std::to_string(element_size) + " bytes are more bytes than size_t holds");
}

void copy_bytes(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, StreamRef stream, bool wait,
                const char* operation) {
  StreamContextGuard guard(stream, operation);
  if (bytes == 0) return;
  check(driver().cuMemcpyAsync(dst, src, bytes, stream.handle()), "cuMemcpyAsync");
  if (wait) check(driver().cuStreamSynchronize(stream.handle()), "cuStreamSynchronize");
}

void copy_host(CUdeviceptr device, std::size_t device_bytes, const void* host, std::size_t host_count,
               std::size_t element_size, const std::type_info& type, bool to_device, bool wait, StreamRef stream,
               const char* who) {
  const std::string_view caller(who);
  const char* operation = to_device ? "copy_from" : "copy_to";
  const std::size_t host_bytes = host_count * element_size;  // a host range's bytes fit in size_t
  if (host_bytes != device_bytes) {
    if (caller == "DeviceSpan")
      throw InvalidArgumentError(span_name(type) + "::" + operation + ": size mismatch: the span has " +
                                  elements(device_bytes / element_size) + ", the host range has " +
                                  std::to_string(host_count));
    throw InvalidArgumentError(std::string("Buffer::") + operation + ": size mismatch: the buffer has " +
                                std::to_string(device_bytes) + " bytes, the host range has " +
                                std::to_string(host_bytes) + " (" + elements(host_count) + " of " +
                                demangle(type.name()) + ")");
  }
  // The operation's name for a closed stream's error, without building a string per copy.
  const bool span = caller == "DeviceSpan";
  const char* full = to_device ? (span ? "DeviceSpan::copy_from" : "Buffer::copy_from")
                               : (span ? "DeviceSpan::copy_to" : "Buffer::copy_to");
  const auto host_ptr = reinterpret_cast<CUdeviceptr>(host);
  if (to_device)
    copy_bytes(device, host_ptr, device_bytes, stream, wait, full);
  else
    copy_bytes(host_ptr, device, device_bytes, stream, wait, full);
}

void copy_spans(CUdeviceptr dst, CUdeviceptr src, std::size_t dst_count, std::size_t src_count,
                std::size_t element_size, const std::type_info& type, StreamRef stream) {
  if (dst_count != src_count)
    throw InvalidArgumentError(span_name(type) + " copy: size mismatch: the destination has " + elements(dst_count) +
                                ", the source has " + std::to_string(src_count));
  copy_bytes(dst, src, dst_count * element_size, stream, false, "DeviceSpan copy");
}

void fill_pattern(CUdeviceptr dst, std::uint32_t bits, std::size_t width, std::size_t count, StreamRef stream,
                  const char* operation) {
  StreamContextGuard guard(stream, operation);
  if (count == 0) return;
  const CUstream s = stream.handle();
  switch (width) {
    case 1: return check(driver().cuMemsetD8Async(dst, static_cast<unsigned char>(bits), count, s), "cuMemsetD8Async");
    case 2:
      return check(driver().cuMemsetD16Async(dst, static_cast<unsigned short>(bits), count, s), "cuMemsetD16Async");
    case 4: return check(driver().cuMemsetD32Async(dst, bits, count, s), "cuMemsetD32Async");
    default: throw InvalidArgumentError(std::string(operation) + ": a fill pattern is 1, 2 or 4 bytes");
  }
}

}  // namespace cucore::detail
