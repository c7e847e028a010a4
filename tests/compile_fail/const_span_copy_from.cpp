// EXPECT-ERROR: DeviceSpan<const T>::copy_from: the span is read-only
// A copy into a DeviceSpan<const float> (from a const Buffer).
#include <cucore/buffer.hpp>

#include <vector>

void f(cucore::StreamRef s, const cucore::Buffer& b, const std::vector<float>& host) {
  b.as<float>().copy_from(host, s);
}
