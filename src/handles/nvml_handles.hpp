#pragma once
// NVML's event sets (handles.hpp's rules): a device event set
// (nvmlEventSetCreate) and a system event set (nvmlSystemEventSetCreate), each
// owned by one reference-counted box that frees it through the NVML table it
// was made with (nvmlEventSetFree / nvmlSystemEventSetFree), exactly once, in
// its destructor, never throwing. The makers allocate the box before asking
// NVML for the set, so a set NVML made is never without its owner; they
// return NVML's code and leave `out` empty on failure, so the caller reports
// the failure its own way.
#include <memory>

#include "loader/toolkit.hpp"

namespace cucore::detail {

class NvmlEventSetBox {
 public:
  explicit NvmlEventSetBox(const NvmlTable& table) noexcept : table_(&table) {}
  NvmlEventSetBox(const NvmlEventSetBox&) = delete;
  NvmlEventSetBox& operator=(const NvmlEventSetBox&) = delete;
  ~NvmlEventSetBox();

  nvml::EventSet get() const noexcept { return set_; }
  const NvmlTable& table() const noexcept { return *table_; }

 private:
  friend nvml::Return create_nvml_event_set(const NvmlTable&, std::shared_ptr<NvmlEventSetBox>&);
  const NvmlTable* table_;
  nvml::EventSet set_ = nullptr;
};

class NvmlSystemEventSetBox {
 public:
  explicit NvmlSystemEventSetBox(const NvmlTable& table) noexcept : table_(&table) {}
  NvmlSystemEventSetBox(const NvmlSystemEventSetBox&) = delete;
  NvmlSystemEventSetBox& operator=(const NvmlSystemEventSetBox&) = delete;
  ~NvmlSystemEventSetBox();

  nvml::SystemEventSet get() const noexcept { return set_; }
  const NvmlTable& table() const noexcept { return *table_; }

 private:
  friend nvml::Return create_nvml_system_event_set(const NvmlTable&, std::shared_ptr<NvmlSystemEventSetBox>&);
  const NvmlTable* table_;
  nvml::SystemEventSet set_ = nullptr;
};

// nvmlEventSetCreate; `out` owns the set on nvml::SUCCESS. The table must have
// both entry points (nvml::ERROR_FUNCTION_NOT_FOUND otherwise, nothing made);
// std::bad_alloc before NVML is asked.
nvml::Return create_nvml_event_set(const NvmlTable& t, std::shared_ptr<NvmlEventSetBox>& out);
// nvmlSystemEventSetCreate (a versioned request); the same contract.
nvml::Return create_nvml_system_event_set(const NvmlTable& t, std::shared_ptr<NvmlSystemEventSetBox>& out);

}  // namespace cucore::detail
