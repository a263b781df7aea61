// SPDX-License-Identifier: Apache-2.0
// ABI facts of our include/nccl.h. Built twice (tests/abi/CMakeLists.txt): with CUDA headers opted out, the
// CPU-only configuration, and, where CUDA is installed, with them on the include path (CFX_FACTS_WITH_CUDA=1),
// because the header takes a different path in each case.
#if !CFX_FACTS_WITH_CUDA
#define CFX_NO_CUDA_HEADERS 1
#endif
#include "abi/abi_facts.h"
#include "conflux.h"
#include "conflux_nccl_ext.h"
#include "nccl.h"

#if CFX_FACTS_WITH_CUDA && !defined(CUDART_VERSION)
#error "CUDA headers are on the include path but nccl.h did not include them"
#endif
#if !CFX_FACTS_WITH_CUDA && defined(CUDART_VERSION)
#error "nccl.h included CUDA headers despite CFX_NO_CUDA_HEADERS"
#endif

// The version macros must match the VERSION file that CMake read (the build passes its numbers in).
static_assert(NCCL_MAJOR == CFX_EXPECT_NCCL_MAJOR && NCCL_MINOR == CFX_EXPECT_NCCL_MINOR &&
                  NCCL_PATCH == CFX_EXPECT_NCCL_PATCH,
              "include/nccl.h and the VERSION file disagree on the NCCL API version");
static_assert(NCCL_VERSION_CODE == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), "NCCL_VERSION_CODE");
static_assert(CFX_MAJOR == CFX_EXPECT_MAJOR && CFX_MINOR == CFX_EXPECT_MINOR && CFX_PATCH == CFX_EXPECT_PATCH,
              "include/conflux.h and the VERSION file disagree on our release");
static_assert(CFX_VERSION_CODE == CFX_MAJOR * 10000 + CFX_MINOR * 100 + CFX_PATCH, "CFX_VERSION_CODE");

#include "abi/abi_facts_collect.inc"

#if CFX_FACTS_WITH_CUDA
cfx::abitest::AbiFacts cfx::abitest::ourAbiFactsWithCuda() { return collectAbiFacts(); }
#else
cfx::abitest::AbiFacts cfx::abitest::ourAbiFacts() { return collectAbiFacts(); }
#endif
