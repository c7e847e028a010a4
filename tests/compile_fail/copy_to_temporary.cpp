// EXPECT-ERROR: copy_to: the host range is a temporary
// A copy into a temporary std::vector, gone before the stream writes it.
#include <cucore/buffer.hpp>

#include <vector>

void f(cucore::StreamRef s, const cucore::Buffer& b) { b.copy_to(std::vector<float>(4), s); }
