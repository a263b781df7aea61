// SPDX-License-Identifier: Apache-2.0
// What one nccl.h says about the ABI, as data, so that two headers that cannot share a translation unit can be
// compared (tests/abi). Deliberately includes no nccl.h itself.
#pragma once

#include <map>
#include <string>

namespace cfx::abitest {

struct AbiFacts {
  // sizeof/offsetof/alignof, enumerator values, macro values, initializer field values. Floats are stored as
  // their bit pattern and pointers as integers.
  std::map<std::string, long long> values;
  // Function name -> its type as the compiler spells it, e.g. "ncclResult_t (*)(int*)"; also the types of
  // selected macros and enums' underlying types.
  std::map<std::string, std::string> types;
  std::map<std::string, std::string> strings;  // string macros (NCCL_SUFFIX)
};

// Each is defined only where its translation unit can be built; see tests/abi/CMakeLists.txt.
AbiFacts nvidiaAbiFacts();       // NVIDIA's nccl.h and nccl_device.h (CFX_HAVE_NVIDIA_NCCL_H)
AbiFacts ourAbiFacts();          // include/nccl.h + conflux_nccl_ext.h, CUDA headers opted out
AbiFacts ourAbiFactsWithCuda();  // the same, with CUDA headers on the include path (CFX_HAVE_CUDA_HEADERS)

}  // namespace cfx::abitest
