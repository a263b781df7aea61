// SPDX-License-Identifier: Apache-2.0
// What the kernel files need from their compiler (primitives layer, device code): nvcc provides the CUDA built-ins
// implicitly; hipcc (Clang's HIP mode, AMD GPUs) needs its runtime header for the same names (blockIdx,
// __fadd_rn, __longlong_as_double...). The kernels themselves are written once, against these names.
#pragma once

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif
#include <cstring>
