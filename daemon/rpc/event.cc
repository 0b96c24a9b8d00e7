#include "rpc/event.h"

namespace conduit::rpc {

Event Event::From(const CallEvent& ev) {
  Event e;
  e.sections = ev.sections & ~uint32_t{kMessage};
  if (ev.has(kMessage)) e.message_flags = ev.message.flags;
  if (ev.has(kStart)) {
    e.target = ev.target;
    e.timeout_us = ev.timeout_us;
    e.method.assign(ev.method);
    e.authority.assign(ev.authority);
    e.peer.assign(ev.peer);
    e.initial_md = Metadata{ev.initial_md.count, std::string(ev.initial_md.block)};
    e.auth = Metadata{ev.auth.count, std::string(ev.auth.block)};
  }
  if (ev.has(kHeaders)) e.headers = Metadata{ev.headers.count, std::string(ev.headers.block)};
  if (ev.has(kStatus)) {
    e.status_code = ev.status_code;
    e.status_details.assign(ev.status_details);
    e.trailers = Metadata{ev.trailers.count, std::string(ev.trailers.block)};
  }
  if (ev.has(kCancel)) {
    e.cancel_code = ev.cancel_code;
    e.cancel_details.assign(ev.cancel_details);
  }
  if (ev.has(kWindow)) e.window = ev.window;
  return e;
}

CallEvent Event::View(uint64_t call) const {
  CallEvent v;
  v.call = call;
  v.sections = sections & ~uint32_t{kMessage};
  v.target = target;
  v.timeout_us = timeout_us;
  v.method = method;
  v.authority = authority;
  v.peer = peer;
  v.initial_md = initial_md.view();
  v.auth = auth.view();
  v.headers = headers.view();
  v.status_code = status_code;
  v.status_details = status_details;
  v.trailers = trailers.view();
  v.cancel_code = cancel_code;
  v.cancel_details = cancel_details;
  v.window = window;
  return v;
}

Event StatusEvent(int32_t code, std::string details) {
  Event e;
  e.sections = kStatus;
  e.status_code = code;
  e.status_details = std::move(details);
  return e;
}

Event CancelEvent(int32_t code, std::string details) {
  Event e;
  e.sections = kCancel;
  e.cancel_code = code;
  e.cancel_details = std::move(details);
  return e;
}

}  // namespace conduit::rpc
