#include "handles/nvml_handles.hpp"

#include <string>

#include "errors/release.hpp"

namespace cucore::detail {
namespace {

// NVML's codes by number and its own text: their names are the system layer's.
void report_nvml_release(const NvmlTable& t, nvml::Return r, const char* call) noexcept {
  if (r == nvml::SUCCESS) return;
  try {
    const char* text = t.nvmlErrorString ? t.nvmlErrorString(r) : nullptr;
    report_release(std::string(call) + " failed: nvmlReturn_t " + std::to_string(r) +
                   (text ? std::string(" (") + text + ")" : ""));
  } catch (...) {  // a message that cannot be built is dropped: a release never throws
  }
}

}  // namespace

NvmlEventSetBox::~NvmlEventSetBox() {
  if (set_) report_nvml_release(*table_, table_->nvmlEventSetFree(set_), "nvmlEventSetFree");
}

NvmlSystemEventSetBox::~NvmlSystemEventSetBox() {
  if (!set_) return;
  nvml::SystemEventSetFreeRequest_v1 request{nvml::kSystemEventSetFreeRequest_v1, set_};
  report_nvml_release(*table_, table_->nvmlSystemEventSetFree(&request), "nvmlSystemEventSetFree");
}

nvml::Return create_nvml_event_set(const NvmlTable& t, std::shared_ptr<NvmlEventSetBox>& out) {
  out.reset();
  if (!t.nvmlEventSetCreate || !t.nvmlEventSetFree) return nvml::ERROR_FUNCTION_NOT_FOUND;
  auto box = std::make_shared<NvmlEventSetBox>(t);
  nvml::EventSet set = nullptr;
  const nvml::Return r = t.nvmlEventSetCreate(&set);
  if (r != nvml::SUCCESS) return r;
  box->set_ = set;
  out = std::move(box);
  return r;
}

nvml::Return create_nvml_system_event_set(const NvmlTable& t, std::shared_ptr<NvmlSystemEventSetBox>& out) {
  out.reset();
  if (!t.nvmlSystemEventSetCreate || !t.nvmlSystemEventSetFree) return nvml::ERROR_FUNCTION_NOT_FOUND;
  auto box = std::make_shared<NvmlSystemEventSetBox>(t);
  nvml::SystemEventSetCreateRequest_v1 request{nvml::kSystemEventSetCreateRequest_v1, nullptr};
  const nvml::Return r = t.nvmlSystemEventSetCreate(&request);
  if (r != nvml::SUCCESS) return r;
  box->set_ = request.set;
  out = std::move(box);
  return r;
}

}  // namespace cucore::detail
