// SPDX-License-Identifier: Apache-2.0
// common/cuda_driver.h declares the few driver types and constants Conflux passes to libcuda.so.1 instead of
// including cuda.h (the library must build and run without the toolkit). Here they are compared with the
// toolkit's own header: a wrong value or offset would pass every host test and corrupt calls on a GPU.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "common/cuda_driver.h"

namespace cfx::cuda {
namespace {

#define CFX_SAME_FIELD(ours, theirs)                                                  \
  EXPECT_EQ(offsetof(Memcpy2D, ours), offsetof(CUDA_MEMCPY2D, theirs)) << #ours;      \
  EXPECT_EQ(sizeof(Memcpy2D::ours), sizeof(CUDA_MEMCPY2D::theirs)) << #ours

TEST(CudaDriverLayout, Memcpy2DIsCudasStruct) {
  EXPECT_EQ(sizeof(Memcpy2D), sizeof(CUDA_MEMCPY2D));
  CFX_SAME_FIELD(srcXInBytes, srcXInBytes);
  CFX_SAME_FIELD(srcY, srcY);
  CFX_SAME_FIELD(srcMemoryType, srcMemoryType);
  CFX_SAME_FIELD(srcHost, srcHost);
  CFX_SAME_FIELD(srcDevice, srcDevice);
  CFX_SAME_FIELD(srcArray, srcArray);
  CFX_SAME_FIELD(srcPitch, srcPitch);
  CFX_SAME_FIELD(dstXInBytes, dstXInBytes);
  CFX_SAME_FIELD(dstY, dstY);
  CFX_SAME_FIELD(dstMemoryType, dstMemoryType);
  CFX_SAME_FIELD(dstHost, dstHost);
  CFX_SAME_FIELD(dstDevice, dstDevice);
  CFX_SAME_FIELD(dstArray, dstArray);
  CFX_SAME_FIELD(dstPitch, dstPitch);
  CFX_SAME_FIELD(WidthInBytes, WidthInBytes);
  CFX_SAME_FIELD(Height, Height);
}

TEST(CudaDriverLayout, ConstantsAreCudasValues) {
  EXPECT_EQ(kSuccess, CUDA_SUCCESS);
  EXPECT_EQ(kErrorNotReady, CUDA_ERROR_NOT_READY);
  EXPECT_EQ(kErrorInvalidValue, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(kPointerAttrContext, CU_POINTER_ATTRIBUTE_CONTEXT);
  EXPECT_EQ(kPointerAttrMemoryType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
  EXPECT_EQ(kPointerAttrIsManaged, CU_POINTER_ATTRIBUTE_IS_MANAGED);
  EXPECT_EQ(kPointerAttrDeviceOrdinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
  EXPECT_EQ(kPointerAttrRangeStart, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
  EXPECT_EQ(kPointerAttrRangeSize, CU_POINTER_ATTRIBUTE_RANGE_SIZE);
  EXPECT_EQ(kMemoryTypeHost, static_cast<unsigned>(CU_MEMORYTYPE_HOST));
  EXPECT_EQ(kMemoryTypeDevice, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(kMemoryTypeUnified, static_cast<unsigned>(CU_MEMORYTYPE_UNIFIED));
  EXPECT_EQ(kStreamNonBlocking, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(kEventBlockingSync, static_cast<unsigned>(CU_EVENT_BLOCKING_SYNC));
  EXPECT_EQ(kEventDisableTiming, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING));
  EXPECT_EQ(kEventInterprocess, static_cast<unsigned>(CU_EVENT_INTERPROCESS));
  EXPECT_EQ(kHostAllocPortable, static_cast<unsigned>(CU_MEMHOSTALLOC_PORTABLE));
  EXPECT_EQ(kHostAllocDeviceMap, static_cast<unsigned>(CU_MEMHOSTALLOC_DEVICEMAP));
  EXPECT_EQ(kStreamWaitValueGeq, static_cast<unsigned>(CU_STREAM_WAIT_VALUE_GEQ));
  EXPECT_EQ(kIpcLazyEnablePeerAccess, static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  EXPECT_EQ(kStreamCaptureNone, CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT_EQ(kStreamCaptureActive, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(kStreamCaptureModeRelaxed, CU_STREAM_CAPTURE_MODE_RELAXED);
  EXPECT_EQ(kUserObjectNoDestructorSync, static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  EXPECT_EQ(kGraphUserObjectMove, static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE));
  EXPECT_EQ(kDeviceAttrPciBusId, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
  EXPECT_EQ(kDeviceAttrPciDeviceId, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
  EXPECT_EQ(kDeviceAttrPciDomainId, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
  EXPECT_EQ(kDeviceAttrComputeCapabilityMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  EXPECT_EQ(kDeviceAttrComputeCapabilityMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  EXPECT_EQ(kDeviceAttrMultiprocessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  EXPECT_EQ(sizeof(CUipcMemHandle), sizeof(::CUipcMemHandle));
  EXPECT_EQ(sizeof(CUipcEventHandle), sizeof(::CUipcEventHandle));
  EXPECT_EQ(sizeof(CUdeviceptr), sizeof(::CUdeviceptr));
  EXPECT_EQ(kDeviceAttrVirtualMemoryManagement, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
  EXPECT_EQ(kDeviceAttrHandleTypePosixFd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
  EXPECT_EQ(kMemAllocationTypePinned, CU_MEM_ALLOCATION_TYPE_PINNED);
  EXPECT_EQ(kMemHandleTypePosixFd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(kMemLocationTypeDevice, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(kMemAccessReadWrite, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(kMemAllocGranularityRecommended, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  EXPECT_EQ(sizeof(CUmemGenericAllocationHandle), sizeof(::CUmemGenericAllocationHandle));
}

TEST(CudaDriverLayout, VirtualMemoryStructsAreCudas) {
  EXPECT_EQ(sizeof(MemLocation), sizeof(CUmemLocation));
  EXPECT_EQ(offsetof(MemLocation, type), offsetof(CUmemLocation, type));
  EXPECT_EQ(offsetof(MemLocation, id), offsetof(CUmemLocation, id));
  EXPECT_EQ(sizeof(MemAllocationProp), sizeof(CUmemAllocationProp));
  EXPECT_EQ(offsetof(MemAllocationProp, type), offsetof(CUmemAllocationProp, type));
  EXPECT_EQ(offsetof(MemAllocationProp, requestedHandleTypes), offsetof(CUmemAllocationProp, requestedHandleTypes));
  EXPECT_EQ(offsetof(MemAllocationProp, location), offsetof(CUmemAllocationProp, location));
  EXPECT_EQ(offsetof(MemAllocationProp, win32HandleMetaData), offsetof(CUmemAllocationProp, win32HandleMetaData));
  EXPECT_EQ(offsetof(MemAllocationProp, allocFlags), offsetof(CUmemAllocationProp, allocFlags));
  EXPECT_EQ(sizeof(MemAllocationProp::allocFlags), sizeof(CUmemAllocationProp::allocFlags));
  EXPECT_EQ(sizeof(MemAccessDesc), sizeof(CUmemAccessDesc));
  EXPECT_EQ(offsetof(MemAccessDesc, location), offsetof(CUmemAccessDesc, location));
  EXPECT_EQ(offsetof(MemAccessDesc, flags), offsetof(CUmemAccessDesc, flags));
}

TEST(CudaDriverLayout, SmallCopiesGoAsTwoOrMoreRowsThatCoverEveryByte) {
  EXPECT_EQ(smallCopyRows(0), 0u);
  EXPECT_EQ(smallCopyRows(1), 0u);  // one byte cannot be rows; it goes in one piece
  EXPECT_EQ(smallCopyRows(1025), 0u);
  EXPECT_EQ(smallCopyRows(4096), 0u);
  EXPECT_EQ(smallCopyRows(1024), 2u);
  EXPECT_EQ(smallCopyRows(8), 2u);
  EXPECT_EQ(smallCopyRows(9), 3u);
  EXPECT_EQ(smallCopyRows(7), 7u);
  EXPECT_EQ(smallCopyRows(1021), 1021u);  // a prime: rows of one byte
  for (size_t bytes = 2; bytes <= 1024; ++bytes) {
    const size_t rows = smallCopyRows(bytes);
    ASSERT_GE(rows, 2u) << bytes;
    EXPECT_EQ(bytes % rows, 0u) << bytes;
  }
}

}  // namespace
}  // namespace cfx::cuda
