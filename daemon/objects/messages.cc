#include "objects/messages.h"

#include "common/frame.h"
#include "reduce/reduce.h"

namespace conduit::objects {

objproto::Id IdToWire(const std::string& id) {
  objproto::Id w{};
  size_t n = id.size() < objproto::kMaxIdBytes ? id.size() : objproto::kMaxIdBytes;
  w.len = static_cast<uint8_t>(n);
  memcpy(w.bytes, id.data(), n);
  return w;
}

bool IdFromWire(const objproto::Id& wire, std::string* id) {
  if (wire.len == 0 || wire.len > objproto::kMaxIdBytes) return false;
  id->assign(wire.bytes, wire.len);
  return true;
}

std::string Printable(const std::string& id) {
  std::string out;
  for (unsigned char c : id) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    }
  }
  return out;
}

objproto::Addr AddrToWire(const std::string& addr) {
  objproto::Addr w{};
  CopyCString(w.text, addr.c_str());
  return w;
}

std::string AddrFromWire(const objproto::Addr& wire) { return FromCString(wire.text); }

bool ProgramId(const objproto::Id& wire, std::string* id) { return IdFromWire(wire, id) && (*id)[0] != '\x01'; }

bool DecodeHello(const Bytes& body, objproto::HelloRequest* req, std::string* exe) {
  if (body.size() != sizeof(*req) || !Decode(body, req)) return false;
  *exe = FromCString(req->exe);
  return true;
}

bool DecodePut(const Bytes& body, objproto::PutRequest* req, std::string* id) {
  return Decode(body, req) && ProgramId(req->id, id);
}

bool DecodeGet(const Bytes& body, objproto::GetRequest* req, std::string* id) {
  return body.size() == sizeof(*req) && Decode(body, req) && ProgramId(req->id, id) &&
         (req->flags & ~static_cast<uint32_t>(objproto::kGetReadOnly)) == 0;
}

bool DecodeDelete(const Bytes& body, std::string* id) {
  objproto::Id wire{};
  return body.size() == sizeof(wire) && Decode(body, &wire) && ProgramId(wire, id);
}

bool DecodeRelease(const Bytes& body, std::string* id) {
  objproto::Id wire{};
  return body.size() == sizeof(wire) && Decode(body, &wire) && IdFromWire(wire, id);
}

bool DecodeWait(const Bytes& body, objproto::WaitRequest* req, std::vector<std::string>* ids) {
  return Decode(body, req) && req->n <= objproto::kMaxSources && ParseIds<objproto::WaitRequest>(body, req->n, ids) &&
         req->num_ready != 0 && req->num_ready <= req->n;
}

bool DecodeReduce(const Bytes& body, objproto::ReduceRequest* req, std::string* target,
                  std::vector<std::string>* sources) {
  return Decode(body, req) && ProgramId(req->target, target) && req->nsources <= objproto::kMaxSources &&
         ParseIds<objproto::ReduceRequest>(body, req->nsources, sources);
}

bool DecodeStoreCopy(const Bytes& body, objproto::StoreCopy* head, std::string* id) {
  return Decode(body, head) && ProgramId(head->id, id) && head->size < objproto::kInlineLimit &&
         TailSize<objproto::StoreCopy>(body) == head->size && head->owner.access >= objproto::kAccessOwner &&
         head->owner.access <= objproto::kAccessWorld;
}

bool DecodeDropCopy(const Bytes& body, objproto::DropCopy* drop, std::string* id) {
  return body.size() == sizeof(*drop) && Decode(body, drop) && IdFromWire(drop->id, id) &&
         (drop->reason == objproto::kDropDeleted || drop->reason == objproto::kDropLost) &&
         (drop->flags & ~objproto::kDropAck) == 0;
}

bool DecodeNodeStart(const Bytes& body, objproto::NodeStart* start, std::string* own, std::string* output,
                     std::vector<objproto::ChildInfo>* children) {
  if (!Decode(body, start) || start->nchildren > kMaxNodeChildren ||
      TailSize<objproto::NodeStart>(body) != start->nchildren * sizeof(objproto::ChildInfo) ||
      !IdFromWire(start->output, output) || !IsValidDataType(static_cast<int>(start->dtype)) ||
      start->op > objproto::kMin) {
    return false;
  }
  own->clear();
  if (start->own.len != 0 && !IdFromWire(start->own, own)) return false;
  children->resize(start->nchildren);
  if (start->nchildren > 0) {
    memcpy(children->data(), Tail<objproto::NodeStart>(body), start->nchildren * sizeof(objproto::ChildInfo));
  }
  return true;
}

}  // namespace conduit::objects
