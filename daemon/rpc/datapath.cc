#include "rpc/datapath.h"

#include "common/log.h"
#include "common/thread_guard.h"

namespace conduit::rpc {
namespace {

// The largest request a content policy decompresses to read (a few compressed bytes must
// not become gigabytes of daemon memory); a larger one is refused, not let through.
constexpr uint64_t kMaxInspectedBytes = 64ull << 20;

}  // namespace

Datapath::Datapath(PolicyEngine* policies) : policies_(policies) {
  delay_thread_ = std::thread([this] { KeepRunning("RPC delayed calls", [&] { RunDelays(); }); });
}

Datapath::~Datapath() {
  {
    std::lock_guard<std::mutex> lock(delay_mu_);
    stopping_ = true;
  }
  delay_cv_.notify_all();
  delay_thread_.join();
}

std::shared_ptr<RpcCall> Datapath::NewCall(RpcInfo info) {
  auto call = std::make_shared<RpcCall>();
  call->filters = policies_->FiltersFor(info);
  for (const auto& f : call->filters) call->reads_body = call->reads_body || f->ReadsRequestBody();
  call->info = std::move(info);
  return call;
}

bool Datapath::Filter(const std::shared_ptr<RpcCall>& call, Event& ev, std::chrono::nanoseconds* delay) {
  if (call->filters.empty()) return true;
  if (ev.has(kStart)) {
    call->request_encoding = EncodingOf(ev.initial_md.view());
    for (const auto& f : call->filters) {
      Verdict v = f->OnStart(call->info);
      if (v.action == Verdict::Action::kDeny) {
        Deny(call, v.code, v.message);
        return false;
      }
      if (v.action == Verdict::Action::kDelay && v.delay > *delay) *delay = v.delay;
    }
  }
  if (!ev.message.empty() && call->reads_body) {
    // The program can still write its send segment: check a private copy, and send that.
    ev.message.MakePrivate();
    // A compressed request is read decompressed (and still sent as it came).
    std::string plain;
    std::string_view content(reinterpret_cast<const char*>(ev.message.data()), ev.message.size());
    if ((ev.message_flags & kMessageCompressed) != 0) {
      std::string why;
      InflateResult r = Decompress(call->request_encoding, content, kMaxInspectedBytes, &plain, &why);
      if (r != InflateResult::kOk) {
        Deny(call,
             r == InflateResult::kTooLarge ? GrpcStatusOf(StatusCode::kResourceExhausted)
                                           : GrpcStatusOf(StatusCode::kInternal),
             "conduit: a policy must read this compressed request and cannot: " + why);
        return false;
      }
      content = plain;
    }
    for (const auto& f : call->filters) {
      if (!f->ReadsRequestBody()) continue;
      Verdict v = f->OnRequestMessage(call->info, reinterpret_cast<const uint8_t*>(content.data()), content.size());
      if (v.action == Verdict::Action::kDeny) {
        Deny(call, v.code, v.message);
        return false;
      }
    }
  }
  if (ev.has(kStart)) {
    for (const auto& f : call->filters) {
      Verdict v = f->OnAdmit(call->info);
      if (v.action == Verdict::Action::kDeny) {
        Deny(call, v.code, v.message);
        return false;
      }
      if (v.action == Verdict::Action::kDelay && v.delay > *delay) *delay = v.delay;
    }
  }
  return true;
}

void Datapath::FromClient(const std::shared_ptr<RpcCall>& call, Event ev) {
  CLOG_DEBUG("%s %s: request sections 0x%x, %zu message bytes, to %s", call->info.program.c_str(),
             call->info.method.c_str(), ev.sections, ev.message.size(), call->server_end->name().c_str());
  std::chrono::nanoseconds delay{0};
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (call->finished) return;
    if (call->held) {
      call->held_events.push_back(std::move(ev));
      return;
    }
  }
  if (!Filter(call, ev, &delay)) return;
  bool ends = ev.has(kCancel);
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (call->finished) return;
    if (!ev.message.empty()) {
      call->outcome.request_bytes += ev.message.size();
      call->outcome.request_messages += 1;
    }
    if (ends) call->outcome.code = ev.cancel_code;
    if (delay.count() > 0 || call->held) {
      call->held_events.push_back(std::move(ev));
      if (!call->held) {
        call->held = true;
        Hold(call, delay);
      }
      return;
    }
    if (ev.has(kStart)) call->start_forwarded = true;
  }
  call->server_end->Deliver(*call, call->server_id, std::move(ev));
  if (ends) Finish(call);
}

void Datapath::FromServer(const std::shared_ptr<RpcCall>& call, Event ev) {
  CLOG_DEBUG("%s %s: response sections 0x%x, %zu message bytes, to %s", call->info.program.c_str(),
             call->info.method.c_str(), ev.sections, ev.message.size(), call->client_end->name().c_str());
  bool ends = ev.has(kStatus) || ev.has(kCancel);
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (call->finished) return;
    if (!ev.message.empty()) {
      call->outcome.response_bytes += ev.message.size();
      call->outcome.response_messages += 1;
    }
    if (ev.has(kStatus)) call->outcome.code = ev.status_code;
    if (ev.has(kCancel)) call->outcome.code = ev.cancel_code;
  }
  call->client_end->Deliver(*call, call->client_id, std::move(ev));
  if (ends) Finish(call);
}

void Datapath::Deny(const std::shared_ptr<RpcCall>& call, int32_t code, const std::string& message) {
  bool tell_server;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (call->finished) return;
    tell_server = call->start_forwarded;
    call->outcome.code = code;
    call->held_events.clear();
  }
  CLOG_DEBUG("%s %s denied: %s", call->info.program.c_str(), call->info.method.c_str(), message.c_str());
  call->client_end->Deliver(*call, call->client_id, StatusEvent(code, message));
  if (tell_server) call->server_end->Deliver(*call, call->server_id, CancelEvent(code, message));
  Finish(call);
}

void Datapath::Finish(const std::shared_ptr<RpcCall>& call) {
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (call->finished) return;
    call->finished = true;
    call->held_events.clear();
    call->outcome.latency = std::chrono::steady_clock::now() - call->started;
  }
  call->client_end->Forget(call->client_id);
  call->server_end->Forget(call->server_id);
  for (const auto& f : call->filters) f->OnFinish(call->info, call->outcome);
}

void Datapath::EndGone(const Endpoint* gone, const std::vector<std::shared_ptr<RpcCall>>& calls,
                       const std::string& why) {
  for (const auto& call : calls) EndFromOutside(call, gone, why);
}

void Datapath::Abort(const std::vector<std::shared_ptr<RpcCall>>& calls, const std::string& why) {
  for (const auto& call : calls) EndFromOutside(call, nullptr, why);
}

void Datapath::EndFromOutside(const std::shared_ptr<RpcCall>& call, const Endpoint* gone, const std::string& why) {
  const bool client_gone = gone != nullptr && call->client_end.get() == gone;
  const bool server_gone = gone != nullptr && call->server_end.get() == gone;
  bool forwarded;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (call->finished) return;
    // A client that left cancelled its call; anything else made it unavailable.
    call->outcome.code = GrpcStatusOf(client_gone ? StatusCode::kCancelled : StatusCode::kUnavailable);
    forwarded = call->start_forwarded;
  }
  if (!client_gone) {
    call->client_end->Deliver(*call, call->client_id, StatusEvent(GrpcStatusOf(StatusCode::kUnavailable), why));
  }
  if (forwarded && !server_gone) {
    call->server_end->Deliver(*call, call->server_id, CancelEvent(GrpcStatusOf(StatusCode::kCancelled), why));
  }
  Finish(call);
}

void Datapath::Hold(const std::shared_ptr<RpcCall>& call, std::chrono::nanoseconds delay) {
  std::lock_guard<std::mutex> lock(delay_mu_);
  auto when = std::chrono::steady_clock::now() + delay;
  bool first = delayed_.empty() || when < delayed_.begin()->first;
  delayed_.emplace(when, call);
  if (first) delay_cv_.notify_one();
}

void Datapath::Release(const std::shared_ptr<RpcCall>& call) {
  for (;;) {
    Event ev;
    {
      std::lock_guard<std::mutex> lock(call->mu);
      if (call->finished || call->held_events.empty()) {
        call->held = false;
        return;
      }
      ev = std::move(call->held_events.front());
      call->held_events.pop_front();
      if (ev.has(kStart)) call->start_forwarded = true;
    }
    bool ends = ev.has(kCancel);
    call->server_end->Deliver(*call, call->server_id, std::move(ev));
    if (ends) {
      Finish(call);
      return;
    }
  }
}

void Datapath::RunDelays() {
  std::unique_lock<std::mutex> lock(delay_mu_);
  while (!stopping_) {
    if (delayed_.empty()) {
      delay_cv_.wait(lock);
      continue;
    }
    auto first = delayed_.begin();
    if (std::chrono::steady_clock::now() < first->first) {
      delay_cv_.wait_until(lock, first->first);
      continue;
    }
    std::shared_ptr<RpcCall> call = std::move(first->second);
    delayed_.erase(first);
    lock.unlock();
    Release(call);
    lock.lock();
  }
}

}  // namespace conduit::rpc
