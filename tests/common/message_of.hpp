#pragma once
// The message of the exception of type E that `fn` throws, or a line saying
// it threw none (so a test's EXPECT on the text fails, naming why).
#include <functional>
#include <stdexcept>
#include <string>

namespace cucore::test {

template <typename E = std::exception>
std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception of the expected type)";
}

}  // namespace cucore::test
