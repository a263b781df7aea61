// SPDX-License-Identifier: Apache-2.0
// Data-socket helpers of the TCP transport that common/socket.h does not offer (transport layer): a
// non-blocking connect for the concurrent handshake loop, socket buffer sizing checked against the kernel's
// caps, and keepalive timing. Descriptors, addresses, listening and accepting come from common/socket.h.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "common/socket.h"
#include "common/status.h"

namespace cfx::transport::tcp {

// True for 0.0.0.0 and ::, which cannot be advertised to peers.
bool isWildcard(const sockaddr_storage& address);

// Sets SO_SNDBUF and SO_RCVBUF to `bytes` where the kernel honours it (see tcp_socket.cc); 0 keeps autotuning.
// On a listener it is inherited by every accepted socket.
void applyBufferSizes(int fd, int64_t bytes);

// Starts a non-blocking connect. On success `*connected` says whether it already completed; otherwise wait for
// POLLOUT and call finishConnect(). On failure `*err` holds the errno (ECONNREFUSED is worth a retry).
Result<net::UniqueFd> startConnect(const sockaddr_storage& to, int64_t bufferBytes, bool* connected, int* err);
// After POLLOUT on a connecting socket: 0 if connected, else the errno of the failed attempt.
int finishConnect(int fd);

// What the kernel lets one socket's buffers grow to, from /proc (0 where unreadable).
struct KernelBufferLimits {
  int64_t autotuneCap = 0;     // min(tcp_rmem[2], tcp_wmem[2]): where kernel autotuning stops
  int64_t fixedBufferCap = 0;  // min(net.core.rmem_max, net.core.wmem_max): the largest size setsockopt honours
};
KernelBufferLimits readKernelBufferLimits();

// The speed of the interface that holds `local` in bytes per second, from /sys/class/net/<name>/speed; 0 when
// unknown (loopback, many virtual interfaces).
double interfaceBytesPerSecond(const sockaddr_storage& local);

// Sets the socket's TCP congestion control (TCP_CONGESTION) to `name`. False, with *why saying what the kernel
// answered, where it refused: the algorithm is not built or loaded, or not in net.ipv4.tcp_allowed_congestion_control
// for a process without CAP_NET_ADMIN. The socket then keeps the system's default.
bool setCongestionControl(int fd, const std::string& name, std::string* why);

// Options for an established data socket: TCP_NODELAY (the proxy batches frames itself) and keepalive tuned so
// that a peer host that vanishes without a FIN or RST is noticed within about two minutes.
Status tuneDataSocket(int fd);

// The kernel's send queue of a data socket. After the host's own queueing discipline drops a segment (a shaped or
// short egress queue), TCP keeps it as unsent; if nothing else is in flight, no acknowledgement comes to send it
// again, and it waits for the probe timer, at least 200 ms (docs/notes/tcp_transport.md, "Bytes the kernel
// holds"). Empty: nothing unsent. Moving: unsent bytes behind some in flight, which acknowledgements will send.
// Stalled: unsent bytes and none in flight (also what a peer that stopped reading leaves: a zero window).
enum class SendQueue { Empty, Moving, Stalled };
SendQueue sendQueueState(int fd);
// Has TCP try to send a stalled queue now (setting TCP_NODELAY again pushes pending frames); harmless where the
// window is closed, which keeps them waiting.
void pushSendQueue(int fd);

}  // namespace cfx::transport::tcp
