// AclFilter: allows or denies calls by the value of one field of their request message.
//
//   {"service": "pkg.Greeter", "method": "SayHello",      // method optional: whole service
//    "field": "account.user",                               // dotted path in the request type
//    "deny": ["mallory"]  |  "allow": ["alice", "bob"],
//    "descriptor_set_file": "/etc/conduit/greeter.desc"     // protoc --descriptor_set_out
//      | "descriptor_set": "<base64 of the same bytes>",     //   --include_imports
//    "side": "client" | "server" | "both"}                  // default "client"
//
// The operator's descriptors say which request type each method takes and where the field
// is; the daemon reads that one field from its private copy of each request (FieldPath). A
// denied call ends with PERMISSION_DENIED and never reaches the server; a request that is
// not a well-formed message is denied too (fail closed).
#ifndef CONDUIT_DAEMON_RPC_POLICY_ACL_FILTER_H_
#define CONDUIT_DAEMON_RPC_POLICY_ACL_FILTER_H_

#include <google/protobuf/descriptor.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/json.h"
#include "rpc/policy/field_path.h"
#include "rpc/policy/filter.h"
#include "rpc/policy/scope.h"

namespace conduit::rpc {

class AclFilter : public Filter {
 public:
  static Status Create(const std::string& name, const Json& spec, std::shared_ptr<Filter>* out);

  std::string name() const override { return name_; }
  bool Applies(const RpcInfo& info) const override;
  bool ReadsRequestBody() const override { return true; }
  Verdict OnRequestMessage(const RpcInfo& info, const uint8_t* data, size_t len) override;

 private:
  std::string name_;
  Scope scope_;
  std::shared_ptr<google::protobuf::DescriptorPool> pool_;
  std::map<std::string, FieldPath> fields_;  // "/pkg.Service/Method" -> the field to read
  std::set<std::string> values_;
  bool allow_list_ = false;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_POLICY_ACL_FILTER_H_
