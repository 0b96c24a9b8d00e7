#include "security/peer_handshake.h"

#include <cstring>

#include "common/fd_io.h"
#include "common/frame.h"
#include "protocol/auth_protocol.h"
#include "security/crypto.h"

namespace conduit {
namespace {

using authproto::Challenge;
using authproto::Finish;
using authproto::Hello;

constexpr char kAcceptorLabel[] = "conduit-auth-v1 acceptor";
constexpr char kDialerLabel[] = "conduit-auth-v1 dialer";
constexpr char kKeysLabel[] = "conduit-auth-v1 keys";

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

// Hello | Challenge without its mac: what both proofs cover.
std::string Transcript(const Hello& h, const Challenge& c) {
  return Bytes(&h, sizeof(h)) + Bytes(&c, offsetof(Challenge, mac));
}

crypto::Digest Proof(const ClusterKey& key, const char* label, const std::string& transcript) {
  return crypto::HmacSha256(key.bytes.data(), key.bytes.size(), std::string(label) + '\0' + transcript);
}

std::string KeyIdText(const uint8_t* id) { return crypto::Hex(id, authproto::kKeyIdBytes); }

void SetKeyId(const ClusterKey& key, uint8_t* out) {
  static_assert(sizeof(key.fingerprint) == authproto::kKeyIdBytes);
  memcpy(out, key.fingerprint.data(), authproto::kKeyIdBytes);
}

// A daemon identity must be a printable, non-empty "ip:port".
Status CheckIdentity(const char (&text)[64], const std::string& peer, std::string* out) {
  *out = FromCString(text);
  // A dialer always ends its name with a NUL (CopyCString): 64 bytes without one were not
  // written by a daemon.
  bool printable = !out->empty() && out->size() < sizeof(text);
  for (char c : *out) printable = printable && c > ' ' && c < 127;
  if (!printable) return RemoteError("daemon at %s sent an unusable identity in its handshake", peer.c_str());
  return Status::Ok();
}

// Per-direction keys from the cluster key, the X25519 secret and the transcript.
Status DeriveKeys(const ClusterKey& key, const std::array<uint8_t, 32>& dh, const Hello& h, const Challenge& c,
                  DirectionKeys* dialer_to_acceptor, DirectionKeys* acceptor_to_dialer) {
  uint8_t ikm[64];
  memcpy(ikm, key.bytes.data(), 32);
  memcpy(ikm + 32, dh.data(), 32);
  std::string salt = Bytes(h.nonce, sizeof(h.nonce)) + Bytes(c.nonce, sizeof(c.nonce));
  crypto::Digest th = crypto::Sha256(Bytes(&h, sizeof(h)) + Bytes(&c, sizeof(c)));
  std::string info = std::string(kKeysLabel) + '\0' + Bytes(th.data(), th.size());
  uint8_t okm[2 * (32 + 12)];
  Status st = crypto::HkdfSha256(ikm, sizeof(ikm), salt, info, okm, sizeof(okm));
  crypto::Cleanse(ikm, sizeof(ikm));
  CONDUIT_RETURN_IF_ERROR(st);
  memcpy(dialer_to_acceptor->key.data(), okm, 32);
  memcpy(acceptor_to_dialer->key.data(), okm + 32, 32);
  memcpy(dialer_to_acceptor->salt.data(), okm + 64, 12);
  memcpy(acceptor_to_dialer->salt.data(), okm + 76, 12);
  crypto::Cleanse(okm, sizeof(okm));
  return Status::Ok();
}

// The record keys of a sealed connection: the X25519 secret of this side's key and the
// other side's share, then DeriveKeys.
Status SealedKeys(const ClusterKey& key, const crypto::X25519& dh, const uint8_t* peer_share, const Hello& h,
                  const Challenge& c, DirectionKeys* dialer_to_acceptor, DirectionKeys* acceptor_to_dialer) {
  std::array<uint8_t, 32> secret{};
  CONDUIT_RETURN_IF_ERROR(dh.Derive(peer_share, &secret));
  Status st = DeriveKeys(key, secret, h, c, dialer_to_acceptor, acceptor_to_dialer);
  crypto::Cleanse(secret.data(), secret.size());
  return st;
}

std::string NoKeyHint(const HandshakeConfig& config) {
  return config.self_only ? " (this daemon has no --cluster-key, so it talks to no other daemon; start every daemon "
                            "with the same --cluster-key)"
                          : "";
}

}  // namespace

namespace {

// The first 8 bytes of a Hello: enough to refuse what is not a handshake at once.
Status CheckHelloStart(const Hello& h, const std::string& peer) {
  if (h.magic != authproto::kMagic) {
    return InvalidUsage("connection from %s did not start with the authentication handshake (first bytes 0x%08x): a "
                        "daemon started with --insecure-peers, or not a Conduit daemon; refused", peer.c_str(), h.magic);
  }
  if (h.version != authproto::kVersion) {
    return InvalidUsage("connection from %s speaks handshake version %u, this daemon %u; refused", peer.c_str(),
                        h.version, authproto::kVersion);
  }
  return Status::Ok();
}

}  // namespace

Status CheckHello(const Hello& h, const std::string& peer, std::string* daemon) {
  CONDUIT_RETURN_IF_ERROR(CheckHelloStart(h, peer));
  if ((h.flags & ~authproto::kWantSealed) != 0) {
    return InvalidUsage("connection from %s sent unknown handshake flags 0x%x; refused", peer.c_str(), h.flags);
  }
  return CheckIdentity(h.daemon, peer, daemon);
}

Status DialerHandshake(int fd, const HandshakeConfig& config, const std::string& peer, Deadline deadline,
                       HandshakeResult* out) {
  const ClusterKey& key = *config.key;
  crypto::X25519 dh;
  CONDUIT_RETURN_IF_ERROR(dh.Generate());
  Hello h{};
  h.magic = authproto::kMagic;
  h.version = authproto::kVersion;
  h.flags = config.want_sealed ? authproto::kWantSealed : 0;
  SetKeyId(key, h.key_id);
  CONDUIT_RETURN_IF_ERROR(crypto::RandomBytes(h.nonce, sizeof(h.nonce)));
  memcpy(h.share, dh.share().data(), sizeof(h.share));
  CopyCString(h.daemon, config.self.c_str());
  CONDUIT_RETURN_IF_ERROR(WriteFull(fd, &h, sizeof(h), deadline));

  Challenge c{};
  Status st = ReadFull(fd, &c, sizeof(c), deadline);
  if (!st.ok()) {
    return SystemError("daemon at %s did not complete the authentication handshake (%s): it refused this daemon or "
                       "does not authenticate (different --cluster-key, or --insecure-peers there); see its log%s",
                       peer.c_str(), st.message().c_str(), NoKeyHint(config).c_str());
  }
  if (c.magic != authproto::kMagic || c.version != authproto::kVersion) {
    return RemoteError("daemon at %s answered the handshake with magic 0x%08x version %u (this daemon speaks "
                       "version %u)", peer.c_str(), c.magic, c.version, authproto::kVersion);
  }
  if (memcmp(c.key_id, h.key_id, sizeof(h.key_id)) != 0) {
    return RemoteError("daemon at %s holds a different cluster key (key id %s, this daemon's %s)%s", peer.c_str(),
                       KeyIdText(c.key_id).c_str(), key.id.c_str(), NoKeyHint(config).c_str());
  }
  const std::string transcript = Transcript(h, c);
  crypto::Digest want = Proof(key, kAcceptorLabel, transcript);
  if (!crypto::ConstantTimeEqual(want.data(), c.mac, want.size())) {
    return RemoteError("daemon at %s failed to prove it holds the cluster key; refusing it", peer.c_str());
  }
  CONDUIT_RETURN_IF_ERROR(CheckIdentity(c.daemon, peer, &out->peer_daemon));
  const bool sealed = (c.flags & authproto::kSealed) != 0;
  if (sealed) CONDUIT_RETURN_IF_ERROR(SealedKeys(key, dh, c.share, h, c, &out->send, &out->recv));
  Finish f{};
  crypto::Digest proof = Proof(key, kDialerLabel, transcript);
  memcpy(f.mac, proof.data(), sizeof(f.mac));
  CONDUIT_RETURN_IF_ERROR(WriteFull(fd, &f, sizeof(f), deadline));
  out->sealed = sealed;
  return Status::Ok();
}

Status AcceptorHandshake(int fd, const HandshakeConfig& config, const std::string& peer, Deadline deadline,
                         HandshakeResult* out) {
  const ClusterKey& key = *config.key;
  Hello h{};
  // The first 8 bytes tell a handshake from a daemon that sends frames straight away (one
  // started with --insecure-peers) without waiting for a whole Hello.
  CONDUIT_RETURN_IF_ERROR(ReadFull(fd, &h, 8, deadline));
  CONDUIT_RETURN_IF_ERROR(CheckHelloStart(h, peer));
  CONDUIT_RETURN_IF_ERROR(ReadFull(fd, reinterpret_cast<uint8_t*>(&h) + 8, sizeof(h) - 8, deadline));
  std::string claimed;
  CONDUIT_RETURN_IF_ERROR(CheckHello(h, peer, &claimed));
  const bool sealed = (h.flags & authproto::kWantSealed) != 0;
  crypto::X25519 dh;
  Challenge c{};
  c.magic = authproto::kMagic;
  c.version = authproto::kVersion;
  c.flags = sealed ? authproto::kSealed : 0;
  SetKeyId(key, c.key_id);
  CONDUIT_RETURN_IF_ERROR(crypto::RandomBytes(c.nonce, sizeof(c.nonce)));
  if (sealed) {
    CONDUIT_RETURN_IF_ERROR(dh.Generate());
    memcpy(c.share, dh.share().data(), sizeof(c.share));
  }
  CopyCString(c.daemon, config.self.c_str());
  const std::string transcript = Transcript(h, c);
  crypto::Digest proof = Proof(key, kAcceptorLabel, transcript);
  memcpy(c.mac, proof.data(), sizeof(c.mac));
  CONDUIT_RETURN_IF_ERROR(WriteFull(fd, &c, sizeof(c), deadline));

  Finish f{};
  Status st = ReadFull(fd, &f, sizeof(f), deadline);
  const bool same_key = memcmp(h.key_id, c.key_id, sizeof(h.key_id)) == 0;
  if (!st.ok()) {
    return SystemError("connection from %s ended during the authentication handshake (%s)%s", peer.c_str(),
                       st.message().c_str(),
                       same_key ? "" : "; its cluster key differs from this daemon's (key ids differ)");
  }
  crypto::Digest want = Proof(key, kDialerLabel, transcript);
  if (!crypto::ConstantTimeEqual(want.data(), f.mac, want.size())) {
    return InvalidUsage("connection from %s (claiming daemon %s) failed authentication: it does not hold this "
                        "cluster's key (its key id %s, this daemon's %s)%s; refused",
                        peer.c_str(), FromCString(h.daemon).c_str(), KeyIdText(h.key_id).c_str(), key.id.c_str(),
                        NoKeyHint(config).c_str());
  }
  out->peer_daemon = claimed;  // proven now, by the MAC over the Hello that carries it
  if (sealed) CONDUIT_RETURN_IF_ERROR(SealedKeys(key, dh, h.share, h, c, &out->recv, &out->send));
  out->sealed = sealed;
  return Status::Ok();
}

}  // namespace conduit
