#include "rpc/program_requests.h"

#include <cstring>
#include <initializer_list>
#include <utility>

namespace conduit::rpc {
namespace {

template <typename T>
bool DecodeExact(std::string_view payload, T* out) {
  if (payload.size() != sizeof(T)) return false;
  memcpy(out, payload.data(), sizeof(T));
  return true;
}

// Splits `rest` into the texts of `parts` ({count, where}), in order; the counts must add up
// to exactly what `rest` holds.
Status TakeCounted(const char* request, std::string_view rest,
                   std::initializer_list<std::pair<uint32_t, std::string*>> parts) {
  uint64_t counted = 0;
  for (const auto& [n, out] : parts) counted += n;
  if (counted != rest.size()) {
    return InvalidArgument("%s counts %llu bytes of credentials and carries %zu", request,
                           static_cast<unsigned long long>(counted), rest.size());
  }
  for (const auto& [n, out] : parts) {
    out->assign(rest.substr(0, n));
    rest.remove_prefix(n);
  }
  return Status::Ok();
}

Status CheckPem(const char* what, uint32_t n) {
  if (n > rpcproto::kMaxTlsPemBytes) {
    return InvalidArgument("%s of %u bytes, over the %u-byte limit", what, n, rpcproto::kMaxTlsPemBytes);
  }
  return Status::Ok();
}

}  // namespace

bool DecodeHello(std::string_view payload, rpcproto::HelloRequest* req, std::string* exe) {
  if (!DecodeExact(payload, req)) return false;
  *exe = FromCString(req->exe);
  return true;
}

bool DecodeOpenChannel(std::string_view payload, rpcproto::OpenChannelRequest* req, std::string* target) {
  if (!DecodeExact(payload, req)) return false;
  *target = FromCString(req->target);
  return true;
}

Status DecodeOpenTlsChannel(std::string_view payload, TlsChannelOpen* out) {
  rpcproto::TlsChannelCredentials creds;
  if (payload.size() < sizeof(out->req) + sizeof(creds)) {
    return InvalidArgument("malformed OpenTlsChannel (%zu bytes)", payload.size());
  }
  memcpy(&out->req, payload.data(), sizeof(out->req));
  memcpy(&creds, payload.data() + sizeof(out->req), sizeof(creds));
  out->target = FromCString(out->req.target);
  CONDUIT_RETURN_IF_ERROR(CheckPem("the roots", creds.root_bytes));
  CONDUIT_RETURN_IF_ERROR(CheckPem("the client key", creds.key_bytes));
  CONDUIT_RETURN_IF_ERROR(CheckPem("the client certificate chain", creds.chain_bytes));
  if (creds.name_bytes == 0 || creds.name_bytes > rpcproto::kMaxTlsNameBytes) {
    return InvalidArgument("a server name of %u bytes (1 to %u)", creds.name_bytes, rpcproto::kMaxTlsNameBytes);
  }
  if (creds.root_bytes == 0) return InvalidArgument("OpenTlsChannel without roots");
  if ((creds.key_bytes == 0) != (creds.chain_bytes == 0)) {
    return InvalidArgument("OpenTlsChannel with a client key but no certificate chain, or the reverse");
  }
  CONDUIT_RETURN_IF_ERROR(TakeCounted("OpenTlsChannel", payload.substr(sizeof(out->req) + sizeof(creds)),
                                      {{creds.root_bytes, &out->roots},
                                       {creds.key_bytes, &out->key},
                                       {creds.chain_bytes, &out->chain},
                                       {creds.name_bytes, &out->name}}));
  if (out->name.find('\0') != std::string::npos) return InvalidArgument("a server name with a NUL byte");
  return Status::Ok();
}

Status DecodeServeTls(std::string_view payload, TlsServe* out) {
  rpcproto::TlsServerCredentials creds;
  if (payload.size() < sizeof(out->req) + sizeof(creds)) {
    return InvalidArgument("malformed ServeTls (%zu bytes)", payload.size());
  }
  memcpy(&out->req, payload.data(), sizeof(out->req));
  memcpy(&creds, payload.data() + sizeof(out->req), sizeof(creds));
  if (creds.client_cert_mode > 4) return InvalidArgument("client certificate mode %u (0 to 4)", creds.client_cert_mode);
  out->client_cert_mode = creds.client_cert_mode;
  CONDUIT_RETURN_IF_ERROR(CheckPem("the server key", creds.key_bytes));
  CONDUIT_RETURN_IF_ERROR(CheckPem("the server certificate chain", creds.chain_bytes));
  CONDUIT_RETURN_IF_ERROR(CheckPem("the client roots", creds.root_bytes));
  if (creds.key_bytes == 0 || creds.chain_bytes == 0) return InvalidArgument("ServeTls without a key and certificate");
  return TakeCounted("ServeTls", payload.substr(sizeof(out->req) + sizeof(creds)),
                     {{creds.key_bytes, &out->key}, {creds.chain_bytes, &out->chain}, {creds.root_bytes, &out->roots}});
}

}  // namespace conduit::rpc
