#include "rpc/policy/acl_filter.h"

#include <google/protobuf/descriptor.pb.h>

#include <fstream>
#include <sstream>

namespace conduit::rpc {
namespace {

bool DecodeBase64(const std::string& in, std::string* out) {
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    int d = digit(c);
    if (d < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

// The descriptor set bytes named by the spec.
Status ReadDescriptorSet(const Json& spec, std::string* bytes) {
  if (const Json* file = spec.find("descriptor_set_file"); file != nullptr && file->is_string()) {
    std::ifstream in(file->as_string(), std::ios::binary);
    if (!in) return InvalidArgument("cannot read descriptor_set_file %s", file->as_string().c_str());
    std::ostringstream all;
    all << in.rdbuf();
    *bytes = all.str();
    return Status::Ok();
  }
  if (const Json* b64 = spec.find("descriptor_set"); b64 != nullptr && b64->is_string()) {
    if (!DecodeBase64(b64->as_string(), bytes)) return InvalidArgument("descriptor_set is not base64");
    return Status::Ok();
  }
  return InvalidArgument(
      "an ACL needs the request types: \"descriptor_set_file\" (from protoc --descriptor_set_out "
      "--include_imports) or \"descriptor_set\" (the same bytes in base64)");
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
  auto f = std::make_shared<AclFilter>();
  f->name_ = name;
  CONDUIT_RETURN_IF_ERROR(Scope::FromJson(spec, &f->scope_));
  const Json* field = spec.find("field");
  if (field == nullptr || !field->is_string() || field->as_string().empty()) {
    return InvalidArgument("an ACL needs \"field\": a dotted path into the request message");
  }
  const Json* allow = spec.find("allow");
  const Json* deny = spec.find("deny");
  if ((allow == nullptr) == (deny == nullptr)) return InvalidArgument("an ACL needs exactly one of \"allow\" and \"deny\"");
  const Json* list = allow != nullptr ? allow : deny;
  f->allow_list_ = allow != nullptr;
  if (!list->is_array()) return InvalidArgument("\"%s\" must be a list of values", f->allow_list_ ? "allow" : "deny");
  for (const Json& v : list->items()) {
    if (v.is_string()) f->values_.insert(v.as_string());
    else if (v.is_int()) f->values_.insert(std::to_string(v.as_int()));
    else if (v.is_bool()) f->values_.insert(v.as_bool() ? "true" : "false");
    else return InvalidArgument("ACL values must be strings, integers or booleans");
  }
  std::string bytes;
  CONDUIT_RETURN_IF_ERROR(ReadDescriptorSet(spec, &bytes));
  CONDUIT_RETURN_IF_ERROR(BuildPool(bytes, &f->pool_));
  const google::protobuf::ServiceDescriptor* service = f->pool_->FindServiceByName(f->scope_.service);
  if (service == nullptr) return InvalidArgument("the descriptor set has no service %s", f->scope_.service.c_str());
  std::string last_error;
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = service->method(i);
    if (!f->scope_.method.empty() && m->name() != f->scope_.method) continue;
    FieldPath path;
    Status st = FieldPath::Resolve(m->input_type(), field->as_string(), &path);
    if (!st.ok()) {
      last_error = st.message();
      continue;  // a service-wide rule covers the methods whose request has the field
    }
    f->fields_["/" + service->full_name() + "/" + m->name()] = path;
  }
  if (f->fields_.empty()) {
    return InvalidArgument("no method of %s%s%s has request field '%s'%s%s", f->scope_.service.c_str(),
                           f->scope_.method.empty() ? "" : " named ", f->scope_.method.c_str(),
                           field->as_string().c_str(), last_error.empty() ? "" : ": ", last_error.c_str());
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
