// The few cryptographic primitives the daemon uses, as thin wrappers over OpenSSL's libcrypto
// (nothing here is implemented by hand): random bytes, SHA-256, HMAC-SHA256, HKDF-SHA256
// and a constant-time comparison. AES-256-GCM lives in aead_record_cipher.* where records
// are sealed.
#ifndef CONDUIT_DAEMON_SECURITY_CRYPTO_H_
#define CONDUIT_DAEMON_SECURITY_CRYPTO_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace conduit::crypto {

using Digest = std::array<uint8_t, 32>;

// Fills buf from the operating system's generator (getrandom through OpenSSL's DRBG).
Status RandomBytes(void* buf, size_t len);

Digest Sha256(std::string_view data);
Digest HmacSha256(const uint8_t* key, size_t key_len, std::string_view data);
// RFC 5869 with SHA-256: `out_len` bytes of key material from `ikm`, `salt` and `info`.
Status HkdfSha256(const uint8_t* ikm, size_t ikm_len, std::string_view salt, std::string_view info, uint8_t* out,
                  size_t out_len);
// Compares without leaking where the first difference is (MAC checks).
bool ConstantTimeEqual(const void* a, const void* b, size_t len);

// Overwrites secret bytes in a way the compiler cannot drop.
void Cleanse(void* data, size_t len);

// An ephemeral X25519 key pair: the Diffie-Hellman share that gives sealed connections
// forward secrecy.
class X25519 {
 public:
  X25519() = default;
  ~X25519();
  X25519(const X25519&) = delete;
  X25519& operator=(const X25519&) = delete;

  Status Generate();
  const std::array<uint8_t, 32>& share() const { return share_; }
  // The shared secret with the holder of `peer_share`; fails on a degenerate share.
  Status Derive(const uint8_t* peer_share, std::array<uint8_t, 32>* secret) const;

 private:
  evp_pkey_st* key_ = nullptr;
  std::array<uint8_t, 32> share_{};
};

// Lowercase hex of bytes.
std::string Hex(const uint8_t* data, size_t len);

}  // namespace conduit::crypto

#endif  // CONDUIT_DAEMON_SECURITY_CRYPTO_H_
