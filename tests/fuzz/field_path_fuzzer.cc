// The ACL's protobuf field reader (rpc/policy/field_path.h), which reads one field of a
// request straight from the bytes a program sends, checked against protobuf's own parser:
// wherever both accept a message, the value the reader finds for a field (last value wins,
// sub-messages merge) is the value the server's protobuf will see, or an ACL could be
// bypassed. The message type has a field of every kind a rule may read, and itself nested.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "rpc/policy/field_path.h"

using conduit::rpc::FieldPath;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FieldDescriptorProto;
using google::protobuf::Message;
using google::protobuf::Reflection;

namespace {

struct Setup {
  google::protobuf::DescriptorPool pool;
  std::unique_ptr<google::protobuf::DynamicMessageFactory> factory;
  const Descriptor* type = nullptr;
  std::vector<FieldPath> paths;
  std::vector<std::vector<const FieldDescriptor*>> steps;  // per path, the fields walked
};

// proto3: message M { string s = 1; bytes b = 2; ...every readable kind...; M inner = 15; }
const Setup& Get() {
  static const Setup* setup = [] {
    google::protobuf::SetLogHandler(nullptr);  // protobuf logs every refused UTF-8 string
    auto* s = new Setup;
    google::protobuf::FileDescriptorProto file;
    file.set_name("fuzz.proto");
    file.set_package("fuzz");
    file.set_syntax("proto3");
    auto* e = file.add_enum_type();
    e->set_name("E");
    const char* names[] = {"ZERO", "ONE", "TWO"};
    for (int i = 0; i < 3; ++i) {
      auto* v = e->add_value();
      v->set_name(names[i]);
      v->set_number(i);
    }
    auto* m = file.add_message_type();
    m->set_name("M");
    const std::pair<const char*, FieldDescriptorProto::Type> fields[] = {
        {"s", FieldDescriptorProto::TYPE_STRING},     {"b", FieldDescriptorProto::TYPE_BYTES},
        {"i32", FieldDescriptorProto::TYPE_INT32},    {"i64", FieldDescriptorProto::TYPE_INT64},
        {"u32", FieldDescriptorProto::TYPE_UINT32},   {"u64", FieldDescriptorProto::TYPE_UINT64},
        {"s32", FieldDescriptorProto::TYPE_SINT32},   {"s64", FieldDescriptorProto::TYPE_SINT64},
        {"f32", FieldDescriptorProto::TYPE_FIXED32},  {"f64", FieldDescriptorProto::TYPE_FIXED64},
        {"sf32", FieldDescriptorProto::TYPE_SFIXED32}, {"sf64", FieldDescriptorProto::TYPE_SFIXED64},
        {"bo", FieldDescriptorProto::TYPE_BOOL},      {"e", FieldDescriptorProto::TYPE_ENUM},
        {"inner", FieldDescriptorProto::TYPE_MESSAGE}};
    int number = 1;
    for (const auto& [name, type] : fields) {
      auto* f = m->add_field();
      f->set_name(name);
      f->set_number(number++);
      f->set_label(FieldDescriptorProto::LABEL_OPTIONAL);
      f->set_type(type);
      if (type == FieldDescriptorProto::TYPE_ENUM) f->set_type_name(".fuzz.E");
      if (type == FieldDescriptorProto::TYPE_MESSAGE) f->set_type_name(".fuzz.M");
    }
    FUZZ_CHECK(s->pool.BuildFile(file) != nullptr, "fuzz.proto does not build");
    s->type = s->pool.FindMessageTypeByName("fuzz.M");
    s->factory = std::make_unique<google::protobuf::DynamicMessageFactory>(&s->pool);
    for (const char* prefix : {"", "inner.", "inner.inner."}) {
      for (const auto& [name, type] : fields) {
        if (type == FieldDescriptorProto::TYPE_MESSAGE) continue;
        FieldPath path;
        conduit::Status st = FieldPath::Resolve(s->type, std::string(prefix) + name, &path);
        FUZZ_CHECK(st.ok(), "%s", st.message().c_str());
        std::vector<const FieldDescriptor*> walk;
        const Descriptor* at = s->type;
        const long levels = std::count(prefix, prefix + strlen(prefix), '.');  // "inner." per level
        for (long level = 0; level < levels; ++level) {
          walk.push_back(at->FindFieldByName("inner"));
          at = walk.back()->message_type();
        }
        walk.push_back(at->FindFieldByName(name));
        s->paths.push_back(std::move(path));
        s->steps.push_back(std::move(walk));
      }
    }
    return s;
  }();
  return *setup;
}

// The value protobuf's reflection gives a rule's field, in the reader's text form.
std::string Expected(const Message& root, const std::vector<const FieldDescriptor*>& walk) {
  const Message* msg = &root;
  for (size_t i = 0; i + 1 < walk.size(); ++i) msg = &msg->GetReflection()->GetMessage(*msg, walk[i]);
  const Reflection* r = msg->GetReflection();
  const FieldDescriptor* f = walk.back();
  switch (f->type()) {
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES: return r->GetString(*msg, f);
    case FieldDescriptor::TYPE_INT32:
    case FieldDescriptor::TYPE_SINT32:
    case FieldDescriptor::TYPE_SFIXED32: return std::to_string(r->GetInt32(*msg, f));
    case FieldDescriptor::TYPE_INT64:
    case FieldDescriptor::TYPE_SINT64:
    case FieldDescriptor::TYPE_SFIXED64: return std::to_string(r->GetInt64(*msg, f));
    case FieldDescriptor::TYPE_UINT32:
    case FieldDescriptor::TYPE_FIXED32: return std::to_string(r->GetUInt32(*msg, f));
    case FieldDescriptor::TYPE_UINT64:
    case FieldDescriptor::TYPE_FIXED64: return std::to_string(r->GetUInt64(*msg, f));
    case FieldDescriptor::TYPE_BOOL: return r->GetBool(*msg, f) ? "true" : "false";
    case FieldDescriptor::TYPE_ENUM: {
      int number = r->GetEnumValue(*msg, f);
      const auto* v = f->enum_type()->FindValueByNumber(number);
      return v != nullptr ? v->name() : std::to_string(number);
    }
    default: return "?";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Setup& s = Get();
  std::unique_ptr<Message> msg(s.factory->GetPrototype(s.type)->New());
  const bool protobuf_ok = size <= INT32_MAX && msg->ParseFromArray(data, static_cast<int>(size));
  for (size_t i = 0; i < s.paths.size(); ++i) {
    std::string value;
    if (!s.paths[i].Read(data, size, &value) || !protobuf_ok) continue;
    const std::string expected = Expected(*msg, s.steps[i]);
    FUZZ_CHECK(value == expected, "%s: the reader says '%s', protobuf '%s'", s.paths[i].text().c_str(), value.c_str(),
               expected.c_str());
  }
  return 0;
}
