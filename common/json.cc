#include "common/json.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace conduit {

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : members_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Json& Json::operator[](std::string_view key) {
  for (auto& [k, v] : members_) {
    if (k == key) return v;
  }
  members_.emplace_back(std::string(key), Json());
  return members_.back().second;
}

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

std::string Json::Dump(int indent) const {
  std::string out;
  DumpTo(&out, indent, 0);
  return out;
}

void Json::DumpTo(std::string* out, int indent, int depth) const {
  auto newline = [&](int level) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * level), ' ');
  };
  switch (type_) {
    case Type::kNull: out->append("null"); return;
    case Type::kBool: out->append(bool_ ? "true" : "false"); return;
    case Type::kNumber: {
      char buf[32];
      if (is_int_) {
        snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(int_));
      } else if (!std::isfinite(number_)) {
        snprintf(buf, sizeof(buf), "null");  // JSON has no NaN or infinity
      } else {
        // The shortest text that reads back as the same double.
        for (int precision = 15; precision <= 17; ++precision) {
          snprintf(buf, sizeof(buf), "%.*g", precision, number_);
          if (strtod(buf, nullptr) == number_) break;
        }
      }
      out->append(buf);
      return;
    }
    case Type::kString: AppendJsonString(out, string_); return;
    case Type::kArray:
      out->push_back('[');
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out->push_back(',');
        newline(depth + 1);
        items_[i].DumpTo(out, indent, depth + 1);
      }
      if (!items_.empty()) newline(depth);
      out->push_back(']');
      return;
    case Type::kObject:
      out->push_back('{');
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i > 0) out->push_back(',');
        newline(depth + 1);
        AppendJsonString(out, members_[i].first);
        out->append(indent < 0 ? ":" : ": ");
        members_[i].second.DumpTo(out, indent, depth + 1);
      }
      if (!members_.empty()) newline(depth);
      out->push_back('}');
      return;
  }
}

// Recursive descent over the RFC 8259 grammar, strict: no comments, no trailing commas.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Status ParseDocument(Json* out) {
    SkipSpace();
    CONDUIT_RETURN_IF_ERROR(ParseValue(out, 0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the value");
    return Status::Ok();
  }

 private:
  Status Error(const char* what) const { return ErrorAt(pos_, what); }
  static Status ErrorAt(size_t pos, const char* what) { return InvalidArgument("invalid JSON at byte %zu: %s", pos, what); }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) ++pos_;
  }
  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status ParseValue(Json* out, int depth) {
    if (depth > kJsonMaxDepth) return Error("nesting deeper than 64 levels");
    if (++values_ > kJsonMaxValues) return Error("more than 1048576 values");
    switch (Peek()) {
      case '{': return ParseObject(out, depth);
      case '[': return ParseArray(out, depth);
      case '"': {
        std::string s;
        CONDUIT_RETURN_IF_ERROR(ParseString(&s));
        *out = Json(std::move(s));
        return Status::Ok();
      }
      case 't':
        if (!Consume("true")) return Error("expected 'true'");
        *out = Json(true);
        return Status::Ok();
      case 'f':
        if (!Consume("false")) return Error("expected 'false'");
        *out = Json(false);
        return Status::Ok();
      case 'n':
        if (!Consume("null")) return Error("expected 'null'");
        *out = Json();
        return Status::Ok();
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) return ParseNumber(out);
        return AtEnd() ? Error("unexpected end of input") : Error("unexpected character");
    }
  }

  Status ParseObject(Json* out, int depth) {
    const size_t start = pos_;
    ++pos_;  // '{'
    *out = Json::Object();
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return Status::Ok();
    }
    for (;;) {
      SkipSpace();
      if (Peek() != '"') return Error("expected a string key");
      std::string key;
      CONDUIT_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (Peek() != ':') return Error("expected ':'");
      ++pos_;
      SkipSpace();
      Json value;
      CONDUIT_RETURN_IF_ERROR(ParseValue(&value, depth + 1));
      out->members_.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return CheckUniqueKeys(*out, start);
      }
      return Error("expected ',' or '}'");
    }
  }

  // Sorting the keys finds a repeated one in O(n log n) comparisons whatever the keys are; a
  // hash set would be linear on average but quadratic on keys chosen to collide.
  static Status CheckUniqueKeys(const Json& object, size_t start) {
    const auto& members = object.members_;
    if (members.size() < 2) return Status::Ok();
    std::vector<std::string_view> keys;
    keys.reserve(members.size());
    for (const auto& m : members) keys.push_back(m.first);
    std::sort(keys.begin(), keys.end());
    auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup == keys.end()) return Status::Ok();
    std::string shown;
    AppendJsonString(&shown, dup->substr(0, 64));
    return InvalidArgument("invalid JSON at byte %zu: duplicate key %s in this object", start, shown.c_str());
  }

  Status ParseArray(Json* out, int depth) {
    ++pos_;  // '['
    *out = Json::Array();
    SkipSpace();
    if (Peek() == ']') {
      ++pos_;
      return Status::Ok();
    }
    for (;;) {
      SkipSpace();
      Json value;
      CONDUIT_RETURN_IF_ERROR(ParseValue(&value, depth + 1));
      out->items_.push_back(std::move(value));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return Status::Ok();
      }
      return Error("expected ',' or ']'");
    }
  }

  Status ParseHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else return Error("bad hex digit in \\u escape");
    }
    *out = v;
    return Status::Ok();
  }

  static void AppendUtf8(std::string* s, uint32_t cp) {
    if (cp < 0x80) {
      s->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      s->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      s->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    for (;;) {
      if (AtEnd()) return Error("unterminated string");
      char c = text_[pos_++];
      if (c == '"') return Status::Ok();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (AtEnd()) return Error("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          CONDUIT_RETURN_IF_ERROR(ParseHex4(&cp));
          if (cp >= 0xd800 && cp < 0xdc00) {  // high surrogate: a low one must follow
            uint32_t low = 0;
            if (!Consume("\\u")) return Error("lone high surrogate");
            CONDUIT_RETURN_IF_ERROR(ParseHex4(&low));
            if (low < 0xdc00 || low >= 0xe000) return Error("bad low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            return Error("lone low surrogate");
          }
          AppendUtf8(out, cp);
          break;
        }
        default: return Error("unknown escape");
      }
    }
  }

  Status ParseNumber(Json* out) {
    const size_t start = pos_;
    bool integral = true;
    if (Peek() == '-') ++pos_;
    if (Peek() == '0') {
      ++pos_;
    } else if (Peek() >= '1' && Peek() <= '9') {
      while (Peek() >= '0' && Peek() <= '9') ++pos_;
    } else {
      return Error("bad number");
    }
    if (Peek() == '.') {
      integral = false;
      ++pos_;
      if (!(Peek() >= '0' && Peek() <= '9')) return Error("digit expected after '.'");
      while (Peek() >= '0' && Peek() <= '9') ++pos_;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      integral = false;
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (!(Peek() >= '0' && Peek() <= '9')) return Error("digit expected in exponent");
      while (Peek() >= '0' && Peek() <= '9') ++pos_;
    }
      if (pos_ - start > kJsonMaxNumberChars) return ErrorAt(start, "number longer than 128 characters");
    std::string token(text_.substr(start, pos_ - start));
    if (integral) {
      errno = 0;
      long long v = strtoll(token.c_str(), nullptr, 10);
      if (errno == 0) {
        *out = Json(v);
        return Status::Ok();
      }
    }
    errno = 0;
    const double v = strtod(token.c_str(), nullptr);
    // Beyond a double (1e400): refused, not turned into infinity, which JSON cannot write
    // back (Dump would say null). Found by fuzzing. Underflow (1e-400) reads as zero.
    if (errno == ERANGE && std::isinf(v)) return ErrorAt(start, "number out of range");
    *out = Json(v);
    return Status::Ok();
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t values_ = 0;
};

Status Json::Parse(std::string_view text, Json* out) {
  JsonParser parser(text);
  Json value;
  CONDUIT_RETURN_IF_ERROR(parser.ParseDocument(&value));
  *out = std::move(value);
  return Status::Ok();
}

}  // namespace conduit
