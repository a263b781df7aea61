// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the header every stripe of a TCP data link carries (tcp_stripe.h), as a connected peer can send it,
// alone and as a sequence through a real TcpLink's receive bookkeeping. Byte 0's bit 0 picks the mode.
//   mode 0, one header: byte 1 nStreams-1 (mod 64), byte 2 the receiving stream (mod nStreams), bytes 3-4 the
//     slot size in units of 64 B minus one (big-endian), byte 5 minStripeBytes/4096 - 1 (mod 32); the rest is the
//     header. decodeStripeHeader() must accept only a whole header whose stripe lies inside its slot, inside the
//     ring's slot, on the stream that read it, and that re-encodes to its own bytes.
//   mode 1, a link: byte 1 nStreams-1 (mod 8), byte 2 nSlots-1 (mod 4), byte 3 slotBytes/4096 - 1 (mod 16); then
//     records: 0xff lets the owner consume one published slot, any other byte s is a header (32 bytes) arriving
//     on stream s mod nStreams. Each header goes through decodeStripeHeader() and TcpLink::admitStripe() as
//     TcpStream::progressRecv() does; an admitted stripe's payload is written where the header says and reported
//     with stripeArrived(). A rejected header ends the input (the link fails); a stream whose header must wait even
//     after the owner consumed everything published stops reading, as a real one would.
//     Properties: an admitted stripe lies inside one ring slot; the owner sees slots in order, each only once all
//     its stripes arrived (every byte of it exactly once), with the size and tag its stripes announced.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "fuzz_common.h"
#include "transport/tcp/tcp_connection.h"

namespace tcp = cfx::transport::tcp;

namespace {

void oneHeader(std::span<const uint8_t> in) {
  if (in.size() < 5) return;
  const int nStreams = 1 + in[0] % 64;
  const tcp::StripeLimits limits{.stream = in[1] % nStreams,
                                 .nStreams = nStreams,
                                 .slotBytes = 64 * (1 + ((size_t{in[2]} << 8) | in[3])),
                                 .minStripeBytes = 4096u * (1 + in[4] % 32)};
  const std::span<const uint8_t> bytes = in.subspan(5);
  cfx::Result<tcp::StripeHeader> h = tcp::decodeStripeHeader(bytes, limits);
  if (!h.ok()) return;
  cfx::fuzz::check(bytes.size() == tcp::kStripeHeaderBytes, "only a whole header is accepted");
  uint8_t again[tcp::kStripeHeaderBytes];
  tcp::encodeStripeHeader(*h, again);
  cfx::fuzz::check(std::memcmp(again, bytes.data(), sizeof(again)) == 0, "an accepted header re-encodes identically");
  cfx::fuzz::check(h->stream == limits.stream, "an accepted stripe is for the stream that read it");
  cfx::fuzz::check(h->bytes <= limits.slotBytes, "an accepted slot fits a ring slot");
  cfx::fuzz::check(uint64_t{h->offset} + h->length <= h->bytes, "an accepted stripe lies inside its slot");
  const tcp::StripeLayout layout = tcp::stripeLayout(h->bytes, nStreams, limits.minStripeBytes);
  cfx::fuzz::check(limits.stream < layout.nStripes, "an accepted stripe's index is within the stripe count");
  cfx::fuzz::check(h->length > 0 || h->bytes == 0, "only an empty slot has an empty stripe");
}

// What the stripes of one slot announced and delivered, by sequence number.
struct SlotSeen {
  uint64_t bytes = 0;
  uint64_t tag = 0;
  uint64_t arrivedBytes = 0;
  int arrivedStripes = 0;
};

class LinkRun {
 public:
  LinkRun(int nStreams, int nSlots, size_t slotBytes)
      : nStreams_(nStreams),
        link_(std::make_shared<tcp::TcpLink>(1, 0, "fuzzed peer", cfx::transport::FifoGeometry{slotBytes, nSlots},
                                             nStreams, 4096u, std::vector<std::shared_ptr<tcp::ProxyWaker>>{})),
        owner_(link_),
        stalled_(static_cast<size_t>(nStreams), false) {}

  // False once the link has failed.
  bool header(int stream, std::span<const uint8_t> bytes) {
    if (stalled_[static_cast<size_t>(stream)]) return true;
    cfx::Result<tcp::StripeHeader> h = tcp::decodeStripeHeader(bytes, link_->stripeLimits(stream));
    if (!h.ok()) return false;
    std::string why;
    tcp::TcpLink::Admit admit = link_->admitStripe(stream, *h, &why);
    if (admit == tcp::TcpLink::Admit::Wait) {
      while (consume()) {
      }
      admit = link_->admitStripe(stream, *h, &why);
    }
    if (admit == tcp::TcpLink::Admit::Reject) return false;
    if (admit == tcp::TcpLink::Admit::Wait) {
      stalled_[static_cast<size_t>(stream)] = true;
      return true;
    }
    tcp::SlotRing& ring = link_->recvRing();
    cfx::fuzz::check(uint64_t{h->offset} + h->length <= ring.slotBytes(), "an admitted stripe lies inside a slot");
    std::memset(ring.slot(h->seq) + h->offset, static_cast<int>(h->seq & 0xff), h->length);
    SlotSeen& seen = seen_[h->seq];
    if (seen.arrivedStripes == 0) {
      seen.bytes = h->bytes;
      seen.tag = h->tag;
    }
    cfx::fuzz::check(seen.bytes == h->bytes && seen.tag == h->tag, "the stripes of a slot agree on size and tag");
    seen.arrivedBytes += h->length;
    ++seen.arrivedStripes;
    (void)link_->stripeArrived(h->seq);
    return true;
  }

  // The owner takes the oldest published slot, if any.
  bool consume() {
    size_t bytes = 0;
    uint64_t tag = 0;
    const void* slot = owner_.tryPeek(&bytes, &tag);
    if (slot == nullptr) return false;
    const auto it = seen_.find(consumed_);
    cfx::fuzz::check(it != seen_.end(), "a published slot is the next in order and had stripes");
    const SlotSeen& seen = it->second;
    cfx::fuzz::check(bytes == seen.bytes && tag == seen.tag, "a published slot has the size and tag announced");
    const tcp::StripeLayout layout = tcp::stripeLayout(bytes, nStreams_, 4096u);
    cfx::fuzz::check(seen.arrivedStripes == layout.nStripes && seen.arrivedBytes == bytes,
                     "a slot is published once every byte of it arrived, once");
    seen_.erase(it);
    ++consumed_;
    owner_.release();
    return true;
  }

 private:
  const int nStreams_;
  std::shared_ptr<tcp::TcpLink> link_;
  cfx::transport::link::ProxiedRecvEnd owner_;
  std::vector<bool> stalled_;
  std::map<uint64_t, SlotSeen> seen_;
  uint64_t consumed_ = 0;
};

void link(std::span<const uint8_t> in) {
  if (in.size() < 3) return;
  const int nStreams = 1 + in[0] % 8;
  LinkRun run(nStreams, 1 + in[1] % 4, 4096 * (1 + size_t{in[2]} % 16));
  std::span<const uint8_t> rest = in.subspan(3);
  while (!rest.empty()) {
    const uint8_t op = rest[0];
    rest = rest.subspan(1);
    if (op == 0xff) {
      (void)run.consume();
      continue;
    }
    const std::span<const uint8_t> bytes = rest.first(std::min(rest.size(), tcp::kStripeHeaderBytes));
    rest = rest.subspan(bytes.size());
    if (!run.header(op % nStreams, bytes)) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    oneHeader(in);
  } else {
    link(in);
  }
  return 0;
}
