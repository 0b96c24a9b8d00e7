// The daemon-to-daemon authentication handshake, version 1 (docs/security.md, "The peer
// handshake"). It runs on every TCP connection between daemons right after connect/accept,
// before the first frame of the peer protocol (peer_protocol.h), unless the operator
// started the daemons with --insecure-peers.
//
//   dialer   -> acceptor  Hello      its nonce, its identity, its X25519 share
//   acceptor -> dialer    Challenge  its nonce, its identity, [its X25519 share],
//                                    MAC_K("conduit-auth-v1 acceptor", Hello | Challenge*)
//   dialer   -> acceptor  Finish     MAC_K("conduit-auth-v1 dialer", Hello | Challenge*)
//
// K is the cluster key (security/cluster_key.h); Challenge* is the Challenge without its mac
// field; MAC is HMAC-SHA256. Each side proves it holds K over both fresh nonces, so a proof
// is bound to this connection and cannot be replayed on another. When the connection is
// sealed, the session keys come from HKDF-SHA256 over K, the X25519 shared secret and the
// transcript (forward secrecy: a key leaked later does not open recorded traffic).
// All integers little-endian; structs are fixed-size and trivially copyable.
#ifndef CONDUIT_PROTOCOL_AUTH_PROTOCOL_H_
#define CONDUIT_PROTOCOL_AUTH_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

namespace conduit::authproto {

inline constexpr uint32_t kMagic = 0x41544443;  // "CDTA"
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kShareBytes = 32;  // an X25519 public key
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kKeyIdBytes = 8;
// The whole handshake must finish this soon after the connection opened.
inline constexpr int kHandshakeTimeoutMs = 5000;

enum Flags : uint16_t {
  kWantSealed = 1,  // Hello: the dialer asks for sealed records (AES-256-GCM) after the handshake
  kSealed = 2,      // Challenge: both directions are sealed after the handshake
};

struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;
  uint8_t key_id[kKeyIdBytes];  // fingerprint of the dialer's cluster key (diagnostics only)
  uint8_t nonce[kNonceBytes];
  uint8_t share[kShareBytes];   // the dialer's ephemeral X25519 public key
  char daemon[64];              // the dialer's advertised "ip:port": its identity once proven
};
static_assert(sizeof(Hello) == 144);

struct Challenge {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;
  uint8_t key_id[kKeyIdBytes];
  uint8_t nonce[kNonceBytes];
  uint8_t share[kShareBytes];   // the acceptor's X25519 public key when kSealed, else zeros
  char daemon[64];              // the acceptor's advertised "ip:port"
  uint8_t mac[kMacBytes];
};
static_assert(sizeof(Challenge) == 176);

struct Finish {
  uint8_t mac[kMacBytes];
};
static_assert(sizeof(Finish) == 32);

// Sealed records after the handshake: u32 length | ciphertext | 16-byte GCM tag, where
// length counts ciphertext and tag; nonce = per-direction salt XOR the record's sequence
// number; the length is the additional authenticated data.
inline constexpr size_t kRecordHeaderBytes = 4;
inline constexpr size_t kRecordTagBytes = 16;
inline constexpr size_t kMaxRecordPlaintext = 64 * 1024;

}  // namespace conduit::authproto

#endif  // CONDUIT_PROTOCOL_AUTH_PROTOCOL_H_
