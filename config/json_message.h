// Operator documents (topology, policies) read as protobuf messages through protobuf's JSON
// mapping: the .proto files here are the schemas, and protobuf's parser gives the checks a
// schema can express (unknown fields, wrong types, integers out of an int32's range), its
// errors naming the field. Each daemon part then checks what a schema cannot (ranges,
// names unique, cross-field rules) on the typed message.
//
// Documents reach the daemon as JSON already parsed by common/json.h, which bounds what a
// hostile body may cost (depth, values, number lengths, duplicate keys); these functions
// hand that value to protobuf.
#ifndef CONDUIT_CONFIG_JSON_MESSAGE_H_
#define CONDUIT_CONFIG_JSON_MESSAGE_H_

#include <google/protobuf/message.h>
#include <google/protobuf/struct.pb.h>

#include <string_view>

#include "common/json.h"
#include "common/status.h"

namespace conduit::config {

// Fills `out` from the JSON text/value `doc`; `what` names the document in errors
// ("tenant policy: unknown field \"x\""). Fields may be written as in the .proto
// (max_mbit_per_s) or in protobuf's lowerCamelCase (maxMbitPerS).
Status MessageFromJsonText(std::string_view text, const char* what, google::protobuf::Message* out);
Status MessageFromJson(const Json& doc, const char* what, google::protobuf::Message* out);
// A union member (a google.protobuf.Value) read as `out`'s field `field`: {field: value}, e.g.
// a list of objects as a message's repeated field. The value goes through its JSON text,
// never through protobuf's inline Map code, whose layout differs between a ThreadSanitizer
// build and Debian's libprotobuf (found by the TSan job: a SEGV in Map::FindHelper).
Status MessageFromValue(const google::protobuf::Value& value, const char* field, const char* what,
                        google::protobuf::Message* out);

// A Value's kind, for a union's error messages.
bool IsString(const google::protobuf::Value& v);
bool IsList(const google::protobuf::Value& v);
bool IsAbsent(const google::protobuf::Value& v);  // not given, or null
// An integer-valued number whose value the double it is held in gives exactly: |v| <= 2^53
// (a Value's numbers are doubles, so 9007199254740993 would arrive as ...992; such
// integers must be written as strings).
inline constexpr int64_t kMaxExactInteger = int64_t{1} << 53;
bool AsInteger(const google::protobuf::Value& v, int64_t* out);

}  // namespace conduit::config

#endif  // CONDUIT_CONFIG_JSON_MESSAGE_H_
