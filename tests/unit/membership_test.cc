// A communicator's membership (daemon/collectives/membership.h): built from the
// rendezvous's rank list, checked when handed over, and the local ranks' claims.
#include "collectives/membership.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace conduit {
namespace {

TEST(BuildMembership, HostsInOrderOfTheirLowestRankAndThisDaemonsIndex) {
  Membership m;
  ASSERT_TRUE(BuildMembership({"b", "a", "b", "c", "a"}, {2, 0, 1}, 5, "a", &m).ok());
  EXPECT_EQ(m.host_addrs, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(m.host_of_rank, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(m.my_host, 1);
  EXPECT_EQ(m.initial_ring, (std::vector<int>{2, 0, 1})) << "the root's ring, a permutation of the hosts";
}

TEST(BuildMembership, ARingThatIsNoPermutationOfTheHostsBecomesRankOrder) {
  for (const std::vector<int>& ring :
       {std::vector<int>{}, {0, 1}, {0, 1, 1}, {0, 1, 3}, {-1, 0, 1}, {0, 1, 2, 0}}) {
    Membership m;
    ASSERT_TRUE(BuildMembership({"x", "y", "z"}, ring, 3, "z", &m).ok());
    EXPECT_EQ(m.initial_ring, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(m.my_host, 2);
  }
}

TEST(BuildMembership, RefusesAListOfAnotherLengthOrWithoutThisDaemon) {
  Membership m;
  Status st = BuildMembership({"a", "b"}, {}, 3, "a", &m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("2 ranks, expected 3"), std::string::npos) << st.message();
  st = BuildMembership({"a", "b"}, {}, 2, "c", &m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("(c) serves no rank"), std::string::npos) << st.message();
}

TEST(CheckMembership, AcceptsWhatBuildMakesAndRefusesEachFlaw) {
  Membership good;
  ASSERT_TRUE(BuildMembership({"a", "b", "a", "c"}, {0, 2, 1}, 4, "b", &good).ok());
  Membership copy = good;
  copy.my_host = -7;  // recomputed from the address
  ASSERT_TRUE(CheckMembership(&copy, 4, "b").ok());
  EXPECT_EQ(copy.my_host, 1);

  struct Case {
    const char* what;
    void (*spoil)(Membership&);
    int nranks;
    const char* error;
  };
  const Case cases[] = {
      {"no hosts", [](Membership& m) { m.host_addrs.clear(); }, 4, "0 hosts for 4 ranks"},
      {"more hosts than ranks", [](Membership&) {}, 2, "3 hosts for 2 ranks"},
      {"a host twice", [](Membership& m) { m.host_addrs[2] = "a"; }, 4, "a host named twice"},
      {"not this daemon", [](Membership& m) { m.host_addrs[1] = "d"; }, 4, "(b) is not one of its hosts"},
      {"ranks missing", [](Membership& m) { m.host_of_rank.pop_back(); }, 4, "a host for each rank is missing"},
      {"a rank off the hosts", [](Membership& m) { m.host_of_rank[3] = 3; }, 4, "a rank on host 3 of 3"},
      {"a negative host", [](Membership& m) { m.host_of_rank[0] = -1; }, 4, "a rank on host -1 of 3"},
      {"a host without ranks", [](Membership& m) { m.host_of_rank[3] = 0; }, 4, "a host without ranks"},
      {"a short ring", [](Membership& m) { m.initial_ring.pop_back(); }, 4, "initial ring"},
      {"a ring with a repeat", [](Membership& m) { m.initial_ring[0] = 1; }, 4, "initial ring"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Membership m = good;
    c.spoil(m);
    Status st = CheckMembership(&m, c.nranks, "b");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
  }
}

TEST(LocalRanks, IndexClaimAndLeave) {
  Membership m;
  ASSERT_TRUE(BuildMembership({"a", "b", "a", "b", "a"}, {}, 5, "a", &m).ok());
  LocalRanks locals(m);
  EXPECT_EQ(locals.ranks(), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(locals.IndexOf(4), 2u);
  EXPECT_TRUE(locals.Contains(2));
  for (int r : {-1, 1, 3, 5, 1 << 30}) EXPECT_FALSE(locals.Contains(r)) << r;

  EXPECT_EQ(locals.TryClaim(2), LocalRanks::Claim::kClaimed);
  EXPECT_EQ(locals.TryClaim(2), LocalRanks::Claim::kHeld) << "a second connection for the same rank";
  EXPECT_EQ(locals.TryClaim(3), LocalRanks::Claim::kNotHere) << "a rank of another host";
  EXPECT_EQ(locals.TryClaim(99), LocalRanks::Claim::kNotHere);
  EXPECT_EQ(locals.TryClaim(0), LocalRanks::Claim::kClaimed);

  locals.MarkLeft(4);
  locals.MarkLeft(3);   // not here: ignored
  locals.MarkLeft(-5);  // nor this
  EXPECT_EQ(locals.LeftRanks(), (std::vector<int>{4}));
}

}  // namespace
}  // namespace conduit
