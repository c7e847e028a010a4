// EXPECT-ERROR: the host range must be contiguous (std::ranges::contiguous_range
// A std::list (not contiguous) copied into a Buffer.
#include <cucore/buffer.hpp>

#include <list>

void f(cucore::StreamRef s, cucore::Buffer& b, const std::list<float>& host) { b.copy_from(host, s); }
