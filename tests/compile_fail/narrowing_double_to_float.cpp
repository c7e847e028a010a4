// EXPECT-ERROR: cucore::launch(TypedKernel): narrowing conversion
// A double given for a TypedKernel's float.
#include <cucore/launch.hpp>

void f(cucore::StreamRef s, const cucore::TypedKernel<void(float, const float*, float*, int)>& k, const float* x,
       float* y) {
  cucore::launch(s, {.grid = 1, .block = 1}, k, 2.0, x, y, 4);
}
