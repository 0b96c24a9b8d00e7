#include "rpc/auth_properties.h"

#include <string_view>

namespace conduit::rpc {
namespace {

void Add(Metadata* md, std::string_view name, std::string_view value) {
  AppendMetadata(&md->block, name, value);
  ++md->count;
}

}  // namespace

Metadata AuthProperties(const TlsPeer& peer) {
  Metadata md;
  Add(&md, "transport_security_type", "ssl");
  if (peer.has_certificate) {
    if (!peer.subject.empty()) Add(&md, "x509_subject", peer.subject);
    if (!peer.common_name.empty()) Add(&md, "x509_common_name", peer.common_name);
    if (!peer.pem.empty()) Add(&md, "x509_pem_cert", peer.pem);
    const std::pair<const std::vector<std::string>*, const char*> kinds[] = {
        {&peer.dns_names, "peer_dns"}, {&peer.emails, "peer_email"}, {&peer.uris, "peer_uri"}, {&peer.ips, "peer_ip"}};
    for (const auto& [names, typed] : kinds) {
      for (const std::string& name : *names) {
        Add(&md, "x509_subject_alternative_name", name);
        Add(&md, typed, name);
      }
    }
    if (!peer.chain_pem.empty()) Add(&md, "x509_pem_cert_chain", peer.chain_pem);
  }
  Add(&md, "security_level", "TSI_PRIVACY_AND_INTEGRITY");
  Add(&md, "ssl_session_reused", "false");  // no resumption between daemons
  if (peer.uris.size() == 1 && peer.uris[0].rfind("spiffe://", 0) == 0) Add(&md, "peer_spiffe_id", peer.uris[0]);
  return md;
}

}  // namespace conduit::rpc
