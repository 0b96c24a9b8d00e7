// FieldPath reads a request field from serialized bytes the way protobuf's own parser
// would (last value wins, repeated sub-messages merge), checked against real messages of
// the greeter test service.
#include <gtest/gtest.h>

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
