// A streaming JSON writer for -J: values are written as they are produced, so a
// run that is killed part way still leaves every finished row in the file.
#ifndef CONDUIT_TOOLS_PERF_JSON_WRITER_H_
#define CONDUIT_TOOLS_PERF_JSON_WRITER_H_

#include <cstddef>
#include <cstdio>
#include <string_view>
#include <vector>

namespace conduit::perf {

class JsonWriter {
 public:
  explicit JsonWriter(std::FILE* f) : f_(f) {}

  void BeginObject();
  void EndObject();
  void BeginList();
  void EndList();
  void Key(std::string_view name);  // inside an object, before its value
  void String(std::string_view s);
  void Int(long long v);
  void Size(size_t v);
  void Double(double v);  // NaN as the string "nan", as nccl-tests writes it
  void Null();
  // Closes whatever is open (a key without a value gets null).
  void Finish();
  size_t depth() const { return stack_.size(); }

 private:
  enum class State { kKey, kObjectEmpty, kObjectSome, kListEmpty, kListSome };
  void BeforeValue();
  void Quoted(std::string_view s);  // the escaped string, no separators

  std::FILE* f_;
  std::vector<State> stack_;
};

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_JSON_WRITER_H_
