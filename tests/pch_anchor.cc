// SPDX-License-Identifier: Apache-2.0
// The target that owns the tests' precompiled header (see tests/CMakeLists.txt); it has no test of its own.
#include <gtest/gtest.h>
