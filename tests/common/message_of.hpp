#pragma once
// What tests compare error messages with: the message of the exception of
// type E that `fn` throws, or a line saying it threw none (so a test's EXPECT
// on the text fails, naming why); a path as messages quote it.
#include <filesystem>
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

// 'path', as cucore's messages quote paths (built without
// operator+(const char*, std::string&&), which GCC 12's -Wrestrict misreads).
inline std::string in_quotes(const std::filesystem::path& p) {
  std::string s(1, '\'');
  s += p.string();
  s += '\'';
  return s;
}

}  // namespace cucore::test
