// SPDX-License-Identifier: Apache-2.0
// The bootstrap's knobs (transport layer): declared once here, read by core/ through readBootstrapParams() when a
// communicator is created, and passed down as BootstrapOptions. NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY also
// choose the socket transport's interface: read them from BootstrapParams rather than declaring them again.
#include <fcntl.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

#include "common/log.h"
#include "common/param.h"
#include "common/socket.h"
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
          "Shared secret for NCCL_COMM_ID and launcher bootstraps (cfxCommInitFromEnv), hashed to the key that "
          "authenticates every connection; the same random text on every rank (cfxrun sets a fresh one per job). "
          "Never logged. Unset, and without CFX_SECRET_FILE: connections are framed and checked but not "
          "authenticated, which one WARN per process says, and a communicator across hosts refuses to form unless "
          "CFX_ALLOW_INSECURE=1. ncclGetUniqueId's ids carry a random secret of their own and ignore it.");
CFX_PARAM(std::string, secretFile, "CFX_SECRET_FILE", "",
          "File holding the shared secret instead of CFX_SECRET (which wins when both are set): a regular file of "
          "this user with mode 0600 or 0400, at most 4096 bytes, trailing newlines ignored. Any other mode or "
          "owner, or an empty file, fails communicator creation naming the file.");
CFX_PARAM(bool, allowInsecure, "CFX_ALLOW_INSECURE", false,
          "1: let a communicator without a secret (NCCL_COMM_ID or launcher mode without CFX_SECRET or "
          "CFX_SECRET_FILE) span several hosts. Anyone who can reach its ports can then join it, feed it data or "
          "stop it.");
CFX_PARAM(std::string, wireProtection, "CFX_WIRE_PROTECTION", "auto",
          "What protects the frames of the bootstrap and the tcp transport after each connection's handshake: off; "
          "integrity (an AES-128-GCM tag on every frame, keyed per connection from the secret and both ends' "
          "nonces, numbered against replay and reordering); encryption (the same, and the payload encrypted). "
          "auto (the default): integrity between hosts, off between ranks of one host (their bytes never leave the "
          "kernel). The bootstrap encrypts whenever this is not off: it carries the secrets of communicators split "
          "from this one. A connection takes the stricter of its two ends' settings. Why integrity across hosts: it "
          "costs CPU, about 0.1 ns a byte to seal and as much to open (encryption 0.3), so a rank on a 10 Gbit/s "
          "link spends a quarter of a core on it (encryption two thirds); at 1 Gbit/s all-reduce busbw was the same "
          "as with off, and on a 10 Gbit/s path it cost at most 6 % up to 1 MiB; only where the transfer already "
          "fills the ranks' cores (2 cores for 2 ranks and both TCP stacks) did it cost 22-26 % at 64 MiB. Set off "
          "where links are faster than spare cores can seal. Figures: docs/notes/security.md.",
          param::oneOf({"auto", "off", "integrity", "encryption"}));

int familyFromText(const std::string& text) {
  if (strcasecmp(text.c_str(), "AF_INET") == 0) return AF_INET;
  if (strcasecmp(text.c_str(), "AF_INET6") == 0) return AF_INET6;
  return AF_UNSPEC;
}

WireProtection protectionFromText(const std::string& text) {
  if (strcasecmp(text.c_str(), "off") == 0) return WireProtection::Off;
  if (strcasecmp(text.c_str(), "integrity") == 0) return WireProtection::Integrity;
  if (strcasecmp(text.c_str(), "encryption") == 0) return WireProtection::Encryption;
  return WireProtection::Auto;
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

constexpr off_t kMaxSecretFileBytes = 4096;

Result<std::string> readSecretFile(const std::string& path) {
  // O_NOFOLLOW: the mode checked must be the file's own, not a link's target chosen by someone else.
  const net::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    return Status::error(Errc::SystemError,
                         strprintf("CFX_SECRET_FILE %s cannot be opened: %s", path.c_str(), std::strerror(errno)));
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) {
    return Status::error(Errc::SystemError,
                         strprintf("CFX_SECRET_FILE %s: fstat: %s", path.c_str(), std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::error(Errc::InvalidUsage, strprintf("CFX_SECRET_FILE %s is not a regular file", path.c_str()));
  }
  if (st.st_uid != ::geteuid()) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("CFX_SECRET_FILE %s belongs to uid %u, not to this user (uid %u)", path.c_str(),
                                   static_cast<unsigned>(st.st_uid), static_cast<unsigned>(::geteuid())));
  }
  if ((st.st_mode & 077) != 0) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("CFX_SECRET_FILE %s has mode %04o: others may read or change it; chmod 600 it",
                                   path.c_str(), static_cast<unsigned>(st.st_mode & 07777)));
  }
  if (st.st_size > kMaxSecretFileBytes) {
    return Status::error(Errc::InvalidUsage, strprintf("CFX_SECRET_FILE %s holds %lld bytes, more than the %lld a "
                                                       "secret may have",
                                                       path.c_str(), static_cast<long long>(st.st_size),
                                                       static_cast<long long>(kMaxSecretFileBytes)));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) {
    return Status::error(Errc::InvalidUsage, strprintf("CFX_SECRET_FILE %s holds no secret", path.c_str()));
  }
  return text;
}

}  // namespace

Result<std::string> launchSecret(const BootstrapParams& params) {
  if (!params.secretText.empty()) return params.secretText;
  if (params.secretFile.empty()) return std::string();
  return readSecretFile(params.secretFile);
}

BootstrapParams readBootstrapParams() {
  BootstrapParams p;
  p.options.timeout = bootstrapTimeout.get();
  p.options.ifName = socketIfName.get();
  p.options.family = familyFromText(socketFamily.get());
  p.options.connectRetries = socketRetryCount.get();
  p.options.retrySleep = std::chrono::milliseconds(socketRetrySleepMs.get());
  p.commId = commId.get();
  p.secretText = readSecret();
  p.secretFile = secretFile.get();
  p.allowInsecure = allowInsecure.get();
  p.wireProtection = protectionFromText(wireProtection.get());
  // The bootstrap carries secrets (the unique ids of communicators split or grown from this one), so whenever
  // frames are protected at all its payloads are encrypted; the cost is nil at its few kilobytes.
  p.options.protection =
      p.wireProtection == WireProtection::Off ? crypto::Protection::Off : crypto::Protection::Encryption;
  return p;
}

}  // namespace cfx::transport
