// Admission (server/program_policy.h, ProgramExe in server/service_router.h): a program is
// named by the kernel, and one the kernel does not name cannot slip past a deny list.
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "server/program_policy.h"
#include "server/service_router.h"

namespace conduit {
namespace {

TEST(ProgramPolicyTest, TheKernelNamesTheProgram) {
  EXPECT_EQ(ProgramExe(getpid()), "program_policy_test");
  EXPECT_EQ(ProgramExe(0), kUnknownExe) << "a pid outside the daemon's pid namespace reads as 0";
  EXPECT_EQ(ProgramExe(-1), kUnknownExe);
}

TEST(ProgramPolicyTest, AnUnknownProgramPassesOnlyWithoutADenyList) {
  ProgramPolicy open;
  EXPECT_TRUE(open.CheckAdmission(kUnknownExe).ok());
  ProgramPolicy policy({"untrusted_trainer"}, 0);
  EXPECT_FALSE(policy.CheckAdmission("untrusted_trainer").ok());
  EXPECT_TRUE(policy.CheckAdmission("trainer").ok());
  const Status unknown = policy.CheckAdmission(kUnknownExe);
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("cannot tell which executable"), std::string::npos) << unknown.message();
  policy.set_denied({}, /*from_admin_api=*/true);
  EXPECT_TRUE(policy.CheckAdmission(kUnknownExe).ok());
}

}  // namespace
}  // namespace conduit
