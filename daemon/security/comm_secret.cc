#include "security/comm_secret.h"

#include <cstring>
#include <string>

#include "security/crypto.h"

namespace conduit {

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
  crypto::Digest d = crypto::HmacSha256(parent.data(), parent.size(), data);
  CommSecret child;
  memcpy(child.data(), d.data(), child.size());
  return child;
}

CommIdentity ChildCommIdentity(const CommSecret& parent_secret, uint64_t generation, int64_t color,
                               const std::string& root_addr) {
  CommIdentity child;
  child.secret = DeriveChildSecret(parent_secret, generation, color);
  child.key = CommKeyOf(child.secret);
  child.root_addr = root_addr;
  return child;
}

Status NewCommIdentity(const std::string& root_addr, CommIdentity* out) {
  CONDUIT_RETURN_IF_ERROR(NewCommSecret(&out->secret));
  out->key = CommKeyOf(out->secret);
  out->root_addr = root_addr;
  return Status::Ok();
}

CommIdentity AddressCommIdentity(const uint8_t* cluster_key, size_t key_len, uint32_t uid, const std::string& comm_id,
                                 const std::string& root_addr) {
  std::string data = "conduit NCCL_COMM_ID v1";
  data.push_back('\0');
  data.append(reinterpret_cast<const char*>(&uid), sizeof(uid));
  data.append(comm_id);
  crypto::Digest d = crypto::HmacSha256(cluster_key, key_len, data);
  CommIdentity id;
  memcpy(id.secret.data(), d.data(), id.secret.size());
  id.key = CommKeyOf(id.secret);
  id.root_addr = root_addr;
  return id;
}

Status CheckCommIdentity(const CommIdentity& id) {
  if (CommKeyOf(id.secret) != id.key) {
    return InvalidArgument("ncclUniqueId's communicator key %016llx does not match its secret: the id was altered or "
                           "forged", static_cast<unsigned long long>(id.key));
  }
  return Status::Ok();
}

}  // namespace conduit
