// SPDX-License-Identifier: Apache-2.0
// Compiled into layers that have no sources yet, so every layer is a real CMake target from the start.
namespace cfx::anchor {}
