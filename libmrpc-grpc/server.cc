#include "server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "channel.h"
#include "common/detached_thread.h"
#include "common/log.h"
#include "completion.h"
#include "credentials_registry.h"
#include "exports.h"
#include "handoff.h"
#include "process.h"

namespace conduit::grpcshim {
namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<grpc_server*, std::shared_ptr<ManagedServer>> by_server;
  std::unordered_map<const void*, std::shared_ptr<ManagedServer>> by_core;
  std::atomic<uint64_t> next_id{1};
};

Registry& Servers() {
  static Registry* r = new Registry();
  return *r;
}

// The port of "host:port", "[::]:port" or ":port"; -1 when there is none.
int PortOf(const char* addr) {
  const char* colon = strrchr(addr, ':');
  if (colon == nullptr || colon[1] == '\0') return -1;
  char* end = nullptr;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) return -1;
  return static_cast<int>(port);
}

// The host of "host:port" or "[v6]:port", without brackets ("" for ":port").
std::string HostOf(const char* addr) {
  const char* colon = strrchr(addr, ':');
  std::string host(addr, colon == nullptr ? strlen(addr) : static_cast<size_t>(colon - addr));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

// CONDUIT_RPC_NATIVE_LISTENER=0: this program's managed servers take calls only through
// conduitd, whatever the daemon allows.
bool NativeListenerWanted() {
  const char* v = getenv("CONDUIT_RPC_NATIVE_LISTENER");
  return v == nullptr || strcmp(v, "0") != 0;
}

// gRPC picks a free port for ":0"; so do we, keeping the socket bound so the port stays ours.
// Only when the port is not also bound by gRPC (conduitd --rpc-managed-only).
int ReservePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  return ntohs(a.sin_port);  // fd deliberately kept open for the life of the process
}

}  // namespace

void ManagedServer::Created(grpc_server* server, const grpc_channel_args* args) {
  std::shared_ptr<ManagedServer> s(new ManagedServer(server));
  s->limits_ = LimitsFromArgs(args);
  s->compression_ = CompressionFromArgs(args);
  // The C++ API talks to the grpc_core::Server behind the handle directly (the allocator
  // functions). Depending on the gRPC release the handle is that object or owns it through
  // its first member; FindCore accepts either.
  memcpy(&s->core_server_, server, sizeof(void*));
  Registry& r = Servers();
  std::lock_guard<std::mutex> lock(r.mu);
  s->id_ = r.next_id++;
  r.by_server[server] = s;
  r.by_core[s->core_server_] = s;
}

std::shared_ptr<ManagedServer> ManagedServer::Find(grpc_server* server) {
  Registry& r = Servers();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_server.find(server);
  return it == r.by_server.end() ? nullptr : it->second;
}

std::shared_ptr<ManagedServer> ManagedServer::FindCore(const void* core_server) {
  Registry& r = Servers();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_core.find(core_server);
  if (it != r.by_core.end()) return it->second;
  // In gRPC 1.51 the C handle is the core server itself (CppImplOf).
  auto same = r.by_server.find(static_cast<grpc_server*>(const_cast<void*>(core_server)));
  return same == r.by_server.end() ? nullptr : same->second;
}

void ManagedServer::Destroyed(grpc_server* server) {
  std::shared_ptr<ManagedServer> s;
  {
    Registry& r = Servers();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_server.find(server);
    if (it == r.by_server.end()) return;
    s = it->second;
    r.by_server.erase(it);
    r.by_core.erase(s->core_server_);
  }
  std::shared_ptr<DaemonConnection> conn;
  {
    std::lock_guard<std::mutex> lock(s->mu_);
    s->shutting_down_ = true;
    conn = s->conn_;
  }
  if (conn != nullptr) conn->UnregisterServer(s->id_);
}

void ManagedServer::RegisterMethod(void* handle, const char* method, const char* /*host*/,
                                   grpc_server_register_method_payload_handling payload) {
  auto m = std::make_unique<Method>();
  m->name = method;
  m->handle = handle;
  m->read_payload = payload == GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER;
  std::lock_guard<std::mutex> lock(mu_);
  by_name_[m->name] = m.get();
  by_handle_[handle] = std::move(m);
}

ManagedServer::Method* ManagedServer::MethodFor(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? &generic_ : it->second;
}

Status ManagedServer::RequestServe(const std::shared_ptr<DaemonConnection>& conn, uint64_t server, const Port& port) {
  rpcproto::ServeRequest req{};
  req.server = server;
  req.port = static_cast<uint32_t>(port.port);
  if (port.host.size() >= sizeof(req.host)) return InvalidArgument("host '%s' is too long", port.host.c_str());
  CopyCString(req.host, port.host.c_str());
  std::string payload(reinterpret_cast<const char*>(&req), sizeof(req));
  if (port.tls != nullptr) {
    if (!conn->tls()) return SystemError("this conduitd does not carry TLS ports");
    rpcproto::TlsServerCredentials creds{};
    creds.client_cert_mode = port.tls->client_cert_mode;
    creds.key_bytes = static_cast<uint32_t>(port.tls->key.size());
    creds.chain_bytes = static_cast<uint32_t>(port.tls->chain.size());
    creds.root_bytes = static_cast<uint32_t>(port.tls->roots.size());
    payload.append(reinterpret_cast<const char*>(&creds), sizeof(creds));
    payload += port.tls->key + port.tls->chain + port.tls->roots;
  }
  std::string reply;
  return conn->Request(port.tls != nullptr ? rpcproto::kServeTls : rpcproto::kServe, payload.data(), payload.size(),
                       rpcproto::kServeReply, &reply);
}

Status ManagedServer::Serve(const std::shared_ptr<DaemonConnection>& conn, const std::vector<Port>& ports) {
  for (const Port& port : ports) CONDUIT_RETURN_IF_ERROR(RequestServe(conn, id_, port));
  conn->RegisterServer(id_, shared_from_this());
  return Status::Ok();
}

int ManagedServer::AddPort(const char* addr, grpc_server_credentials* creds) {
  auto bind_natively = [&] {
    int port = Real().grpc_server_add_http2_port(server_, addr, creds);
    if (port > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      ++real_ports_;
    }
    return port;
  };
  std::shared_ptr<const TlsServerCreds> tls;
  if (!IsInsecure(creds)) {
    std::string why;
    tls = TlsServerOf(creds, &why);
    if (tls == nullptr) {
      CLOG_INFO("server port %s uses native gRPC: %s", addr, why.c_str());
      return bind_natively();
    }
  }
  bool managed_before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (native_) return bind_natively();  // an earlier port decided
    managed_before = managed_;
  }
  std::string why;
  std::shared_ptr<DaemonConnection> conn = LiveConnection(&why);
  bool also_native = conn != nullptr && conn->native_listeners() && NativeListenerWanted();
  int port = PortOf(addr);
  bool bound = false;
  if (also_native && port >= 0) {
    // gRPC binds it first, as it would without us: a port in use fails here as natively,
    // and ":0" gets gRPC's choice, which conduitd then serves too.
    port = bind_natively();
    if (port == 0) return 0;
    bound = true;
  } else if (port == 0) {
    port = ReservePort();  // no native listener: hold the port so nobody else takes it
  }
  Port served{port, HostOf(addr), tls};
  Status st;
  if (port <= 0) {
    st = InvalidArgument("cannot tell its port number");
  } else if (conn == nullptr) {
    st = SystemError("%s", why.c_str());
  } else {
    // No lock across the round trip: the thread waiting may handle incoming calls meanwhile.
    st = RequestServe(conn, id_, served);
  }
  if (!st.ok()) {
    if (managed_before) {
      CLOG_WARN("server port %s cannot be served by conduitd (%s); %s", addr, st.message().c_str(),
                bound ? "only native clients reach it" : "it gets no calls");
      return bound ? port : bind_natively();
    }
    CLOG_INFO("server port %s uses native gRPC: %s", addr, st.message().c_str());
    {
      std::lock_guard<std::mutex> lock(mu_);
      native_ = true;
    }
    return bound ? port : bind_natively();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    managed_ = true;
    conn_ = conn;
    ports_.push_back(served);
  }
  conn->RegisterServer(id_, shared_from_this());
  CLOG_INFO("server port %d is served through conduitd%s%s", port, tls != nullptr ? " with TLS" : "",
            bound ? " (and natively, for clients without the preload)" : " only");
  return port;
}

void ManagedServer::BeforeStart() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!managed_ || real_ports_ == 0 || intake_ != nullptr) return;
  std::weak_ptr<ManagedServer> weak = weak_from_this();
  NativeIntake::Handlers h;
  h.arrived = [weak](std::unique_ptr<NativeIntake::Arrival> a) {
    if (auto self = weak.lock()) self->OnNativeArrival(std::move(a));
  };
  h.failed = [weak](void* method, grpc_completion_queue* cq) {
    if (auto self = weak.lock()) self->OnNativeRequestFailed(method, cq);
  };
  h.shutdown_done = [weak] {
    if (auto self = weak.lock()) self->OnNativeShutdownDone();
  };
  intake_ = std::make_shared<NativeIntake>(server_, std::move(h));
}

void ManagedServer::AfterStart() {
  std::vector<std::pair<Method*, grpc_completion_queue*>> wanted;
  std::shared_ptr<NativeIntake> intake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
    intake = intake_;
    if (intake == nullptr) return;
    // Requests the program made before the start (a C program may) get theirs now.
    auto collect = [&](Method* m) {
      for (auto& [cq, count] : m->by_cq) {
        while (NeedNativeRequestLocked(m, cq)) wanted.emplace_back(m, cq);
      }
    };
    collect(&generic_);
    for (auto& [handle, m] : by_handle_) collect(m.get());
  }
  intake->Start();
  for (auto& [m, cq] : wanted) RequestNative(m, cq);
}

void ManagedServer::SetRegisteredAllocator(grpc_completion_queue* cq, void* method,
                                           std::function<grpc_core::Server::RegisteredCallAllocation()> allocator) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_handle_.find(method);
  if (it == by_handle_.end()) return;
  it->second->allocator = std::move(allocator);
  it->second->allocator_cq = cq;
}

void ManagedServer::SetBatchAllocator(grpc_completion_queue* cq,
                                      std::function<grpc_core::Server::BatchCallAllocation()> allocator) {
  std::lock_guard<std::mutex> lock(mu_);
  generic_.batch_allocator = std::move(allocator);
  generic_.allocator_cq = cq;
}

grpc_call_error ManagedServer::RequestRegistered(void* method, grpc_call** call, gpr_timespec* deadline,
                                                 grpc_metadata_array* metadata, grpc_byte_buffer** payload,
                                                 grpc_completion_queue* cq_bound, grpc_completion_queue* cq_notify,
                                                 void* tag) {
  Method* m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    m = method != nullptr ? MethodOfHandleLocked(method) : nullptr;
    if (m == nullptr) return GRPC_CALL_ERROR;
  }
  if ((payload != nullptr) != m->read_payload) return GRPC_CALL_ERROR_PAYLOAD_TYPE_MISMATCH;
  if (!BeginCompletion(cq_notify, tag)) return GRPC_CALL_ERROR_COMPLETION_QUEUE_SHUTDOWN;
  return Take(m, Request{tag, cq_bound, cq_notify, call, deadline, metadata, payload, nullptr});
}

grpc_call_error ManagedServer::RequestCall(grpc_call** call, grpc_call_details* details, grpc_metadata_array* metadata,
                                           grpc_completion_queue* cq_bound, grpc_completion_queue* cq_notify,
                                           void* tag) {
  if (!BeginCompletion(cq_notify, tag)) return GRPC_CALL_ERROR_COMPLETION_QUEUE_SHUTDOWN;
  return Take(&generic_, Request{tag, cq_bound, cq_notify, call, nullptr, metadata, nullptr, details});
}

grpc_call_error ManagedServer::Take(Method* m, const Request& req) {
  ManagedCall* ready = nullptr;
  std::unique_ptr<NativeIntake::Arrival> native;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shutting_down_) {
      // A managed call waiting (with its first message when the method reads it first) ...
      for (auto it = m->waiting.begin(); it != m->waiting.end(); ++it) {
        if (!m->read_payload || (*it)->PayloadKnown()) {
          ready = *it;
          m->waiting.erase(it);
          active_.insert(ready);
          break;
        }
      }
      // ... else a native one bound to this request's queue, else the request waits.
      if (ready == nullptr) native = TakeNativeLocked(m, req.cq_bound);
      if (ready == nullptr && native == nullptr) {
        PushRequestLocked(m, req);
        if (!NeedNativeRequestLocked(m, req.cq_bound)) return GRPC_CALL_OK;
        queued = true;
      }
    }
  }
  if (native != nullptr) {
    NativeIntake::Hand(std::move(native), req.call, req.deadline, req.metadata, req.payload, req.details);
    PostCompletion(req.cq_notify, req.tag, true);
  } else if (ready != nullptr) {
    ready->BindToProgram(req.cq_bound, req.metadata, req.deadline, req.payload, req.details);
    *req.call = ready->AsGrpc();
    HandOff(ready);
    PostCompletion(req.cq_notify, req.tag, true);
  } else if (queued) {
    RequestNative(m, req.cq_bound);  // the request waits; gRPC may fill it for a native client
  } else {
    PostCompletion(req.cq_notify, req.tag, false);  // the server is shutting down
  }
  return GRPC_CALL_OK;
}

ManagedServer::Method* ManagedServer::MethodOfHandleLocked(void* handle) {
  if (handle == nullptr) return &generic_;
  auto it = by_handle_.find(handle);
  return it == by_handle_.end() ? nullptr : it->second.get();
}

void ManagedServer::PushRequestLocked(Method* m, const Request& req) {
  m->requests.push_back(req);
  ++m->by_cq[req.cq_bound].waiting;
}

ManagedServer::Request ManagedServer::EraseRequestLocked(Method* m, std::deque<Request>::iterator it) {
  Request req = *it;
  m->requests.erase(it);
  --m->by_cq[req.cq_bound].waiting;
  return req;
}

ManagedServer::Request ManagedServer::PopFrontLocked(Method* m) { return EraseRequestLocked(m, m->requests.begin()); }

std::optional<ManagedServer::Request> ManagedServer::TakeRequestLocked(Method* m, grpc_completion_queue* cq) {
  auto it = std::find_if(m->requests.begin(), m->requests.end(), [cq](const Request& r) { return r.cq_bound == cq; });
  if (it == m->requests.end()) return std::nullopt;
  return EraseRequestLocked(m, it);
}

std::unique_ptr<NativeIntake::Arrival> ManagedServer::TakeNativeLocked(Method* m, grpc_completion_queue* cq) {
  for (auto it = m->native_waiting.begin(); it != m->native_waiting.end(); ++it) {
    if ((*it)->cq_bound != cq) continue;
    std::unique_ptr<NativeIntake::Arrival> a = std::move(*it);
    m->native_waiting.erase(it);
    return a;
  }
  return nullptr;
}

bool ManagedServer::NeedNativeRequestLocked(Method* m, grpc_completion_queue* cq) {
  if (intake_ == nullptr || !started_ || shutting_down_) return false;
  QueueCount& count = m->by_cq[cq];
  if (count.native_requested >= count.waiting) return false;
  ++count.native_requested;
  return true;
}

void ManagedServer::RequestNative(Method* m, grpc_completion_queue* cq) {
  std::shared_ptr<NativeIntake> intake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    intake = intake_;
  }
  if (intake != nullptr && intake->Request(m->handle, m->read_payload, cq)) return;
  std::lock_guard<std::mutex> lock(mu_);
  --m->by_cq[cq].native_requested;
}

void ManagedServer::OnNativeArrival(std::unique_ptr<NativeIntake::Arrival> a) {
  std::optional<Request> req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Method* m = MethodOfHandleLocked(a->method);
    if (m == nullptr) return;  // cannot happen: handles are never removed; the call is refused
    --m->by_cq[a->cq_bound].native_requested;
    if (shutting_down_) return;
    req = TakeRequestLocked(m, a->cq_bound);
    if (!req) {
      // A managed call took the request meanwhile; the program's next one on this queue gets it.
      m->native_waiting.push_back(std::move(a));
      return;
    }
  }
  NativeIntake::Hand(std::move(a), req->call, req->deadline, req->metadata, req->payload, req->details);
  PostCompletion(req->cq_notify, req->tag, true);
}

void ManagedServer::OnNativeRequestFailed(void* method, grpc_completion_queue* cq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Method* m = MethodOfHandleLocked(method)) --m->by_cq[cq].native_requested;
}

void ManagedServer::OnNativeShutdownDone() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    native_shutdown_done_ = true;
  }
  FinishShutdownIfIdle();
}

void ManagedServer::Match(Method* m, ManagedCall* call) {
  std::unique_lock<std::mutex> lock(mu_);
  CLOG_DEBUG("incoming %s: %zu requests, allocator %d, %zu waiting", m->name.c_str(), m->requests.size(),
             m->allocator != nullptr, m->waiting.size());
  if (shutting_down_) {
    lock.unlock();
    call->Reject(GRPC_STATUS_UNAVAILABLE, "server is shutting down");
    call->Unref();
    return;
  }
  if (m->read_payload && !call->PayloadKnown()) {
    m->waiting.push_back(call);
    return;
  }
  if (!m->requests.empty()) {
    Request req = PopFrontLocked(m);
    active_.insert(call);  // takes over the server's reference
    lock.unlock();
    call->BindToProgram(req.cq_bound, req.metadata, req.deadline, req.payload, req.details);
    *req.call = call->AsGrpc();
    HandOff(call);
    PostCompletion(req.cq_notify, req.tag, true);
    return;
  }
  grpc_completion_queue* cq = m->allocator_cq;
  if (m->allocator) {
    auto allocator = m->allocator;
    active_.insert(call);
    lock.unlock();
    grpc_core::Server::RegisteredCallAllocation a = allocator();
    if (!BeginCompletion(cq, a.tag)) {
      call->Reject(GRPC_STATUS_UNAVAILABLE, "server is shutting down");
      return;
    }
    call->BindToProgram(a.cq, a.initial_metadata, a.deadline, a.optional_payload, nullptr);
    *a.call = call->AsGrpc();
    HandOff(call);
    PostCompletion(cq, a.tag, true);
    return;
  }
  if (m->batch_allocator) {
    auto allocator = m->batch_allocator;
    active_.insert(call);
    lock.unlock();
    grpc_core::Server::BatchCallAllocation a = allocator();
    if (!BeginCompletion(cq, a.tag)) {
      call->Reject(GRPC_STATUS_UNAVAILABLE, "server is shutting down");
      return;
    }
    call->BindToProgram(a.cq, a.initial_metadata, nullptr, nullptr, a.details);
    *a.call = call->AsGrpc();
    HandOff(call);
    PostCompletion(cq, a.tag, true);
    return;
  }
  m->waiting.push_back(call);
}

void ManagedServer::OnIncomingCall(const std::shared_ptr<DaemonConnection>& conn, const rpc::CallEvent& start,
                                   grpc_byte_buffer* message) {
  ManagedCall* call = ManagedCall::NewServer(shared_from_this(), conn, start, limits_, compression_);
  if (call == nullptr) {
    if (message != nullptr) Real().grpc_byte_buffer_destroy(message);
    CLOG_WARN("too many calls in flight: refusing %.*s", static_cast<int>(start.method.size()), start.method.data());
    return;
  }
  // The first frame may already hold the request, its end, or a cancellation.
  if (message != nullptr || (start.sections & (rpc::kHalfClose | rpc::kCancel | rpc::kWindow)) != 0) {
    call->OnEvent(start, message);
  }
  if (call->is_finished()) {
    call->Unref();
    return;
  }
  Match(MethodFor(call->method()), call);
}

void ManagedServer::OnWaitingCallChanged(ManagedCall* call) {
  Method* found = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto take = [&](Method* m) {
      for (auto it = m->waiting.begin(); it != m->waiting.end(); ++it) {
        if (*it == call) {
          m->waiting.erase(it);
          found = m;
          return true;
        }
      }
      return false;
    };
    if (!take(&generic_)) {
      for (auto& [handle, m] : by_handle_) {
        if (take(m.get())) break;
      }
    }
  }
  if (found == nullptr) return;
  if (call->is_finished()) {
    call->Unref();
    return;
  }
  Match(found, call);
}

void ManagedServer::OnCallFinished(ManagedCall* call) {
  bool erased;
  {
    std::lock_guard<std::mutex> lock(mu_);
    erased = active_.erase(call) > 0;
  }
  if (erased) call->Unref();
  FinishShutdownIfIdle();
}

void ManagedServer::OnConnectionLost(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_ || !managed_) return;
  conn_.reset();
  CLOG_WARN("server on port %d lost conduitd (%s); it will serve again when the daemon is back",
            ports_.empty() ? 0 : ports_[0].port, why.c_str());
  // Re-register once the daemon is back (calls in flight already failed).
  std::weak_ptr<ManagedServer> weak = weak_from_this();
  SpawnDetached("a server's re-registration", [weak] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::shared_ptr<ManagedServer> self = weak.lock();
      if (self == nullptr) return;
      std::vector<Port> ports;
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        if (self->shutting_down_) return;
        ports = self->ports_;
      }
      std::string ignored;
      std::shared_ptr<DaemonConnection> conn = LiveConnection(&ignored);
      if (conn == nullptr || !self->Serve(conn, ports).ok()) continue;
      std::lock_guard<std::mutex> lock(self->mu_);
      self->conn_ = conn;
      CLOG_INFO("server on port %d is served through conduitd again", ports.empty() ? 0 : ports[0].port);
      return;
    }
  });
}

void ManagedServer::ShutdownAndNotify(grpc_completion_queue* cq, void* tag) {
  std::vector<Request> requests;
  std::vector<ManagedCall*> waiting;
  std::vector<std::unique_ptr<NativeIntake::Arrival>> native_waiting;  // released unanswered
  std::shared_ptr<DaemonConnection> conn;
  std::shared_ptr<NativeIntake> intake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_ && shutdown_cq_ != nullptr) {
      // A second shutdown request: gRPC notifies every one; let it.
      Real().grpc_server_shutdown_and_notify(server_, cq, tag);
      return;
    }
    shutting_down_ = true;
    shutdown_cq_ = cq;
    shutdown_tag_ = tag;
    conn = conn_;
    intake = intake_;
    auto drain = [&](Method* m) {
      for (auto& r : m->requests) requests.push_back(r);
      m->requests.clear();
      for (auto& [q, count] : m->by_cq) count.waiting = 0;
      for (ManagedCall* c : m->waiting) waiting.push_back(c);
      m->waiting.clear();
      for (auto& a : m->native_waiting) native_waiting.push_back(std::move(a));
      m->native_waiting.clear();
    };
    drain(&generic_);
    for (auto& [handle, m] : by_handle_) drain(m.get());
  }
  if (intake != nullptr) {
    // gRPC stops listening at once and notifies the intake when its native calls are over;
    // the program's tag is posted when the managed ones are over too.
    bool begun = BeginCompletion(cq, tag);
    if (!begun) CLOG_WARN("server shutdown requested on a completion queue already shut down; nobody is told");
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_begun_ = begun;
    }
    intake->Shutdown();
  }
  if (conn != nullptr && conn->alive()) {
    rpcproto::UnserveRequest req{id_};
    std::string reply;
    (void)conn->Request(rpcproto::kUnserve, &req, sizeof(req), rpcproto::kUnserveReply, &reply);
  }
  for (const Request& r : requests) PostCompletion(r.cq_notify, r.tag, false);
  for (ManagedCall* c : waiting) {
    c->Reject(GRPC_STATUS_UNAVAILABLE, "server is shutting down");
    c->Unref();
  }
  native_waiting.clear();
  FinishShutdownIfIdle();
}

void ManagedServer::FinishShutdownIfIdle() {
  grpc_completion_queue* cq;
  void* tag;
  bool through_intake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shutting_down_ || shutdown_notified_ || shutdown_cq_ == nullptr || !active_.empty()) return;
    through_intake = intake_ != nullptr;
    if (through_intake && !native_shutdown_done_) return;
    if (through_intake && !shutdown_begun_) return;  // nobody to tell
    shutdown_notified_ = true;
    cq = shutdown_cq_;
    tag = shutdown_tag_;
  }
  if (through_intake) {
    PostCompletion(cq, tag, true);
  } else {
    Real().grpc_server_shutdown_and_notify(server_, cq, tag);
  }
}

void ManagedServer::CancelAll() {
  std::vector<ManagedCall*> active;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (ManagedCall* c : active_) {
      c->Ref();
      active.push_back(c);
    }
  }
  for (ManagedCall* c : active) {
    c->Cancel(GRPC_STATUS_CANCELLED, "Cancelled");
    c->Unref();
  }
}

}  // namespace conduit::grpcshim
