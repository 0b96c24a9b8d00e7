#include "rpc/policy/acl_filter.h"

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/struct.pb.h>

#include <fstream>
#include <sstream>

#include "config/json_message.h"
#include "config/rpc_policy.pb.h"

namespace conduit::rpc {
namespace {

// The descriptor set bytes named by the policy.
Status ReadDescriptorSet(const config::v1::AclPolicy& doc, std::string* bytes) {
  if (!doc.descriptor_set_file().empty()) {
    std::ifstream in(doc.descriptor_set_file(), std::ios::binary);
    if (!in) return InvalidArgument("cannot read descriptor_set_file %s", doc.descriptor_set_file().c_str());
    std::ostringstream all;
    all << in.rdbuf();
    *bytes = all.str();
    return Status::Ok();
  }
  if (!doc.descriptor_set().empty()) {
    *bytes = doc.descriptor_set();  // protobuf's JSON mapping decoded the base64
    return Status::Ok();
  }
  return InvalidArgument(
      "an ACL needs the request types: \"descriptor_set_file\" (from protoc --descriptor_set_out "
      "--include_imports) or \"descriptor_set\" (the same bytes in base64)");
}

// An allow or deny entry as the text FieldPath::Read gives the field's value.
bool ValueText(const google::protobuf::Value& v, std::string* out) {
  int64_t n;
  if (config::IsString(v)) *out = v.string_value();
  else if (config::AsInteger(v, &n)) *out = std::to_string(n);
  else if (v.kind_case() == google::protobuf::Value::kBoolValue) *out = v.bool_value() ? "true" : "false";
  else return false;
  return true;
}

Status BuildPool(const std::string& bytes, std::shared_ptr<google::protobuf::DescriptorPool>* out) {
  google::protobuf::FileDescriptorSet set;
  if (!set.ParseFromString(bytes)) return InvalidArgument("the descriptor set is not a FileDescriptorSet");
  auto pool = std::make_shared<google::protobuf::DescriptorPool>();
  for (const auto& file : set.file()) {
    if (pool->BuildFile(file) == nullptr) {
      return InvalidArgument("descriptor set file %s does not build (missing --include_imports?)", file.name().c_str());
    }
  }
  *out = std::move(pool);
  return Status::Ok();
}

}  // namespace

Status AclFilter::Create(const std::string& name, const Json& spec, std::shared_ptr<Filter>* out) {
  config::v1::AclPolicy doc;
  CONDUIT_RETURN_IF_ERROR(config::MessageFromJson(spec, "ACL", &doc));
  auto f = std::make_shared<AclFilter>();
  f->name_ = name;
  CONDUIT_RETURN_IF_ERROR(Scope::Make(doc.service(), doc.method(), doc.side(), &f->scope_));
  if (doc.field().empty()) return InvalidArgument("an ACL needs \"field\": a dotted path into the request message");
  if (doc.has_allow() == doc.has_deny()) return InvalidArgument("an ACL needs exactly one of \"allow\" and \"deny\"");
  f->allow_list_ = doc.has_allow();
  for (const google::protobuf::Value& v : (f->allow_list_ ? doc.allow() : doc.deny()).values()) {
    std::string text;
    if (!ValueText(v, &text)) {
      return InvalidArgument("ACL values must be strings, integers (beyond 2^53 written as strings: \"%lld\") or "
                             "booleans", static_cast<long long>(config::kMaxExactInteger + 1));
    }
    f->values_.insert(std::move(text));
  }
  std::string bytes;
  CONDUIT_RETURN_IF_ERROR(ReadDescriptorSet(doc, &bytes));
  CONDUIT_RETURN_IF_ERROR(BuildPool(bytes, &f->pool_));
  const google::protobuf::ServiceDescriptor* service = f->pool_->FindServiceByName(f->scope_.service);
  if (service == nullptr) return InvalidArgument("the descriptor set has no service %s", f->scope_.service.c_str());
  std::string last_error;
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = service->method(i);
    if (!f->scope_.method.empty() && m->name() != f->scope_.method) continue;
    FieldPath path;
    Status st = FieldPath::Resolve(m->input_type(), doc.field(), &path);
    if (!st.ok()) {
      last_error = st.message();
      continue;  // a service-wide rule covers the methods whose request has the field
    }
    f->fields_["/" + service->full_name() + "/" + m->name()] = path;
  }
  if (f->fields_.empty()) {
    return InvalidArgument("no method of %s%s%s has request field '%s'%s%s", f->scope_.service.c_str(),
                           f->scope_.method.empty() ? "" : " named ", f->scope_.method.c_str(),
                           doc.field().c_str(), last_error.empty() ? "" : ": ", last_error.c_str());
  }
  *out = std::move(f);
  return Status::Ok();
}

bool AclFilter::Applies(const RpcInfo& info) const { return scope_.Matches(info) && fields_.count(info.method) > 0; }

Verdict AclFilter::OnRequestMessage(const RpcInfo& info, const uint8_t* data, size_t len) {
  auto it = fields_.find(info.method);
  if (it == fields_.end()) return Verdict::Continue();
  std::string value;
  if (!it->second.Read(data, len, &value)) {
    return Verdict::Deny(GrpcStatusOf(StatusCode::kPermissionDenied), "conduit: access denied by policy '" + name_ +
                                                                          "': the request to " + info.method +
                                                                          " is not a well-formed message");
  }
  bool listed = values_.count(value) > 0;
  if (listed == allow_list_) return Verdict::Continue();
  return Verdict::Deny(GrpcStatusOf(StatusCode::kPermissionDenied),
                       "conduit: access denied by policy '" + name_ + "': " + it->second.text() + " = '" + value +
                           "' is " + (allow_list_ ? "not allowed" : "denied"));
}

}  // namespace conduit::rpc
