#include <cucore/adaptors.hpp>

#include <cucore/errors.hpp>

#include <cstdint>
#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>

namespace cucore {
namespace {

class StatisticsImpl final : public MemoryResource::Impl {
 public:
  explicit StatisticsImpl(MemoryResource up) : upstream(std::move(up)) {
    if (!upstream) throw InvalidArgumentError("StatisticsResourceAdaptor: the upstream resource is empty");
  }
  CUdeviceptr allocate(std::size_t size, StreamRef stream) override {
    CUdeviceptr p = upstream.impl()->allocate(size, stream);
    std::lock_guard lock(mutex);
    auto n = static_cast<std::int64_t>(size);
    counts.current_bytes += n;
    counts.total_bytes += n;
    counts.peak_bytes = std::max(counts.peak_bytes, counts.current_bytes);
    ++counts.current_count;
    ++counts.total_count;
    counts.peak_count = std::max(counts.peak_count, counts.current_count);
    return p;
  }
  void deallocate(CUdeviceptr ptr, std::size_t size, StreamRef stream) override {
    upstream.impl()->deallocate(ptr, size, stream);
    std::lock_guard lock(mutex);
    counts.current_bytes -= static_cast<std::int64_t>(size);
    --counts.current_count;
  }
  bool is_device_accessible() const noexcept override { return upstream.impl()->is_device_accessible(); }
  bool is_host_accessible() const noexcept override { return upstream.impl()->is_host_accessible(); }
  int device_id() const noexcept override { return upstream.impl()->device_id(); }
  bool is_managed() const noexcept override { return upstream.impl()->is_managed(); }

  MemoryResource upstream;
  mutable std::mutex mutex;
  AllocationCounts counts;
};

class LimitingImpl final : public MemoryResource::Impl {
 public:
  LimitingImpl(MemoryResource up, std::size_t lim) : upstream(std::move(up)), limit(lim) {
    if (!upstream) throw InvalidArgumentError("LimitingResourceAdaptor: the upstream resource is empty");
  }
  CUdeviceptr allocate(std::size_t size, StreamRef stream) override {
    {
      std::lock_guard lock(mutex);
      if (size > limit - allocated)
        throw CudaError(CUDA_ERROR_OUT_OF_MEMORY, "LimitingResourceAdaptor::allocate(" + std::to_string(size) +
                                                      " bytes; " + std::to_string(allocated) + " of the limit " +
                                                      std::to_string(limit) + " in use)");
      allocated += size;  // reserve before the upstream call so racing threads cannot overshoot
    }
    try {
      return upstream.impl()->allocate(size, stream);
    } catch (...) {
      std::lock_guard lock(mutex);
      allocated -= size;
      throw;
    }
  }
  void deallocate(CUdeviceptr ptr, std::size_t size, StreamRef stream) override {
    upstream.impl()->deallocate(ptr, size, stream);
    std::lock_guard lock(mutex);
    allocated -= size;
  }
  bool is_device_accessible() const noexcept override { return upstream.impl()->is_device_accessible(); }
  bool is_host_accessible() const noexcept override { return upstream.impl()->is_host_accessible(); }
  int device_id() const noexcept override { return upstream.impl()->device_id(); }
  bool is_managed() const noexcept override { return upstream.impl()->is_managed(); }

  MemoryResource upstream;
  std::size_t limit;
  mutable std::mutex mutex;
  std::size_t allocated = 0;
};

}  // namespace

StatisticsResourceAdaptor::StatisticsResourceAdaptor(MemoryResource upstream)
    : MemoryResource(std::make_shared<StatisticsImpl>(std::move(upstream))) {}

AllocationCounts StatisticsResourceAdaptor::counts() const {
  auto& s = static_cast<StatisticsImpl&>(*impl());
  std::lock_guard lock(s.mutex);
  return s.counts;
}

const MemoryResource& StatisticsResourceAdaptor::upstream() const {
  return static_cast<StatisticsImpl&>(*impl()).upstream;
}

LimitingResourceAdaptor::LimitingResourceAdaptor(MemoryResource upstream, std::size_t limit_bytes)
    : MemoryResource(std::make_shared<LimitingImpl>(std::move(upstream), limit_bytes)) {}

std::size_t LimitingResourceAdaptor::allocated_bytes() const {
  auto& s = static_cast<LimitingImpl&>(*impl());
  std::lock_guard lock(s.mutex);
  return s.allocated;
}

std::size_t LimitingResourceAdaptor::limit_bytes() const { return static_cast<LimitingImpl&>(*impl()).limit; }

const MemoryResource& LimitingResourceAdaptor::upstream() const {
  return static_cast<LimitingImpl&>(*impl()).upstream;
}

}  // namespace cucore
