// A program's requests to the object store (libhoplite -> conduitd, docs/object-protocol.md),
// decoded by the functions ProgramSession uses (objects/messages.h): Hello, Put (with its
// inline bytes), Get, Release/Delete, Wait and Reduce (with their id lists); and, of the
// daemons' messages, the addresses in their structs, a shard's StoreCopy and DropCopy, a
// reduce coordinator's NodeStart. The first byte
// picks the message; the rest is its body. Decoded ids are valid and printable, counts and
// sizes within the protocol's limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "objects/messages.h"

using namespace conduit;
using namespace conduit::objects;

namespace {

void CheckId(const std::string& id) {
  FUZZ_CHECK(ValidId(id), "invalid id of %zu bytes", id.size());
  objproto::Id wire = IdToWire(id);
  std::string back;
  FUZZ_CHECK(IdFromWire(wire, &back) && back == id, "id round trip");
  std::string shown = Printable(id);
  for (unsigned char c : shown) FUZZ_CHECK(c >= 0x20 && c < 0x7f, "unprintable byte 0x%02x in '%s'", c, shown.c_str());
}

void CheckIds(const std::vector<std::string>& ids, uint32_t n) {
  FUZZ_CHECK(ids.size() == n && n <= objproto::kMaxSources, "%zu ids for n=%u", ids.size(), n);
  for (const auto& id : ids) CheckId(id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Bytes body(data + 1, data + size);
  switch (data[0] % 10) {
    case 0: {
      objproto::HelloRequest req;
      std::string exe;
      if (DecodeHello(body, &req, &exe)) FUZZ_CHECK(exe.size() <= sizeof(req.exe), "exe of %zu bytes", exe.size());
      break;
    }
    case 1: {
      objproto::PutRequest req;
      std::string id;
      if (!DecodePut(body, &req, &id)) break;
      CheckId(id);
      // The session's own check of the inline bytes, on the decoded request.
      const bool small = req.size < objproto::kInlineLimit;
      if (TailSize<objproto::PutRequest>(body) == (small ? req.size : 0) && small) {
        std::string copy(reinterpret_cast<const char*>(Tail<objproto::PutRequest>(body)), req.size);
        FUZZ_CHECK(copy.size() == req.size, "inline bytes");
      }
      break;
    }
    case 2: {
      objproto::GetRequest req;
      std::string id;
      if (DecodeGet(body, &req, &id)) CheckId(id);
      break;
    }
    case 3: {
      std::string id;
      if (DecodeDelete(body, &id)) CheckId(id);
      if (DecodeRelease(body, &id)) CheckId(id);
      break;
    }
    case 4: {
      objproto::WaitRequest req;
      std::vector<std::string> ids;
      if (!DecodeWait(body, &req, &ids)) break;
      CheckIds(ids, req.n);
      FUZZ_CHECK(req.num_ready >= 1 && req.num_ready <= req.n, "num_ready %u of %u", req.num_ready, req.n);
      break;
    }
    case 5: {
      objproto::ReduceRequest req;
      std::string target;
      std::vector<std::string> sources;
      if (!DecodeReduce(body, &req, &target, &sources)) break;
      CheckId(target);
      CheckIds(sources, req.nsources);
      break;
    }
    case 6: {
      // Addresses in the peers' structs: fixed text fields that may lack their NUL.
      objproto::Addr addr;
      if (!Decode(body, &addr)) break;
      std::string text = AddrFromWire(addr);
      FUZZ_CHECK(text.size() <= sizeof(addr.text), "address of %zu bytes", text.size());
      FUZZ_CHECK(AddrFromWire(AddrToWire(text)) == text.substr(0, sizeof(addr.text) - 1), "address round trip");
      break;
    }
    case 7: {
      // A shard's copy of a small object for this daemon to keep: exactly `size` bytes
      // follow, a program's id, an owner whose access is known.
      objproto::StoreCopy c;
      std::string id;
      if (!DecodeStoreCopy(body, &c, &id)) break;
      CheckId(id);
      FUZZ_CHECK(id[0] != '\x01', "a reduce's internal id accepted");
      FUZZ_CHECK(c.size < objproto::kInlineLimit && body.size() == sizeof(c) + c.size, "%llu bytes in a %zu-byte body",
                 static_cast<unsigned long long>(c.size), body.size());
      FUZZ_CHECK(c.owner.access >= objproto::kAccessOwner && c.owner.access <= objproto::kAccessWorld, "access %u",
                 c.owner.access);
      break;
    }
    case 8: {
      // A shard's drop of this daemon's copy: a valid id (a reduce's internal ones too), a
      // known reason, and of the flags only the request for an answer (version 5).
      objproto::DropCopy d;
      std::string id;
      if (!DecodeDropCopy(body, &d, &id)) break;
      FUZZ_CHECK(body.size() == sizeof(d), "a DropCopy of %zu bytes", body.size());
      FUZZ_CHECK(ValidId(id) && id.size() == d.id.len, "id of %zu bytes", id.size());
      FUZZ_CHECK(d.reason == objproto::kDropDeleted || d.reason == objproto::kDropLost, "reason %u", d.reason);
      FUZZ_CHECK((d.flags & ~objproto::kDropAck) == 0, "flags 0x%x", d.flags);
      break;
    }
    case 9: {
      // A reduce node's start: exactly nchildren ChildInfo after the struct, a valid output
      // id, an own id only when one is there, a known data type and op.
      objproto::NodeStart s;
      std::string own, output;
      std::vector<objproto::ChildInfo> children;
      if (!DecodeNodeStart(body, &s, &own, &output, &children)) break;
      CheckId(output);
      if (!own.empty()) CheckId(own);
      FUZZ_CHECK(s.nchildren <= kMaxNodeChildren && children.size() == s.nchildren &&
                     body.size() == sizeof(s) + children.size() * sizeof(objproto::ChildInfo),
                 "%zu children in a %zu-byte body", children.size(), body.size());
      FUZZ_CHECK(s.op <= objproto::kMin, "op %u", s.op);
      for (const objproto::ChildInfo& c : children) {
        FUZZ_CHECK(AddrFromWire(c.where).size() <= sizeof(c.where.text), "child address");
      }
      break;
    }
  }
  return 0;
}
