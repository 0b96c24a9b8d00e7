#include "config/json_message.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <string>

namespace conduit::config {

Status MessageFromJsonText(std::string_view text, const char* what, google::protobuf::Message* out) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a misspelt field is an error, never silently dropped
  out->Clear();
  const auto st = google::protobuf::util::JsonStringToMessage(std::string(text), out, options);
  if (!st.ok()) return InvalidArgument("%s: %s", what, std::string(st.message()).c_str());
  return Status::Ok();
}

Status MessageFromJson(const Json& doc, const char* what, google::protobuf::Message* out) {
  if (!doc.is_object()) return InvalidArgument("%s: expected a JSON object", what);
  return MessageFromJsonText(doc.Dump(), what, out);
}

Status MessageFromValue(const google::protobuf::Value& value, const char* field, const char* what,
                        google::protobuf::Message* out) {
  std::string text;
  const auto st = google::protobuf::util::MessageToJsonString(value, &text);
  if (!st.ok()) return InvalidArgument("%s: %s", what, std::string(st.message()).c_str());
  std::string wrapped = "{";
  AppendJsonString(&wrapped, field);
  wrapped += ":" + text + "}";
  return MessageFromJsonText(wrapped, what, out);
}

bool IsString(const google::protobuf::Value& v) { return v.kind_case() == google::protobuf::Value::kStringValue; }
bool IsList(const google::protobuf::Value& v) { return v.kind_case() == google::protobuf::Value::kListValue; }
bool IsAbsent(const google::protobuf::Value& v) {
  return v.kind_case() == google::protobuf::Value::KIND_NOT_SET || v.kind_case() == google::protobuf::Value::kNullValue;
}

bool AsInteger(const google::protobuf::Value& v, int64_t* out) {
  if (v.kind_case() != google::protobuf::Value::kNumberValue) return false;
  const double d = v.number_value();
  constexpr double kMax = static_cast<double>(kMaxExactInteger);
  if (!(d >= -kMax && d <= kMax) || std::floor(d) != d) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

}  // namespace conduit::config
