// SPDX-License-Identifier: Apache-2.0
// Striping of one TCP link over several sockets (transport layer): how a slot is cut into stripes, the header
// each stripe carries on the wire, and the choice of stream count and socket buffers from the measured
// round-trip time (autotuning). Everything here is a pure function, so it is unit-tested without sockets.
//
// A link (peer, channel) has nStreams sockets. A slot of `bytes` is cut into k = min(nStreams,
// ceil(bytes / minStripeBytes)) contiguous stripes (at least one, so an empty slot still travels), stripe j of
// it going out on stream j. Stream 0 therefore carries every slot, in order; stream j carries exactly the slots
// of more than j stripes. A small slot costs one frame on one socket, as without striping, and a full slot
// keeps every socket busy. Each stripe frame is a 32-byte StripeHeader, then (where the socket's frames are
// protected, CFX_WIRE_PROTECTION) a 16-byte AES-GCM tag over the header and the payload, then the payload
// (encrypted with protection encryption):
//
//   StripeHeader {seq u64, tag u64, bytes u32, offset u32, length u32, magic u16, stream u16}  (little-endian)
//
// A socket's frames are numbered from 0 in each direction, and the number is the tag's nonce: a stripe that is
// changed, replayed, dropped, reordered or moved to another socket fails its tag, and the link fails naming the
// peer. The receiver reads the payload into its slot, checks the tag there and publishes the slot only after.
//
// seq numbers the slots of one direction of one link from 0; bytes and tag are the whole slot's. The receiver
// recomputes the layout from (bytes, nStreams, minStripeBytes) and accepts a stripe only where it must be; see
// StripeReassembly in tcp_connection.h for the ordering rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace cfx::transport::tcp {

// NCCL's cap on NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, and ours on streams per link.
inline constexpr int kMaxStreams = 64;
// Stripes shorter than this are not worth a frame of their own: below it, a slot uses fewer streams. Large
// enough that a slot's per-stripe cost (one header, one more socket to finish) stays small; small enough that the
// 128 KiB slice most messages travel in (the shm slot, which bounds every transport's slice) spreads over four
// streams.
inline constexpr uint32_t kDefaultMinStripeBytes = 32 * 1024;

struct StripeLayout {
  int nStripes = 1;        // k: stripes of this slot, on streams 0..k-1
  size_t stripeBytes = 0;  // every stripe but the last has this length (a multiple of 64)

  size_t offset(int stripe) const { return static_cast<size_t>(stripe) * stripeBytes; }
  size_t length(int stripe, size_t bytes) const;
};

// The layout of a slot of `bytes` on a link of nStreams streams (1..kMaxStreams). minStripeBytes >= 4096 keeps
// every stripe non-empty (see tcp_stripe.cc).
StripeLayout stripeLayout(size_t bytes, int nStreams, uint32_t minStripeBytes);

struct StripeHeader {
  uint64_t seq = 0;
  uint64_t tag = 0;
  uint32_t bytes = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
  uint16_t stream = 0;
};
inline constexpr size_t kStripeHeaderBytes = 32;
// A stripe frame's header with its tag, where the socket's frames are protected.
inline constexpr size_t kMaxStripeFrameHeaderBytes = kStripeHeaderBytes + 16;

// What a receiving stream knows before it reads a stripe header: which stream it is and the link's geometry.
struct StripeLimits {
  int stream = 0;                                    // the stream the header arrived on
  int nStreams = 1;                                  // the link's streams, 1..kMaxStreams
  size_t slotBytes = 0;                              // the receive ring's slot size
  uint32_t minStripeBytes = kDefaultMinStripeBytes;  // as the link was set up (>= 4096, see stripeLayout)
};

void encodeStripeHeader(const StripeHeader& header, uint8_t* out);
// The kStripeHeaderBytes of a stripe header that arrived on limits.stream, checked for everything that does not
// depend on earlier stripes: the magic (a wrong one means the byte stream is not ours, or is out of step), the
// stream it names, a slot no larger than slotBytes, and exactly the offset and length the layout gives this
// stream. An accepted stripe therefore lies within its slot, and its slot within a ring slot, so its payload can
// be received in place. InvalidUsage, saying what the peer sent, for anything else. Whether the slot comes in
// order with the stream's other stripes is TcpLink::admitStripe()'s to judge.
Result<StripeHeader> decodeStripeHeader(std::span<const uint8_t> in, const StripeLimits& limits);

// ---- autotuning ---------------------------------------------------------------------------------------------

struct AutotuneInputs {
  double rttSeconds = 0;            // measured: the connect() round trip of the link's first socket
  double linkBytesPerSecond = 0;    // the interface's speed; 0 when unknown (loopback, some virtual NICs)
  int64_t autotuneCapBytes = 0;     // the receive buffer kernel autotuning grows a socket to: tcp_rmem[2]
  int64_t fixedBufferCapBytes = 0;  // the largest SO_SNDBUF/SO_RCVBUF the kernel honours: min(wmem_max, rmem_max)
  int maxStreams = 8;
  // Rails the link stripes over (the peer's listeners, one per NIC, where its host has fewer ranks than rails):
  // each carries linkBytesPerSecond, and the streams take them in turn, so the link gets at least one stream per
  // rail and a multiple of the rail count.
  int rails = 1;
};

struct AutotuneDecision {
  int nStreams = 1;
  int64_t socketBufferBytes = 0;  // 0: keep kernel autotuning
  double bdpBytes = 0;            // bandwidth x RTT, for the log line
  double assumedBytesPerSecond = 0;  // summed over the rails
  int rails = 1;
};

// Picks the stream count and socket buffers for one peer from the bandwidth-delay product: one TCP stream moves
// at most about half its receive buffer per round trip (the kernel keeps the rest for bookkeeping), so a link
// needs ceil(BDP / (buffer / 2)) streams to fill the pipe, buffer being the larger of what autotuning reaches
// and what a fixed SO_RCVBUF may be. A fixed buffer is set only when autotuning would stop short of the
// per-stream window and the kernel honours the size. With several rails the path is that many NICs wide: the BDP
// is summed over them, and the count rounded up to a multiple of the rails (down where maxStreams cuts it), so
// every rail carries as many stripes as the others.
AutotuneDecision autotune(const AutotuneInputs& in);

// "4 streams (BDP 6.2 MB at 1.00 Gbit/s x 50.1 ms), kernel-autotuned buffers": for the INFO line.
std::string describe(const AutotuneDecision& decision, double rttSeconds);

// ---- slots for long fat paths -------------------------------------------------------------------------------

// The slot size of every link of a communicator whose slowest path has a bandwidth-delay product of bdpBytes.
// A ring step waits one round trip for its neighbour per slice, so a slice much smaller than the BDP leaves the
// pipe mostly empty. While the FIFO (nSlots x baseSlotBytes) already holds one BDP, the slots stay as they are;
// otherwise they double until one slot holds the BDP, as long as nSlots x slot stays within fifoCapBytes (0: never
// grow) and a slot within 1 GiB. Ranks pass the same (allGathered) inputs, so they get the same answer.
size_t pathSlotBytes(size_t baseSlotBytes, int nSlots, double bdpBytes, uint64_t fifoCapBytes);

}  // namespace cfx::transport::tcp
