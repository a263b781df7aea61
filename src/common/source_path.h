// SPDX-License-Identifier: Apache-2.0
// Source paths as logs and status origins print them.
#pragma once

namespace cfx {

// `file` relative to src/, like NCCL's "misc/socket.cc", rather than the absolute path the build saw.
const char* relativeSource(const char* file) noexcept;

}  // namespace cfx
