// SPDX-License-Identifier: Apache-2.0
// Memory that same-host peers can map (transport layer): over cuda_ipc's and shm's exported blocks.
#include "transport/peer_memory.h"

#include "transport/cuda_ipc/vmm_memory.h"
#include "transport/shm/shm_export.h"

namespace cfx::transport {

Result<void*> allocDeviceShareable(size_t bytes) { return cuda_ipc::allocShareable(bytes); }
Result<bool> freeDeviceShareable(void* p) { return cuda_ipc::freeShareable(p); }
Result<void*> allocHostExported(size_t bytes) { return shm::allocExported(bytes); }
bool freeHostExported(void* p) { return shm::freeExported(p); }

}  // namespace cfx::transport
