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

#include "common/object_protocol.h"

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

template <typename T>
size_t TailSize(const Bytes& body) {
  return body.size() - sizeof(T);
}

template <typename T>
const uint8_t* Tail(const Bytes& body) {
  return body.data() + sizeof(T);
}

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_MESSAGES_H_
