// EXPECT-ERROR: fill<T>: T must be 1, 2 or 4 bytes
// A fill with a double: no 8-byte memset.
#include <cucore/buffer.hpp>

void f(cucore::StreamRef s, cucore::Buffer& b) { b.fill(1.0, s); }
