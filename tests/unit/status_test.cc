// The one error model (common/status.h): canonical codes, what each edge reports for them,
// and the end-of-stream condition that sessions decide on instead of message text.
#include "common/status.h"

#include <grpc/status.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin/admin_api.h"
#include "common/fd_io.h"
#include "common/frame.h"

namespace conduit {
namespace {

// The NCCL-flavoured makers keep the results the NCCL edge has always reported, and
// their canonical codes come back to the same result.
TEST(StatusTest, NcclMakersRoundTrip) {
  const struct {
    Status st;
    StatusCode canonical;
    ncclResult_t nccl;
  } cases[] = {
      {SystemError("x"), StatusCode::kUnknown, ncclSystemError},
      {RemoteError("x"), StatusCode::kUnavailable, ncclRemoteError},
      {InvalidArgument("x"), StatusCode::kInvalidArgument, ncclInvalidArgument},
      {InvalidUsage("x"), StatusCode::kFailedPrecondition, ncclInvalidUsage},
      {InternalError("x"), StatusCode::kInternal, ncclInternalError},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(c.st.ok());
    EXPECT_EQ(c.st.canonical(), c.canonical) << StatusCodeName(c.st.canonical());
    EXPECT_EQ(c.st.code(), c.nccl);
    EXPECT_EQ(NcclResultOf(c.canonical), c.nccl);
    EXPECT_EQ(CanonicalOf(c.nccl), c.canonical);
  }
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().code(), ncclSuccess);
}

// A result read off the wire keeps its exact value for the NCCL edge, even one with no
// canonical code of its own.
TEST(StatusTest, WireResultsSurviveExactly) {
  for (ncclResult_t r : {ncclUnhandledCudaError, ncclSystemError, ncclRemoteError, ncclInvalidUsage}) {
    Status st = FromWire(ToWire(Status(r, "from a peer")));
    EXPECT_EQ(st.code(), r);
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.message(), "from a peer");
  }
  EXPECT_EQ(FromWire(ToWire(NotFound("no such thing"))).code(), ncclInvalidArgument);
}

// Canonical codes are gRPC's own numbers: the RPC service hands them to programs as is.
TEST(StatusTest, GrpcCodesAreGrpcs) {
  EXPECT_EQ(GrpcStatusOf(StatusCode::kOk), GRPC_STATUS_OK);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kCancelled), GRPC_STATUS_CANCELLED);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kInvalidArgument), GRPC_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kDeadlineExceeded), GRPC_STATUS_DEADLINE_EXCEEDED);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kNotFound), GRPC_STATUS_NOT_FOUND);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kPermissionDenied), GRPC_STATUS_PERMISSION_DENIED);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kResourceExhausted), GRPC_STATUS_RESOURCE_EXHAUSTED);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kFailedPrecondition), GRPC_STATUS_FAILED_PRECONDITION);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kOutOfRange), GRPC_STATUS_OUT_OF_RANGE);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kInternal), GRPC_STATUS_INTERNAL);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kUnavailable), GRPC_STATUS_UNAVAILABLE);
  EXPECT_EQ(GrpcStatusOf(StatusCode::kUnauthenticated), GRPC_STATUS_UNAUTHENTICATED);
}

TEST(StatusTest, AdminEdgeMapsCanonicalCodes) {
  EXPECT_EQ(AdminReply::FromStatus(NotFound("no tenant policy named 'x'")).http_status, 404);
  EXPECT_EQ(AdminReply::FromStatus(InvalidArgument("bad")).http_status, 400);
  EXPECT_EQ(AdminReply::FromStatus(InvalidUsage("bad")).http_status, 400);
  EXPECT_EQ(AdminReply::FromStatus(Status(StatusCode::kPermissionDenied, "no")).http_status, 403);
  EXPECT_EQ(AdminReply::FromStatus(SystemError("disk")).http_status, 500);
  EXPECT_EQ(AdminReply::FromStatus(RemoteError("peer")).http_status, 500);
}

// A peer that hangs up between frames ends the stream; one that hangs up inside a frame
// is an error. Sessions log the second and not the first, by this predicate alone.
TEST(StatusTest, HangingUpBetweenFramesIsAnEndOfStream) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  close(fds[1]);
  Frame frame;
  Status st = ReadFrame(fds[0], 1, 1, 1024, &frame, Deadline::AfterMs(1000));
  EXPECT_TRUE(IsEndOfStream(st)) << st.message();
  EXPECT_EQ(st.code(), ncclSystemError);  // the NCCL edge sees a lost connection, as before
  close(fds[0]);

  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const char part[5] = {1, 0, 0, 0, 1};
  ASSERT_EQ(write(fds[1], part, sizeof(part)), 5);
  close(fds[1]);
  st = ReadFrame(fds[0], 1, 1, 1024, &frame, Deadline::AfterMs(1000));
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(IsEndOfStream(st)) << st.message();
  close(fds[0]);

  EXPECT_TRUE(IsEndOfStream(ClosedAfter(0, 16)));
  EXPECT_FALSE(IsEndOfStream(ClosedAfter(3, 16)));
  EXPECT_FALSE(IsEndOfStream(ClosedAfter(3, 0)));
}

}  // namespace
}  // namespace conduit
