// EXPECT-ERROR: the host range's element type differs from the span's
// A std::vector<double> copied into a DeviceSpan<float>.
#include <cucore/device_span.hpp>

#include <vector>

void f(cucore::StreamRef s, cucore::DeviceSpan<float> d, const std::vector<double>& host) { d.copy_from(host, s); }
