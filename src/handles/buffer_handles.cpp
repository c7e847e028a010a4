#include "handles/buffer_handles.hpp"

#include <cucore/errors.hpp>

#include <exception>
#include <string>

#include "errors/release.hpp"

namespace cucore::detail {

BufferBox::~BufferBox() {
  if (!free || !ptr) return;
  // Destructors never throw; a failed free leaves the memory to the pool's owner, and is reported.
  try {
    free(*this, stream, true);
  } catch (const LibraryNotFoundError&) {
    // No driver: it holds nothing that could leak (releases never load it).
  } catch (const CudaError& e) {
    if (e.code() != CUDA_ERROR_DEINITIALIZED) report_release(std::string("freeing a Buffer's memory: ") + e.what());
  } catch (const std::exception& e) {
    report_release(std::string("freeing a Buffer's memory: ") + e.what());
  } catch (...) {
    report_release("freeing a Buffer's memory failed");
  }
}

}  // namespace cucore::detail
