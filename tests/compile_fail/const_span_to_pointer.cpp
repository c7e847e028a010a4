// EXPECT-ERROR: a DeviceSpan<const T> binds only to a const T* parameter
// A DeviceSpan<const float> given for a TypedKernel's float*.
#include <cucore/device_span.hpp>
#include <cucore/launch.hpp>

void f(cucore::StreamRef s, const cucore::TypedKernel<void(float*, int)>& k, cucore::DeviceSpan<const float> in) {
  cucore::launch(s, {.grid = 1, .block = 1}, k, in, 4);
}
