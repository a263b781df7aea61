// SPDX-License-Identifier: Apache-2.0
// ncclMemAlloc and ncclMemFree's policy (core layer): which memory a buffer gets, so that peers' direct paths can
// read it in place where they can.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace cfx::core {

// `size` (> 0) bytes: on the calling thread's current device when it has one (a block peers can map where the driver
// can export one, else plain cuMemAlloc memory), else host memory same-host peers can map.
Result<void*> allocMemory(size_t size);
// Frees what allocMemory returned; InvalidArgument for any other pointer.
Status freeMemory(void* ptr);

}  // namespace cfx::core
