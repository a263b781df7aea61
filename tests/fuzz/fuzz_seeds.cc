// SPDX-License-Identifier: Apache-2.0
// cfx_fuzz_seeds DIR: writes a seed corpus for every fuzz target into DIR/<target>/, built with the library's
// own serializers, so the seeds follow the wire format wherever it changes and no binary blob is committed.
// Each target starts from well-formed messages (valid handshakes signed with the fixed test credentials) and
// the fuzzer mutates from there.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "faulttol/health_wire.h"
#include "faulttol/member_wire.h"
#include "fuzz_common.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_stripe.h"
#include "compress/codec.h"
#include "compress/sparse_delta.h"
#include "transport/ucx/ucx_hello.h"

namespace boot = cfx::transport::boot;
namespace wire = cfx::ft::wire;
namespace tcp = cfx::transport::tcp;
using Bytes = std::vector<uint8_t>;

namespace {

std::string g_dir;
int g_failures = 0;

void append(Bytes& out, const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); }
template <typename C>
void append(Bytes& out, const C& c) {
  append(out, reinterpret_cast<const uint8_t*>(c.data()), c.size());
}

void write(const std::string& target, const std::string& name, const Bytes& bytes) {
  const std::string dir = g_dir + "/" + target;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "cfx_fuzz_seeds: mkdir %s: %s\n", dir.c_str(), std::strerror(errno));
    ++g_failures;
    return;
  }
  std::ofstream f(dir + "/" + name, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "cfx_fuzz_seeds: cannot write %s/%s\n", dir.c_str(), name.c_str());
    ++g_failures;
  }
}

sockaddr_storage v4(const char* ip, uint16_t port) {
  sockaddr_storage s{};
  auto& a = reinterpret_cast<sockaddr_in&>(s);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  return s;
}

sockaddr_storage v6(const char* ip, uint16_t port, uint32_t scope) {
  sockaddr_storage s{};
  auto& a = reinterpret_cast<sockaddr_in6&>(s);
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_scope_id = scope;
  ::inet_pton(AF_INET6, ip, &a.sin6_addr);
  return s;
}

Bytes address(const sockaddr_storage& a) {
  Bytes out(boot::kAddressBytes);
  boot::encodeAddress(a, out.data());
  return out;
}

void uniqueIds() {
  cfx::transport::UniqueId id;
  id.root = v4("10.1.2.3", 29500);
  id.secret = cfx::fuzz::fixedSecret();
  id.magic = 0x1122334455667788ull;
  Bytes b(cfx::transport::UniqueId::kBytes);
  id.encode(b.data());
  write("unique_id", "v4", b);
  id.root = v6("fe80::1", 4242, 3);
  id.startRootInInit = true;
  id.encode(b.data());
  write("unique_id", "v6_root_in_init", b);
}

void addresses() {
  write("boot_address", "v4", address(v4("127.0.0.1", 1)));
  write("boot_address", "v6", address(v6("2001:db8::7", 65535, 0)));
}

Bytes frame(uint8_t nRanksByte, const boot::FrameHeader& h, const Bytes& payload) {
  Bytes out{nRanksByte};
  uint8_t hdr[boot::kFrameHeaderBytes];
  boot::encodeFrameHeader(h, hdr);
  append(out, hdr, sizeof(hdr));
  append(out, payload);
  return out;
}

void frames() {
  Bytes table;
  append(table, address(v4("10.0.0.1", 4000)));
  append(table, address(v6("::1", 4001, 0)));
  append(table, address(v4("10.0.0.3", 4002)));
  table.resize(boot::tablePayloadBytes(3), 0x5a);  // the session nonce
  write("boot_frame", "table3", frame(2, {boot::FrameKind::Table, 3, table.size()}, table));
  const std::string text = "the bootstrap root gave up waiting: missing rank 2 (2 of 3 joined)";
  const Bytes textBytes(text.begin(), text.end());
  write("boot_frame", "error_timeout",
        frame(2, {boot::FrameKind::Error, static_cast<uint64_t>(cfx::Errc::Timeout), textBytes.size()}, textBytes));
  write("boot_frame", "status", frame(2, {boot::FrameKind::Status, 0, textBytes.size()}, textBytes));
  write("boot_frame", "query", frame(0, {boot::FrameKind::Query, 0, 0}, {}));
  write("boot_frame", "user", frame(7, {boot::FrameKind::User, 42, 4}, {1, 2, 3, 4}));
  write("boot_frame", "forward3", frame(2, {boot::FrameKind::Forward, 3, table.size()}, table));

  // boot_group: byte 0 = nRanks - 1, byte 1 = the groups expected, then a Hello or a Group frame. Group 1 of 2 of
  // 5 ranks is ranks 3 and 4.
  const auto hello = boot::encodeHello({v6("::1", 4001, 0), 1, 2});
  Bytes helloSeed{4, 2};
  append(helloSeed, hello.data(), hello.size());
  write("boot_group", "hello", helloSeed);
  Bytes block;
  append(block, address(v4("10.0.0.4", 4003)));
  append(block, address(v6("::1", 4004, 0)));
  Bytes groupSeed{4, 2};
  uint8_t hdr[boot::kFrameHeaderBytes];
  boot::encodeFrameHeader({boot::FrameKind::Group, (uint64_t{2} << 32) | 1, block.size()}, hdr);
  append(groupSeed, hdr, sizeof(hdr));
  append(groupSeed, block);
  write("boot_group", "group1of2", groupSeed);
  groupSeed[1] = 0;  // root 0 before it knows the groups
  write("boot_group", "group1of2_any", groupSeed);
}

// The sealed Hello frame a joining client sends after the handshake of the fixed nonces.
Bytes helloFrame(const boot::Credentials& cred, const std::array<uint8_t, 32>& clientNonce,
                 const std::array<uint8_t, 32>& serverNonce) {
  cfx::Result<boot::FrameKeys> keys =
      boot::deriveFrameKeys(cred.secret, cred.commMagic, cred.protection, clientNonce, serverNonce, true);
  if (!keys.ok()) {
    ++g_failures;
    return {};
  }
  Bytes out(boot::kFrameHeaderBytes + boot::kHelloBytes + keys->send.tagBytes());
  boot::encodeFrameHeader({boot::FrameKind::Hello, 0, boot::kHelloBytes}, out.data());
  const auto hello = boot::encodeHello({v4("192.168.0.9", 5555), 1, 3});
  std::copy(hello.begin(), hello.end(), out.begin() + boot::kFrameHeaderBytes);
  uint8_t* payload = out.data() + boot::kFrameHeaderBytes;
  if (!keys->send
           .seal({out.data(), boot::kFrameHeaderBytes}, payload, payload, boot::kHelloBytes,
                 payload + boot::kHelloBytes)
           .ok()) {
    ++g_failures;
  }
  return out;
}

void bootHandshakes() {
  const boot::Credentials cred = cfx::fuzz::fixedCredentials();
  const auto serverNonce = cfx::fuzz::fixedNonce(1);
  const auto clientNonce = cfx::fuzz::fixedNonce(2);
  for (const auto kind : {boot::ConnKind::RootJoin, boot::ConnKind::Peer}) {
    cfx::Result<std::array<uint8_t, boot::kAuthBytes>> auth =
        boot::encodeAuth(cred, serverNonce, kind, 1, 4, clientNonce);
    if (!auth.ok()) {
      ++g_failures;
      return;
    }
    Bytes server{0};
    append(server, *auth);
    if (kind == boot::ConnKind::RootJoin) append(server, helloFrame(cred, clientNonce, serverNonce));
    write("boot_handshake", kind == boot::ConnKind::RootJoin ? "server_rootjoin" : "server_peer", server);
    Bytes session{static_cast<uint8_t>(kind == boot::ConnKind::RootJoin ? 17 : 200)};
    append(session, *auth);
    append(session, helloFrame(cred, clientNonce, serverNonce));
    write("boot_server_session", kind == boot::ConnKind::RootJoin ? "rootjoin" : "peer", session);
  }
  cfx::Result<std::array<uint8_t, boot::kProofBytes>> proof =
      boot::encodeServerProof(cred, clientNonce, serverNonce, cred.protection);
  if (!proof.ok()) {
    ++g_failures;
    return;
  }
  Bytes client{1};
  append(client, boot::encodeChallenge(serverNonce, cred.protection));
  append(client, *proof);
  write("boot_handshake", "client", client);
}

void tcpHandshakes() {
  tcp::Hello hello;
  hello.fromRank = 1;
  hello.toRank = 3;
  hello.nRanks = 4;
  hello.channel = 2;
  hello.nSlots = 8;
  hello.slotBytes = 1 << 20;
  hello.nonce = cfx::fuzz::fixedNonce(4);
  hello.session = {1, 2, 3, 4, 5, 6, 7, 8};
  hello.protection = cfx::crypto::Protection::Integrity;
  const auto helloBytes = tcp::encodeHello(hello);
  cfx::Result<tcp::Mac> proof = tcp::clientMac(cfx::fuzz::fixedSecret(), helloBytes.data(), cfx::fuzz::fixedNonce(3),
                                               cfx::crypto::Protection::Integrity);
  if (!proof.ok()) {
    ++g_failures;
    return;
  }
  Bytes h{0};
  append(h, helloBytes);
  append(h, *proof);
  write("tcp_handshake", "hello_proof", h);
  for (const auto code : {tcp::AckCode::Ok, tcp::AckCode::GeometryMismatch, tcp::AckCode::Duplicate}) {
    Bytes a{1};
    append(a, tcp::encodeAck(code));
    write("tcp_handshake", std::string("ack_") + std::to_string(static_cast<unsigned>(code)), a);
  }
  tcp::Challenge c;
  c.nonce = cfx::fuzz::fixedNonce(3);
  c.protection = cfx::crypto::Protection::Encryption;
  cfx::Result<tcp::Mac> mac = tcp::serverMac(cfx::fuzz::fixedSecret(), helloBytes.data(), c.nonce, c.protection);
  if (!mac.ok()) {
    ++g_failures;
    return;
  }
  c.mac = *mac;
  Bytes ch{2};
  append(ch, tcp::encodeChallenge(c));
  write("tcp_handshake", "challenge", ch);
}

// The header of stream `stream`'s stripe of a slot, as the sender lays it out.
Bytes stripe(uint64_t seq, uint64_t tag, uint32_t bytes, int nStreams, uint32_t minStripeBytes, int stream) {
  const tcp::StripeLayout layout = tcp::stripeLayout(bytes, nStreams, minStripeBytes);
  Bytes out(tcp::kStripeHeaderBytes);
  tcp::encodeStripeHeader(tcp::StripeHeader{.seq = seq,
                                            .tag = tag,
                                            .bytes = bytes,
                                            .offset = static_cast<uint32_t>(layout.offset(stream)),
                                            .length = static_cast<uint32_t>(layout.length(stream, bytes)),
                                            .stream = static_cast<uint16_t>(stream)},
                          out.data());
  return out;
}

void tcpStripes() {
  // Mode 0: nStreams-1, stream, slot size in 64 B units minus one (big-endian), minStripeBytes/4096 - 1, header.
  const auto one = [](const std::string& name, int nStreams, int stream, size_t slotBytes, uint32_t minStripe,
                      uint32_t bytes) {
    const size_t units = slotBytes / 64 - 1;
    Bytes b{0,
            static_cast<uint8_t>(nStreams - 1),
            static_cast<uint8_t>(stream),
            static_cast<uint8_t>(units >> 8),
            static_cast<uint8_t>(units),
            static_cast<uint8_t>(minStripe / 4096 - 1)};
    append(b, stripe(7, 0xabcdef, bytes, nStreams, minStripe, stream));
    write("tcp_stripe", name, b);
  };
  one("stream1_of_4", 4, 1, 256 * 1024, tcp::kDefaultMinStripeBytes, 100000);
  one("empty_slot", 1, 0, 4096, 4096, 0);
  one("last_of_64", 64, 63, 4 << 20, 4096, 4 << 20);
  one("short_slot", 8, 0, 128 * 1024, tcp::kDefaultMinStripeBytes, 1000);

  // Mode 1: nStreams-1, nSlots-1, slotBytes/4096 - 1, then records (0xff: the owner consumes; s: a header on s).
  // Two streams, two 16 KiB slots: a full slot, a small one on stream 0 only, then one whose stream-1 stripe
  // comes first.
  Bytes two{1, 1, 1, 3};
  const auto on = [](Bytes& b, int stream, const Bytes& header) {
    b.push_back(static_cast<uint8_t>(stream));
    append(b, header);
  };
  on(two, 0, stripe(0, 1, 16384, 2, 4096, 0));
  on(two, 1, stripe(0, 1, 16384, 2, 4096, 1));
  two.push_back(0xff);
  on(two, 0, stripe(1, 2, 100, 2, 4096, 0));
  on(two, 1, stripe(2, 3, 16384, 2, 4096, 1));
  on(two, 0, stripe(2, 3, 16384, 2, 4096, 0));
  two.push_back(0xff);
  two.push_back(0xff);
  write("tcp_stripe", "link_two_streams", two);
  // Four streams, four 32 KiB slots, slots of 1, 2, 3 and 4 stripes arriving stream by stream.
  Bytes four{1, 3, 3, 7};
  const uint32_t sizes[4] = {4096, 8192, 12288, 32768};
  for (int stream = 3; stream >= 0; --stream) {
    for (uint64_t seq = 0; seq < 4; ++seq) {
      if (stream < tcp::stripeLayout(sizes[seq], 4, 4096).nStripes) {
        on(four, stream, stripe(seq, 100 + seq, sizes[seq], 4, 4096, stream));
      }
    }
  }
  for (int i = 0; i < 4; ++i) four.push_back(0xff);
  write("tcp_stripe", "link_four_streams", four);
}

void ucxHellos() {
  const auto address = cfx::fuzz::fixedWorkerAddress();
  cfx::Result<cfx::crypto::Digest> hello = cfx::transport::ucx::helloDigest(cfx::fuzz::fixedSecret(), 3, 1, address);
  if (!hello.ok()) {
    ++g_failures;
    return;
  }
  Bytes h{0, 3, 1};
  append(h, *hello);
  write("ucx_hello", "hello_3_to_1", h);
  const auto record = [](const std::string& name, uint32_t addressBytes) {
    const cfx::transport::ucx::AddressRecord r{.slotBytes = 256 * 1024, .nSlots = 8, .addressBytes = addressBytes};
    Bytes b{1};
    uint8_t encoded[cfx::transport::ucx::kAddressRecordBytes];
    cfx::transport::ucx::encodeRecord(r, encoded);
    append(b, encoded, sizeof(encoded));
    write("ucx_hello", name, b);
  };
  record("record", 211);
  record("record_no_worker", 0);
}

// Each datagram twice: as received (mode 0) and without its MAC, for the target to sign (mode 1).
void healthDatagram(const std::string& name, int nRanks, const wire::Header& h, const Bytes& payload) {
  const cfx::transport::Secret secret = cfx::fuzz::fixedSecret();
  cfx::Result<Bytes> sealed = wire::seal(h, payload, secret);
  if (!sealed.ok()) {
    ++g_failures;
    return;
  }
  const auto modeByte = [&](uint8_t mode) { return static_cast<uint8_t>(((nRanks - 1) << 1) | mode); };
  Bytes received{modeByte(0)};
  append(received, *sealed);
  write("health_datagram", name, received);
  Bytes toSign{modeByte(1)};
  append(toSign, sealed->data(), sealed->size() - wire::kMacBytes);
  write("health_datagram", name + "_to_sign", toSign);
}

void healthDatagrams() {
  const int nRanks = 8;
  wire::Header h;
  h.commTag = cfx::fuzz::kHealthCommTag;
  h.sender = 3;
  h.receiver = 0;  // the fuzzed monitor's rank
  h.nRanks = nRanks;
  h.counter = 41;
  h.known = 1;
  h.kind = wire::Heartbeat;
  healthDatagram("heartbeat", nRanks, h, {});
  h.kind = wire::Leaving;
  healthDatagram("leaving", nRanks, h, {});
  h.kind = wire::Revoke;
  healthDatagram("revoke", nRanks, h, wire::encodeRevoke({5, cfx::Errc::Ok, ""}));
  healthDatagram("revoke_mismatch", nRanks, h,
                 wire::encodeRevoke({5, cfx::Errc::InvalidUsage, "mismatched operation across ranks: rank 2 sent"}));
  cfx::ft::Failure f;
  f.rank = 6;
  f.reason = cfx::ft::FailureReason::Hung;
  f.detectedBy = 3;
  f.pid = 4242;
  f.host = "node-b";
  f.op = "AllReduce";
  f.opSeq = 17;
  f.text = "no heartbeat for 3000 ms";
  h.kind = wire::FailureNotice;
  healthDatagram("failure", nRanks, h, wire::encodeFailure(f));
  f.op.clear();
  f.opSeq = 0;
  f.reason = cfx::ft::FailureReason::Exited;
  healthDatagram("failure_idle", nRanks, h, wire::encodeFailure(f));
}

// Membership frames: a Challenge-Hello-Ready-Epoch-Id-Outcome-Verdict conversation as one stream (mode 0), and each frame alone
// without its MAC for the target to sign (mode 1).
void memberFrames() {
  namespace member = cfx::ft::member;
  const cfx::transport::Secret key = cfx::fuzz::fixedSecret();
  std::vector<member::Message> talk(7);
  talk[0].kind = member::Kind::Challenge;
  talk[0].challenge.fill(0x11);
  talk[1].kind = member::Kind::Hello;
  talk[1].hello.nonce.fill(0x22);
  talk[1].hello.uuid.fill(0x33);
  talk[1].hello.epoch = 4;
  talk[1].hello.rank = 2;
  talk[1].hello.nRanks = 5;
  talk[1].hello.verdictSeq = 12;
  talk[1].hello.verdictOk = true;
  talk[2].kind = member::Kind::Ready;
  talk[2].epoch = 4;
  talk[3].kind = member::Kind::Epoch;
  talk[3].note = {5, 1, 6, true, 1, 0};
  talk[4].kind = member::Kind::Id;
  talk[4].epoch = 5;
  talk[4].id.fill(0x44);
  talk[5].kind = member::Kind::Outcome;
  talk[5].vote = {5, 3, true, -1};
  talk[6].kind = member::Kind::Verdict;
  talk[6].vote = {5, 3, false, 2};
  Bytes stream{0};
  for (size_t i = 0; i < talk.size(); ++i) {
    cfx::Result<Bytes> frame = member::seal(talk[i], i, key);
    if (!frame.ok()) {
      ++g_failures;
      return;
    }
    append(stream, *frame);
    Bytes toSign{1};
    append(toSign, frame->data(), frame->size() - member::kMacBytes);
    write("member_frame", std::string(member::kindName(talk[i].kind)) + "_to_sign", toSign);
  }
  write("member_frame", "conversation", stream);
}

// Codec pieces: one real piece of every format (header bytes as fuzz_codec_piece.cc reads them), and delta payloads
// of every encoding (as fuzz_sparse_delta.cc reads them).
void codecPieces() {
  const uint16_t count = 300;
  std::vector<float> values(count);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i % 37) - 18) * 0.25f;
  for (uint8_t f = 1; f <= 8; ++f) {
    cfx::compress::CodecSpec spec;
    spec.format = static_cast<cfx::compress::Format>(f);
    spec.block = f == 4 || f == 5 ? 32 : 64;  // the MX formats take 32
    spec.fraction = 0.1f;
    auto codec = cfx::compress::Codec::make(spec, cfx::DataType::Float32);
    if (!codec.ok()) {
      ++g_failures;
      return;
    }
    Bytes seed = {static_cast<uint8_t>(f - 1), static_cast<uint8_t>(f == 4 || f == 5 ? 2 : 3), 2, 1,
                  static_cast<uint8_t>(count & 0xff), static_cast<uint8_t>(count >> 8)};
    Bytes piece(codec->pieceBytes(count));
    codec->encode(values.data(), cfx::DataType::Float32, count, piece.data(), {});
    append(seed, piece.data(), piece.size());
    write("codec_piece", cfx::compress::formatName(spec.format), seed);
  }
  std::vector<float> next = values;
  for (size_t i = 0; i < next.size(); i += 9) next[i] += 1.0f;
  for (auto mode : {cfx::compress::DeltaMode::Indices, cfx::compress::DeltaMode::Bitmap, cfx::compress::DeltaMode::Full}) {
    cfx::compress::DeltaPlan plan = cfx::compress::planDelta(next.data(), values.data(), count, 4);
    plan.mode = mode;
    plan.bytes = cfx::compress::deltaBytes(mode, plan.changed, count, 4);
    Bytes seed = {static_cast<uint8_t>(mode), 2, static_cast<uint8_t>(count & 0xff), static_cast<uint8_t>(count >> 8),
                  static_cast<uint8_t>(plan.changed & 0xff), static_cast<uint8_t>(plan.changed >> 8)};
    Bytes payload(plan.bytes);
    cfx::compress::encodeDelta(plan, next.data(), values.data(), count, 4, payload.data());
    append(seed, payload.data(), payload.size());
    write("sparse_delta", cfx::compress::deltaModeName(mode), seed);
  }
}

// Sealed frames of both formats and both protections: three genuine frames as received (mode 0), and the same
// in the clear with each edit for the target to seal and tamper with (mode 1).
void sealedFrames() {
  for (int stripe = 0; stripe < 2; ++stripe) {
    for (int encrypt = 0; encrypt < 2; ++encrypt) {
      const auto protection = encrypt ? cfx::crypto::Protection::Encryption : cfx::crypto::Protection::Integrity;
      const cfx::transport::Secret key = cfx::fuzz::fixedSecret();
      cfx::crypto::FrameCipher send = cfx::crypto::FrameCipher::create(protection, key).value();
      Bytes received{static_cast<uint8_t>(stripe | (encrypt << 1))};
      Bytes clear{0, 0, 1};
      for (uint32_t i = 0; i < 3; ++i) {
        const uint32_t n = 100 * (i + 1);
        Bytes header(stripe ? tcp::kStripeHeaderBytes : boot::kFrameHeaderBytes);
        if (stripe) {
          tcp::encodeStripeHeader({.seq = i, .tag = 7, .bytes = n, .offset = 0, .length = n, .stream = 0},
                                  header.data());
        } else {
          boot::encodeFrameHeader({boot::FrameKind::User, i, n}, header.data());
        }
        Bytes payload(n, static_cast<uint8_t>(0x30 + i));
        append(clear, header);
        append(clear, payload);
        uint8_t tag[cfx::crypto::kTagBytes];
        if (!send.seal(header, payload.data(), payload.data(), n, tag).ok()) ++g_failures;
        append(received, header);
        if (stripe) append(received, tag, sizeof(tag));
        append(received, payload);
        if (!stripe) append(received, tag, sizeof(tag));
      }
      const std::string name = std::string(stripe ? "stripe" : "boot") + (encrypt ? "_encrypted" : "_integrity");
      write("sealed_frame", name, received);
      for (uint8_t edit = 0; edit < 4; ++edit) {
        Bytes tamper{static_cast<uint8_t>(stripe | (encrypt << 1) | 4)};
        tamper.push_back(edit);
        append(tamper, clear.data() + 1, clear.size() - 1);
        write("sealed_frame", name + "_edit" + std::to_string(edit), tamper);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR   (writes DIR/<target>/<seed> for every fuzz target)\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  if (::mkdir(g_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "cfx_fuzz_seeds: mkdir %s: %s\n", g_dir.c_str(), std::strerror(errno));
    return 1;
  }
  uniqueIds();
  addresses();
  frames();
  bootHandshakes();
  tcpHandshakes();
  healthDatagrams();
  memberFrames();
  tcpStripes();
  ucxHellos();
  codecPieces();
  sealedFrames();
  return g_failures == 0 ? 0 : 1;
}
