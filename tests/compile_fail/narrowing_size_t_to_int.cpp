// EXPECT-ERROR: cucore::launch(TypedKernel): narrowing conversion
// A size_t given for a TypedKernel's int (the message lists the rule's examples).
#include <cucore/launch.hpp>

#include <cstddef>
#include <vector>

void f(cucore::StreamRef s, const cucore::TypedKernel<void(float, const float*, float*, int)>& k, const float* x,
       float* y, const std::vector<float>& host) {
  cucore::launch(s, {.grid = 1, .block = 1}, k, 2.0f, x, y, host.size());
}
