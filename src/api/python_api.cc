// SPDX-License-Identifier: Apache-2.0
// Knobs of the Python package (python/conflux) and its torch backend, which read them before the library is loaded
// (api layer). Declared here so that docs/ENV.md lists them with every other variable; the library never reads them.
#include "common/param.h"

namespace cfx::api {
namespace {

CFX_PARAM(std::string, pythonLibraryParam, "CFX_LIBRARY", "",
          "Python package (import conflux) and torch backend (import conflux.torch): the libnccl.so.2 to bind, or a "
          "folder holding it. Unset: the build of the checkout the package runs from, else the one it was installed "
          "from, else the dynamic loader's libconflux.so or libnccl.so.2. A library without cfxGetVersion (NVIDIA's) "
          "is refused.");

}  // namespace
}  // namespace cfx::api
