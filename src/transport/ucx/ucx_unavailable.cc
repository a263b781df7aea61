// SPDX-License-Identifier: Apache-2.0
// The UCX transport in a build without UCX (CMake found no ucx package): selecting it is a clear error
// (transport layer). Compiled instead of the UCX sources.
#include "common/log.h"
#include "transport/ucx/ucx_transport.h"

namespace cfx::transport::ucx {

// Never instantiated here; complete so that UcxTransport's unique_ptr member can be destroyed.
class UcxProxy {};

bool UcxTransport::available() { return false; }

Result<std::unique_ptr<UcxTransport>> UcxTransport::create(Bootstrap&, const std::vector<PeerInfo>&,
                                                           const std::vector<bool>&, Doorbell&, const UcxOptions&,
                                                           Endpoints&) {
  return Status::error(Errc::InvalidUsage,
                       "the UCX transport was selected (NCCL_NET/CFX_NET), but this library was built without UCX: "
                       "install UCX's development package and rebuild (CMake -DCFX_WITH_UCX=ON), or select Socket");
}

UcxTransport::~UcxTransport() = default;

void UcxTransport::abort() {}

}  // namespace cfx::transport::ucx
