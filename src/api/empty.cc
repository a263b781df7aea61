// SPDX-License-Identifier: Apache-2.0
// The shared library needs one source of its own; everything else comes from the api archive.
namespace cfx::api {}
