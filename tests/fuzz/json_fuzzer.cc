// Json::Parse, the parser of every admin request body and operator policy file. Besides
// not crashing: whatever it accepts, it accepts again as Dump() writes it (compact and
// pretty), with the same value.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "fuzz_check.h"

using conduit::Json;

namespace {

bool SameValue(const Json& a, const Json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Json::Type::kNull: return true;
    case Json::Type::kBool: return a.as_bool() == b.as_bool();
    case Json::Type::kNumber:
      // 3e2 comes back as the integer 300: compare values, exactly when both are integers.
      if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
      return a.as_number() == b.as_number();
    case Json::Type::kString: return a.as_string() == b.as_string();
    case Json::Type::kArray:
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!SameValue(a.items()[i], b.items()[i])) return false;
      }
      return true;
    case Json::Type::kObject:
      if (a.members().size() != b.members().size()) return false;
      for (size_t i = 0; i < a.members().size(); ++i) {
        if (a.members()[i].first != b.members()[i].first || !SameValue(a.members()[i].second, b.members()[i].second)) {
          return false;
        }
      }
      return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Json value;
  if (!Json::Parse(std::string_view(reinterpret_cast<const char*>(data), size), &value).ok()) return 0;
  for (int indent : {-1, 2}) {
    const std::string text = value.Dump(indent);
    Json again;
    conduit::Status st = Json::Parse(text, &again);
    FUZZ_CHECK(st.ok(), "Dump(%d) wrote what Parse refuses: %s\n%s", indent, st.message().c_str(), text.c_str());
    FUZZ_CHECK(SameValue(value, again), "Dump(%d) changed the value: %s", indent, text.c_str());
  }
  return 0;
}
