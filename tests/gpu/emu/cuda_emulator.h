// SPDX-License-Identifier: Apache-2.0
// The entry points of the CPU stand-in for the CUDA driver (cuda_emulator.cc), declared for the HIP stand-in
// (hip_emulator.cc), which runs on them. Both files include this, so the compiler holds the definitions to it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/cuda_driver.h"

#define CFX_EMU_API extern "C" __attribute__((visibility("default"))) cfx::cuda::CUresult

namespace cfx::emu {
using CUdeviceptr = cuda::CUdeviceptr;
using CUhostFn = cuda::CUhostFn;
}  // namespace cfx::emu

CFX_EMU_API cuInit(unsigned flags);
CFX_EMU_API cuGetErrorString(cfx::cuda::CUresult rc, const char** text);
CFX_EMU_API cuDeviceGet(int* device, int ordinal);
CFX_EMU_API cuDeviceGetCount(int* count);
CFX_EMU_API cuDeviceGetAttribute(int* value, int attr, int device);
CFX_EMU_API cuDevicePrimaryCtxRetain(void** ctx, int device);
CFX_EMU_API cuDevicePrimaryCtxRelease_v2(int device);
CFX_EMU_API cuCtxGetCurrent(void** ctx);
CFX_EMU_API cuCtxSetCurrent(void* ctx);
CFX_EMU_API cuCtxPushCurrent_v2(void* ctx);
CFX_EMU_API cuCtxPopCurrent_v2(void** ctx);
CFX_EMU_API cuCtxGetDevice(int* device);
CFX_EMU_API cuPointerGetAttribute(void* data, int attr, cfx::emu::CUdeviceptr p);
CFX_EMU_API cuMemAlloc_v2(cfx::emu::CUdeviceptr* p, size_t bytes);
CFX_EMU_API cuMemFree_v2(cfx::emu::CUdeviceptr p);
CFX_EMU_API cuMemHostAlloc(void** p, size_t bytes, unsigned flags);
CFX_EMU_API cuMemFreeHost(void* p);
CFX_EMU_API cuMemHostGetDevicePointer_v2(cfx::emu::CUdeviceptr* d, void* p, unsigned flags);
CFX_EMU_API cuMemHostRegister_v2(void* p, size_t bytes, unsigned flags);
CFX_EMU_API cuMemHostUnregister(void* p);
CFX_EMU_API cuMemGetAddressRange_v2(cfx::emu::CUdeviceptr* base, size_t* size, cfx::emu::CUdeviceptr p);
CFX_EMU_API cuMemcpyDtoHAsync_v2(void* dst, cfx::emu::CUdeviceptr src, size_t bytes, void* stream);
CFX_EMU_API cuMemcpyHtoDAsync_v2(cfx::emu::CUdeviceptr dst, const void* src, size_t bytes, void* stream);
CFX_EMU_API cuMemcpyDtoDAsync_v2(cfx::emu::CUdeviceptr dst, cfx::emu::CUdeviceptr src, size_t bytes, void* stream);
CFX_EMU_API cuMemcpyAsync(cfx::emu::CUdeviceptr dst, cfx::emu::CUdeviceptr src, size_t bytes, void* stream);
CFX_EMU_API cuMemsetD8Async(cfx::emu::CUdeviceptr dst, unsigned char value, size_t bytes, void* stream);
CFX_EMU_API cuStreamCreate(void** stream, unsigned flags);
CFX_EMU_API cuStreamDestroy_v2(void* stream);
CFX_EMU_API cuStreamSynchronize(void* stream);
CFX_EMU_API cuStreamGetCaptureInfo_v2(void* stream, int* status, unsigned long long* id, void** graph,
                                      const void** deps, size_t* numDeps);
CFX_EMU_API cuStreamIsCapturing(void* stream, int* status);
CFX_EMU_API cuThreadExchangeStreamCaptureMode(int* mode);
CFX_EMU_API cuStreamBeginCapture_v2(void* stream, int mode);
CFX_EMU_API cuStreamEndCapture(void* stream, void** graph);
CFX_EMU_API cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags);
CFX_EMU_API cuGraphLaunch(void* exec, void* stream);
CFX_EMU_API cuGraphExecDestroy(void* exec);
CFX_EMU_API cuGraphDestroy(void* graph);
CFX_EMU_API cuUserObjectCreate(void** object, void* p, cfx::emu::CUhostFn destroy, unsigned initialRefcount,
                               unsigned flags);
CFX_EMU_API cuUserObjectRelease(void* object, unsigned count);
CFX_EMU_API cuGraphRetainUserObject(void* graph, void* object, unsigned count, unsigned flags);
CFX_EMU_API cuStreamWaitValue32_v2(void* stream, cfx::emu::CUdeviceptr addr, uint32_t value, unsigned flags);
CFX_EMU_API cuStreamWriteValue32_v2(void* stream, cfx::emu::CUdeviceptr addr, uint32_t value, unsigned flags);
CFX_EMU_API cuLaunchHostFunc(void* stream, cfx::emu::CUhostFn fn, void* userData);
CFX_EMU_API cuEventCreate(void** event, unsigned flags);
CFX_EMU_API cuEventDestroy_v2(void* event);
CFX_EMU_API cuEventRecord(void* event, void* stream);
CFX_EMU_API cuEventQuery(void* event);
CFX_EMU_API cuEventSynchronize(void* event);
CFX_EMU_API cuStreamWaitEvent(void* stream, void* event, unsigned flags);
CFX_EMU_API cuIpcGetMemHandle(void* handle, cfx::emu::CUdeviceptr p);
CFX_EMU_API cuIpcOpenMemHandle_v2(cfx::emu::CUdeviceptr* p, cfx::cuda::CUipcMemHandle handle, unsigned flags);
CFX_EMU_API cuIpcCloseMemHandle(cfx::emu::CUdeviceptr p);
CFX_EMU_API cuModuleLoadData(void** module, const void* image);
CFX_EMU_API cuModuleUnload(void* module);
CFX_EMU_API cuModuleGetFunction(void** fn, void* module, const char* name);
CFX_EMU_API cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned sharedBytes, void* stream, void** params, void** extra);
CFX_EMU_API cuMemGetAllocationGranularity(size_t* granularity, const cfx::cuda::MemAllocationProp* prop, int option);
CFX_EMU_API cuMemCreate(cfx::cuda::CUmemGenericAllocationHandle* handle, size_t bytes,
                        const cfx::cuda::MemAllocationProp* prop, unsigned long long flags);
CFX_EMU_API cuMemRelease(cfx::cuda::CUmemGenericAllocationHandle handle);
CFX_EMU_API cuMemAddressReserve(cfx::emu::CUdeviceptr* p, size_t bytes, size_t alignment, cfx::emu::CUdeviceptr addr,
                                unsigned long long flags);
CFX_EMU_API cuMemAddressFree(cfx::emu::CUdeviceptr p, size_t bytes);
CFX_EMU_API cuMemMap(cfx::emu::CUdeviceptr p, size_t bytes, size_t offset,
                     cfx::cuda::CUmemGenericAllocationHandle handle, unsigned long long flags);
CFX_EMU_API cuMemUnmap(cfx::emu::CUdeviceptr p, size_t bytes);
CFX_EMU_API cuMemSetAccess(cfx::emu::CUdeviceptr p, size_t bytes, const cfx::cuda::MemAccessDesc* desc, size_t count);
CFX_EMU_API cuMemExportToShareableHandle(void* shareable, cfx::cuda::CUmemGenericAllocationHandle handle, int type,
                                         unsigned long long flags);
CFX_EMU_API cuMemImportFromShareableHandle(cfx::cuda::CUmemGenericAllocationHandle* handle, void* osHandle, int type);

// Tells tests they run on a stand-in (1), and what it did in this process (see cuda_emulator.cc).
extern "C" __attribute__((visibility("default"))) int cfxCudaEmulator();
extern "C" __attribute__((visibility("default"))) long long cfxCudaEmulatorCount(const char* what);
