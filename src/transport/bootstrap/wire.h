// SPDX-License-Identifier: Apache-2.0
// Bootstrap wire format (transport layer, bootstrap internals): addresses, frames, and the mutual HMAC handshake
// every bootstrap connection starts with. Integers are little-endian (common/wire.h).
//
// Handshake (protocol 3; 3 added the Hello's group fields, ConnKind::GroupJoin and the Group and Forward frames
// of an init through several roots):
//   server -> client  Challenge   magic u32 | version u16 | protection u8 | 0 u8 | serverNonce[32]           40 B
//   client -> server  Auth        magic u32 | version u16 | kind u16 | rank i32 | nRanks i32 | protection u8 |
//                                 0[3] | clientNonce[32] | HMAC(secret, "cfx-boot-v2/client" || serverNonce ||
//                                 commMagic || kind || rank || nRanks || protection)[32]                  84 B
//   server -> client  Proof       HMAC(secret, "cfx-boot-v2/server" || clientNonce || serverNonce ||
//                                      commMagic || both protections)[32]                                  32 B
// The two labels differ, so a server's proof can never be replayed as a client's answer. The server's protection
// is bound by its proof, the client's by its HMAC, and each direction's frame key by both nonces, so a man in the
// middle can neither replay a connection nor lower its protection: the frames use the stricter of the two ends'
// settings (CFX_WIRE_PROTECTION), and key(direction) = HMAC(secret, "cfx-boot-v2/key" || clientNonce ||
// serverNonce || commMagic || protection || direction) (crypto::connectionKeys).
//
// After the handshake every message is a frame: magic u32 | kind u8 | 0[3] | tag u64 | bytes u64 (24 B), then
// `bytes` payload bytes, then (protection not off) a 16-byte AES-GCM tag over header and payload, the payload
// encrypted with protection encryption. The frame number of its direction is the nonce (crypto::FrameCipher),
// so a frame replayed, dropped, reordered or moved to another connection fails. A joining rank's first frame is
// its Hello: its listen address, which the root puts into the table, and the group it joins in (JoinHello).
//
// Init through several roots (ncclCommInitRankScalable with m ids, m <= nRanks): rank r joins root
// groupOf(r, nRanks, m) with that id's secret. Root 0 serves group 0 and the leaders (first ranks) of the other
// groups; every other root serves its group only:
//   root k (k > 0)   group complete -> Group frame (the group's addresses) to its leader
//   leader k         connects to root 0 with id 0's secret (GroupJoin, rank = k) and sends that Group frame on
//   root 0           group 0 complete and m-1 Group frames in -> Table (all addresses, session nonce) to group 0 and
//                    to every leader
//   leader k         Forward frame (that Table's payload) to root k
//   root k           checks its group's entries in it, then sends it as the Table to the rest of its group
// So no root handles more than about nRanks/m + m connections.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "common/doorbell.h"
#include "common/socket.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"

namespace cfx::transport::boot {

inline constexpr uint32_t kHandshakeMagic = 0x43465842;  // "CFXB"
inline constexpr uint32_t kFrameMagic = 0x43465846;      // "CFXF"
inline constexpr uint16_t kProtocolVersion = 3;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kAddressBytes = 24;
inline constexpr size_t kFrameHeaderBytes = 24;
inline constexpr size_t kMaxFrameBytes = size_t{64} << 20;
inline constexpr size_t kMaxControlBytes = 4096;  // Error and Status payloads from the root
inline constexpr size_t kChallengeBytes = 40;
inline constexpr size_t kAuthBytes = 84;
inline constexpr size_t kProofBytes = 32;
// The table's trailer: a nonce the root draws for this communicator (Bootstrap::secret()).
inline constexpr size_t kSessionNonceBytes = 32;
// A Hello's payload: the listen address, then the group u32 and the number of groups u32.
inline constexpr size_t kHelloBytes = kAddressBytes + 8;

void encodeAddress(const sockaddr_storage& addr, uint8_t out[kAddressBytes]);
// InvalidArgument for an unknown family code or a port of 0.
Result<sockaddr_storage> decodeAddress(const uint8_t in[kAddressBytes]);

// What a connection carries once authenticated.
enum class ConnKind : uint16_t {
  RootJoin = 1,   // a rank joining at the root: Hello, then the root answers with Table, Error or Status frames
  Peer = 2,       // rank -> rank, one direction: frames of kinds User, AllGather, Barrier
  GroupJoin = 3,  // a group's leader joining root 0 (rank = its group): a Group frame, then Table/Error/Status back
};

enum class FrameKind : uint8_t {
  User = 1,       // Bootstrap::send/recv
  AllGather = 2,  // tag = sequence << 32 | step
  Barrier = 3,    // tag = sequence << 32 | round
  Table = 16,     // root -> rank: tag = nRanks, payload = nRanks encoded addresses, then the session nonce
  Error = 17,     // root -> rank: tag = Errc, payload = message text
  Query = 18,     // rank -> root: "who is missing?" (no payload)
  Status = 19,    // root -> rank: payload = text naming the missing ranks
  Hello = 20,     // rank -> root, first frame of a join: payload = JoinHello (kHelloBytes)
  Group = 21,     // root k -> its leader, leader -> root 0: tag = groups << 32 | group, payload = the group's addresses
  Forward = 22,   // leader -> root k: payload = the Table payload root 0 sent, for root k to hand to its group
};

// The groups of an init through `groups` roots: rank r belongs to group r * groups / nRanks (floor), so group g is
// the ranks [first, first + count) below, every group is non-empty when groups <= nRanks, and sizes differ by <= 1.
struct GroupRange {
  int first = 0;
  int count = 0;
};
int groupOf(int rank, int nRanks, int groups);
GroupRange groupRange(int group, int nRanks, int groups);

struct FrameHeader {
  FrameKind kind = FrameKind::User;
  uint64_t tag = 0;
  uint64_t bytes = 0;
};

void encodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]);
// Checks the magic, the kind and that bytes <= maxBytes. The error says what was wrong.
Result<FrameHeader> decodeFrameHeader(const uint8_t in[kFrameHeaderBytes], size_t maxBytes);

// The communicator's shared knowledge: connections prove they hold it. `protection` is this end's setting for the
// frames after the handshake (BootstrapOptions::protection).
struct Credentials {
  Secret secret{};
  uint64_t commMagic = 0;
  crypto::Protection protection = crypto::Protection::Encryption;
};

using crypto::FrameKeys;

// The handshake's messages as this library sends them (the fuzz seeds are built with these too).
std::array<uint8_t, kChallengeBytes> encodeChallenge(std::span<const uint8_t, kNonceBytes> serverNonce,
                                                     crypto::Protection serverProtection);
Result<std::array<uint8_t, kAuthBytes>> encodeAuth(const Credentials& cred,
                                                   std::span<const uint8_t, kNonceBytes> serverNonce, ConnKind kind,
                                                   int rank, int nRanks,
                                                   std::span<const uint8_t, kNonceBytes> clientNonce);
Result<std::array<uint8_t, kProofBytes>> encodeServerProof(const Credentials& cred,
                                                           std::span<const uint8_t, kNonceBytes> clientNonce,
                                                           std::span<const uint8_t, kNonceBytes> serverNonce,
                                                           crypto::Protection clientProtection);
// The frame keys of a connection whose handshake went through: `isClient` says which end is asking.
Result<FrameKeys> deriveFrameKeys(const Secret& secret, uint64_t commMagic, crypto::Protection protection,
                                  std::span<const uint8_t, kNonceBytes> clientNonce,
                                  std::span<const uint8_t, kNonceBytes> serverNonce, bool isClient);

// ---- parsers of received bytes ------------------------------------------------------------------------------
// Everything a bootstrap endpoint reads from a socket passes through one of these pure functions before anything
// acts on it. Each takes exactly the bytes that arrived (a span, so the length is checked first, never assumed),
// allocates no more than its input implies, and fails with RemoteError (InvalidArgument for addresses) naming
// what is wrong. tests/fuzz drives each one with libFuzzer.

Result<sockaddr_storage> decodeAddress(std::span<const uint8_t> in);
Result<FrameHeader> decodeFrameHeader(std::span<const uint8_t> in, size_t maxBytes);

// A joining rank's Hello payload. decodeHello checks the address and that 0 <= group < groups (it cannot know
// nRanks: the root checks the group against the rank).
struct JoinHello {
  sockaddr_storage listen{};
  int group = 0;
  int groups = 1;
};
std::array<uint8_t, kHelloBytes> encodeHello(const JoinHello& hello);
Result<JoinHello> decodeHello(std::span<const uint8_t> in);

// A Group frame (header already decoded, payload exactly h.bytes long, already opened) of an init of nRanks ranks
// through `groups` roots (groups < 1: any, as root 0 sees a leader before anyone told it): the group it names and
// exactly that group's addresses. RemoteError naming what is wrong.
struct GroupBlock {
  int group = 0;
  int groups = 0;
  std::vector<sockaddr_storage> addresses;  // of ranks groupRange(group).first ...
};
Result<GroupBlock> decodeGroup(const FrameHeader& h, std::span<const uint8_t> payload, int nRanks, int groups);
// The payload of a Group frame.
std::vector<uint8_t> encodeGroupAddresses(std::span<const sockaddr_storage> addresses);

// The client's view of the server's Challenge: its nonce and protection, once magic and version check out.
struct Challenge {
  std::array<uint8_t, kNonceBytes> nonce{};
  crypto::Protection protection = crypto::Protection::Off;
};
Result<Challenge> decodeChallenge(std::span<const uint8_t> in);
// The client's check of the server's Proof; RemoteError when the server does not know the secret (or answers a
// different challenge: a recorded proof is worthless because clientNonce is fresh, or claims another protection).
Status checkServerProof(const Credentials& cred, std::span<const uint8_t, kNonceBytes> clientNonce,
                        const Challenge& challenge, std::span<const uint8_t> proof);

// The first words of an Auth (magic and version) arrive before the rest; garbage is refused on them alone.
inline constexpr size_t kAuthPrefixBytes = 6;
Status checkAuthPrefix(std::span<const uint8_t> in);

// A client's Auth, decoded and authenticated against the challenge this server sent.
struct Auth {
  ConnKind kind = ConnKind::Peer;
  int rank = -1;
  int nRanks = -1;
  crypto::Protection protection = crypto::Protection::Off;
  std::array<uint8_t, kNonceBytes> clientNonce{};
};
// RemoteError for a malformed Auth, an unknown kind or protection, or an HMAC that does not match (another secret
// or communicator, or an Auth recorded against another challenge: serverNonce is fresh per connection).
Result<Auth> checkAuth(const Credentials& cred, std::span<const uint8_t, kNonceBytes> serverNonce,
                       std::span<const uint8_t> in);

// The root's answer to a joining rank (header already decoded, payload exactly h.bytes long, already opened).
struct RootAnswer {
  FrameKind kind = FrameKind::Table;    // Table, Error or Status
  std::vector<sockaddr_storage> table;  // Table: nRanks addresses
  std::array<uint8_t, kSessionNonceBytes> sessionNonce{};  // Table: drawn by the root for this communicator
  Errc code = Errc::RemoteError;        // Error: the root's code, never Ok or InProgress (init must not look pending)
  std::string text;                     // Error, Status: the root's words, printable ASCII only
};
// A Forward frame's payload is a Table's and decodes as one here (its kind stays Forward).
Result<RootAnswer> decodeRootAnswer(const FrameHeader& h, std::span<const uint8_t> payload, int nRanks);
// The bytes of a Table frame's payload.
inline size_t tablePayloadBytes(int nRanks) { return static_cast<size_t>(nRanks) * kAddressBytes + kSessionNonceBytes; }

// ---- frames on a connection ---------------------------------------------------------------------------------

// The largest frame (header, payload and tag) sealFrame() encodes into one buffer; larger payloads go separately.
inline constexpr size_t kCoalesceBytes = 64 * 1024;
// Seals a frame (header, payload, tag) with `keys.send` and sends it, blocking until the kernel holds it. With
// encryption the payload is encrypted into a copy: the caller's buffer is never written.
Status sendFrame(net::Socket& sock, crypto::FrameCipher& key, const FrameHeader& h, const void* payload,
                 const Deadline& deadline, const std::atomic<bool>* abortFlag);
// Blocks for the next frame: reads the header (checked against maxBytes), the payload and the tag, and opens it
// with `key`. RemoteError naming `peer` for a frame that fails authentication or a malformed header.
struct Frame {
  FrameHeader header;
  std::vector<uint8_t> payload;
};
Result<Frame> recvFrame(net::Socket& sock, crypto::FrameCipher& key, size_t maxBytes, const Deadline& deadline,
                        const std::atomic<bool>* abortFlag);
// Opens a received frame in place; RemoteError saying what it means when the tag does not match.
Status openFrame(crypto::FrameCipher& key, const uint8_t header[kFrameHeaderBytes], std::span<uint8_t> payload,
                 const uint8_t* tag);

// The client half of the handshake, blocking. `hello` is sent as the first frame after the server's proof checks
// out (RootJoin). RemoteError when the server closes the connection (it rejected us) or its proof is wrong.
Result<FrameKeys> clientHandshake(net::Socket& sock, const Credentials& cred, ConnKind kind, int rank, int nRanks,
                                  const JoinHello* hello, const Deadline& deadline, const std::atomic<bool>* abortFlag);

// The server half, non-blocking, so a silent or slow stranger never holds up the thread that serves the
// legitimate ranks. Drive it with progress() whenever poll() reports pollEvents() on fd(), and at least once
// per deadline check: it fails itself once its deadline passes.
class ServerHandshake {
 public:
  enum class State { Running, Done, Failed };
  // Called once the client's HMAC checks out and before this side proves itself: a non-empty answer rejects the
  // client (why), so it sees its connection closed instead of a connection that silently drops its frames.
  using Admission = std::function<std::string(ConnKind kind, int rank, int nRanks)>;

  ServerHandshake(net::Socket sock, const Credentials& cred, std::chrono::milliseconds timeout,
                  Admission admission = {});

  State progress();
  State state() const { return state_; }
  short pollEvents() const;
  int fd() const { return sock_.fd(); }
  const std::string& peerName() const { return sock_.peerName(); }
  // Why it failed, for the log line ("failed authentication (wrong secret?)", "timed out", ...).
  const std::string& failure() const { return failure_; }

  // Valid once Done.
  ConnKind kind() const { return kind_; }
  int rank() const { return rank_; }
  int nRanks() const { return nRanks_; }
  const JoinHello& hello() const { return hello_; }
  net::Socket takeSocket() { return std::move(sock_); }
  FrameKeys takeKeys() { return std::move(keys_); }

 private:
  enum class Stage { SendChallenge, RecvAuth, SendProof, RecvHello };
  State fail(std::string why);
  void startSend(const uint8_t* data, size_t n, Stage sendStage);
  void startRecv(size_t n, Stage next);
  State onAuth();
  State onHello();

  static constexpr size_t kHelloFrameBytes = kFrameHeaderBytes + kHelloBytes + crypto::kTagBytes;
  static constexpr size_t kBufferBytes = kHelloFrameBytes > kAuthBytes ? kHelloFrameBytes : kAuthBytes;

  net::Socket sock_;
  const Credentials* cred_;  // owned by the root or the Bootstrap, which outlive every handshake
  Admission admission_;
  Deadline deadline_;
  State state_ = State::Running;
  Stage stage_ = Stage::SendChallenge;
  std::array<uint8_t, kBufferBytes> out_{};
  size_t outLen_ = 0;
  size_t outPos_ = 0;
  std::array<uint8_t, kBufferBytes> in_{};
  size_t inNeed_ = 0;
  size_t inHave_ = 0;
  std::array<uint8_t, kNonceBytes> serverNonce_{};
  std::string failure_;
  ConnKind kind_ = ConnKind::Peer;
  int rank_ = -1;
  int nRanks_ = -1;
  JoinHello hello_;
  FrameKeys keys_;
};

}  // namespace cfx::transport::boot
