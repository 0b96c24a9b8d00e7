// greeter_client: an ordinary gRPC C++ client of the Greeter service that runs one
// scenario and checks what comes back. It knows nothing of Conduit; the tests run it with
// and without LD_PRELOAD=libmrpc-grpc.so.
//
//   greeter_client --target HOST:PORT --case CASE [--mode sync|async|callback] [options]
//   (chat_loop: bidirectional streams for --seconds, --count messages each;
//    stream_loop: one stream for --seconds, a message every --interval-ms)
//
// Prints "PASS <case>" or "FAIL <case>: <why>" (exit 0 / 1), plus "status <code> <message>"
// for every call whose status it reports.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "greeter.grpc.pb.h"
#include "greeter_util.h"

namespace conduit::test {
namespace {

using Clock = std::chrono::steady_clock;
using grpc::ClientContext;
using grpc::Status;

struct Options {
  std::string target;
  std::string test_case;
  std::string mode = "sync";
  std::string name = "world";
  std::string user = "alice";
  std::string compress;  // gzip or deflate: the call's messages are compressed with it
  std::string call_creds;  // token, plugin or failing-plugin (Prepare)
  // TLS: roots the server's certificate must lead to (given: the channel uses TLS), the
  // client's own certificate and key (optional), the name to check (default: the target's).
  std::string tls_roots, tls_cert, tls_key, tls_name;
  int count = 5;
  int bytes = 0;
  int deadline_ms = 0;
  int delay_ms = 0;
  int cancel_after_ms = 200;  // cancel: when the client cancels its call
  int expect = 0;
  int fail_code = 0;
  int interval_ms = 50;
  int inflight = 16;
  int seconds = 0;      // chat_loop: how long to go on
  int print_each = 0;   // chat_loop: a line per chat (time since the start, latency)
  int pace_ms = 0;      // bidi (sync): the pause between one reply and the next request
};

int Fail(const Options& o, const std::string& why) {
  printf("FAIL %s: %s\n", o.test_case.c_str(), why.c_str());
  return 1;
}

int Pass(const Options& o) {
  printf("PASS %s\n", o.test_case.c_str());
  return 0;
}

void Report(const Status& st) {
  printf("status %d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
  fflush(stdout);
}

std::string Metadata(const std::multimap<grpc::string_ref, grpc::string_ref>& md, const char* key) {
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

HelloRequest Request(const Options& o, const std::string& name) {
  HelloRequest req;
  req.set_name(name);
  req.set_payload(Pattern(o.bytes, 3));
  req.set_reply_bytes(o.bytes);
  req.set_delay_ms(o.delay_ms);
  req.set_fail_code(o.fail_code);
  req.set_fail_message("greeting " + name + " refused");
  req.set_count(o.count);
  req.mutable_account()->set_user(o.user);
  return req;
}

// Call credentials from a metadata plugin: "x-creds" naming what gRPC told the plugin, or
// an error.
class TestCredentialsPlugin : public grpc::MetadataCredentialsPlugin {
 public:
  explicit TestCredentialsPlugin(bool fail) : fail_(fail) {}
  grpc::Status GetMetadata(grpc::string_ref service_url, grpc::string_ref method_name,
                           const grpc::AuthContext& /*channel_auth_context*/,
                           std::multimap<std::string, std::string>* metadata) override {
    if (fail_) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token today");
    metadata->emplace("x-creds", "url=" + std::string(service_url.data(), service_url.size()) +
                                     " method=" + std::string(method_name.data(), method_name.size()));
    return grpc::Status::OK;
  }

 private:
  bool fail_;
};

void Prepare(const Options& o, ClientContext* ctx) {
  ctx->AddMetadata("x-echo", "ping-" + o.name);
  // --call-creds: gRPC's access token (needs a secure channel), or a plugin allowed on any
  // channel (GRPC_SECURITY_NONE) that adds "x-creds" or fails.
  if (o.call_creds == "token") ctx->set_credentials(grpc::AccessTokenCredentials("secret"));
  if (o.call_creds == "plugin" || o.call_creds == "failing-plugin") {
    ctx->set_credentials(grpc::experimental::MetadataCredentialsFromPlugin(
        std::make_unique<TestCredentialsPlugin>(o.call_creds == "failing-plugin"), GRPC_SECURITY_NONE));
  }
  if (o.compress == "gzip") ctx->set_compression_algorithm(GRPC_COMPRESS_GZIP);
  if (o.compress == "deflate") ctx->set_compression_algorithm(GRPC_COMPRESS_DEFLATE);
  if (o.deadline_ms > 0) ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o.deadline_ms));
}

// Signals a reactor's end to the thread that waits for it.
class Done {
 public:
  void Set(const Status& st) {
    std::lock_guard<std::mutex> lock(mu_);
    st_ = st;
    done_ = true;
    cv_.notify_one();
  }
  Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return st_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status st_;
};

// One SayHello in the chosen API style.
Status SayHello(Greeter::Stub* stub, const Options& o, ClientContext* ctx, const HelloRequest& req, HelloReply* rep) {
  if (o.mode == "async") {
    grpc::CompletionQueue cq;
    auto rpc = stub->AsyncSayHello(ctx, req, &cq);
    Status st;
    rpc->Finish(rep, &st, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    if (!cq.Next(&tag, &ok) || tag != reinterpret_cast<void*>(1) || !ok) return Status(grpc::INTERNAL, "bad completion");
    return st;
  }
  if (o.mode == "callback") {
    Done done;
    stub->async()->SayHello(ctx, &req, rep, [&](Status s) { done.Set(s); });
    return done.Wait();
  }
  return stub->SayHello(ctx, req, rep);
}

int CheckStatus(const Options& o, const Status& st) {
  Report(st);
  if (static_cast<int>(st.error_code()) != o.expect) {
    return Fail(o, "status " + std::to_string(st.error_code()) + " (" + st.error_message() + "), wanted " +
                       std::to_string(o.expect));
  }
  return -1;  // as expected: the caller goes on checking
}

int Unary(Greeter::Stub* stub, const Options& o) {
  ClientContext ctx;
  Prepare(o, &ctx);
  HelloReply rep;
  HelloRequest req = Request(o, o.name);
  Status st = SayHello(stub, o, &ctx, req, &rep);
  if (int r = CheckStatus(o, st); r >= 0) return r;
  if (!st.ok()) {
    if (o.fail_code != 0 && st.error_message() != req.fail_message()) return Fail(o, "wrong error message");
    if (o.fail_code != 0 && Metadata(ctx.GetServerTrailingMetadata(), "x-trailer") != "bye") {
      return Fail(o, "the error lost its trailing metadata");
    }
    return Pass(o);
  }
  if (rep.message() != "Hello " + o.name) return Fail(o, "reply '" + rep.message() + "'");
  if (rep.checksum() != Checksum(req.payload())) return Fail(o, "the server saw other request bytes");
  if (rep.payload() != Pattern(o.bytes, 7)) return Fail(o, "reply payload corrupted");
  if (Metadata(ctx.GetServerInitialMetadata(), "x-echo-reply") != "ping-" + o.name) {
    return Fail(o, "initial metadata not echoed");
  }
  if (Metadata(ctx.GetServerTrailingMetadata(), "x-trailer") != "bye") return Fail(o, "trailing metadata missing");
  return Pass(o);
}

int ServerStream(Greeter::Stub* stub, const Options& o) {
  ClientContext ctx;
  Prepare(o, &ctx);
  HelloRequest req = Request(o, o.name);
  std::vector<HelloReply> got;
  Status st;
  if (o.mode == "async") {
    grpc::CompletionQueue cq;
    auto reader = stub->AsyncListGreetings(&ctx, req, &cq, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    if (!cq.Next(&tag, &ok) || !ok) return Fail(o, "call did not start");
    for (;;) {
      HelloReply rep;
      reader->Read(&rep, reinterpret_cast<void*>(2));
      if (!cq.Next(&tag, &ok)) return Fail(o, "queue shut down");
      if (!ok) break;
      got.push_back(rep);
    }
    reader->Finish(&st, reinterpret_cast<void*>(3));
    if (!cq.Next(&tag, &ok) || !ok) return Fail(o, "finish failed");
  } else if (o.mode == "callback") {
    class Reader : public grpc::ClientReadReactor<HelloReply> {
     public:
      Reader(Greeter::Stub* stub, ClientContext* ctx, const HelloRequest& req, std::vector<HelloReply>* got)
          : got_(got) {
        stub->async()->ListGreetings(ctx, &req, this);
        StartRead(&rep_);
        StartCall();
      }
      void OnReadDone(bool ok) override {
        if (!ok) return;
        got_->push_back(rep_);
        StartRead(&rep_);
      }
      void OnDone(const Status& st) override { done.Set(st); }
      Done done;

     private:
      std::vector<HelloReply>* got_;
      HelloReply rep_;
    };
    Reader reader(stub, &ctx, req, &got);
    st = reader.done.Wait();
  } else {
    auto reader = stub->ListGreetings(&ctx, req);
    HelloReply rep;
    while (reader->Read(&rep)) got.push_back(rep);
    st = reader->Finish();
  }
  if (int r = CheckStatus(o, st); r >= 0) return r;
  if (!st.ok()) return Pass(o);
  if (static_cast<int>(got.size()) != o.count) return Fail(o, "got " + std::to_string(got.size()) + " replies");
  for (int i = 0; i < o.count; ++i) {
    if (got[i].seq() != i || got[i].payload() != Pattern(o.bytes, i)) return Fail(o, "reply " + std::to_string(i) + " wrong");
  }
  if (Metadata(ctx.GetServerInitialMetadata(), "x-echo-reply") != "ping-" + o.name) {
    return Fail(o, "initial metadata not echoed");
  }
  return Pass(o);
}

// Waits for the next event of a completion queue on which the caller has exactly the ops
// whose tags it passes outstanding; false when the queue shut down or a tag is unexpected.
bool Await(grpc::CompletionQueue* cq, std::initializer_list<intptr_t> tags, std::map<intptr_t, bool>* oks) {
  for (size_t i = 0; i < tags.size(); ++i) {
    void* tag;
    bool ok;
    if (!cq->Next(&tag, &ok)) return false;
    auto t = reinterpret_cast<intptr_t>(tag);
    if (std::find(tags.begin(), tags.end(), t) == tags.end() || oks->count(t)) return false;
    (*oks)[t] = ok;
  }
  return true;
}

// One op on `cq` and its completion; false when it failed (the call is over).
bool AwaitOne(grpc::CompletionQueue* cq, intptr_t tag, bool* queue_ok) {
  std::map<intptr_t, bool> oks;
  *queue_ok = Await(cq, {tag}, &oks);
  return *queue_ok && oks[tag];
}

void* Tag(intptr_t t) { return reinterpret_cast<void*>(t); }

int ClientStream(Greeter::Stub* stub, const Options& o) {
  ClientContext ctx;
  Prepare(o, &ctx);
  HelloReply rep;
  std::vector<HelloRequest> reqs;
  std::string names;
  uint64_t sum = Checksum("");
  for (int i = 0; i < o.count; ++i) {
    HelloRequest req = Request(o, o.name + std::to_string(i));
    req.set_payload(Pattern(o.bytes, i));
    sum = Checksum(req.payload(), sum);
    names += (i ? "," : "") + req.name();
    reqs.push_back(std::move(req));
  }
  // A failed write means the call is over (refused, cancelled): Finish says why.
  Status st;
  if (o.mode == "async") {
    grpc::CompletionQueue cq;
    bool queue_ok;
    auto writer = stub->AsyncCollectNames(&ctx, &rep, &cq, Tag(1));
    if (AwaitOne(&cq, 1, &queue_ok)) {
      for (const HelloRequest& req : reqs) {
        writer->Write(req, Tag(2));
        if (!AwaitOne(&cq, 2, &queue_ok)) break;
      }
      if (queue_ok) {
        writer->WritesDone(Tag(3));
        AwaitOne(&cq, 3, &queue_ok);
      }
    }
    if (!queue_ok) return Fail(o, "completion queue out of order or shut down");
    writer->Finish(&st, Tag(4));
    if (!AwaitOne(&cq, 4, &queue_ok)) return Fail(o, "finish failed");
  } else if (o.mode == "callback") {
    class Writer : public grpc::ClientWriteReactor<HelloRequest> {
     public:
      Writer(Greeter::Stub* stub, ClientContext* ctx, HelloReply* rep, const std::vector<HelloRequest>& reqs)
          : reqs_(reqs) {
        stub->async()->CollectNames(ctx, rep, this);
        Next();
        StartCall();
      }
      void OnWriteDone(bool ok) override {
        if (ok) Next();  // else the call is over: OnDone follows
      }
      void OnWritesDoneDone(bool) override {}
      void OnDone(const Status& st) override { done.Set(st); }
      Done done;

     private:
      void Next() {
        if (sent_ == reqs_.size()) {
          StartWritesDone();
        } else {
          StartWrite(&reqs_[sent_++]);
        }
      }
      const std::vector<HelloRequest>& reqs_;
      size_t sent_ = 0;
    };
    Writer writer(stub, &ctx, &rep, reqs);
    st = writer.done.Wait();
  } else {
    auto writer = stub->CollectNames(&ctx, &rep);
    for (const HelloRequest& req : reqs) {
      if (!writer->Write(req)) break;
    }
    writer->WritesDone();
    st = writer->Finish();
  }
  if (int r = CheckStatus(o, st); r >= 0) return r;
  if (!st.ok()) return Pass(o);
  if (rep.message() != names || rep.seq() != o.count) return Fail(o, "server collected '" + rep.message() + "'");
  if (rep.checksum() != sum) return Fail(o, "the server saw other request bytes");
  return Pass(o);
}

// What the server answers to the i-th request of a Chat; empty when it is right.
std::string CheckChatReply(const HelloRequest& req, const HelloReply& rep, int i) {
  if (rep.message() != "echo " + req.name() || rep.seq() != i || rep.checksum() != Checksum(req.payload()) ||
      rep.payload() != Pattern(req.reply_bytes(), i + 1)) {
    return "reply " + std::to_string(i) + " wrong: " + rep.message();
  }
  return "";
}

// One bidirectional stream through the sync API: each request written and its reply read
// and checked before the next, then no reply more. What went wrong ("" when nothing); *st
// is the call's status (Finish), whatever happened.
std::string SyncChat(Greeter::Stub* stub, ClientContext* ctx, const std::vector<HelloRequest>& reqs, Status* st,
                     int pace_ms = 0) {
  auto stream = stub->Chat(ctx);
  std::string wrong;
  for (size_t i = 0; i < reqs.size() && wrong.empty(); ++i) {
    if (i > 0 && pace_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pace_ms));
    HelloReply rep;
    if (!stream->Write(reqs[i])) {
      wrong = "write " + std::to_string(i) + " failed";
    } else if (!stream->Read(&rep)) {
      wrong = "read " + std::to_string(i) + " failed";
    } else {
      wrong = CheckChatReply(reqs[i], rep, static_cast<int>(i));
    }
  }
  stream->WritesDone();
  HelloReply extra;
  if (stream->Read(&extra)) wrong = "a reply after the last request";
  *st = stream->Finish();
  return wrong;
}

int Bidi(Greeter::Stub* stub, const Options& o) {
  ClientContext ctx;
  Prepare(o, &ctx);
  std::vector<HelloRequest> reqs;
  for (int i = 0; i < o.count; ++i) reqs.push_back(Request(o, o.name + std::to_string(i)));
  Status st;
  std::string wrong;
  if (o.mode == "async") {
    // Each write and the read of its answer are outstanding at the same time.
    grpc::CompletionQueue cq;
    bool queue_ok;
    auto stream = stub->AsyncChat(&ctx, &cq, Tag(1));
    if (!AwaitOne(&cq, 1, &queue_ok)) return Fail(o, "call did not start");
    for (int i = 0; i < o.count && wrong.empty(); ++i) {
      HelloReply rep;
      stream->Write(reqs[i], Tag(2));
      stream->Read(&rep, Tag(3));
      std::map<intptr_t, bool> oks;
      if (!Await(&cq, {2, 3}, &oks)) return Fail(o, "completion queue out of order or shut down");
      if (!oks[2] || !oks[3]) return Fail(o, "write or read " + std::to_string(i) + " failed");
      wrong = CheckChatReply(reqs[i], rep, i);
    }
    HelloReply extra;
    stream->WritesDone(Tag(4));
    stream->Read(&extra, Tag(5));
    std::map<intptr_t, bool> oks;
    if (!Await(&cq, {4, 5}, &oks)) return Fail(o, "completion queue out of order or shut down");
    if (oks[5]) return Fail(o, "a reply after the last request");
    stream->Finish(&st, Tag(6));
    if (!AwaitOne(&cq, 6, &queue_ok)) return Fail(o, "finish failed");
  } else if (o.mode == "callback") {
    // Ping-pong: the next request goes once the previous write and its answer are done.
    class Chat : public grpc::ClientBidiReactor<HelloRequest, HelloReply> {
     public:
      Chat(Greeter::Stub* stub, ClientContext* ctx, const std::vector<HelloRequest>& reqs) : reqs_(reqs) {
        stub->async()->Chat(ctx, this);
        Step();
        StartCall();
      }
      void OnWriteDone(bool ok) override {
        if (ok) Arrived(/*wrote=*/true);
      }
      void OnReadDone(bool ok) override {
        if (!ok) return;  // the end of the stream (after WritesDone) or a failed call
        std::string why;
        if (got_ == reqs_.size()) {
          why = "a reply after the last request";
        } else {
          why = CheckChatReply(reqs_[got_], rep_, static_cast<int>(got_));
        }
        ++got_;
        if (!why.empty()) {
          std::lock_guard<std::mutex> lock(mu_);
          if (wrong.empty()) wrong = why;
        }
        Arrived(/*wrote=*/false);
      }
      void OnDone(const Status& st) override { done.Set(st); }
      Done done;
      std::string wrong;  // read after done.Wait()

     private:
      void Arrived(bool wrote) {
        bool step;
        {
          std::lock_guard<std::mutex> lock(mu_);
          (wrote ? written_ : answered_) = true;
          step = written_ && answered_;
          if (step) written_ = answered_ = false;
        }
        if (step) Step();
      }
      // Sends the next request and reads its answer, or ends the writes and reads the end.
      void Step() {
        if (sent_ == reqs_.size()) {
          StartWritesDone();
        } else {
          StartWrite(&reqs_[sent_++]);
        }
        StartRead(&rep_);
      }
      const std::vector<HelloRequest>& reqs_;
      HelloReply rep_;
      size_t sent_ = 0;
      size_t got_ = 0;
      std::mutex mu_;
      bool written_ = false;
      bool answered_ = false;
    };
    Chat chat(stub, &ctx, reqs);
    st = chat.done.Wait();
    wrong = chat.wrong;
  } else {
    wrong = SyncChat(stub, &ctx, reqs, &st, o.pace_ms);
  }
  if (!wrong.empty()) return Fail(o, wrong);
  if (int r = CheckStatus(o, st); r >= 0) return r;
  if (st.ok() && Metadata(ctx.GetServerInitialMetadata(), "x-echo-reply") != "ping-" + o.name) {
    return Fail(o, "initial metadata not echoed");
  }
  return Pass(o);
}

// Expects the call to end with o.expect (DEADLINE_EXCEEDED or CANCELLED) within a bound.
int Abandoned(Greeter::Stub* stub, const Options& o, bool cancel) {
  ClientContext ctx;
  Prepare(o, &ctx);
  HelloReply rep;
  HelloRequest req = Request(o, o.name);
  auto start = Clock::now();
  std::thread canceller;
  if (cancel) {
    canceller = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.cancel_after_ms));
      ctx.TryCancel();
    });
  }
  Status st = SayHello(stub, o, &ctx, req, &rep);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  if (canceller.joinable()) canceller.join();
  printf("elapsed_ms %lld\n", static_cast<long long>(ms));
  if (int r = CheckStatus(o, st); r >= 0) return r;
  int bound = (cancel ? o.cancel_after_ms : o.deadline_ms) + 1500;
  if (ms > bound) return Fail(o, "took " + std::to_string(ms) + " ms");
  return Pass(o);
}

// Calls at a steady pace, printing each status (policy changes show up in the sequence).
int Loop(Greeter::Stub* stub, const Options& o) {
  for (int i = 0; i < o.count; ++i) {
    ClientContext ctx;
    Prepare(o, &ctx);
    HelloReply rep;
    Status st = SayHello(stub, o, &ctx, Request(o, o.name), &rep);
    printf("call %d code %d %s\n", i, static_cast<int>(st.error_code()), st.error_message().c_str());
    fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
  }
  return Pass(o);
}

// As many calls as possible, `inflight` at a time; counts outcomes by status code.
int Burst(Greeter::Stub* stub, const Options& o) {
  grpc::CompletionQueue cq;
  struct Call {
    ClientContext ctx;
    HelloReply rep;
    Status st;
    std::unique_ptr<grpc::ClientAsyncResponseReader<HelloReply>> rpc;
  };
  std::map<int, int> codes;
  int started = 0, done = 0;
  auto start = Clock::now();
  HelloRequest req = Request(o, o.name);
  auto launch = [&] {
    auto* c = new Call;
    Prepare(o, &c->ctx);
    c->rpc = stub->AsyncSayHello(&c->ctx, req, &cq);
    c->rpc->Finish(&c->rep, &c->st, c);
    ++started;
  };
  while (started < o.count && started < o.inflight) launch();
  while (done < started) {
    void* tag;
    bool ok;
    if (!cq.Next(&tag, &ok)) break;
    auto* c = static_cast<Call*>(tag);
    codes[c->st.error_code()]++;
    if (!c->st.ok() && codes[c->st.error_code()] == 1) Report(c->st);
    delete c;
    ++done;
    if (started < o.count) launch();
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  printf("burst calls %d elapsed_ms %lld", done, static_cast<long long>(ms));
  for (auto& [code, n] : codes) printf(" code%d=%d", code, n);
  printf("\n");
  if (done != o.count) return Fail(o, "only " + std::to_string(done) + " calls completed");
  return Pass(o);
}

// Bidirectional streams one after the other for o.seconds: each sends o.count messages and
// reads each reply before the next (every reply checked: order, content, none extra), so a
// message lost, duplicated or answered twice fails it. Prints a summary (and, with
// --print-each 1, "chat <i> start_s <t> ms <latency> ok <0|1>" per stream, t on the
// host's monotonic clock, as Python's time.monotonic()).
int ChatLoop(Greeter::Stub* stub, const Options& o) {
  const auto start = Clock::now();
  std::vector<double> latencies;
  int failed = 0;
  for (int i = 0; Clock::now() - start < std::chrono::seconds(o.seconds); ++i) {
    const auto begun = Clock::now();
    ClientContext ctx;
    Prepare(o, &ctx);
    std::vector<HelloRequest> reqs;
    for (int m = 0; m < o.count; ++m) reqs.push_back(Request(o, o.name + std::to_string(i) + "." + std::to_string(m)));
    Status st;
    const std::string wrong = SyncChat(stub, &ctx, reqs, &st);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - begun).count();
    latencies.push_back(ms);
    const bool ok = st.ok() && wrong.empty();
    if (!ok) {
      ++failed;
      printf("chat %d failed: code %d %s %s\n", i, static_cast<int>(st.error_code()), st.error_message().c_str(),
             wrong.c_str());
    }
    if (o.print_each != 0) {
      printf("chat %d start_s %.6f ms %.3f ok %d\n", i, std::chrono::duration<double>(begun.time_since_epoch()).count(),
             ms, ok ? 1 : 0);
    }
    fflush(stdout);
  }
  std::vector<double> sorted = latencies;
  std::sort(sorted.begin(), sorted.end());
  printf("chats %zu failed %d median_ms %.3f slowest_ms %.3f\n", sorted.size(), failed,
         sorted.empty() ? 0.0 : sorted[sorted.size() / 2], sorted.empty() ? 0.0 : sorted.back());
  if (failed != 0) return Fail(o, std::to_string(failed) + " chat(s) failed");
  if (sorted.empty()) return Fail(o, "no chat ran");
  return Pass(o);
}

// One long bidirectional stream for --seconds: a request every --interval-ms, each reply
// read and checked before the next; a stream that breaks is opened again (as a program must)
// and its failure counted. --print-each: a line per message (its start on the monotonic
// clock, its round trip, whether it came back right).
int StreamLoop(Greeter::Stub* stub, const Options& o) {
  const auto start = Clock::now();
  std::vector<double> latencies;
  int failed = 0, streams = 0;
  for (int i = 0; Clock::now() - start < std::chrono::seconds(o.seconds);) {
    ClientContext ctx;
    Prepare(o, &ctx);
    auto stream = stub->Chat(&ctx);
    ++streams;
    for (int seq = 0; Clock::now() - start < std::chrono::seconds(o.seconds); ++seq, ++i) {
      const auto begun = Clock::now();
      HelloRequest req = Request(o, o.name + std::to_string(i));
      HelloReply rep;
      const bool ok = stream->Write(req) && stream->Read(&rep) && CheckChatReply(req, rep, seq).empty();
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - begun).count();
      latencies.push_back(ms);
      if (o.print_each != 0) {
        printf("msg %d start_s %.6f ms %.3f ok %d\n", i, std::chrono::duration<double>(begun.time_since_epoch()).count(),
               ms, ok ? 1 : 0);
        fflush(stdout);
      }
      if (!ok) {
        ++failed;
        ++i;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(o.interval_ms * 1000));
    }
    ctx.TryCancel();
    (void)stream->Finish();
  }
  std::vector<double> sorted = latencies;
  std::sort(sorted.begin(), sorted.end());
  printf("messages %zu streams %d failed %d median_ms %.3f slowest_ms %.3f\n", sorted.size(), streams, failed,
         sorted.empty() ? 0.0 : sorted[sorted.size() / 2], sorted.empty() ? 0.0 : sorted.back());
  if (failed != 0) return Fail(o, std::to_string(failed) + " message(s) failed");
  if (sorted.empty()) return Fail(o, "no message went");
  return Pass(o);
}

int Main(int argc, char** argv) {
  Options o;
  std::map<std::string, int*> ints = {{"--count", &o.count},         {"--bytes", &o.bytes},
                                      {"--deadline-ms", &o.deadline_ms}, {"--delay-ms", &o.delay_ms},
                                      {"--expect", &o.expect},       {"--fail-code", &o.fail_code},
                                      {"--interval-ms", &o.interval_ms}, {"--inflight", &o.inflight},
                                      {"--seconds", &o.seconds},     {"--print-each", &o.print_each},
                                      {"--cancel-after-ms", &o.cancel_after_ms}, {"--pace-ms", &o.pace_ms}};
  std::map<std::string, std::string*> strings = {
      {"--target", &o.target}, {"--case", &o.test_case}, {"--mode", &o.mode}, {"--name", &o.name}, {"--user", &o.user},
      {"--compress", &o.compress}, {"--call-creds", &o.call_creds}, {"--tls-roots", &o.tls_roots},
      {"--tls-cert", &o.tls_cert}, {"--tls-key", &o.tls_key}, {"--tls-name", &o.tls_name}};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (ints.count(argv[i])) {
      *ints[argv[i]] = atoi(argv[i + 1]);
    } else if (strings.count(argv[i])) {
      *strings[argv[i]] = argv[i + 1];
    } else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!o.tls_roots.empty()) {
    grpc::SslCredentialsOptions tls{ReadFile(o.tls_roots), ReadFile(o.tls_key), ReadFile(o.tls_cert)};
    creds = grpc::SslCredentials(tls);
    if (!o.tls_name.empty()) args.SetSslTargetNameOverride(o.tls_name);
  }
  auto channel = grpc::CreateCustomChannel(o.target, creds, args);
  auto stub = Greeter::NewStub(channel);
  const std::string& c = o.test_case;
  if (c == "unary") return Unary(stub.get(), o);
  if (c == "server_stream") return ServerStream(stub.get(), o);
  if (c == "client_stream") return ClientStream(stub.get(), o);
  if (c == "bidi") return Bidi(stub.get(), o);
  if (c == "deadline") return Abandoned(stub.get(), o, /*cancel=*/false);
  if (c == "cancel") return Abandoned(stub.get(), o, /*cancel=*/true);
  if (c == "loop") return Loop(stub.get(), o);
  if (c == "burst") return Burst(stub.get(), o);
  if (c == "chat_loop") return ChatLoop(stub.get(), o);
  if (c == "stream_loop") return StreamLoop(stub.get(), o);
  fprintf(stderr, "unknown --case %s\n", c.c_str());
  return 2;
}

}  // namespace
}  // namespace conduit::test

int main(int argc, char** argv) { return conduit::test::Main(argc, argv); }
