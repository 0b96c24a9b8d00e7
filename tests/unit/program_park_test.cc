// ProgramPark (server/program_park.h): program sessions stop between two requests for a
// live upgrade, never in the middle of one, leave the next request unread in the kernel,
// hand over their connections and state, and go on when the upgrade is called off. The
// sessions of a group (a communicator's local ranks) stop together, never one while
// another's request waits for it.
// Sessions are threads serving one-byte requests over socketpairs.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "server/program_park.h"

namespace conduit {
namespace {

// One program and its session: the session answers each byte with the byte + 1, taking
// `work_ms` per request.
struct Session {
  int program = -1;
  int daemon = -1;
  std::thread thread;
  std::atomic<int> served{0};

  // `group`: its ProgramPark group; `before_reply` runs in each request (a collective
  // waiting for the other local ranks).
  // `background`: the session's background work test (ProgramPark::Member::SetBackgroundWork);
  // `idle`: its idle test (ProgramPark::Member::SetIdle).
  Session(ProgramPark* park, int work_ms, int id, uint64_t group = 0, std::function<void()> before_reply = nullptr,
          std::function<bool()> background = nullptr, std::function<bool()> idle = nullptr) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    program = sv[0];
    daemon = sv[1];
    thread = std::thread([this, park, work_ms, id, group, before_reply, background, idle] {
      ProgramPark::Member member(park, daemon, [id](std::string* state, std::vector<UniqueFd>*) {
        *state = "session " + std::to_string(id);
        return Status::Ok();
      });
      if (background) member.SetBackgroundWork(background);
      if (idle) member.SetIdle(idle);
      member.SetGroup(group);
      for (;;) {
        if (!member.AwaitRequest().ok()) return;
        unsigned char b;
        if (read(daemon, &b, 1) != 1) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(work_ms));
        if (before_reply) before_reply();
        ++b;
        ++served;
        if (write(daemon, &b, 1) != 1) return;
      }
    });
  }
  ~Session() {
    shutdown(program, SHUT_RDWR);
    thread.join();
    close(program);
    close(daemon);
  }
  // Sends a request; the reply, or -1 when none came within `ms`.
  void Send(unsigned char b) { ASSERT_EQ(write(program, &b, 1), 1); }
  int Reply(int ms) {
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    setsockopt(program, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    unsigned char b;
    return read(program, &b, 1) == 1 ? b : -1;
  }
  // Bytes the daemon side has not read.
  int Unread() const {
    unsigned char buf[16];
    const ssize_t n = recv(daemon, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
    return n < 0 ? 0 : static_cast<int>(n);
  }
};

// Waits until the session has read its request (so it is in it): a sleep would race with a
// slow scheduler.
void WaitRead(const Session& s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s.Unread() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(s.Unread(), 0) << "the session never read its request";
}

bool WaitParked(const ProgramPark& park, size_t n, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (park.parked() < n) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(ProgramParkTest, IdleSessionsStopLeaveTheNextRequestUnreadAndGoOnWhenResumed) {
  ProgramPark park(ServiceId::kObjects);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(std::make_unique<Session>(&park, 0, i));
  sessions[0]->Send(1);
  EXPECT_EQ(sessions[0]->Reply(2000), 2);

  park.Begin();
  ASSERT_TRUE(WaitParked(park, 3, 2000));
  sessions[1]->Send(10);
  EXPECT_EQ(sessions[1]->Reply(100), -1) << "a parked session answered";
  EXPECT_EQ(sessions[1]->Unread(), 1) << "the request must stay in the kernel for the next process";

  std::vector<HandedProgram> handed;
  ASSERT_TRUE(park.Export(&handed).ok());
  ASSERT_EQ(handed.size(), 3u);
  for (const HandedProgram& h : handed) {
    EXPECT_EQ(h.service, ServiceId::kObjects);
    EXPECT_TRUE(h.fd.valid());
    EXPECT_EQ(h.state.rfind("session ", 0), 0u) << h.state;
  }

  park.Resume();
  EXPECT_EQ(sessions[1]->Reply(2000), 11) << "the resumed session did not serve the waiting request";
  // The others leave the park as they get to run.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (park.parked() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(park.parked(), 0u);
}

TEST(ProgramParkTest, ASessionInARequestFinishesItFirst) {
  ProgramPark park(ServiceId::kObjects);
  Session slow(&park, 300, 0);
  slow.Send(5);
  WaitRead(slow);  // it is working on it
  park.Begin();
  EXPECT_FALSE(WaitParked(park, 1, 100)) << "parked in the middle of a request";
  EXPECT_EQ(slow.Reply(2000), 6);
  EXPECT_TRUE(WaitParked(park, 1, 2000));
  park.Resume();
}

TEST(ProgramParkTest, ABusyProgramIsStoppedAtARequestBoundary) {
  ProgramPark park(ServiceId::kObjects);
  Session busy(&park, 0, 0);
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0};
  // The program sends its next request as soon as each answer arrives.
  std::thread program([&] {
    unsigned char b = 0;
    while (!stop.load()) {
      if (write(busy.program, &b, 1) != 1) return;
      if (busy.Reply(3000) < 0) return;
      ++answered;
    }
  });
  while (answered.load() < 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  park.Begin();
  EXPECT_TRUE(WaitParked(park, 1, 2000)) << "a session with requests always waiting never stopped";
  const int served = busy.served.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(busy.served.load(), served) << "served a request while parked";
  stop.store(true);
  park.Resume();
  program.join();
}

TEST(ProgramParkTest, AGroupStopsTogetherOnceNoneIsInARequest) {
  ProgramPark park(ServiceId::kCollectives);
  constexpr uint64_t kGroup = 7;
  auto b = std::make_unique<Session>(&park, 0, 1, kGroup);
  // A's request completes only once B has served one: a collective of two local ranks.
  Session a(&park, 0, 0, kGroup, [&b] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (b->served.load() == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  Session other(&park, 0, 2);  // not in the group: stops at once
  a.Send(1);
  WaitRead(a);  // A waits for B
  park.Begin();
  ASSERT_TRUE(WaitParked(park, 1, 2000));  // `other`
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(park.parked(), 1u) << "B stopped while A's request waited for it";
  // B's request arrives during the park: B serves it (A needs it), then both stop.
  b->Send(1);
  EXPECT_EQ(b->Reply(2000), 2);
  EXPECT_EQ(a.Reply(2000), 2);
  EXPECT_TRUE(WaitParked(park, 3, 2000));
  // Stopped: the next request of either waits unread.
  a.Send(5);
  EXPECT_EQ(a.Reply(100), -1);
  EXPECT_EQ(a.Unread(), 1);
  park.Resume();
  EXPECT_EQ(a.Reply(2000), 6);
}

// Asynchronous device groups: A's accepted group runs on (its background work) until B's
// next request has been served. During the park A reads nothing more (its work does not wait
// for its own next request), B serves its request (A's work needs it), and both stop once the
// work has ended, A's next request unread.
// A's work ends only once B is out of its request: B's idle test runs under the park's lock
// only when no session of the group is in a request (ProgramPark::MayPark), and it is what
// ends A's work. Ended any earlier, while B is still in its request, A would rightly serve its
// next request (B's request might need it) and the test would race with B's reply.
TEST(ProgramParkTest, BackgroundWorkHoldsTheGroupAndItsSessionReadsNoMore) {
  ProgramPark park(ServiceId::kCollectives);
  constexpr uint64_t kGroup = 9;
  std::atomic<bool> a_working{true};
  Session a(&park, 0, 0, kGroup, nullptr, [&a_working] { return a_working.load(); });
  std::atomic<bool> b_served{false};
  Session b(
      &park, 0, 1, kGroup, [&b_served] { b_served.store(true); }, nullptr,
      [&] {
        if (b_served.load()) a_working.store(false);
        return true;
      });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // both waiting for requests, in their group
  park.Begin();
  a.Send(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(park.parked(), 0u) << "stopped while A's background work runs";
  EXPECT_EQ(a.Unread(), 1) << "A read a request while its background work ran";
  b.Send(3);
  EXPECT_EQ(b.Reply(2000), 4) << "B did not serve the request A's work waits for";
  EXPECT_TRUE(WaitParked(park, 2, 2000));
  EXPECT_FALSE(a_working.load());
  EXPECT_EQ(a.Unread(), 1);
  EXPECT_EQ(a.served.load(), 0);
  park.Resume();
  EXPECT_EQ(a.Reply(2000), 2);
}

TEST(ProgramParkTest, ResumeRunsTheServicesOwnUndo) {
  std::atomic<int> undone{0}, begun{0};
  ProgramPark park(ServiceId::kCollectives, [&undone] { ++undone; }, [&begun] { ++begun; });
  park.Begin();
  EXPECT_EQ(begun.load(), 1);
  park.Resume();
  EXPECT_EQ(undone.load(), 1);
}

// The RPC service's sessions stop only when idle (no call in flight): one that is not keeps
// serving requests during the park, stops as soon as it is idle, and serves what it held
// (Ready::held) once the park is over, even when its program sends nothing more.
TEST(ProgramParkTest, ASessionStopsOnlyWhenIdleAndServesWhatItHeldAfterThePark) {
  ProgramPark park(ServiceId::kRpc);
  std::atomic<bool> idle{false};
  std::atomic<int> served{0}, held_served{0};
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::thread session([&] {
    ProgramPark::Member member(&park, sv[1], [](std::string*, std::vector<UniqueFd>*) { return Status::Ok(); });
    member.SetIdle([&idle] { return idle.load(); });
    bool held = false;
    for (;;) {
      if (!member.AwaitRequest({false, held, false}).ok()) return;
      if (held && !park.parking()) {
        held = false;
        ++held_served;
        continue;
      }
      unsigned char b;
      if (read(sv[1], &b, 1) != 1) return;
      ++served;
      if (park.parking()) held = true;  // a request it may not serve now
    }
  });
  park.Begin();
  unsigned char b = 1;
  ASSERT_EQ(write(sv[0], &b, 1), 1);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (served.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(served.load(), 1) << "a busy session must go on reading during the park";
  EXPECT_FALSE(WaitParked(park, 1, 50)) << "stopped while not idle";
  idle = true;
  EXPECT_TRUE(WaitParked(park, 1, 2000)) << "did not stop once idle";
  EXPECT_EQ(held_served.load(), 0);
  park.Resume();
  const auto until2 = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (held_served.load() == 0 && std::chrono::steady_clock::now() < until2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(held_served.load(), 1) << "what it held was not served after the park";
  shutdown(sv[0], SHUT_RDWR);
  session.join();
  close(sv[0]);
  close(sv[1]);
}

}  // namespace
}  // namespace conduit
