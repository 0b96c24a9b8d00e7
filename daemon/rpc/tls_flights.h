// TLS links between daemons (docs/rpc-protocol.md, "TLS links"): after the RPC PeerHello
// named a TLS port, the two daemons run a TLS 1.3 handshake for the two programs, with
// their credentials (security/tls_session.h): each flight travels in one kTlsHandshake
// frame, then the accepting daemon sends its verdict (kTlsDone). Either side that fails
// sends a failed kTlsDone instead of its next flight, so the other one learns why.
//
// Once both agree, the connection's later records are sealed with keys exported from that
// handshake (Conn::Reseal): what the calls carry is protected by the programs' TLS session,
// not only by the daemons' cluster key.
#ifndef CONDUIT_DAEMON_RPC_TLS_FLIGHTS_H_
#define CONDUIT_DAEMON_RPC_TLS_FLIGHTS_H_

#include <cstdint>

#include "common/conn.h"
#include "common/deadline.h"
#include "common/frame_stream.h"
#include "common/status.h"
#include "security/tls_session.h"

namespace conduit::rpc {

// Largest flight either side accepts (a server's certificate chain is in one).
inline constexpr uint32_t kMaxTlsFlightBytes = 256u << 10;

// Runs `hs` to its end over the link (`client`: the connecting daemon, which speaks
// first), then reseals `conn` and rebinds `reader` and `writer` to it. The whole exchange
// ends by `deadline`.
Status RunTlsFlights(Conn* conn, FrameReader* reader, FrameWriter* writer, TlsHandshake* hs, bool client,
                     Deadline deadline);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_TLS_FLIGHTS_H_
