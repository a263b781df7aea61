// SPDX-License-Identifier: Apache-2.0
// How an exported C entry point is defined (api layer): NCCL's profiling-interface pattern, where pnccl<Name> is
// the implementation and nccl<Name> a weak alias at the same address.
//
//   CFX_API ncclResult_t pncclAllReduce(const void* sendbuff, ..., cudaStream_t stream) {
//     return api::call("ncclAllReduce", comm, [&] { ... });
//   }
//   CFX_NCCL_ALIAS(ncclAllReduce)
//
// The definition must follow the declaration in nccl.h (or conflux_nccl_ext.h) exactly, so include that header
// first: CFX_NCCL_ALIAS takes the alias's type from pnccl<Name>, and a signature drift then fails to compile
// instead of breaking callers. Do not add noexcept to these definitions (the headers' declarations have none,
// and C++17 makes it part of the type); keep exceptions inside through api::call instead.
//
// Result in libnccl.so.2 (checked by tests/abi/check_symbols.sh):
//   T pncclAllReduce   strong, default visibility
//   W ncclAllReduce    weak, same address
// so a profiler or shim can define its own strong ncclAllReduce (in the executable or an LD_PRELOADed library)
// and still reach ours through pncclAllReduce, exactly as with NVIDIA's library.
//
// cfx* extensions have no twin: define them with CFX_API only.
#pragma once

// Exported with default visibility (the library is built with -fvisibility=hidden) and C linkage.
#define CFX_API extern "C" __attribute__((visibility("default")))

// Declares nccl<Name> as a weak, exported alias of the p<name> definition that precedes it in the same
// translation unit. `name` is the public name, e.g. CFX_NCCL_ALIAS(ncclAllReduce). The pragmas silence the
// deprecation warning that naming pncclResetDebugInit would otherwise raise.
#define CFX_NCCL_ALIAS(name)                                                                                \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"") extern "C" \
      __attribute__((weak, alias("p" #name), visibility("default"))) __typeof__(p##name) name;              \
  _Pragma("GCC diagnostic pop")
