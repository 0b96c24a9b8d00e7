// AES-256-GCM for the records of a sealed daemon-to-daemon connection (common/conn.h):
// one key and 12-byte nonce salt per direction, from the peer handshake; record i of a
// direction uses nonce = salt XOR i (big-endian in the last 8 bytes), so a record that is
// dropped, replayed or moved fails to open, and no nonce is ever used twice under a key.
#ifndef CONDUIT_DAEMON_SECURITY_AEAD_RECORD_CIPHER_H_
#define CONDUIT_DAEMON_SECURITY_AEAD_RECORD_CIPHER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "common/record_cipher.h"

namespace conduit {

struct DirectionKeys {
  std::array<uint8_t, 32> key{};
  std::array<uint8_t, 12> salt{};
};

// Fails only when OpenSSL cannot set up the cipher.
Status NewAesGcmSealer(const DirectionKeys& keys, std::unique_ptr<RecordSealer>* out);
Status NewAesGcmOpener(const DirectionKeys& keys, std::unique_ptr<RecordOpener>* out);
// A live upgrade: the state RecordSealer/RecordOpener::Export wrote in the old process (the
// keys and the next record's number), so the new one goes on where it stopped.
Status ImportAesGcmSealer(const std::string& state, std::unique_ptr<RecordSealer>* out);
Status ImportAesGcmOpener(const std::string& state, std::unique_ptr<RecordOpener>* out);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SECURITY_AEAD_RECORD_CIPHER_H_
