// SPDX-License-Identifier: Apache-2.0
// The UCX transport's link: its owner-driven hook and its peer probe (transport layer). Nothing here calls UCX: the
// proxy does.
#include "transport/ucx/ucx_connection.h"

#include <signal.h>

#include <cerrno>

namespace cfx::transport::ucx {

UcxLink::UcxLink(int peer, int channel, std::string description, const FifoGeometry& geometry,
                 std::shared_ptr<ProxyWaker> waker, pid_t probePid)
    : ProxiedLink(peer, channel, std::move(description), geometry, kSlotRoom, {std::move(waker)}, "ucx"),
      probePid_(probePid) {}

bool UcxLink::driveInline() {
  if (!gate_) return false;
  std::unique_lock<std::mutex> lock(gate_->mutex, std::try_to_lock);
  if (!lock.owns_lock() || !gate_->drive) return false;
  gate_->ticks.fetch_add(1, std::memory_order_relaxed);
  gate_->drive();
  return true;
}

bool UcxLink::driveFromOwner(link::OwnerMoment moment) {
  // Inline progress (ucx_proxy.h): a round sends what was posted, and posts the receive into a released slot.
  const bool drove = driveInline();
  // An empty recv ring is looked at again either way: a round of the proxy's may have published meanwhile.
  return drove || moment == link::OwnerMoment::RecvEmpty;
}

Status UcxLink::check() {
  if (!failed() && probePid_ > 0 && ::kill(probePid_, 0) != 0 && errno == ESRCH) {
    fail(Status::error(Errc::RemoteError, strprintf("ucx: %s exited (its process is gone); check that process for "
                                                    "its own error",
                                                    description().c_str())));
  }
  return status();
}

}  // namespace cfx::transport::ucx
