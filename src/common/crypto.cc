// SPDX-License-Identifier: Apache-2.0
// OpenSSL-backed crypto primitives (common layer). EVP_MAC for HMAC, EVP_Digest for SHA-256.
#include "common/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <utility>
#include <vector>

namespace cfx::crypto {

namespace {

struct MacDeleter {
  void operator()(EVP_MAC* mac) const { EVP_MAC_free(mac); }
};
struct MacCtxDeleter {
  void operator()(EVP_MAC_CTX* ctx) const { EVP_MAC_CTX_free(ctx); }
};
using UniqueMac = std::unique_ptr<EVP_MAC, MacDeleter>;
using UniqueMacCtx = std::unique_ptr<EVP_MAC_CTX, MacCtxDeleter>;

Status opensslError(const char* what) {
  const unsigned long code = ERR_get_error();
  char text[256] = "unknown error";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return Status::error(Errc::SystemError, strprintf("OpenSSL %s failed: %s", what, text));
}

// Fetching the algorithm walks OpenSSL's provider tables; do it once per process. The pointer is immutable after
// the thread-safe static initialisation, and EVP_MAC objects may be shared between threads.
EVP_MAC* hmacAlgorithm() {
  static const UniqueMac mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  return mac.get();
}

}  // namespace

Status randomBytes(std::span<uint8_t> out) {
  if (out.empty()) return {};
  if (out.size() > static_cast<size_t>(INT_MAX)) return Status::error(Errc::InvalidArgument, "randomBytes: too many");
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) return opensslError("RAND_bytes");
  return {};
}

namespace {

// A new HMAC-SHA256 context with `key` set.
Result<UniqueMacCtx> keyedContext(std::span<const uint8_t> key) {
  EVP_MAC* mac = hmacAlgorithm();
  if (mac == nullptr) return opensslError("EVP_MAC_fetch(HMAC)");
  UniqueMacCtx ctx(EVP_MAC_CTX_new(mac));
  if (!ctx) return opensslError("EVP_MAC_CTX_new");
  char digestName[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digestName, 0),
      OSSL_PARAM_construct_end(),
  };
  // HMAC with an empty key is well defined (the key is zero-padded); OpenSSL wants a non-null pointer for it.
  static const uint8_t kEmptyKey[1] = {0};
  const uint8_t* keyData = key.empty() ? kEmptyKey : key.data();
  if (EVP_MAC_init(ctx.get(), keyData, key.size(), params) != 1) return opensslError("EVP_MAC_init");
  return ctx;
}

// Feeds `parts` to a keyed context and returns the MAC.
Result<Digest> finishHmac(EVP_MAC_CTX* ctx, std::span<const std::span<const uint8_t>> parts) {
  for (const auto& part : parts) {
    if (!part.empty() && EVP_MAC_update(ctx, part.data(), part.size()) != 1) return opensslError("EVP_MAC_update");
  }
  Digest out{};
  size_t outLen = 0;
  if (EVP_MAC_final(ctx, out.data(), &outLen, out.size()) != 1) return opensslError("EVP_MAC_final");
  if (outLen != out.size()) {
    return Status::error(Errc::InternalError, strprintf("HMAC-SHA256 produced %zu bytes, expected 32", outLen));
  }
  return out;
}

// hmacSha256 over any number of parts.
Result<Digest> hmacSha256Parts(std::span<const uint8_t> key, std::span<const std::span<const uint8_t>> parts) {
  CFX_TRY_ASSIGN(UniqueMacCtx ctx, keyedContext(key));
  return finishHmac(ctx.get(), parts);
}

}  // namespace

Result<Digest> hmacSha256(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts) {
  return hmacSha256Parts(key, std::span<const std::span<const uint8_t>>(parts.begin(), parts.size()));
}

// ---- HmacKey ----

// The keyed context. EVP_MAC_CTX is opaque, so HmacKey holds this instead of naming OpenSSL in the header.
struct HmacKey::Ctx {
  UniqueMacCtx mac;
};

Result<HmacKey> HmacKey::make(std::span<const uint8_t> key) {
  CFX_TRY_ASSIGN(UniqueMacCtx ctx, keyedContext(key));
  return HmacKey(std::unique_ptr<Ctx>(new Ctx{std::move(ctx)}));
}

HmacKey::HmacKey(std::unique_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}
HmacKey::HmacKey(HmacKey&&) noexcept = default;
HmacKey& HmacKey::operator=(HmacKey&&) noexcept = default;
HmacKey::~HmacKey() = default;

Result<Digest> HmacKey::mac(std::initializer_list<std::span<const uint8_t>> parts) {
  if (ctx_ == nullptr) return Status::error(Errc::InvalidUsage, "HmacKey used after a move");
  // A null key keeps the one set in make(): OpenSSL resets the inner and outer digests from the saved pads.
  if (EVP_MAC_init(ctx_->mac.get(), nullptr, 0, nullptr) != 1) return opensslError("EVP_MAC_init");
  return finishHmac(ctx_->mac.get(), std::span<const std::span<const uint8_t>>(parts.begin(), parts.size()));
}

Result<Digest> sha256(std::span<const uint8_t> data) {
  Digest out{};
  unsigned int outLen = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &outLen, EVP_sha256(), nullptr) != 1) {
    return opensslError("EVP_Digest(SHA256)");
  }
  if (outLen != out.size()) {
    return Status::error(Errc::InternalError, strprintf("SHA-256 produced %u bytes, expected 32", outLen));
  }
  return out;
}

Result<Digest> sha256(std::string_view text) { return sha256(bytesOf(text)); }

bool constantTimeEqual(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  // The sizes are public (both are digests of a fixed length); only the contents must not leak.
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// ---- frame protection ---------------------------------------------------------------------------------------

const char* protectionName(Protection p) {
  switch (p) {
    case Protection::Off: return "off";
    case Protection::Integrity: return "integrity";
    case Protection::Encryption: return "encryption";
  }
  return "?";
}

struct FrameCipher::Ctx {
  EVP_CIPHER_CTX* evp = nullptr;
  ~Ctx() { EVP_CIPHER_CTX_free(evp); }
};

namespace {

constexpr size_t kKeyBytes = 16;  // AES-128
constexpr size_t kIvBytes = 12;   // GCM's native nonce: 4 zero bytes, then the frame number
// EVP's update calls take an int length.
constexpr size_t kMaxUpdateBytes = size_t{1} << 30;

// Feeds `data` to the open GCM operation: as associated data (out == nullptr) or through the cipher.
bool update(EVP_CIPHER_CTX* evp, uint8_t* out, const uint8_t* in, size_t n) {
  while (n > 0) {
    const size_t step = std::min(n, kMaxUpdateBytes);
    int len = 0;
    if (EVP_CipherUpdate(evp, out, &len, in, static_cast<int>(step)) != 1) return false;
    in += step;
    if (out != nullptr) out += step;
    n -= step;
  }
  return true;
}

}  // namespace

Result<FrameCipher> FrameCipher::create(Protection protection, std::span<const uint8_t> key) {
  FrameCipher c;
  c.protection_ = protection;
  if (protection == Protection::Off) return c;
  if (key.size() < kKeyBytes) {
    return Status::error(Errc::InvalidArgument, strprintf("frame key of %zu bytes, need %zu", key.size(), kKeyBytes));
  }
  c.ctx_ = new Ctx;
  c.ctx_->evp = EVP_CIPHER_CTX_new();
  if (c.ctx_->evp == nullptr) return opensslError("EVP_CIPHER_CTX_new");
  // The key schedule is computed once here; each frame only sets its nonce.
  if (EVP_CipherInit_ex(c.ctx_->evp, EVP_aes_128_gcm(), nullptr, key.data(), nullptr, 1) != 1) {
    return opensslError("EVP_CipherInit_ex(aes-128-gcm)");
  }
  return c;
}

FrameCipher::FrameCipher() = default;
FrameCipher::FrameCipher(FrameCipher&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)), protection_(other.protection_), frames_(other.frames_) {}
FrameCipher& FrameCipher::operator=(FrameCipher&& other) noexcept {
  if (this != &other) {
    delete ctx_;
    ctx_ = std::exchange(other.ctx_, nullptr);
    protection_ = other.protection_;
    frames_ = other.frames_;
  }
  return *this;
}
FrameCipher::~FrameCipher() { delete ctx_; }

Status FrameCipher::start(bool encrypt) {
  uint8_t iv[kIvBytes] = {};
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(frames_ >> (8 * i));
  ++frames_;
  if (EVP_CipherInit_ex(ctx_->evp, nullptr, nullptr, nullptr, iv, encrypt ? 1 : 0) != 1) {
    return opensslError("EVP_CipherInit_ex(nonce)");
  }
  return {};
}

Status FrameCipher::seal(std::span<const uint8_t> header, const uint8_t* src, uint8_t* dst, size_t n, uint8_t* tag) {
  if (protection_ == Protection::Off) return {};
  CFX_TRY(start(/*encrypt=*/true));
  EVP_CIPHER_CTX* evp = ctx_->evp;
  if (!update(evp, nullptr, header.data(), header.size())) return opensslError("EVP_CipherUpdate(header)");
  const bool encrypt = protection_ == Protection::Encryption;
  if (!update(evp, encrypt ? dst : nullptr, src, n)) return opensslError("EVP_CipherUpdate(payload)");
  uint8_t none[kTagBytes];  // GCM's final writes nothing; OpenSSL still wants somewhere it could
  int len = 0;
  if (EVP_CipherFinal_ex(evp, none, &len) != 1) return opensslError("EVP_CipherFinal_ex");
  if (EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag) != 1) {
    return opensslError("EVP_CTRL_GCM_GET_TAG");
  }
  return {};
}

Result<bool> FrameCipher::open(std::span<const uint8_t> header, uint8_t* payload, size_t n, const uint8_t* tag) {
  if (protection_ == Protection::Off) return true;
  CFX_TRY(start(/*encrypt=*/false));
  EVP_CIPHER_CTX* evp = ctx_->evp;
  if (!update(evp, nullptr, header.data(), header.size())) return opensslError("EVP_CipherUpdate(header)");
  const bool decrypt = protection_ == Protection::Encryption;
  if (!update(evp, decrypt ? payload : nullptr, payload, n)) return opensslError("EVP_CipherUpdate(payload)");
  if (EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), const_cast<uint8_t*>(tag)) != 1) {
    return opensslError("EVP_CTRL_GCM_SET_TAG");
  }
  uint8_t none[kTagBytes];
  int len = 0;
  // A failing final is the tag mismatch, which is the peer's doing, not OpenSSL's: no error string to drain.
  const bool authentic = EVP_CipherFinal_ex(evp, none, &len) == 1;
  if (!authentic) ERR_clear_error();
  return authentic;
}

Result<FrameKeys> connectionKeys(std::span<const uint8_t> secret, Protection protection, bool isClient,
                                 std::initializer_list<std::span<const uint8_t>> context) {
  const auto key = [&](std::string_view direction) -> Result<Digest> {
    std::vector<std::span<const uint8_t>> parts(context);
    parts.push_back(bytesOf(direction));
    return hmacSha256Parts(secret, parts);
  };
  CFX_TRY_ASSIGN(const Digest toServer, key("client->server"));
  CFX_TRY_ASSIGN(const Digest toClient, key("server->client"));
  FrameKeys keys;
  CFX_TRY_ASSIGN(keys.send, FrameCipher::create(protection, isClient ? toServer : toClient));
  CFX_TRY_ASSIGN(keys.recv, FrameCipher::create(protection, isClient ? toClient : toServer));
  return keys;
}

}  // namespace cfx::crypto
