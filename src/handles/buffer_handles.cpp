#include "handles/buffer_handles.hpp"

namespace cucore::detail {

BufferBox::~BufferBox() {
  if (!free || !ptr) return;
  try {
    free(*this, stream, true);
  } catch (...) {
    // Destructors never throw; a failed free leaves the memory to the pool's owner.
  }
}

}  // namespace cucore::detail
