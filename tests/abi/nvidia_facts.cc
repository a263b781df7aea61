// SPDX-License-Identifier: Apache-2.0
// ABI facts of NVIDIA's nccl.h, the reference. Built only where NVIDIA's header is installed, with only its
// directory on the include path, so <nccl.h> cannot resolve to ours.
#include <nccl.h>
#include <nccl_device.h>

#include "abi/abi_facts.h"
#include "abi/abi_facts_collect.inc"

cfx::abitest::AbiFacts cfx::abitest::nvidiaAbiFacts() { return collectAbiFacts(); }
