// Encoding helpers for the object protocol: ids and addresses to and from their fixed
// wire fields, and "struct + trailing bytes" message bodies. Every decoder checks sizes,
// because bodies come from other processes.
#ifndef CONDUIT_DAEMON_OBJECTS_MESSAGES_H_
#define CONDUIT_DAEMON_OBJECTS_MESSAGES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "protocol/object_protocol.h"

namespace conduit::objects {

using Bytes = std::vector<uint8_t>;

// An object id is 1..63 arbitrary bytes.
inline bool ValidId(const std::string& id) { return !id.empty() && id.size() <= objproto::kMaxIdBytes; }
objproto::Id IdToWire(const std::string& id);
// False for a length outside 1..63.
bool IdFromWire(const objproto::Id& wire, std::string* id);
// For logs and JSON: the id with quotes, backslashes and non-printable bytes as \uXXXX.
std::string Printable(const std::string& id);

objproto::Addr AddrToWire(const std::string& addr);
std::string AddrFromWire(const objproto::Addr& wire);

template <typename T>
Bytes Encode(const T& head, const void* tail = nullptr, size_t tail_len = 0) {
  static_assert(std::is_trivially_copyable_v<T>);
  Bytes out(sizeof(T) + tail_len);
  memcpy(out.data(), &head, sizeof(T));
  if (tail_len > 0) memcpy(out.data() + sizeof(T), tail, tail_len);
  return out;
}

// Copies the leading struct; the rest of the body (if any) starts at sizeof(T).
template <typename T>
bool Decode(const Bytes& body, T* head) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (body.size() < sizeof(T)) return false;
  memcpy(head, body.data(), sizeof(T));
  return true;
}

// Only after Decode<T> succeeded on `body`.
template <typename T>
size_t TailSize(const Bytes& body) {
  return body.size() - sizeof(T);
}

template <typename T>
const uint8_t* Tail(const Bytes& body) {
  return body.data() + sizeof(T);
}

// A program's id: a valid id that is not one of the daemon's own (ids starting with \x01
// name a reduce's partial results).
bool ProgramId(const objproto::Id& wire, std::string* id);

// Parses `n` program ids following a struct T in the body: exactly n, each valid. Only
// after Decode<T> succeeded.
template <typename T>
bool ParseIds(const Bytes& body, uint32_t n, std::vector<std::string>* ids) {
  if (TailSize<T>(body) != static_cast<size_t>(n) * sizeof(objproto::Id)) return false;
  const uint8_t* p = Tail<T>(body);
  for (uint32_t i = 0; i < n; ++i) {
    objproto::Id w;
    memcpy(&w, p + i * sizeof(w), sizeof(w));
    std::string id;
    if (!ProgramId(w, &id)) return false;
    ids->push_back(std::move(id));
  }
  return true;
}

// A program's requests (program_session.cc), decoded and checked as far as the bytes go:
// fixed-size requests exactly their size, ids valid program ids, flags known, counts
// within the protocol's limits. False when malformed.
bool DecodeHello(const Bytes& body, objproto::HelloRequest* req, std::string* exe);
bool DecodePut(const Bytes& body, objproto::PutRequest* req, std::string* id);  // inline bytes: Tail
bool DecodeGet(const Bytes& body, objproto::GetRequest* req, std::string* id);
bool DecodeDelete(const Bytes& body, std::string* id);
// Release names a view the program holds: any valid id (it is looked up, never created).
bool DecodeRelease(const Bytes& body, std::string* id);
// 1 <= num_ready <= n <= kMaxSources, n ids.
bool DecodeWait(const Bytes& body, objproto::WaitRequest* req, std::vector<std::string>* ids);
// nsources <= kMaxSources ids.
bool DecodeReduce(const Bytes& body, objproto::ReduceRequest* req, std::string* target,
                  std::vector<std::string>* sources);

// A daemon's message (directory.cc -> object_service.cc): a program id, a known access
// (kAccessOwner..kAccessWorld), a size under kInlineLimit and exactly that many bytes after
// the struct (Tail). False when malformed.
bool DecodeStoreCopy(const Bytes& body, objproto::StoreCopy* head, std::string* id);
// A shard's DropCopy (directory.cc -> object_service.cc): exactly the struct, a valid id, a
// known reason (kDropDeleted, kDropLost) and no flag but kDropAck. False when malformed.
bool DecodeDropCopy(const Bytes& body, objproto::DropCopy* drop, std::string* id);

// A reduce coordinator's NodeStart (reducer.cc -> reduce_node.cc): the struct, then exactly
// nchildren (<= kMaxNodeChildren) ChildInfo; a valid output id, a known data type and op;
// `own` empty when the struct carries none (the sink copying the root's stream). False when
// malformed.
inline constexpr uint32_t kMaxNodeChildren = 1024;
bool DecodeNodeStart(const Bytes& body, objproto::NodeStart* start, std::string* own, std::string* output,
                     std::vector<objproto::ChildInfo>* children);

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_MESSAGES_H_
