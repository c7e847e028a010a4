#pragma once
// The DLPack ABI: the definitions cucore uses from dlpack.h v1.3
// (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h), in a namespace of
// their own so that they never clash with a dlpack.h the program also includes
// (PyTorch's ATen/dlpack.h, ...): the layouts are the same, so a
// ::DLManagedTensor* from another library converts with reinterpret_cast (and
// cucore::StridedMemoryView::from_dlpack takes it as it is). Tensors (0.x
// DLManagedTensor, capsule "dltensor"; 1.x DLManagedTensorVersioned, capsule
// "dltensor_versioned") and the C exchange API (a type's
// __dlpack_c_exchange_api__, a PyCapsule "dlpack_exchange_api" holding a
// DLPackExchangeAPI*).
//
// The vendored definitions are from dlpack.h:
//   Copyright (c) 2017 - by Contributors
//   Licensed under the Apache License, Version 2.0 (the "License"); you may not
//   use this file except in compliance with the License. You may obtain a copy
//   of the License at http://www.apache.org/licenses/LICENSE-2.0
//   Unless required by applicable law or agreed to in writing, software
//   distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
//   WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
//   License for the specific language governing permissions and limitations
//   under the License.
#include <cstdint>

namespace cucore::dlpack {

// ---- vendored from dlpack.h v1.3 ---------------------------------------------------

constexpr uint32_t kMajor = 1;  // DLPACK_MAJOR_VERSION
constexpr uint32_t kMinor = 3;  // DLPACK_MINOR_VERSION

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;    // may be NULL when ndim == 0
  int64_t* strides;  // in elements; NULL only before DLPack 1.2 (meaning compact row-major) or when ndim == 0
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

constexpr uint64_t kDLFlagBitMaskReadOnly = 1ULL << 0;    // DLPACK_FLAG_BITMASK_READ_ONLY
constexpr uint64_t kDLFlagBitMaskIsCopied = 1ULL << 1;    // DLPACK_FLAG_BITMASK_IS_COPIED

struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

// The C exchange API (`__dlpack_c_exchange_api__`). The functions taking a
// PyObject* are called with the GIL held; on failure they return -1 with a
// Python exception set.
using DLPackManagedTensorAllocator = int (*)(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                                             void (*SetError)(void* error_ctx, const char* kind, const char* message));
// An owning tensor for `py_object` (of the type the API came from); no stream synchronization.
using DLPackManagedTensorFromPyObjectNoSync = int (*)(void* py_object, DLManagedTensorVersioned** out);
// A non-owning description of `py_object`, valid until control returns; may be NULL in the table.
using DLPackDLTensorFromPyObjectNoSync = int (*)(void* py_object, DLTensor* out);
// The producer's current work stream on a device (NULL for the CPU).
using DLPackCurrentWorkStream = int (*)(DLDeviceType device_type, int32_t device_id, void** out_current_stream);
// A producer object owning `tensor` (stolen).
using DLPackManagedTensorToPyObjectNoSync = int (*)(DLManagedTensorVersioned* tensor, void** out_py_object);

struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader* prev_api;  // an older version's table, or NULL
};

struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
};

// ---- names of the Python protocol -----------------------------------------------------

constexpr const char* kExchangeApiCapsule = "dlpack_exchange_api";
constexpr const char* kExchangeApiAttr = "__dlpack_c_exchange_api__";
constexpr const char* kExchangeApiOldAttr = "__c_dlpack_exchange_api__";  // before DLPack 1.3's name

}  // namespace cucore::dlpack
