// SPDX-License-Identifier: Apache-2.0
// AMD GPUs: the HIP runtime (libamdhip64, loaded with dlopen) behind the same Driver table as CUDA (common layer).
//
// Everything above the common layer speaks the CUDA driver's vocabulary (cuda_driver.h). HIP's API mirrors it
// closely, so where no CUDA device exists but an AMD one does (/dev/kfd), driver() fills the table with thin
// adapters over HIP: the same stream protocol, staging, CUDA-IPC-style handles (xGMI peers through
// hipIpcOpenMemHandle) and kernels (the hipcc code object bundles beside the fatbins) then run on AMD GPUs. The
// adapters translate what differs: device attribute numbers, memory type values (changed in ROCm 6), the IPC flag,
// deviceptr-as-void* signatures, hipStreamWaitValue32's mask. Entry points HIP gained late (hipLaunchHostFunc in
// ROCm 5.3+, graph user objects) are optional: without a host-function entry there is no stream protocol, so
// the runtime is not used; without user objects, graph capture is refused.
//
// Where HIP's stream waits differ from CUDA's: ROCm documents hipStreamWaitValueGte as a plain `*ptr >= value`,
// not CUDA's cyclic compare, so the adapters offer hipStreamWaitValue64 too and the stream flag is waited on as 64
// bits there (core/device_stream.h), which never wraps; the HIP stand-in compares as ROCm documents, and the flag
// starts just below 2^32, so any device test with three ops on a communicator crosses the 32-bit boundary under
// both compares. ROCm also documents the waited word as signal memory (hipExtMallocWithFlags); its runtime
// (ROCclr) waits with a small polling kernel on any memory it knows, pinned host memory included, and needs a
// signal only when told to wait in the command processor (GPU_STREAMOPS_CP_WAIT). The library waits on mapped
// pinned memory, which suits the default. That kernel polls a word the host writes, never another process's
// kernel; with several ranks on one AMD GPU it must run beside the other processes' queues, which AMD's hardware
// scheduler does without an MPS-like service. Both unverified on hardware.
//
// No AMD GPU has been available to this project. Checked by resolving every name against ROCm 5.2's libamdhip64
// (tests/unit/common/hip_driver_test.cc), and by the device tests run over these adapters on a CPU stand-in for
// the runtime built against ROCm 5.2's header (tests/gpu/emu/hip_emulator.cc, ctest EmulatedHip.*): that checks
// the adapters' translations against ROCm's declarations, not a GPU's behaviour.
#pragma once

#include <string>
#include <vector>

#include "common/cuda_driver.h"

namespace cfx::cuda {

// Loads libamdhip64 (6, then 5) and fills `table` with adapters; null with the reason in *why when HIP is absent,
// lacks a required entry point, or finds no device. Called by driver() only where /dev/kfd exists.
const Driver* loadHipDriver(Driver* table, std::string* why);

// The required HIP entry points `lib` (a dlopen handle of libamdhip64) lacks; empty when all resolve. For tests.
std::vector<std::string> hipMissingEntryPoints(void* lib);

}  // namespace cfx::cuda
