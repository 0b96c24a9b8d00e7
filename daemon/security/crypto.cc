#include "security/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <climits>
#include <memory>
#include <string>

#include "security/openssl_errors.h"

namespace conduit::crypto {

Status RandomBytes(void* buf, size_t len) {
  if (len > INT_MAX || RAND_bytes(static_cast<unsigned char*>(buf), static_cast<int>(len)) != 1) {
    return SystemError("no random bytes from the system: %s", DrainOpenSslErrors().c_str());
  }
  return Status::Ok();
}

Digest Sha256(std::string_view data) {
  Digest out{};
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data());
  return out;
}

Digest HmacSha256(const uint8_t* key, size_t key_len, std::string_view data) {
  Digest out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key, static_cast<int>(key_len), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       out.data(), &len);
  return out;
}

Status HkdfSha256(const uint8_t* ikm, size_t ikm_len, std::string_view salt, std::string_view info, uint8_t* out,
                  size_t out_len) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr),
                                                                   EVP_PKEY_CTX_free);
  size_t len = out_len;
  if (ctx == nullptr || EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_salt(ctx.get(), reinterpret_cast<const unsigned char*>(salt.data()),
                                  static_cast<int>(salt.size())) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), ikm, static_cast<int>(ikm_len)) <= 0 ||
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), reinterpret_cast<const unsigned char*>(info.data()),
                                  static_cast<int>(info.size())) <= 0 ||
      EVP_PKEY_derive(ctx.get(), out, &len) <= 0 || len != out_len) {
    return InternalError("HKDF failed: %s", DrainOpenSslErrors().c_str());
  }
  return Status::Ok();
}

bool ConstantTimeEqual(const void* a, const void* b, size_t len) { return CRYPTO_memcmp(a, b, len) == 0; }

X25519::~X25519() { EVP_PKEY_free(key_); }

Status X25519::Generate() {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr),
                                                                   EVP_PKEY_CTX_free);
  EVP_PKEY_free(key_);
  key_ = nullptr;
  size_t len = share_.size();
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) <= 0 || EVP_PKEY_keygen(ctx.get(), &key_) <= 0 ||
      EVP_PKEY_get_raw_public_key(key_, share_.data(), &len) <= 0 || len != share_.size()) {
    return InternalError("X25519 key generation failed: %s", DrainOpenSslErrors().c_str());
  }
  return Status::Ok();
}

Status X25519::Derive(const uint8_t* peer_share, std::array<uint8_t, 32>* secret) const {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> peer(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_share, 32), EVP_PKEY_free);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new(key_, nullptr), EVP_PKEY_CTX_free);
  size_t len = secret->size();
  // OpenSSL refuses an all-zero shared secret (a low-order share) in EVP_PKEY_derive.
  if (key_ == nullptr || peer == nullptr || ctx == nullptr || EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) <= 0 || EVP_PKEY_derive(ctx.get(), secret->data(), &len) <= 0 ||
      len != secret->size()) {
    return RemoteError("the peer's X25519 share is unusable: %s", DrainOpenSslErrors().c_str());
  }
  return Status::Ok();
}

void Cleanse(void* data, size_t len) { OPENSSL_cleanse(data, len); }

std::string Hex(const uint8_t* data, size_t len) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (size_t i = 0; i < len; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

}  // namespace conduit::crypto
