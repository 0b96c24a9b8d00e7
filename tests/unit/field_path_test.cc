// FieldPath reads a request field from serialized bytes the way protobuf's own parser
// would (last value wins, repeated sub-messages merge), checked against real messages of
// the greeter test service.
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <gtest/gtest.h>

#include <memory>

#include "greeter.pb.h"
#include "rpc/policy/field_path.h"

namespace conduit::rpc {
namespace {

using conduit::test::HelloRequest;

FieldPath Resolve(const std::string& path) {
  FieldPath f;
  Status st = FieldPath::Resolve(HelloRequest::descriptor(), path, &f);
  EXPECT_TRUE(st.ok()) << st.message();
  return f;
}

std::string Read(const FieldPath& f, const std::string& bytes) {
  std::string v;
  EXPECT_TRUE(f.Read(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &v));
  return v;
}

TEST(FieldPathTest, ResolveChecksTheDescriptor) {
  FieldPath f;
  EXPECT_FALSE(FieldPath::Resolve(HelloRequest::descriptor(), "nope", &f).ok());
  EXPECT_FALSE(FieldPath::Resolve(HelloRequest::descriptor(), "account.nope", &f).ok());
  EXPECT_FALSE(FieldPath::Resolve(HelloRequest::descriptor(), "name.x", &f).ok()) << "a string is not a message";
  EXPECT_FALSE(FieldPath::Resolve(HelloRequest::descriptor(), "account", &f).ok()) << "a message is not a value";
  EXPECT_TRUE(FieldPath::Resolve(HelloRequest::descriptor(), "account.tier", &f).ok());
}

TEST(FieldPathTest, ReadsValuesAndDefaults) {
  HelloRequest req;
  req.set_name("world");
  req.set_payload(std::string(1000, '\x0a'));  // bytes that look like field keys
  req.set_delay_ms(-3);
  req.mutable_account()->set_user("alice");
  req.mutable_account()->set_tier(7);
  std::string bytes = req.SerializeAsString();
  EXPECT_EQ(Read(Resolve("name"), bytes), "world");
  EXPECT_EQ(Read(Resolve("account.user"), bytes), "alice");
  EXPECT_EQ(Read(Resolve("account.tier"), bytes), "7");
  EXPECT_EQ(Read(Resolve("delay_ms"), bytes), "-3");
  EXPECT_EQ(Read(Resolve("fail_code"), bytes), "0") << "absent: proto3 default";
  HelloRequest empty;
  EXPECT_EQ(Read(Resolve("account.user"), empty.SerializeAsString()), "");
}

TEST(FieldPathTest, AgreesWithProtobufOnRepeatedAndMergedFields) {
  // Concatenated messages parse as one: scalars take the last value, sub-messages merge.
  HelloRequest first, second;
  first.mutable_account()->set_user("alice");
  first.set_name("a");
  second.mutable_account()->set_tier(3);
  second.set_name("b");
  std::string both = first.SerializeAsString() + second.SerializeAsString();
  HelloRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(both));
  EXPECT_EQ(Read(Resolve("account.user"), both), parsed.account().user());
  EXPECT_EQ(Read(Resolve("name"), both), parsed.name());
  HelloRequest sneaky;
  sneaky.mutable_account()->set_user("mallory");
  std::string hidden = first.SerializeAsString() + sneaky.SerializeAsString();
  ASSERT_TRUE(parsed.ParseFromString(hidden));
  EXPECT_EQ(parsed.account().user(), "mallory");
  EXPECT_EQ(Read(Resolve("account.user"), hidden), "mallory");
}

// Found by tests/fuzz/field_path_fuzzer.cc: a 32-bit field sent as a longer varint. The
// server's protobuf keeps the low 32 bits; the reader must see the same value, or a deny
// rule on it is bypassed.
TEST(FieldPathTest, ThirtyTwoBitFieldsKeepTheLow32BitsLikeProtobuf) {
  google::protobuf::FileDescriptorProto file;
  file.set_name("wide.proto");
  file.set_syntax("proto3");
  auto* m = file.add_message_type();
  m->set_name("Wide");
  const std::pair<const char*, google::protobuf::FieldDescriptorProto::Type> fields[] = {
      {"u32", google::protobuf::FieldDescriptorProto::TYPE_UINT32},
      {"s32", google::protobuf::FieldDescriptorProto::TYPE_SINT32},
      {"i32", google::protobuf::FieldDescriptorProto::TYPE_INT32}};
  for (int i = 0; i < 3; ++i) {
    auto* f = m->add_field();
    f->set_name(fields[i].first);
    f->set_number(i + 1);
    f->set_type(fields[i].second);
    f->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  }
  google::protobuf::DescriptorPool pool;
  ASSERT_NE(pool.BuildFile(file), nullptr);
  const google::protobuf::Descriptor* type = pool.FindMessageTypeByName("Wide");
  // Each field as the varint 2^32 + 5 (10-byte form of a 64-bit value too).
  const std::string wide = "\x85\x80\x80\x80\x10";
  const std::string bytes = "\x08" + wide + "\x10" + wide + "\x18" + wide;
  google::protobuf::DynamicMessageFactory factory(&pool);
  std::unique_ptr<google::protobuf::Message> parsed(factory.GetPrototype(type)->New());
  ASSERT_TRUE(parsed->ParseFromString(bytes));
  const auto* r = parsed->GetReflection();
  const std::string expected[] = {std::to_string(r->GetUInt32(*parsed, type->field(0))),
                                  std::to_string(r->GetInt32(*parsed, type->field(1))),
                                  std::to_string(r->GetInt32(*parsed, type->field(2)))};
  EXPECT_EQ(expected[0], "5");
  EXPECT_EQ(expected[1], "-3");
  for (int i = 0; i < 3; ++i) {
    FieldPath f;
    ASSERT_TRUE(FieldPath::Resolve(type, fields[i].first, &f).ok());
    EXPECT_EQ(Read(f, bytes), expected[i]) << fields[i].first;
  }
}

// An unknown group (wire types 3 and 4, deprecated but still parsed by protobuf) is skipped
// as protobuf skips it, so a rule still sees the field after it; an unclosed group is refused.
TEST(FieldPathTest, UnknownGroupsAreSkippedLikeProtobuf) {
  HelloRequest req;
  req.mutable_account()->set_user("alice");
  const std::string group = std::string("\x9b\x06", 2) + "\x08\x05" + "\x0a\x01x" + std::string("\x9c\x06", 2);
  const std::string bytes = group + req.SerializeAsString();  // field 99: a group holding 1: 5, 1: "x"
  HelloRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(Read(Resolve("account.user"), bytes), parsed.account().user());
  std::string v;
  const std::string open = group.substr(0, group.size() - 2) + req.SerializeAsString();
  EXPECT_FALSE(parsed.ParseFromString(open));
  EXPECT_FALSE(Resolve("account.user").Read(reinterpret_cast<const uint8_t*>(open.data()), open.size(), &v));
}

TEST(FieldPathTest, MalformedBytesAreReported) {
  HelloRequest req;
  req.mutable_account()->set_user("alice");
  std::string bytes = req.SerializeAsString();
  FieldPath f = Resolve("account.user");
  std::string v;
  for (size_t n = 1; n < bytes.size(); ++n) {
    EXPECT_FALSE(f.Read(reinterpret_cast<const uint8_t*>(bytes.data()), n, &v)) << n;
  }
  std::string bad_varint(11, '\xff');
  EXPECT_FALSE(f.Read(reinterpret_cast<const uint8_t*>(bad_varint.data()), bad_varint.size(), &v));
}

}  // namespace
}  // namespace conduit::rpc
