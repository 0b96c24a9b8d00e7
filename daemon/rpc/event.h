// Event: one Call frame's sections as the daemon carries them between the two ends of a
// call, with owned strings (the frame buffer they were decoded from does not live on).
#ifndef CONDUIT_DAEMON_RPC_EVENT_H_
#define CONDUIT_DAEMON_RPC_EVENT_H_

#include <cstdint>
#include <string>

#include "common/rpc_event.h"
#include "rpc/message.h"

namespace conduit::rpc {

struct Metadata {
  uint32_t count = 0;
  std::string block;
  MetadataView view() const { return MetadataView{count, block}; }
};

struct Event {
  uint32_t sections = 0;
  // Start
  uint64_t target = 0;
  int64_t timeout_us = kNoTimeout;
  std::string method;
  std::string authority;
  std::string peer;
  Metadata initial_md;
  // Start, set by the server's daemon only: the caller's TLS identity (rpc_event.h)
  Metadata auth;
  // Headers
  Metadata headers;
  // Message (Message section present iff !message.empty()) and its wire flags
  Message message;
  uint32_t message_flags = 0;
  // Status
  int32_t status_code = 0;
  std::string status_details;
  Metadata trailers;
  // Cancel
  int32_t cancel_code = 0;
  std::string cancel_details;
  // Window
  uint64_t window = 0;

  bool has(Section s) const { return (sections & s) != 0; }
  // Everything but the message.
  static Event From(const CallEvent& ev);
  // A view for EncodeCallEvent; the caller fills the Message section.
  CallEvent View(uint64_t call) const;
};

Event CancelEvent(int32_t code, std::string details);
// A Status event alone (the call ends normally, e.g. refused by a policy).
Event StatusEvent(int32_t code, std::string details);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_EVENT_H_
