// EXPECT-ERROR: the DeviceSpan's element type is not the parameter's pointee type
// A DeviceSpan<float> given for a TypedKernel's double*.
#include <cucore/device_span.hpp>
#include <cucore/launch.hpp>

void f(cucore::StreamRef s, const cucore::TypedKernel<void(double*, int)>& k, cucore::DeviceSpan<float> out) {
  cucore::launch(s, {.grid = 1, .block = 1}, k, out, 4);
}
