#include "common/rpc_event.h"

#include <cstring>

#include "protocol/rpc_protocol.h"

namespace conduit::rpc {
namespace {

template <typename T>
void AppendRaw(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Bounds-checked cursor over untrusted bytes.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Fixed(T* out) {
    if (in_.size() - at_ < sizeof(T)) return false;
    memcpy(out, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool Bytes(size_t n, std::string_view* out) {
    if (in_.size() - at_ < n) return false;
    *out = in_.substr(at_, n);
    at_ += n;
    return true;
  }
  size_t left() const { return in_.size() - at_; }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

Status ReadMetadata(Reader& r, uint32_t count, uint32_t bytes, MetadataView* md, const char* what) {
  if (bytes > rpcproto::kMaxSectionBytes) return InvalidArgument("%s metadata of %u bytes is too large", what, bytes);
  if (!r.Bytes(bytes, &md->block)) return InvalidArgument("%s metadata overruns the frame", what);
  md->count = count;
  return CheckMetadata(md->block, count);
}

bool ValidCode(int32_t code) { return code >= 0 && code <= 16; }

}  // namespace

Status CheckMetadata(std::string_view block, uint32_t count) {
  Reader r(block);
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t lens[2];
    std::string_view key, value;
    if (!r.Fixed(&lens) || !r.Bytes(lens[0], &key) || !r.Bytes(lens[1], &value)) {
      return InvalidArgument("metadata entry %u of %u overruns its block", i, count);
    }
    if (key.empty()) return InvalidArgument("metadata entry %u has an empty key", i);
  }
  if (r.left() != 0) return InvalidArgument("metadata block has %zu stray bytes", r.left());
  return Status::Ok();
}

void AppendMetadata(std::string* block, std::string_view key, std::string_view value) {
  uint32_t lens[2] = {static_cast<uint32_t>(key.size()), static_cast<uint32_t>(value.size())};
  AppendRaw(block, lens);
  block->append(key);
  block->append(value);
}

void EncodeCallEvent(const CallEvent& ev, std::string* out) {
  bool inline_data = ev.has(kMessage) && ev.message.segment == kInlineSegment;
  CallHead head{ev.call, ev.sections, inline_data ? static_cast<uint32_t>(ev.data.size()) : 0};
  AppendRaw(out, head);
  if (ev.has(kStart)) {
    StartWire w{ev.target,
                ev.timeout_us,
                static_cast<uint32_t>(ev.method.size()),
                static_cast<uint32_t>(ev.authority.size()),
                static_cast<uint32_t>(ev.peer.size()),
                ev.initial_md.count,
                static_cast<uint32_t>(ev.initial_md.block.size()),
                ev.auth.count == 0 ? 0 : static_cast<uint32_t>(sizeof(uint32_t) + ev.auth.block.size())};
    AppendRaw(out, w);
    out->append(ev.method);
    out->append(ev.authority);
    out->append(ev.peer);
    out->append(ev.initial_md.block);
    if (ev.auth.count != 0) {
      AppendRaw(out, ev.auth.count);
      out->append(ev.auth.block);
    }
  }
  if (ev.has(kHeaders)) {
    AppendRaw(out, MetadataWire{ev.headers.count, static_cast<uint32_t>(ev.headers.block.size())});
    out->append(ev.headers.block);
  }
  if (ev.has(kMessage)) AppendRaw(out, ev.message);
  if (ev.has(kStatus)) {
    StatusWire w{ev.status_code, static_cast<uint32_t>(ev.status_details.size()), ev.trailers.count,
                 static_cast<uint32_t>(ev.trailers.block.size())};
    AppendRaw(out, w);
    out->append(ev.status_details);
    out->append(ev.trailers.block);
  }
  if (ev.has(kCancel)) {
    AppendRaw(out, CancelWire{ev.cancel_code, static_cast<uint32_t>(ev.cancel_details.size())});
    out->append(ev.cancel_details);
  }
  if (ev.has(kWindow)) AppendRaw(out, ev.window);
}

Status PeekCallHead(std::string_view payload, CallHead* head) {
  if (payload.size() < sizeof(CallHead)) return InvalidArgument("Call frame of %zu bytes has no head", payload.size());
  memcpy(head, payload.data(), sizeof(CallHead));
  return Status::Ok();
}

Status DecodeCallEvent(std::string_view sections, CallEvent* ev) {
  *ev = CallEvent{};
  Reader r(sections);
  CallHead head;
  if (!r.Fixed(&head)) return InvalidArgument("Call frame of %zu bytes has no head", sections.size());
  ev->call = head.call;
  ev->sections = head.sections;
  if ((head.sections & ~kAllSections) != 0) return InvalidArgument("unknown Call sections 0x%x", head.sections);
  if (head.sections == 0) return InvalidArgument("Call frame with no sections");
  if (ev->has(kStart)) {
    StartWire w;
    if (!r.Fixed(&w)) return InvalidArgument("truncated Start section");
    if (w.method_len == 0 || w.method_len > 4096 || w.authority_len > 4096 || w.peer_len > 256) {
      return InvalidArgument("Start section with a method of %u bytes, an authority of %u bytes and a peer of %u bytes",
                             w.method_len, w.authority_len, w.peer_len);
    }
    if (w.timeout_us < kNoTimeout) return InvalidArgument("negative timeout %lld us", static_cast<long long>(w.timeout_us));
    ev->target = w.target;
    ev->timeout_us = w.timeout_us;
    if (!r.Bytes(w.method_len, &ev->method) || !r.Bytes(w.authority_len, &ev->authority) ||
        !r.Bytes(w.peer_len, &ev->peer)) {
      return InvalidArgument("Start section overruns the frame");
    }
    CONDUIT_RETURN_IF_ERROR(ReadMetadata(r, w.md_count, w.md_bytes, &ev->initial_md, "initial"));
    if (w.auth_bytes != 0) {
      uint32_t count;
      if (w.auth_bytes < sizeof(count) || !r.Fixed(&count)) return InvalidArgument("truncated auth properties");
      CONDUIT_RETURN_IF_ERROR(ReadMetadata(r, count, w.auth_bytes - sizeof(count), &ev->auth, "auth"));
      if (count == 0) return InvalidArgument("auth properties announced with none");
    }
  }
  if (ev->has(kHeaders)) {
    MetadataWire w;
    if (!r.Fixed(&w)) return InvalidArgument("truncated Headers section");
    CONDUIT_RETURN_IF_ERROR(ReadMetadata(r, w.count, w.bytes, &ev->headers, "response"));
  }
  if (ev->has(kMessage)) {
    if (!r.Fixed(&ev->message)) return InvalidArgument("truncated Message section");
    const MessageWire& m = ev->message;
    if ((m.flags & ~kKnownMessageFlags) != 0) return InvalidArgument("unknown message flags 0x%x", m.flags);
    if (m.fragment_length > m.total_length || m.fragment_offset > m.total_length - m.fragment_length) {
      return InvalidArgument("message fragment [%llu, +%llu) outside a %llu-byte message",
                             static_cast<unsigned long long>(m.fragment_offset),
                             static_cast<unsigned long long>(m.fragment_length),
                             static_cast<unsigned long long>(m.total_length));
    }
    if (m.segment == kInlineSegment) {
      if (m.fragment_length != head.inline_bytes) {
        return InvalidArgument("inline message fragment of %llu bytes but %u inline bytes follow",
                               static_cast<unsigned long long>(m.fragment_length), head.inline_bytes);
      }
    } else if (head.inline_bytes != 0) {
      return InvalidArgument("%u inline bytes after a message held in a segment", head.inline_bytes);
    }
  } else if (head.inline_bytes != 0) {
    return InvalidArgument("%u inline bytes without a Message section", head.inline_bytes);
  }
  if (ev->has(kStatus)) {
    StatusWire w;
    if (!r.Fixed(&w)) return InvalidArgument("truncated Status section");
    if (!ValidCode(w.code)) return InvalidArgument("status code %d is not a gRPC status", w.code);
    if (w.details_len > rpcproto::kMaxSectionBytes || !r.Bytes(w.details_len, &ev->status_details)) {
      return InvalidArgument("Status details overrun the frame");
    }
    ev->status_code = w.code;
    CONDUIT_RETURN_IF_ERROR(ReadMetadata(r, w.md_count, w.md_bytes, &ev->trailers, "trailing"));
  }
  if (ev->has(kCancel)) {
    CancelWire w;
    if (!r.Fixed(&w)) return InvalidArgument("truncated Cancel section");
    if (!ValidCode(w.code) || w.code == 0) return InvalidArgument("cancel code %d is not an error status", w.code);
    if (w.details_len > rpcproto::kMaxSectionBytes || !r.Bytes(w.details_len, &ev->cancel_details)) {
      return InvalidArgument("Cancel details overrun the frame");
    }
    ev->cancel_code = w.code;
  }
  if (ev->has(kWindow) && !r.Fixed(&ev->window)) return InvalidArgument("truncated Window section");
  if (r.left() != 0) return InvalidArgument("%zu stray bytes after the Call sections", r.left());
  return Status::Ok();
}

}  // namespace conduit::rpc
