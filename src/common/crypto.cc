// SPDX-License-Identifier: Apache-2.0
// OpenSSL-backed crypto primitives (common layer). EVP_MAC for HMAC, EVP_Digest for SHA-256.
#include "common/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <climits>
#include <memory>

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

Result<Digest> hmacSha256(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts) {
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
  for (const auto& part : parts) {
    if (!part.empty() && EVP_MAC_update(ctx.get(), part.data(), part.size()) != 1) {
      return opensslError("EVP_MAC_update");
    }
  }
  Digest out{};
  size_t outLen = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &outLen, out.size()) != 1) return opensslError("EVP_MAC_final");
  if (outLen != out.size()) {
    return Status::error(Errc::InternalError, strprintf("HMAC-SHA256 produced %zu bytes, expected 32", outLen));
  }
  return out;
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

}  // namespace cfx::crypto
