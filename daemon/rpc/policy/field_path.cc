#include "rpc/policy/field_path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <cstdint>

namespace conduit::rpc {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

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
    const auto wire = WireFormatLite::WireTypeForFieldType(static_cast<WireFormatLite::FieldType>(f->type()));
    out->steps_.push_back(Step{WireFormatLite::MakeTag(f->number(), wire), f->type()});
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
    case FieldDescriptor::TYPE_SINT32:
      return std::to_string(WireFormatLite::ZigZagDecode32(static_cast<uint32_t>(raw)));
    case FieldDescriptor::TYPE_SINT64:
      return std::to_string(WireFormatLite::ZigZagDecode64(raw));
    case FieldDescriptor::TYPE_ENUM: {
      const auto* v = leaf_->enum_type()->FindValueByNumber(static_cast<int32_t>(raw));
      return v != nullptr ? v->name() : std::to_string(static_cast<int32_t>(raw));
    }
    default:
      return std::to_string(raw);
  }
}

// Walks one message (the stream's current limit) field by field. Fields off the path are
// skipped by protobuf's own SkipField, which knows every wire type, groups included.
bool FieldPath::Find(CodedInputStream* in, size_t step, std::string* value, bool* found) const {
  const Step& want = steps_[step];
  const bool leaf = step + 1 == steps_.size();
  for (;;) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) return in->ConsumedEntireMessage();  // a clean end, not a field 0 or a cut varint
    if (tag != want.tag) {
      if (!WireFormatLite::SkipField(in, tag)) return false;
      continue;
    }
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t v;
        if (!in->ReadVarint64(&v)) return false;
        if (leaf) *value = Format(v);
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED32: {
        uint32_t v;
        if (!in->ReadLittleEndian32(&v)) return false;
        if (leaf) *value = Format(v);
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED64: {
        uint64_t v;
        if (!in->ReadLittleEndian64(&v)) return false;
        if (leaf) *value = Format(v);
        break;
      }
      default: {  // length-delimited: the string or bytes leaf, or a message on the path
        uint32_t n;
        if (!in->ReadVarint32(&n) || static_cast<int64_t>(n) > in->BytesUntilLimit()) return false;
        if (leaf) {
          if (!in->ReadString(value, static_cast<int>(n))) return false;
          break;
        }
        const CodedInputStream::Limit outer = in->PushLimit(static_cast<int>(n));
        if (!Find(in, step + 1, value, found)) return false;
        in->PopLimit(outer);
        continue;  // *found was set (or not) by the step below
      }
    }
    *found = true;
  }
}

bool FieldPath::Read(const uint8_t* data, size_t len, std::string* value) const {
  if (len > static_cast<size_t>(INT32_MAX)) return false;  // protobuf's own limit on a message
  CodedInputStream in(data, static_cast<int>(len));
  in.PushLimit(static_cast<int>(len));  // so that ReadTag can tell a clean end from a cut one
  bool found = false;
  if (!Find(&in, 0, value, &found)) return false;
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
