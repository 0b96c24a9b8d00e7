// The reply and request pages (protocol/call_page.h) between the shim's DaemonConnection
// and a scripted daemon on a real Unix socket: replies put while the program spins and after
// it went to sleep on its socket (the kReplyInPage wake), requests put while the daemon spins
// and after it went to sleep (the kRequestInPage wake), each race taken both ways over many
// calls, a daemon that answers on the socket anyway, ones that predate pages, and one that
// dies while the program waits.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "common/frame.h"
#include "common/shm_segment.h"
#include "daemon_connection.h"
#include "protocol/call_page.h"
#include "protocol/shim_protocol.h"
#include "temp_dir.h"

namespace conduit {
namespace {

// What the scripted daemon does with Group request `n` (1, 2, ...) on a connection that
// attached a page: put its reply in the page after `delay`, or send it on the socket.
struct Answer {
  std::chrono::microseconds delay{0};
  bool on_socket = false;
  // Between storing the reply's `seq` and taking `waiting`: a daemon thread descheduled
  // there, while the program takes the reply, sends its next request and sleeps.
  std::chrono::microseconds late_wake{0};
};

// Which pages the scripted daemon takes: none (a daemon that predates them), the reply
// page only (one that predates request pages), or both.
enum class Pages { kNone, kReplyOnly, kBoth };

// A daemon that speaks just enough of the shim protocol: Hello, AttachReplyPage and
// AttachRequestPage (taken or, as a daemon that predates them does, refused), and Group
// requests, from the socket or the request page, answered by a GroupReply whose failed_op
// is the request's number, so the program can check it got the reply to its own request.
// Between requests it spins on the request page for `request_spin`, then sleeps on the
// socket, where the program's kRequestInPage frame wakes it.
class ScriptedDaemon {
 public:
  ScriptedDaemon(const std::string& path, Pages pages, std::function<Answer(int)> answer, int die_after = -1,
                 std::chrono::microseconds request_spin = std::chrono::microseconds(200))
      : pages_(pages), answer_(std::move(answer)), die_after_(die_after), request_spin_(request_spin) {
    listener_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listener_.get(), 4), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedDaemon() { thread_.join(); }
  int groups() const { return groups_.load(); }
  int wakes_sent() const { return wakes_.load(); }
  int requests_from_page() const { return from_page_.load(); }
  int request_wakes() const { return request_wakes_.load(); }

 private:
  // The next request from the request page (true) or the socket (false, in `f`).
  bool NextFromPage(int conn, Frame* f, bool* ok) {
    *ok = true;
    for (;;) {
      if (request_page_.data() != nullptr) {
        CallPage* page = CallPageOf(request_page_.data());
        bool on_socket = false;
        const auto until = std::chrono::steady_clock::now() + request_spin_;
        while (std::chrono::steady_clock::now() < until) {
          if (InPage(page, taken_ + 1)) return true;
          pollfd p{conn, POLLIN, 0};
          if ((on_socket = poll(&p, 1, 0) > 0)) break;
        }
        if (!on_socket) {
          AnnounceSleep(page);
          if (LookBeforeSleep(page, taken_ + 1) != LastLook::kSleep) return true;  // a frame owed is ignored later
        }
      }
      if (!ReadFrame(conn, shimproto::kMagic, shimproto::kVersion, shimproto::kMaxPayload, f, Deadline::AfterMs(10000),
                     /*accept_fd=*/true)
               .ok()) {
        *ok = false;  // the program closed its end
        return false;
      }
      if (f->header.type != shimproto::kRequestInPage) return false;
      ++request_wakes_;
      EXPECT_NE(request_page_.data(), nullptr) << "a kRequestInPage without a request page";
      if (request_page_.data() == nullptr) {
        *ok = false;
        return false;
      }
      CallPage* page = CallPageOf(request_page_.data());
      page->waiting.exchange(0);
      if (InPage(page, taken_ + 1)) return true;
      // The request it was for was taken already: ignore it, as conduitd does, and wait
      // again from the start (spin, then ask for a frame before sleeping).
    }
  }

  // PutInPage, or its two halves `late_wake` apart.
  static bool Put(CallPage* page, uint32_t count, const shimproto::GroupReply& r, std::chrono::microseconds late_wake) {
    if (late_wake.count() == 0) return PutInPage(page, count, shimproto::kGroupReply, &r, sizeof(r));
    StoreInPage(page, count, shimproto::kGroupReply, &r, sizeof(r));
    std::this_thread::sleep_for(late_wake);
    return TakeWakeRequest(page);
  }

  void Serve() {
    UniqueFd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(conn.valid());
    ShmSegment page;
    uint32_t put = 0;
    for (;;) {
      Frame f;
      bool ok;
      if (NextFromPage(conn.get(), &f, &ok)) {
        CallPage* rp = CallPageOf(request_page_.data());
        ASSERT_EQ(rp->type, shimproto::kGroup);
        ASSERT_GE(rp->len, sizeof(shimproto::GroupRequest));
        f.header.type = shimproto::kGroup;
        f.payload.assign(rp->payload, rp->payload + rp->len);
        ++taken_;
        ++from_page_;
      } else if (!ok) {
        return;
      }
      const Deadline d = Deadline::AfterMs(5000);
      if (f.header.type == shimproto::kHello) {
        shimproto::HelloReply r{};
        r.status = ToWire(Status::Ok());
        r.accepted = 1;
        r.timeout_ms = 5000;
        ASSERT_TRUE(WriteFrame(conn.get(), shimproto::kMagic, shimproto::kVersion, shimproto::kHelloReply, 0, &r,
                               sizeof(r), d).ok());
      } else if (f.header.type == shimproto::kAttachReplyPage || f.header.type == shimproto::kAttachRequestPage) {
        const bool reply = f.header.type == shimproto::kAttachReplyPage;
        const bool takes = reply ? pages_ != Pages::kNone : pages_ == Pages::kBoth;
        Status st = takes ? (reply ? page : request_page_).Map(f.fd.get(), kCallPageBytes, kCallPageBytes)
                          : InvalidArgument("unknown request type %u", f.header.type);
        WireStatus w = ToWire(st);
        ASSERT_TRUE(WriteFrame(conn.get(), shimproto::kMagic, shimproto::kVersion, f.header.type + 1, 0, &w, sizeof(w),
                               d).ok());
      } else if (f.header.type == shimproto::kGroup) {
        const int n = ++groups_;
        if (n == die_after_) return;  // closes the connection with the reply owed
        Answer a = answer_(n);
        std::this_thread::sleep_for(a.delay);
        shimproto::GroupReply r{};
        r.status = ToWire(Status::Ok());
        r.failed_op = n;
        if (a.on_socket || page.data() == nullptr) {
          ASSERT_TRUE(WriteFrame(conn.get(), shimproto::kMagic, shimproto::kVersion, shimproto::kGroupReply, 0, &r,
                                 sizeof(r), d).ok());
        } else if (Put(CallPageOf(page.data()), ++put, r, a.late_wake)) {
          ++wakes_;
          ASSERT_TRUE(WriteFrame(conn.get(), shimproto::kMagic, shimproto::kVersion, shimproto::kReplyInPage, 0,
                                 nullptr, 0, d).ok());
        }
      } else {
        ADD_FAILURE() << "unexpected request type " << f.header.type;
        return;
      }
    }
  }

  UniqueFd listener_;
  const Pages pages_;
  std::function<Answer(int)> answer_;
  const int die_after_;
  const std::chrono::microseconds request_spin_;
  ShmSegment request_page_;
  uint32_t taken_ = 0;  // requests taken from the request page
  std::atomic<int> groups_{0};
  std::atomic<int> wakes_{0};
  std::atomic<int> from_page_{0};
  std::atomic<int> request_wakes_{0};
  std::thread thread_;
};

// The exchange itself, each interleaving of the program's last look with the daemon's put
// taken in turn (the socket tests below meet the middle one too rarely to count on).
TEST(ReplyPageProtocol, EachOrderOfTheLastLookAndThePutOwesTheRightFrames) {
  alignas(64) static uint8_t bytes[kCallPageBytes];
  CallPage* page = CallPageOf(bytes);
  memset(bytes, 0, sizeof(bytes));
  const uint32_t reply = 0x5eed;
  // 1. Put while the program spins: no frame; its last look (if any) takes it with none owed.
  EXPECT_FALSE(PutInPage(page, 1, shimproto::kGroupReply, &reply, sizeof(reply)));
  AnnounceSleep(page);
  EXPECT_EQ(LookBeforeSleep(page, 1), LastLook::kTake);
  EXPECT_EQ(page->waiting.load(), 0u);
  // 2. Put between the program's announcement and its last look: the daemon owes a frame,
  //    and the program knows to read it.
  AnnounceSleep(page);
  EXPECT_TRUE(PutInPage(page, 2, shimproto::kGroupReply, &reply, sizeof(reply)));
  EXPECT_EQ(LookBeforeSleep(page, 2), LastLook::kTakeAfterWakeFrame);
  EXPECT_EQ(page->waiting.load(), 0u);
  // 3. Put after the last look: the program sleeps, the daemon wakes it.
  AnnounceSleep(page);
  EXPECT_EQ(LookBeforeSleep(page, 3), LastLook::kSleep);
  EXPECT_TRUE(PutInPage(page, 3, shimproto::kGroupReply, &reply, sizeof(reply)));
  EXPECT_TRUE(WriterTookWaiting(page));
  EXPECT_TRUE(InPage(page, 3));
  EXPECT_EQ(page->len, sizeof(reply));
  // 4. The program sleeps and the reply comes on the socket instead (a daemon without the
  //    page): `waiting` was never taken, and the program takes it back.
  AnnounceSleep(page);
  EXPECT_EQ(LookBeforeSleep(page, 4), LastLook::kSleep);
  EXPECT_FALSE(WriterTookWaiting(page));
  EXPECT_EQ(page->waiting.load(), 0u);
}

class ReplyPageTest : public ::testing::Test {
 protected:
  ReplyPageTest() : dir_("reply-page") {
    path_ = dir_.path() + "/conduitd.sock";
    setenv(shimproto::kSocketEnv, path_.c_str(), 1);
  }
  ~ReplyPageTest() override { unsetenv(shimproto::kSocketEnv); }

  std::unique_ptr<DaemonConnection> Connect() {
    std::unique_ptr<DaemonConnection> conn;
    Status st = DaemonConnection::Open(&conn);
    EXPECT_TRUE(st.ok()) << st.message();
    return conn;
  }

  // One Group call asking for the page; the reply's number, or -1 on an error.
  static int Call(DaemonConnection& conn, int spin_micros, Status* error = nullptr) {
    shimproto::GroupRequest req{0, shimproto::kGroupReplyInPage};
    Status st = conn.SendRequest(shimproto::kGroup, &req, sizeof(req), -1, conn.has_reply_page());
    Frame reply;
    if (st.ok()) {
      st = conn.ReadReply(shimproto::kGroup, shimproto::kGroupReply, &reply, Deadline::AfterMs(10000), spin_micros);
    }
    if (error != nullptr) *error = st;
    if (!st.ok() || reply.payload.size() != sizeof(shimproto::GroupReply)) return -1;
    shimproto::GroupReply r;
    memcpy(&r, reply.payload.data(), sizeof(r));
    return r.failed_op;
  }

  // Nothing left unread on the connection: every kReplyInPage frame the daemon sent was
  // read by the call it was for (one left over would be taken for a later call's reply).
  static void ExpectNothingUnread(DaemonConnection& conn) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a last frame in flight
    char byte;
    EXPECT_LT(recv(conn.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT), 0) << "a frame was left unread";
  }

  // A connection with a reply page making `calls` calls (each spinning `spin_micros`),
  // every reply the one to its own request, at least one wake frame sent, none left unread.
  void ExpectCallsWithWakes(const ScriptedDaemon& daemon, int calls, int spin_micros) {
    std::unique_ptr<DaemonConnection> conn = Connect();
    ASSERT_TRUE(conn->has_reply_page());
    for (int n = 1; n <= calls; ++n) ASSERT_EQ(Call(*conn, spin_micros), n);
    EXPECT_GT(daemon.wakes_sent(), 0);
    ExpectNothingUnread(*conn);
  }

  test::TempDir dir_;
  std::string path_;
};

TEST_F(ReplyPageTest, RepliesComeThroughThePageWhileTheProgramSpinsAndAfterItSleeps) {
  // Odd calls answered at once (the program is still spinning), even ones after 5 ms
  // (the program spins 100 us, then sleeps on its socket and is woken by kReplyInPage).
  // On a loaded machine the program's spin may itself be descheduled past a late reply,
  // which it then finds without a wake-up: so some wakes, not one per late reply.
  ScriptedDaemon daemon(path_, Pages::kBoth, [](int n) {
    return Answer{std::chrono::microseconds(n % 2 == 0 ? 5000 : 0), false};
  });
  ExpectCallsWithWakes(daemon, 40, 100);
}

TEST_F(ReplyPageTest, TheRaceBetweenSleepingAndTheReplyEndsTheSameEitherWay) {
  // Replies land around the moment the program gives up spinning, so the program's store
  // of `waiting` and the daemon's reply meet in both orders; every reply must arrive once
  // and in order, every kReplyInPage frame be read (the next call would trip on one left).
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> jitter(0, 60);
  std::vector<int> delays(2001);
  for (int& d : delays) d = jitter(rng);
  ScriptedDaemon daemon(path_, Pages::kBoth, [&](int n) { return Answer{std::chrono::microseconds(delays[n]), false}; });
  ExpectCallsWithWakes(daemon, 2000, 20);
}

TEST_F(ReplyPageTest, ALateWakeUpForThePreviousReplyIsNotTakenForTheNext) {
  // The daemon takes `waiting` 3 ms after storing each reply: the program finds the reply
  // while spinning, sends its next request, gives up spinning (50 us) and asks to be woken,
  // and the daemon's late exchange for the previous reply wakes it. Seen on CI as "conduitd
  // said the reply was in the reply page, and it was not": the program must wait again.
  // Every third reply is on time and on the socket, after such a late wake-up too.
  ScriptedDaemon daemon(path_, Pages::kBoth, [](int n) {
    return Answer{std::chrono::microseconds(0), n % 3 == 0, std::chrono::microseconds(3000)};
  });
  ExpectCallsWithWakes(daemon, 30, 50);
}

TEST_F(ReplyPageTest, ADaemonMayStillAnswerOnTheSocket) {
  // Every third reply on the socket (a daemon that lost the page in a replacement, or a
  // reply too large for it): the program takes replies from wherever they come.
  ScriptedDaemon daemon(path_, Pages::kBoth, [](int n) {
    return Answer{std::chrono::microseconds(n % 5 == 0 ? 2000 : 0), n % 3 == 0};
  });
  std::unique_ptr<DaemonConnection> conn = Connect();
  ASSERT_TRUE(conn->has_reply_page());
  for (int n = 1; n <= 30; ++n) ASSERT_EQ(Call(*conn, 50), n);
  ExpectNothingUnread(*conn);
  conn.reset();
}

TEST_F(ReplyPageTest, ADaemonThatPredatesPagesAnswersOnTheSocket) {
  ScriptedDaemon daemon(path_, Pages::kNone, [](int) { return Answer{}; });
  std::unique_ptr<DaemonConnection> conn = Connect();
  ASSERT_FALSE(conn->has_reply_page());
  for (int n = 1; n <= 5; ++n) ASSERT_EQ(Call(*conn, 50), n);
  conn.reset();
}

TEST_F(ReplyPageTest, ADaemonThatDiesWhileTheProgramWaitsEndsTheWait) {
  ScriptedDaemon daemon(path_, Pages::kBoth, [](int) { return Answer{}; }, /*die_after=*/3);
  std::unique_ptr<DaemonConnection> conn = Connect();
  ASSERT_TRUE(conn->has_reply_page());
  ASSERT_EQ(Call(*conn, 50), 1);
  ASSERT_EQ(Call(*conn, 50), 2);
  Status st;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Call(*conn, 50, &st), -1);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("lost contact with conduitd"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  conn.reset();
}

// The request page, the same exchange the other way round: the daemon spins for a request
// in the page, then sleeps on its socket, where the program's kRequestInPage wakes it.
TEST_F(ReplyPageTest, RequestsComeThroughThePageWhileTheDaemonSpinsAndAfterItSleeps) {
  // Odd calls come at once (the daemon still spins, 200 us), even ones 3 ms after the last
  // reply (the daemon sleeps on its socket by then).
  ScriptedDaemon daemon(path_, Pages::kBoth, [](int) { return Answer{}; });
  std::unique_ptr<DaemonConnection> conn = Connect();
  ASSERT_TRUE(conn->has_request_page());
  for (int n = 1; n <= 40; ++n) {
    if (n % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    ASSERT_EQ(Call(*conn, 100), n);
  }
  EXPECT_EQ(daemon.requests_from_page(), 40);
  EXPECT_GT(daemon.request_wakes(), 0);
  conn.reset();
}

TEST_F(ReplyPageTest, TheRaceBetweenTheDaemonsSleepAndTheRequestEndsTheSameEitherWay) {
  // Requests come around the moment the daemon gives up spinning (20 us), so its store of
  // `waiting` and the program's request meet in both orders: every request must be served
  // once and in order, whether a wake frame came for it, came late, or not at all.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> jitter(0, 40);
  ScriptedDaemon daemon(path_, Pages::kBoth, [](int) { return Answer{}; }, -1, std::chrono::microseconds(20));
  std::unique_ptr<DaemonConnection> conn = Connect();
  ASSERT_TRUE(conn->has_request_page());
  for (int n = 1; n <= 2000; ++n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(jitter(rng));
    while (std::chrono::steady_clock::now() < until) {
    }
    ASSERT_EQ(Call(*conn, 50), n);
  }
  EXPECT_EQ(daemon.requests_from_page(), 2000);
  conn.reset();
}

TEST_F(ReplyPageTest, ADaemonThatPredatesRequestPagesTakesRequestsOnTheSocket) {
  ScriptedDaemon daemon(path_, Pages::kReplyOnly, [](int) { return Answer{}; });
  std::unique_ptr<DaemonConnection> conn = Connect();
  ASSERT_TRUE(conn->has_reply_page());
  ASSERT_FALSE(conn->has_request_page());
  for (int n = 1; n <= 5; ++n) ASSERT_EQ(Call(*conn, 50), n);
  EXPECT_EQ(daemon.requests_from_page(), 0);
  conn.reset();
}

}  // namespace
}  // namespace conduit
