#pragma once
// Single-flight builds through a program cache: of the threads that miss one
// (cache, key) at once, the first makes the entry and the others wait for its
// result (or its exception). Program::compile builds through it, and so does
// cucore.compute's linking of its kernels.
#include <cucore/object_code.hpp>
#include <cucore/program_cache.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace cucore::detail {

// How many flights have landed so far: taken before the lookup that missed,
// so that single_flight looks in the cache again for a caller that missed
// just before another thread's flight of the same key landed.
std::uint64_t flights_landed() noexcept;

// The entry for `key`, made by `make` in one thread; `make` also puts it in
// the cache (under the key it is handed, which it may correct) before the
// waiting threads are given it.
ObjectCode single_flight(ProgramCache& cache, const std::string& key, CodeType target, std::uint64_t landed_before,
                         const std::function<ObjectCode(std::string& key)>& make);

}  // namespace cucore::detail
