// SPDX-License-Identifier: Apache-2.0
// The bootstrap's knobs (transport layer): declared once here, read by core/ through readBootstrapParams() when a
// communicator is created, and passed down as BootstrapOptions. NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY also
// choose the socket transport's interface: read them from BootstrapParams rather than declaring them again.
#include <strings.h>
#include <sys/socket.h>

#include <chrono>
#include <mutex>
#include <string>

#include "common/log.h"
#include "common/param.h"
#include "transport/bootstrap/bootstrap.h"

namespace cfx::transport {

namespace {

CFX_PARAM(std::string, socketIfName, "NCCL_SOCKET_IFNAME", "",
          "IP interfaces for the bootstrap and the socket transport: a comma list of name prefixes (eth,ib); a "
          "leading ^ excludes (^docker,lo); = makes the names exact (=eth0, ^=docker0). Unset: ib*, then the "
          "interface in NCCL_COMM_ID's subnet, then anything but docker*/lo*/virbr*, then docker*, lo*, virbr*.");
CFX_PARAM(std::string, socketFamily, "NCCL_SOCKET_FAMILY", "",
          "Restrict interface addresses to AF_INET or AF_INET6. Unset: either (IPv4 first).",
          param::oneOf({"", "AF_INET", "AF_INET6"}));
CFX_PARAM(int, socketRetryCount, "NCCL_SOCKET_RETRY_CNT", 34,
          "Extra connect attempts after 'connection refused' or a connect timeout (bootstrap races).",
          param::inRange(0, 100000));
CFX_PARAM(int, socketRetrySleepMs, "NCCL_SOCKET_RETRY_SLEEP_MSEC", 100,
          "Milliseconds to sleep between connect attempts.", param::inRange(0, 60000));
CFX_PARAM(std::chrono::milliseconds, bootstrapTimeout, "CFX_BOOTSTRAP_TIMEOUT_MS", std::chrono::milliseconds(300000),
          "Bound on every bootstrap wait: joining a communicator, and each bootstrap allGather, barrier, send and "
          "recv. A rank missing longer than this makes the others fail with a timeout that names it.",
          param::atLeast(std::chrono::milliseconds(1)));
CFX_PARAM(std::string, commId, "NCCL_COMM_ID", "",
          "host:port, ip:port or [ipv6]:port of the bootstrap root. Every rank builds the unique id from it, and "
          "rank 0 serves the root inside ncclCommInitRank.");
CFX_PARAM(std::string, secretText, "CFX_SECRET", "",
          "Shared secret for NCCL_COMM_ID and launcher bootstraps, hashed to the session key that authenticates "
          "every connection. Unset: connections are framed and checked but not authenticated. Never logged.");

int familyFromText(const std::string& text) {
  if (strcasecmp(text.c_str(), "AF_INET") == 0) return AF_INET;
  if (strcasecmp(text.c_str(), "AF_INET6") == 0) return AF_INET6;
  return AF_UNSPEC;
}

// CFX_SECRET bypasses get(): the registry logs every value it parses at INFO/ENV, and a secret must not be.
std::string readSecret() {
  std::string value = secretText.rawValue().value_or("");
  static std::once_flag once;
  if (!value.empty()) {
    std::call_once(once, [] { CFX_INFO(log::Sys::Env, "CFX_SECRET set by environment (value not shown)."); });
  }
  return value;
}

}  // namespace

BootstrapParams readBootstrapParams() {
  BootstrapParams p;
  p.options.timeout = bootstrapTimeout.get();
  p.options.ifName = socketIfName.get();
  p.options.family = familyFromText(socketFamily.get());
  p.options.connectRetries = socketRetryCount.get();
  p.options.retrySleep = std::chrono::milliseconds(socketRetrySleepMs.get());
  p.commId = commId.get();
  p.secretText = readSecret();
  return p;
}

}  // namespace cfx::transport
