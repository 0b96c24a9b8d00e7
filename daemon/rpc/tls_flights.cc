#include "rpc/tls_flights.h"

#include <cstring>
#include <string>

#include "protocol/peer_protocol.h"
#include "protocol/rpc_protocol.h"
#include "security/aead_record_cipher.h"

namespace conduit::rpc {
namespace {

OutFrame FlightFrame(uint16_t type, std::string payload) {
  OutFrame f;
  f.head = std::move(payload);
  PutFrameHeader(&f, peerproto::kMagic, peerproto::kVersion, type, 0, f.head.size());
  return f;
}

OutFrame Verdict(const Status& st) {
  rpcproto::StatusReply reply{ToWire(st)};
  return FlightFrame(rpcproto::kTlsDone, std::string(reinterpret_cast<const char*>(&reply), sizeof(reply)));
}

// Tells the other side why this side gave up, and gives up.
Status GiveUp(FrameWriter* writer, const Status& why) {
  (void)writer->Send(Verdict(why));
  return why;
}

Status Switch(Conn* conn, FrameReader* reader, FrameWriter* writer, const TlsHandshake& hs) {
  if (reader->buffered() > 0) return InvalidArgument("the other daemon sent bytes before the TLS handshake ended");
  DirectionKeys send, recv;
  CONDUIT_RETURN_IF_ERROR(hs.Keys(&send, &recv));
  std::unique_ptr<RecordSealer> sealer;
  std::unique_ptr<RecordOpener> opener;
  CONDUIT_RETURN_IF_ERROR(NewAesGcmSealer(send, &sealer));
  CONDUIT_RETURN_IF_ERROR(NewAesGcmOpener(recv, &opener));
  CONDUIT_RETURN_IF_ERROR(conn->Reseal(std::move(sealer), std::move(opener)));
  reader->Rebind(conn);
  writer->Rebind(conn);
  return Status::Ok();
}

}  // namespace

Status RunTlsFlights(Conn* conn, FrameReader* reader, FrameWriter* writer, TlsHandshake* hs, bool client,
                     Deadline deadline) {
  std::string out;
  if (client) {
    Status st = hs->Step("", &out);
    if (!st.ok()) return GiveUp(writer, st);
    CONDUIT_RETURN_IF_ERROR(writer->Send(FlightFrame(rpcproto::kTlsHandshake, std::move(out))));
  }
  for (;;) {
    FrameHeader h;
    CONDUIT_RETURN_IF_ERROR(reader->NextHeader(&h, deadline));
    if (h.type == rpcproto::kTlsDone) {
      rpcproto::StatusReply reply;
      if (h.length != sizeof(reply)) return InvalidArgument("malformed TLS verdict (%u bytes)", h.length);
      CONDUIT_RETURN_IF_ERROR(reader->Read(&reply, sizeof(reply), deadline));
      Status theirs = FromWire(reply.status);
      if (!theirs.ok()) return RemoteError("the other daemon ended the TLS handshake: %s", theirs.message().c_str());
      // Only the accepting daemon says yes, and only once this side is done too.
      if (!client || !hs->done()) return InvalidArgument("a TLS verdict before the handshake ended");
      return Switch(conn, reader, writer, *hs);
    }
    if (h.type != rpcproto::kTlsHandshake || h.length > kMaxTlsFlightBytes) {
      return InvalidArgument("expected a TLS flight, got message 0x%04x of %u bytes", h.type, h.length);
    }
    std::string in;
    CONDUIT_RETURN_IF_ERROR(reader->ReadString(h.length, &in, deadline));
    if (hs->done()) return GiveUp(writer, InvalidArgument("a TLS flight after the handshake ended"));
    out.clear();
    Status st = hs->Step(in, &out);
    if (!st.ok()) return GiveUp(writer, st);
    if (!out.empty()) CONDUIT_RETURN_IF_ERROR(writer->Send(FlightFrame(rpcproto::kTlsHandshake, std::move(out))));
    if (!client && hs->done()) {
      // The verdict goes under the old records; everything after it under the new ones.
      CONDUIT_RETURN_IF_ERROR(writer->Send(Verdict(Status::Ok())));
      return Switch(conn, reader, writer, *hs);
    }
  }
}

}  // namespace conduit::rpc
