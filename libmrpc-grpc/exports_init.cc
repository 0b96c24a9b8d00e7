// grpc_init / grpc_shutdown: the shim counts the program's initializations so that before
// the last shutdown it takes its daemon socket back from gRPC's pollers (gRPC waits for
// every fd it polls before it shuts down).
#include <atomic>

#include "daemon_connection.h"
#include "exports.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

std::atomic<int> g_inits{0};

void BeforeShutdown() {
  if (g_inits.fetch_sub(1) == 1) ReleaseGrpcPollers();
}

}  // namespace

bool GrpcInitialized() { return g_inits.load() > 0; }

}  // namespace conduit::grpcshim

using conduit::grpcshim::Real;

extern "C" {

CONDUIT_EXPORT void grpc_init(void) {
  conduit::grpcshim::g_inits.fetch_add(1);
  Real().grpc_init();
}

CONDUIT_EXPORT void grpc_shutdown(void) {
  conduit::grpcshim::BeforeShutdown();
  Real().grpc_shutdown();
}

CONDUIT_EXPORT void grpc_shutdown_blocking(void) {
  conduit::grpcshim::BeforeShutdown();
  Real().grpc_shutdown_blocking();
}

}  // extern "C"
