// Json: a small JSON value with a strict parser and a serializer, for the admin API and
// operator-supplied policies. Objects keep insertion order so answers read the way they
// were built. The parser takes untrusted input: it runs in O(n log n) of the text at worst
// (duplicate keys are found by sorting, not by comparing every pair), bounds nesting (so
// recursion cannot overflow the stack), the number of values (so memory stays within a
// small multiple of the text) and the length of a number (strtod is slow on huge
// mantissas), and reports the byte offset of the first error.
#ifndef CONDUIT_DAEMON_COMMON_JSON_H_
#define CONDUIT_DAEMON_COMMON_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace conduit {

// Limits of Json::Parse (docs/admin-api.md lists them for request bodies).
inline constexpr int kJsonMaxDepth = 64;              // arrays and objects inside each other
inline constexpr size_t kJsonMaxValues = 1u << 20;    // values in one document, containers included
inline constexpr size_t kJsonMaxNumberChars = 128;    // characters of one number

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, Json>;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::kBool), bool_(b) {}
  Json(int v) : Json(Type::kNumber) { SetInt(v); }
  Json(long v) : Json(Type::kNumber) { SetInt(v); }
  Json(long long v) : Json(Type::kNumber) { SetInt(v); }
  Json(unsigned v) : Json(Type::kNumber) { SetInt(v); }
  Json(unsigned long v) : Json(Type::kNumber) { SetUnsigned(v); }
  Json(unsigned long long v) : Json(Type::kNumber) { SetUnsigned(v); }
  Json(double v) : type_(Type::kNumber), number_(v) {}
  Json(const char* s) : type_(Type::kString), string_(s) {}
  Json(std::string s) : type_(Type::kString), string_(std::move(s)) {}
  Json(std::string_view s) : type_(Type::kString), string_(s) {}

  static Json Array() { return Json(Type::kArray); }
  static Json Object() { return Json(Type::kObject); }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  // True for numbers written without fraction or exponent that fit int64.
  bool is_int() const { return type_ == Type::kNumber && is_int_; }

  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  int64_t as_int() const { return is_int_ ? int_ : static_cast<int64_t>(number_); }
  const std::string& as_string() const { return string_; }

  // Arrays.
  const std::vector<Json>& items() const { return items_; }
  void push_back(Json v) { items_.push_back(std::move(v)); }
  size_t size() const { return type_ == Type::kArray ? items_.size() : members_.size(); }

  // Objects.
  const std::vector<Member>& members() const { return members_; }
  const Json* find(std::string_view key) const;
  // Inserts null under `key` when absent (the value must be an object).
  Json& operator[](std::string_view key);

  // Compact text, or pretty-printed with `indent` spaces per level.
  std::string Dump(int indent = -1) const;

  // Parses exactly one JSON value (surrounding whitespace allowed), within the limits above;
  // an object with a key twice is an error.
  static Status Parse(std::string_view text, Json* out);

 private:
  friend class JsonParser;
  explicit Json(Type t) : type_(t) {}
  void SetInt(int64_t v) {
    number_ = static_cast<double>(v);
    is_int_ = true;
    int_ = v;
  }
  void SetUnsigned(uint64_t v) {
    number_ = static_cast<double>(v);
    is_int_ = v <= static_cast<uint64_t>(INT64_MAX);
    int_ = is_int_ ? static_cast<int64_t>(v) : 0;
  }
  void DumpTo(std::string* out, int indent, int depth) const;

  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  bool is_int_ = false;
  int64_t int_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<Member> members_;
};

// Appends `s` as a quoted JSON string (escaping controls, quotes and backslashes).
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_JSON_H_
