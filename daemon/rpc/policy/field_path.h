// FieldPath: one protobuf field of a request, named by a dotted path ("account.user") and
// resolved once against the operator's descriptors, read straight from serialized bytes.
//
// Reading parses only what the rule needs, with protobuf's own wire reader
// (CodedInputStream, WireFormatLite): it walks the message's fields, skips every one not on
// the path (no decoding, no allocation) and descends only into the sub-messages on the path. Protobuf semantics hold: a field that appears several times
// takes its last value, and sub-messages that appear several times merge, so a sender
// cannot hide a value behind a second copy of the field.
#ifndef CONDUIT_DAEMON_RPC_POLICY_FIELD_PATH_H_
#define CONDUIT_DAEMON_RPC_POLICY_FIELD_PATH_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace conduit::rpc {

class FieldPath {
 public:
  // Resolves `path` in `type`; every step but the last must be a singular message field,
  // the last a singular string, bytes, integer, bool or enum field.
  static Status Resolve(const google::protobuf::Descriptor* type, const std::string& path, FieldPath* out);

  // The field's value as text (decimal integers, "true"/"false", enum value names), or its
  // default when absent. False when `data` is not a well-formed message.
  bool Read(const uint8_t* data, size_t len, std::string* value) const;

  const std::string& text() const { return text_; }

 private:
  struct Step {
    uint32_t tag;  // field number and the wire type its declared type is written with
    google::protobuf::FieldDescriptor::Type type;
  };
  bool Find(google::protobuf::io::CodedInputStream* in, size_t step, std::string* value, bool* found) const;
  std::string Format(uint64_t raw) const;

  std::string text_;
  std::vector<Step> steps_;
  const google::protobuf::FieldDescriptor* leaf_ = nullptr;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_POLICY_FIELD_PATH_H_
