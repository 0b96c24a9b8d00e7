#include "rpc/policy/field_path.h"

#include <cstring>

namespace conduit::rpc {
namespace {

using google::protobuf::FieldDescriptor;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t b = *p++;
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

WireType WireTypeOf(FieldDescriptor::Type t) {
  switch (t) {
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE:
      return kLength;
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64:
    case FieldDescriptor::TYPE_DOUBLE:
      return kFixed64;
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
    case FieldDescriptor::TYPE_FLOAT:
      return kFixed32;
    default:
      return kVarint;
  }
}

bool Readable(FieldDescriptor::Type t) {
  switch (t) {
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_INT32:
    case FieldDescriptor::TYPE_INT64:
    case FieldDescriptor::TYPE_UINT32:
    case FieldDescriptor::TYPE_UINT64:
    case FieldDescriptor::TYPE_SINT32:
    case FieldDescriptor::TYPE_SINT64:
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED32:
    case FieldDescriptor::TYPE_SFIXED64:
    case FieldDescriptor::TYPE_BOOL:
    case FieldDescriptor::TYPE_ENUM:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status FieldPath::Resolve(const google::protobuf::Descriptor* type, const std::string& path, FieldPath* out) {
  *out = FieldPath();
  out->text_ = path;
  const google::protobuf::Descriptor* at = type;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t dot = path.find('.', begin);
    std::string name = path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (at == nullptr) return InvalidArgument("'%s': %s is not a message", path.c_str(), path.substr(0, begin - 1).c_str());
    const FieldDescriptor* f = at->FindFieldByName(name);
    if (f == nullptr) return InvalidArgument("%s has no field '%s'", at->full_name().c_str(), name.c_str());
    if (f->is_repeated()) return InvalidArgument("field %s is repeated; rules read singular fields", f->full_name().c_str());
    out->steps_.push_back(Step{static_cast<uint32_t>(f->number()), f->type()});
    bool last = dot == std::string::npos;
    if (last) {
      if (!Readable(f->type())) {
        return InvalidArgument("field %s is a %s; rules read strings, bytes, integers, bools and enums",
                               f->full_name().c_str(), f->type_name());
      }
      out->leaf_ = f;
      return Status::Ok();
    }
    if (f->type() != FieldDescriptor::TYPE_MESSAGE) {
      return InvalidArgument("field %s is not a message, so '%s' goes nowhere", f->full_name().c_str(), path.c_str());
    }
    at = f->message_type();
    begin = dot + 1;
  }
  return InvalidArgument("empty field path");
}

// Values as protobuf's parser sees them: a 32-bit field keeps the low 32 bits of a longer
// varint (found by fuzzing: a uint32 of 2^32 + 5 read as 4294967301 where the server sees 5,
// so a deny rule on "5" let it through), and sint32 zigzag-decodes those 32 bits.
std::string FieldPath::Format(uint64_t raw) const {
  switch (leaf_->type()) {
    case FieldDescriptor::TYPE_BOOL:
      return raw != 0 ? "true" : "false";
    case FieldDescriptor::TYPE_INT32:
    case FieldDescriptor::TYPE_SFIXED32:
      return std::to_string(static_cast<int32_t>(raw));
    case FieldDescriptor::TYPE_UINT32:
    case FieldDescriptor::TYPE_FIXED32:
      return std::to_string(static_cast<uint32_t>(raw));
    case FieldDescriptor::TYPE_INT64:
    case FieldDescriptor::TYPE_SFIXED64:
      return std::to_string(static_cast<int64_t>(raw));
    case FieldDescriptor::TYPE_SINT32: {
      const uint32_t n = static_cast<uint32_t>(raw);
      return std::to_string(static_cast<int32_t>((n >> 1) ^ (~(n & 1) + 1)));
    }
    case FieldDescriptor::TYPE_SINT64:
      return std::to_string(static_cast<int64_t>((raw >> 1) ^ (~(raw & 1) + 1)));
    case FieldDescriptor::TYPE_ENUM: {
      const auto* v = leaf_->enum_type()->FindValueByNumber(static_cast<int32_t>(raw));
      return v != nullptr ? v->name() : std::to_string(static_cast<int32_t>(raw));
    }
    default:
      return std::to_string(raw);
  }
}

bool FieldPath::Find(const uint8_t* data, size_t len, size_t step, std::string* value, bool* found) const {
  const uint8_t* p = data;
  const uint8_t* end = data + len;
  const Step& want = steps_[step];
  bool leaf = step + 1 == steps_.size();
  while (p < end) {
    uint64_t key;
    if (!ReadVarint(p, end, &key)) return false;
    uint32_t number = static_cast<uint32_t>(key >> 3);
    uint32_t wire = static_cast<uint32_t>(key & 7);
    if (number == 0) return false;
    bool ours = number == want.number && wire == WireTypeOf(want.type);
    switch (wire) {
      case kVarint: {
        uint64_t v;
        if (!ReadVarint(p, end, &v)) return false;
        if (ours && leaf) {
          *value = Format(v);
          *found = true;
        }
        break;
      }
      case kFixed64:
      case kFixed32: {
        size_t n = wire == kFixed64 ? 8 : 4;
        if (static_cast<size_t>(end - p) < n) return false;
        uint64_t v = 0;
        memcpy(&v, p, n);
        p += n;
        if (ours && leaf) {
          *value = Format(n == 4 && (want.type == FieldDescriptor::TYPE_SFIXED32)
                              ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v)))
                              : v);
          *found = true;
        }
        break;
      }
      case kLength: {
        uint64_t n;
        if (!ReadVarint(p, end, &n) || n > static_cast<uint64_t>(end - p)) return false;
        if (ours && leaf) {
          value->assign(reinterpret_cast<const char*>(p), n);
          *found = true;
        } else if (ours && !Find(p, n, step + 1, value, found)) {
          return false;
        }
        p += n;
        break;
      }
      default:
        return false;  // groups (deprecated) and invalid wire types
    }
  }
  return true;
}

bool FieldPath::Read(const uint8_t* data, size_t len, std::string* value) const {
  bool found = false;
  if (!Find(data, len, 0, value, &found)) return false;
  if (!found) {
    if (leaf_->type() == FieldDescriptor::TYPE_STRING || leaf_->type() == FieldDescriptor::TYPE_BYTES) {
      value->clear();
    } else if (leaf_->type() == FieldDescriptor::TYPE_ENUM) {
      *value = leaf_->default_value_enum()->name();
    } else {
      *value = Format(0);
    }
  }
  return true;
}

}  // namespace conduit::rpc
