// EXPECT-ERROR: a const Buffer binds only to a pointer-to-const parameter (const T*)
// A const Buffer given for a TypedKernel's writable pointer.
#include <cucore/buffer.hpp>
#include <cucore/launch.hpp>

void f(cucore::StreamRef s, const cucore::TypedKernel<void(float, float*)>& k, const cucore::Buffer& b) {
  cucore::launch(s, {.grid = 1, .block = 1}, k, 1.0f, b);
}
