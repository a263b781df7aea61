// SPDX-License-Identifier: Apache-2.0
// Memory that same-host peers can map and read in place (transport layer): the blocks ncclMemAlloc hands out, on a
// device (cuda_ipc/vmm_memory.h) or in host memory (shm/shm_export.h). The direct paths of both transports find
// them again by address.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace cfx::transport {

// A device block of `bytes` on the calling thread's current device that peers can map; an error where the driver
// cannot export one (the caller may fall back to plain device memory).
Result<void*> allocDeviceShareable(size_t bytes);
// Frees a block of allocDeviceShareable; false (nothing done) when `p` is not one.
Result<bool> freeDeviceShareable(void* p);
// A zero-filled host block of `bytes` that same-host peers can map.
Result<void*> allocHostExported(size_t bytes);
// Frees a block of allocHostExported; false (nothing done) when `p` is not the start of one.
bool freeHostExported(void* p);

}  // namespace cfx::transport
