// What a sealed connection (common/conn.h) needs from a cipher: seal one record of one
// direction, open one record of the other. The implementation (AES-256-GCM with
// per-direction keys from the peer handshake) is security/aead_record_cipher.*; common/
// knows only this interface, so the framing and buffering live once, here, and the
// cryptography once, there.
#ifndef CONDUIT_DAEMON_COMMON_RECORD_CIPHER_H_
#define CONDUIT_DAEMON_COMMON_RECORD_CIPHER_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace conduit {

class RecordSealer {
 public:
  virtual ~RecordSealer() = default;
  // Bytes a record adds after its ciphertext (the tag).
  virtual size_t tag_bytes() const = 0;
  // Encrypts the bytes of pieces[0..n) (the record's plaintext, in order) into `out`:
  // ciphertext of the same length, then the tag. `aad` (the record header) is
  // authenticated, not encrypted. Records are numbered implicitly: each call is the next.
  virtual Status Seal(const uint8_t* aad, size_t aad_len, const iovec* pieces, int n, uint8_t* out) = 0;
  // A live upgrade hands the connection to a new process: the keys and the next record's
  // number, which that process imports (security/aead_record_cipher.h). Secret: it travels
  // only over the upgrade's own socket.
  virtual std::string Export() const = 0;
};

class RecordOpener {
 public:
  virtual ~RecordOpener() = default;
  virtual size_t tag_bytes() const = 0;
  // Decrypts one record (`len` bytes: ciphertext then tag) into `plain` (len - tag bytes)
  // and checks the tag; a record that was altered, replayed, reordered or cut fails.
  virtual Status Open(const uint8_t* aad, size_t aad_len, const uint8_t* record, size_t len, uint8_t* plain) = 0;
  virtual std::string Export() const = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_RECORD_CIPHER_H_
