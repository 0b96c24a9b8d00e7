#include "json_writer.h"

#include <cmath>
#include <string>

#include "common/json.h"

namespace conduit::perf {

void JsonWriter::BeforeValue() {
  if (stack_.empty()) return;
  switch (stack_.back()) {
    case State::kKey: stack_.pop_back(); break;
    case State::kListEmpty: stack_.back() = State::kListSome; break;
    case State::kListSome: std::fputc(',', f_); break;
    default: break;  // a value straight inside an object is a caller bug; keep the output going
  }
}

void JsonWriter::BeginObject() {
  BeforeValue();
  std::fputc('{', f_);
  stack_.push_back(State::kObjectEmpty);
}

void JsonWriter::EndObject() {
  if (!stack_.empty()) stack_.pop_back();
  std::fputc('}', f_);
}

void JsonWriter::BeginList() {
  BeforeValue();
  std::fputc('[', f_);
  stack_.push_back(State::kListEmpty);
}

void JsonWriter::EndList() {
  if (!stack_.empty()) stack_.pop_back();
  std::fputc(']', f_);
}

void JsonWriter::Key(std::string_view name) {
  if (!stack_.empty() && stack_.back() == State::kObjectSome) std::fputc(',', f_);
  if (!stack_.empty() && stack_.back() == State::kObjectEmpty) stack_.back() = State::kObjectSome;
  Quoted(name);
  std::fputc(':', f_);
  stack_.push_back(State::kKey);
}

void JsonWriter::String(std::string_view s) {
  BeforeValue();
  Quoted(s);
}

// The daemon's JSON string escaping (common/json.h), so both write strings the same way.
void JsonWriter::Quoted(std::string_view s) {
  std::string quoted;
  AppendJsonString(&quoted, s);
  std::fputs(quoted.c_str(), f_);
}

void JsonWriter::Int(long long v) {
  BeforeValue();
  std::fprintf(f_, "%lld", v);
}

void JsonWriter::Size(size_t v) {
  BeforeValue();
  std::fprintf(f_, "%zu", v);
}

void JsonWriter::Double(double v) {
  if (std::isnan(v)) {
    String("nan");
    return;
  }
  BeforeValue();
  std::fprintf(f_, "%f", v);
}

void JsonWriter::Null() {
  BeforeValue();
  std::fputs("null", f_);
}

void JsonWriter::Finish() {
  while (!stack_.empty()) {
    switch (stack_.back()) {
      case State::kKey: Null(); break;
      case State::kObjectEmpty:
      case State::kObjectSome: EndObject(); break;
      case State::kListEmpty:
      case State::kListSome: EndList(); break;
    }
  }
}

}  // namespace conduit::perf
