#include "security/comm_secret.h"

#include <cstring>
#include <string>

#include "security/crypto.h"

namespace conduit {

namespace {

// An identity is its secret, the key that secret gives, and a root.
CommIdentity IdentityOf(const CommSecret& secret, const std::string& root_addr) {
  CommIdentity id;
  id.secret = secret;
  id.key = CommKeyOf(secret);
  id.root_addr = root_addr;
  return id;
}

// A secret derived from `data` under `key` (HMAC-SHA256: its 32 bytes).
CommSecret DerivedSecret(const uint8_t* key, size_t key_len, const std::string& data) {
  crypto::Digest d = crypto::HmacSha256(key, key_len, data);
  CommSecret secret;
  memcpy(secret.data(), d.data(), secret.size());
  return secret;
}

}  // namespace

Status NewCommSecret(CommSecret* out) { return crypto::RandomBytes(out->data(), out->size()); }

uint64_t CommKeyOf(const CommSecret& secret) {
  std::string data = "conduit comm key v1";
  data.push_back('\0');
  data.append(reinterpret_cast<const char*>(secret.data()), secret.size());
  crypto::Digest d = crypto::Sha256(data);
  uint64_t key;
  memcpy(&key, d.data(), sizeof(key));
  return key == 0 ? 1 : key;
}

CommSecret DeriveChildSecret(const CommSecret& parent, uint64_t generation, int64_t color) {
  std::string data = "conduit comm child v1";
  data.push_back('\0');
  data.append(reinterpret_cast<const char*>(&generation), sizeof(generation));
  data.append(reinterpret_cast<const char*>(&color), sizeof(color));
  return DerivedSecret(parent.data(), parent.size(), data);
}

CommIdentity ChildCommIdentity(const CommSecret& parent_secret, uint64_t generation, int64_t color,
                               const std::string& root_addr) {
  return IdentityOf(DeriveChildSecret(parent_secret, generation, color), root_addr);
}

Status NewCommIdentity(const std::string& root_addr, CommIdentity* out) {
  CommSecret secret;
  CONDUIT_RETURN_IF_ERROR(NewCommSecret(&secret));
  *out = IdentityOf(secret, root_addr);
  return Status::Ok();
}

CommIdentity AddressCommIdentity(const uint8_t* cluster_key, size_t key_len, uint32_t uid, const std::string& comm_id,
                                 const std::string& root_addr) {
  std::string data = "conduit NCCL_COMM_ID v1";
  data.push_back('\0');
  data.append(reinterpret_cast<const char*>(&uid), sizeof(uid));
  data.append(comm_id);
  return IdentityOf(DerivedSecret(cluster_key, key_len, data), root_addr);
}

Status CheckCommIdentity(const CommIdentity& id) {
  if (CommKeyOf(id.secret) != id.key) {
    return InvalidArgument("ncclUniqueId's communicator key %016llx does not match its secret: the id was altered or "
                           "forged", static_cast<unsigned long long>(id.key));
  }
  return Status::Ok();
}

}  // namespace conduit
