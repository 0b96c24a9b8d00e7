// greeter_server: an ordinary gRPC C++ server of the Greeter service, in the sync, async
// (completion queue) or callback style. It knows nothing of Conduit; the tests run it with
// and without LD_PRELOAD=libmrpc-grpc.so.
//
//   greeter_server --listen 0.0.0.0:50051 [--mode sync|async|callback] [--relay HOST:PORT]
//                  [--tls-cert PEM --tls-key PEM [--tls-client-roots PEM]]
//
// Prints "greeter_server listening on port N" when ready; exits cleanly on SIGTERM.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "greeter.grpc.pb.h"
#include "greeter_util.h"

// The algorithm of the messages the caller sends (libgrpc's, and the shim's for a managed
// call; C++ linkage, test/cpp/interop uses it the same way).
grpc_compression_algorithm grpc_call_test_only_get_compression_algorithm(grpc_call* call);

namespace conduit::test {
namespace {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

constexpr int kMaxMessage = 64 << 20;

void Say(const char* fmt, const std::string& what) {
  printf(fmt, what.c_str());
  printf("\n");
  fflush(stdout);
}

// Echoes "x-echo" back as initial metadata "x-echo-reply" and sets a trailer. A caller
// named "inspect..." (x-echo "ping-inspect...") also gets a line of what the server sees of
// it: its user-agent, its peer address, every metadata key, the compression algorithm of
// its messages, what call credentials sent as "x-creds", and its auth_context (transport
// security, peer identity, every property but the PEM certificate and chain, shown by
// their lengths).
void EchoMetadata(grpc::ServerContextBase* ctx) {
  auto md = ctx->client_metadata();
  ctx->AddTrailingMetadata("x-trailer", "bye");
  auto it = md.find("x-echo");
  if (it == md.end()) return;
  std::string echo(it->second.data(), it->second.size());
  ctx->AddInitialMetadata("x-echo-reply", echo);
  if (echo.rfind("ping-inspect", 0) != 0) return;
  auto ua = md.find("user-agent");
  auto creds = md.find("x-creds");
  std::string keys;
  for (const auto& [key, value] : md) keys += std::string(key.data(), key.size()) + ",";
  grpc_compression_algorithm encoding = grpc_call_test_only_get_compression_algorithm(ctx->c_call());
  std::string auth;
  std::shared_ptr<const grpc::AuthContext> auth_context = ctx->auth_context();
  if (auth_context != nullptr) {
    auth += auth_context->IsPeerAuthenticated() ? "authenticated" : "anonymous";
    auth += " identity-name=" + auth_context->GetPeerIdentityPropertyName() + " identity=";
    for (const auto& id : auth_context->GetPeerIdentity()) auth += std::string(id.data(), id.size()) + ";";
    for (const grpc::AuthProperty& p : *auth_context) {
      std::string name(p.first.data(), p.first.size());
      auth += " " + name + "=" +
              (name.rfind("x509_pem_cert", 0) == 0 ? std::to_string(p.second.size()) + "B"
                                                    : std::string(p.second.data(), p.second.size()));
    }
  }
  printf("server: %s sees user-agent=[%s] peer=[%s] keys=[%s] encoding=[%d] x-creds=[%s] auth=[%s]\n", echo.c_str(),
         ua == md.end() ? "" : std::string(ua->second.data(), ua->second.size()).c_str(), ctx->peer().c_str(),
         keys.c_str(), static_cast<int>(encoding),
         creds == md.end() ? "" : std::string(creds->second.data(), creds->second.size()).c_str(), auth.c_str());
  fflush(stdout);
}

// Sleeps in slices; false as soon as the call is cancelled.
bool SleepUnlessCancelled(grpc::ServerContextBase* ctx, int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (ctx->IsCancelled()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return !ctx->IsCancelled();
}

Status Answer(const HelloRequest& req, HelloReply* rep) {
  if (req.fail_code() != 0) return Status(static_cast<StatusCode>(req.fail_code()), req.fail_message());
  rep->set_message("Hello " + req.name());
  rep->set_payload(Pattern(req.reply_bytes(), 7));
  rep->set_checksum(Checksum(req.payload()));
  return Status::OK;
}

class SyncGreeter final : public Greeter::Service {
 public:
  // --relay HOST:PORT: SayHello is passed on to that server as a child call (deadline and
  // cancellation propagated from this call, gRPC's default propagation).
  void RelayTo(const std::string& target) {
    relay_ = Greeter::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  }

 private:
  std::unique_ptr<Greeter::Stub> relay_;

  Status SayHello(ServerContext* ctx, const HelloRequest* req, HelloReply* rep) override {
    EchoMetadata(ctx);
    if (relay_ != nullptr) {
      std::unique_ptr<grpc::ClientContext> child = grpc::ClientContext::FromServerContext(*ctx);
      Status st = relay_->SayHello(child.get(), *req, rep);
      Say("server: relayed %s", req->name() + " ended with status " + std::to_string(st.error_code()));
      return st;
    }
    if (req->delay_ms() > 0 && !SleepUnlessCancelled(ctx, req->delay_ms())) {
      Say("server: SayHello %s was cancelled", req->name());
      return Status(StatusCode::CANCELLED, "cancelled");
    }
    return Answer(*req, rep);
  }

  Status ListGreetings(ServerContext* ctx, const HelloRequest* req, grpc::ServerWriter<HelloReply>* out) override {
    EchoMetadata(ctx);
    for (int i = 0; i < req->count(); ++i) {
      if (req->delay_ms() > 0 && !SleepUnlessCancelled(ctx, req->delay_ms())) {
        Say("server: ListGreetings %s was cancelled", req->name());
        return Status(StatusCode::CANCELLED, "cancelled");
      }
      HelloReply rep;
      rep.set_message("Hello " + req->name() + " #" + std::to_string(i));
      rep.set_seq(i);
      rep.set_payload(Pattern(req->reply_bytes(), i));
      if (!out->Write(rep)) return Status(StatusCode::UNAVAILABLE, "client went away");
    }
    if (req->fail_code() != 0) return Status(static_cast<StatusCode>(req->fail_code()), req->fail_message());
    return Status::OK;
  }

  Status CollectNames(ServerContext* ctx, grpc::ServerReader<HelloRequest>* in, HelloReply* rep) override {
    EchoMetadata(ctx);
    HelloRequest req;
    std::string names;
    uint64_t sum = Checksum("");
    int n = 0;
    while (in->Read(&req)) {
      names += (n++ ? "," : "") + req.name();
      sum = Checksum(req.payload(), sum);
    }
    rep->set_message(names);
    rep->set_seq(n);
    rep->set_checksum(sum);
    return Status::OK;
  }

  Status Chat(ServerContext* ctx, grpc::ServerReaderWriter<HelloReply, HelloRequest>* stream) override {
    EchoMetadata(ctx);
    HelloRequest req;
    int n = 0;
    while (stream->Read(&req)) {
      HelloReply rep;
      rep.set_message("echo " + req.name());
      rep.set_seq(n++);
      rep.set_checksum(Checksum(req.payload()));
      rep.set_payload(Pattern(req.reply_bytes(), n));
      if (!stream->Write(rep)) break;
    }
    return Status::OK;
  }
};

// The completion-queue API: one state machine per call, for every method.
class AsyncGreeter {
 public:
  AsyncGreeter(Greeter::AsyncService* service, grpc::ServerCompletionQueue* cq) : service_(service), cq_(cq) {}

  void Run() {
    new UnaryCall(service_, cq_);
    new StreamCall(service_, cq_);
    new CollectCall(service_, cq_);
    new ChatCall(service_, cq_);
    void* tag;
    bool ok;
    while (cq_->Next(&tag, &ok)) static_cast<CallState*>(tag)->Proceed(ok);
  }

 private:
  struct CallState {
    virtual ~CallState() = default;
    virtual void Proceed(bool ok) = 0;
  };

  struct UnaryCall : CallState {
    UnaryCall(Greeter::AsyncService* s, grpc::ServerCompletionQueue* cq) : service(s), cq(cq), responder(&ctx) {
      service->RequestSayHello(&ctx, &req, &responder, cq, cq, this);
    }
    void Proceed(bool ok) override {
      if (state == kRequested) {
        if (!ok) {  // shutting down
          delete this;
          return;
        }
        new UnaryCall(service, cq);
        EchoMetadata(&ctx);
        HelloReply rep;
        Status st = Answer(req, &rep);
        state = kFinishing;
        responder.Finish(rep, st, this);
      } else {
        delete this;
      }
    }
    enum { kRequested, kFinishing } state = kRequested;
    Greeter::AsyncService* service;
    grpc::ServerCompletionQueue* cq;
    ServerContext ctx;
    HelloRequest req;
    grpc::ServerAsyncResponseWriter<HelloReply> responder;
  };

  struct StreamCall : CallState {
    StreamCall(Greeter::AsyncService* s, grpc::ServerCompletionQueue* cq) : service(s), cq(cq), writer(&ctx) {
      service->RequestListGreetings(&ctx, &req, &writer, cq, cq, this);
    }
    void Proceed(bool ok) override {
      if (state == kRequested) {
        if (!ok) {
          delete this;
          return;
        }
        new StreamCall(service, cq);
        EchoMetadata(&ctx);
        state = kWriting;
      } else if (state == kFinishing) {
        delete this;
        return;
      }
      if (!ok || sent == req.count()) {
        state = kFinishing;
        writer.Finish(ok ? Status::OK : Status(StatusCode::UNAVAILABLE, "write failed"), this);
        return;
      }
      HelloReply rep;
      rep.set_message("Hello " + req.name() + " #" + std::to_string(sent));
      rep.set_seq(sent);
      rep.set_payload(Pattern(req.reply_bytes(), sent));
      ++sent;
      writer.Write(rep, this);
    }
    enum { kRequested, kWriting, kFinishing } state = kRequested;
    Greeter::AsyncService* service;
    grpc::ServerCompletionQueue* cq;
    ServerContext ctx;
    HelloRequest req;
    grpc::ServerAsyncWriter<HelloReply> writer;
    int sent = 0;
  };

  // CollectNames: reads until the client's half-close, then answers.
  struct CollectCall : CallState {
    CollectCall(Greeter::AsyncService* s, grpc::ServerCompletionQueue* cq) : service(s), cq(cq), reader(&ctx) {
      service->RequestCollectNames(&ctx, &reader, cq, cq, this);
    }
    void Proceed(bool ok) override {
      if (state == kRequested) {
        if (!ok) {
          delete this;
          return;
        }
        new CollectCall(service, cq);
        EchoMetadata(&ctx);
        state = kReading;
      } else if (state == kFinishing) {
        delete this;
        return;
      } else if (ok) {
        names += (n++ ? "," : "") + req.name();
        sum = Checksum(req.payload(), sum);
      } else {  // the client's half-close
        HelloReply rep;
        rep.set_message(names);
        rep.set_seq(n);
        rep.set_checksum(sum);
        state = kFinishing;
        reader.Finish(rep, Status::OK, this);
        return;
      }
      reader.Read(&req, this);
    }
    enum { kRequested, kReading, kFinishing } state = kRequested;
    Greeter::AsyncService* service;
    grpc::ServerCompletionQueue* cq;
    ServerContext ctx;
    HelloRequest req;
    grpc::ServerAsyncReader<HelloReply, HelloRequest> reader;
    std::string names;
    uint64_t sum = Checksum("");
    int n = 0;
  };

  // Chat: read a request, write its answer, until the client's half-close.
  struct ChatCall : CallState {
    ChatCall(Greeter::AsyncService* s, grpc::ServerCompletionQueue* cq) : service(s), cq(cq), stream(&ctx) {
      service->RequestChat(&ctx, &stream, cq, cq, this);
    }
    void Proceed(bool ok) override {
      switch (state) {
        case kRequested:
          if (!ok) {
            delete this;
            return;
          }
          new ChatCall(service, cq);
          EchoMetadata(&ctx);
          break;
        case kReading:
          if (!ok) {
            state = kFinishing;
            stream.Finish(Status::OK, this);
            return;
          }
          rep.set_message("echo " + req.name());
          rep.set_seq(n++);
          rep.set_checksum(Checksum(req.payload()));
          rep.set_payload(Pattern(req.reply_bytes(), n));
          state = kWriting;
          stream.Write(rep, this);
          return;
        case kWriting:
          if (!ok) {
            state = kFinishing;
            stream.Finish(Status(StatusCode::UNAVAILABLE, "write failed"), this);
            return;
          }
          break;
        case kFinishing:
          delete this;
          return;
      }
      state = kReading;
      stream.Read(&req, this);
    }
    enum { kRequested, kReading, kWriting, kFinishing } state = kRequested;
    Greeter::AsyncService* service;
    grpc::ServerCompletionQueue* cq;
    ServerContext ctx;
    HelloRequest req;
    HelloReply rep;
    grpc::ServerAsyncReaderWriter<HelloReply, HelloRequest> stream;
    int n = 0;
  };

  Greeter::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
};

// The callback API: every method as a reactor.
class CallbackGreeter final : public Greeter::CallbackService {
  grpc::ServerUnaryReactor* SayHello(grpc::CallbackServerContext* ctx, const HelloRequest* req,
                                     HelloReply* rep) override {
    EchoMetadata(ctx);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(Answer(*req, rep));
    return reactor;
  }

  grpc::ServerWriteReactor<HelloReply>* ListGreetings(grpc::CallbackServerContext* ctx,
                                                      const HelloRequest* req) override {
    class Writer : public grpc::ServerWriteReactor<HelloReply> {
     public:
      Writer(grpc::CallbackServerContext* ctx, const HelloRequest& req) : req_(req) {
        EchoMetadata(ctx);
        Next();
      }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(Status(StatusCode::UNAVAILABLE, "write failed"));
          return;
        }
        Next();
      }
      void OnDone() override { delete this; }

     private:
      void Next() {
        if (sent_ == req_.count()) {
          Finish(Status::OK);
          return;
        }
        rep_.set_message("Hello " + req_.name() + " #" + std::to_string(sent_));
        rep_.set_seq(sent_);
        rep_.set_payload(Pattern(req_.reply_bytes(), sent_));
        ++sent_;
        StartWrite(&rep_);
      }
      HelloRequest req_;
      HelloReply rep_;
      int sent_ = 0;
    };
    return new Writer(ctx, *req);
  }

  grpc::ServerReadReactor<HelloRequest>* CollectNames(grpc::CallbackServerContext* ctx, HelloReply* rep) override {
    class Reader : public grpc::ServerReadReactor<HelloRequest> {
     public:
      Reader(grpc::CallbackServerContext* ctx, HelloReply* rep) : rep_(rep) {
        EchoMetadata(ctx);
        StartRead(&req_);
      }
      void OnReadDone(bool ok) override {
        if (!ok) {  // the client's half-close
          rep_->set_message(names_);
          rep_->set_seq(n_);
          rep_->set_checksum(sum_);
          Finish(Status::OK);
          return;
        }
        names_ += (n_++ ? "," : "") + req_.name();
        sum_ = Checksum(req_.payload(), sum_);
        StartRead(&req_);
      }
      void OnDone() override { delete this; }

     private:
      HelloReply* rep_;
      HelloRequest req_;
      std::string names_;
      uint64_t sum_ = Checksum("");
      int n_ = 0;
    };
    return new Reader(ctx, rep);
  }

  grpc::ServerBidiReactor<HelloRequest, HelloReply>* Chat(grpc::CallbackServerContext* ctx) override {
    class Chatter : public grpc::ServerBidiReactor<HelloRequest, HelloReply> {
     public:
      explicit Chatter(grpc::CallbackServerContext* ctx) {
        EchoMetadata(ctx);
        StartRead(&req_);
      }
      void OnReadDone(bool ok) override {
        if (!ok) {
          Finish(Status::OK);
          return;
        }
        rep_.set_message("echo " + req_.name());
        rep_.set_seq(n_++);
        rep_.set_checksum(Checksum(req_.payload()));
        rep_.set_payload(Pattern(req_.reply_bytes(), n_));
        StartWrite(&rep_);
      }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(Status(StatusCode::UNAVAILABLE, "write failed"));
          return;
        }
        StartRead(&req_);
      }
      void OnDone() override { delete this; }

     private:
      HelloRequest req_;
      HelloReply rep_;
      int n_ = 0;
    };
    return new Chatter(ctx);
  }
};

int Main(int argc, char** argv) {
  std::string listen = "0.0.0.0:50051";
  std::string relay;
  std::string mode = "sync";
  // TLS: the server's key and certificate, and the roots client certificates must lead to
  // (given: clients must present a certificate that verifies).
  std::string tls_cert, tls_key, tls_client_roots;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--listen") == 0) listen = argv[i + 1];
    else if (strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
    else if (strcmp(argv[i], "--relay") == 0) relay = argv[i + 1];
    else if (strcmp(argv[i], "--tls-cert") == 0) tls_cert = argv[i + 1];
    else if (strcmp(argv[i], "--tls-key") == 0) tls_key = argv[i + 1];
    else if (strcmp(argv[i], "--tls-client-roots") == 0) tls_client_roots = argv[i + 1];
  }
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!tls_cert.empty()) {
    grpc::SslServerCredentialsOptions tls(tls_client_roots.empty()
                                              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_key_cert_pairs.push_back({ReadFile(tls_key), ReadFile(tls_cert)});
    tls.pem_root_certs = ReadFile(tls_client_roots);
    creds = grpc::SslServerCredentials(tls);
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, creds, &port);
  builder.SetMaxReceiveMessageSize(kMaxMessage);
  builder.SetMaxSendMessageSize(kMaxMessage);
  SyncGreeter sync_service;
  if (!relay.empty()) sync_service.RelayTo(relay);
  Greeter::AsyncService async_service;
  CallbackGreeter callback_service;
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  if (mode == "sync") {
    builder.RegisterService(&sync_service);
  } else if (mode == "async") {
    builder.RegisterService(&async_service);
    cq = builder.AddCompletionQueue();
  } else if (mode == "callback") {
    builder.RegisterService(&callback_service);
  } else {
    fprintf(stderr, "unknown --mode %s\n", mode.c_str());
    return 2;
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    fprintf(stderr, "greeter_server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::thread async_loop;
  if (cq != nullptr) async_loop = std::thread([&] { AsyncGreeter(&async_service, cq.get()).Run(); });
  printf("greeter_server listening on port %d (%s)\n", port, mode.c_str());
  fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (cq != nullptr) {
    cq->Shutdown();
    async_loop.join();
  }
  printf("greeter_server stopped\n");
  return 0;
}

}  // namespace
}  // namespace conduit::test

int main(int argc, char** argv) { return conduit::test::Main(argc, argv); }
