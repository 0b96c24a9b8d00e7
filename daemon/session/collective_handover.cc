// The collectives service's side of a live upgrade (docs/upgrade.md): a session's state,
// and the communicators its sessions share, in the handover's encoding
// (protocol/upgrade_state.proto: CollectiveSession, CollectivesState). Everything read here
// came over a socket from another process and is checked before use.
#include <string.h>

#include "common/log.h"
#include "protocol/call_page.h"
#include "protocol/upgrade_state.pb.h"
#include "session/client_session.h"
#include "session/collective_service.h"

namespace conduit {
namespace {

// How long the communicators' point-to-point readers may take to reach a frame boundary.
constexpr int kQuiesceMs = 2000;

// Appends `fd` to the service's descriptors; its 1-based position.
uint32_t Add(UniqueFd fd, std::vector<UniqueFd>* fds) {
  fds->push_back(std::move(fd));
  return static_cast<uint32_t>(fds->size());
}


// Memory traffic counts travel in CommKindTotals and CommTraceRecord alike (the same field
// names in both messages).
template <typename Message>
void SetTraffic(const TrafficCounts& t, Message* out) {
  out->set_program_copies(t.program_copies);
  out->set_local_copies(t.local_copies);
  out->set_reduce_writes(t.reduce_writes);
  out->set_socket_sends(t.socket_sends);
  out->set_socket_receives(t.socket_receives);
  out->set_device_writes(t.device_writes);
  out->set_device_to_host(t.device_to_host);
  out->set_host_to_device(t.host_to_device);
}

template <typename Message>
TrafficCounts TrafficOf(const Message& in) {
  return TrafficCounts{in.program_copies(), in.local_copies(), in.reduce_writes(), in.socket_sends(),
                       in.socket_receives(), in.device_writes(), in.device_to_host(), in.host_to_device()};
}

void EncodeTrace(const std::vector<CollRecord>& trace, upgrade::v1::Communicator* out) {
  for (const CollRecord& r : trace) {
    upgrade::v1::CommTraceRecord* o = out->add_trace();
    o->set_seq(r.seq);
    o->set_kind(r.kind);
    o->set_dtype(r.dtype);
    o->set_redop(r.redop);
    o->set_root(r.root);
    o->set_count(r.count);
    o->set_bytes(r.bytes);
    o->set_payload_bytes(r.payload_bytes);
    o->set_algorithm(r.algorithm);
    o->set_start_unix_us(r.start_unix_us);
    o->set_duration_us(r.duration_us);
    o->set_error(r.error);
    if (r.config) {
      o->set_has_config(true);
      o->set_config_epoch(r.config->epoch);
      for (int h : r.config->ring) o->add_ring(h);
      o->set_allreduce_algo(r.config->allreduce_algo);
    }
    SetTraffic(r.traffic, o);
  }
}

// The trace, checked as any input: bounded in length and text, kinds and ring entries in
// range (the admin API prints them).
Status DecodeTrace(const upgrade::v1::Communicator& in, int nhosts, std::vector<CollRecord>* out) {
  constexpr size_t kMaxText = 1024;
  if (static_cast<size_t>(in.trace_size()) > CommStats::kTraceCapacity) {
    return InvalidArgument("a trace of %d collectives", in.trace_size());
  }
  std::shared_ptr<const CommConfig> config;  // shared by consecutive records of one configuration
  for (const upgrade::v1::CommTraceRecord& t : in.trace()) {
    if (t.kind() >= static_cast<uint32_t>(CommStats::kKinds) || t.dtype() > 255 || t.redop() > 255 ||
        t.error().size() > kMaxText || t.algorithm().size() > kMaxText || t.allreduce_algo().size() > kMaxText) {
      return InvalidArgument("a malformed trace record (collective %llu)", static_cast<unsigned long long>(t.seq()));
    }
    CollRecord r;
    r.seq = t.seq();
    r.kind = static_cast<uint8_t>(t.kind());
    r.dtype = static_cast<uint8_t>(t.dtype());
    r.redop = static_cast<uint8_t>(t.redop());
    r.root = t.root();
    r.count = t.count();
    r.bytes = t.bytes();
    r.payload_bytes = t.payload_bytes();
    r.algorithm = KnownAlgorithmName(t.algorithm());
    r.start_unix_us = t.start_unix_us();
    r.duration_us = t.duration_us();
    r.error = t.error();
    if (t.has_config()) {
      if (t.ring_size() > nhosts) return InvalidArgument("a trace record's ring of %d hosts", t.ring_size());
      for (int h : t.ring()) {
        if (h < 0 || h >= nhosts) return InvalidArgument("a trace record's ring names host %d", h);
      }
      std::vector<int> ring(t.ring().begin(), t.ring().end());
      if (!config || config->epoch != t.config_epoch() || config->ring != ring ||
          config->allreduce_algo != t.allreduce_algo()) {
        auto c = std::make_shared<CommConfig>();
        c->epoch = t.config_epoch();
        c->ring = std::move(ring);
        c->allreduce_algo = t.allreduce_algo();
        config = std::move(c);
      }
      r.config = config;
    }
    r.traffic = TrafficOf(t);
    out->push_back(std::move(r));
  }
  return Status::Ok();
}

void Encode(HandedComm& in, upgrade::v1::Communicator* out, std::vector<UniqueFd>* fds) {
  out->set_key(in.key);
  out->set_secret(in.secret.data(), in.secret.size());
  out->set_nranks(in.nranks);
  out->set_exe(in.exe);
  for (const auto& a : in.host_addrs) out->add_host_addrs(a);
  for (int h : in.host_of_rank) out->add_host_of_rank(h);
  for (int h : in.initial_ring) out->add_initial_ring(h);
  out->set_protocol_version(in.protocol_version);
  out->set_coll_seq(in.coll_seq);
  out->set_config_epoch(in.config.epoch);
  for (int h : in.config.ring) out->add_ring(h);
  out->set_allreduce_algo(in.config.allreduce_algo);
  out->set_entered_epoch(in.entered_epoch);
  out->set_proposed_epoch(in.proposed_epoch);
  out->set_next_request_id(in.next_request_id);
  out->set_reconfigurations(in.reconfigurations);
  for (int r : in.left_ranks) out->add_left_ranks(r);
  if (!in.failed.ok()) {
    out->set_failed_result(static_cast<int32_t>(in.failed.code()));
    out->set_failed_message(in.failed.message());
  }
  for (HandedLinks& l : in.links) {
    upgrade::v1::CommLinks* o = out->add_links();
    o->set_host(l.host);
    o->set_collective(Add(std::move(l.collective), fds));
    o->set_path(l.path);
    o->set_local_ip(l.local_ip);
    o->set_epoch(l.epoch);
    o->set_p2p(Add(std::move(l.p2p), fds));
  }
  for (ArrivedMessage& m : in.messages) {
    upgrade::v1::WaitingMessage* o = out->add_messages();
    o->set_src(m.src);
    o->set_dst(m.dst);
    o->set_data(m.bytes.data(), m.bytes.size());
  }
  out->set_ops(in.stats.ops);
  out->set_bytes(in.stats.bytes);
  out->set_errors(in.stats.errors);
  out->set_device_p2p_direct_bytes(in.stats.device_p2p_direct);
  out->set_device_p2p_through_host_bytes(in.stats.device_p2p_through_host);
  for (const CommStats::Totals::Kind& k : in.stats.kinds) {
    upgrade::v1::CommKindTotals* o = out->add_kinds();
    o->set_ops(k.ops);
    o->set_bytes(k.bytes);
    for (uint64_t n : k.latency) o->add_latency(n);
    o->set_latency_sum_ns(k.latency_sum_ns);
    SetTraffic(k.traffic, o);
  }
  EncodeTrace(in.trace, out);
}

Status DecodeTotals(const upgrade::v1::Communicator& in, CommStats::Totals* out) {
  if (in.kinds_size() > CommStats::kKinds) return InvalidArgument("counters for %d collective kinds", in.kinds_size());
  out->ops = in.ops();
  out->bytes = in.bytes();
  out->errors = in.errors();
  out->device_p2p_direct = in.device_p2p_direct_bytes();
  out->device_p2p_through_host = in.device_p2p_through_host_bytes();
  for (int i = 0; i < in.kinds_size(); ++i) {
    const upgrade::v1::CommKindTotals& k = in.kinds(i);
    CommStats::Totals::Kind& o = out->kinds[i];
    if (k.latency_size() != 0 && static_cast<size_t>(k.latency_size()) != o.latency.size()) {
      return InvalidArgument("a latency histogram of %d buckets (this daemon counts %zu)", k.latency_size(),
                             o.latency.size());
    }
    o.ops = k.ops();
    o.bytes = k.bytes();
    for (int b = 0; b < k.latency_size(); ++b) o.latency[b] = k.latency(b);
    o.latency_sum_ns = k.latency_sum_ns();
    o.traffic = TrafficOf(k);
  }
  return Status::Ok();
}

Status Decode(const upgrade::v1::Communicator& in, std::vector<UniqueFd>* fds, HandedComm* out) {
  if (in.secret().size() != out->secret.size()) return InvalidArgument("a secret of %zu bytes", in.secret().size());
  out->key = in.key();
  memcpy(out->secret.data(), in.secret().data(), out->secret.size());
  out->nranks = in.nranks();
  out->exe = in.exe();
  out->host_addrs.assign(in.host_addrs().begin(), in.host_addrs().end());
  out->host_of_rank.assign(in.host_of_rank().begin(), in.host_of_rank().end());
  out->initial_ring.assign(in.initial_ring().begin(), in.initial_ring().end());
  out->protocol_version = in.protocol_version();
  out->coll_seq = in.coll_seq();
  out->config.epoch = in.config_epoch();
  out->config.ring.assign(in.ring().begin(), in.ring().end());
  out->config.allreduce_algo = in.allreduce_algo();
  out->entered_epoch = in.entered_epoch();
  out->proposed_epoch = in.proposed_epoch();
  out->next_request_id = in.next_request_id();
  out->reconfigurations = in.reconfigurations();
  out->left_ranks.assign(in.left_ranks().begin(), in.left_ranks().end());
  if (in.failed_result() != 0) {
    const int32_t r = in.failed_result();
    const ncclResult_t code = r > 0 && r <= ncclInProgress ? static_cast<ncclResult_t>(r) : ncclSystemError;
    out->failed = Status(code, in.failed_message().empty() ? "failed before a live upgrade" : in.failed_message());
  }
  for (const upgrade::v1::CommLinks& l : in.links()) {
    HandedLinks h;
    h.host = l.host();
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(fds, l.collective(), &h.collective));
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(fds, l.p2p(), &h.p2p));
    h.path = l.path();
    h.local_ip = l.local_ip();
    h.epoch = l.epoch();
    out->links.push_back(std::move(h));
  }
  for (const upgrade::v1::WaitingMessage& m : in.messages()) {
    out->messages.push_back(ArrivedMessage{m.src(), m.dst(), std::vector<uint8_t>(m.data().begin(), m.data().end())});
  }
  CONDUIT_RETURN_IF_ERROR(DecodeTotals(in, &out->stats));
  return DecodeTrace(in, in.host_addrs_size(), &out->trace);
}

}  // namespace

Status ClientSession::SavedState(std::string* state, std::vector<UniqueFd>* fds) const {
  if (device_.holds_event()) {
    return Status(StatusCode::kAborted, who_ + " orders its GPU work by interprocess events (the event-ordered path), "
                                             "whose state does not move yet");
  }
  // The park stops a session only once its asynchronous groups have run
  // (ProgramPark::Member::SetBackgroundWork).
  if (proxy_.busy()) return Status(StatusCode::kAborted, who_ + " has asynchronous GPU groups under way");
  upgrade::v1::CollectiveSession s;
  s.set_hello_done(hello_done_);
  if (Status error = proxy_.error(); !error.ok()) {
    s.set_async_error_result(static_cast<int32_t>(error.code()));
    s.set_async_error_message(error.message());
  }
  if (comm_) {
    s.set_comm_key(comm_->key());
    s.set_rank(rank_);
  }
  if (shm_.data() != nullptr && shm_fd_.valid()) {
    UniqueFd dup;
    CONDUIT_RETURN_IF_ERROR(DupFd(shm_fd_.get(), "a shared segment", &dup));
    fds->push_back(std::move(dup));
    s.set_shm_size(shm_.size());
  }
  Status dup_failed;
  regions_.ForEach([&](uint64_t id, uint64_t size, int fd) {
    UniqueFd dup;
    Status st = DupFd(fd, "a host region", &dup);
    if (!st.ok()) {
      if (dup_failed.ok()) dup_failed = st;
      return;
    }
    fds->push_back(std::move(dup));
    upgrade::v1::HostRegion* r = s.add_regions();
    r->set_id(id);
    r->set_size(size);
    r->set_fd(static_cast<uint32_t>(fds->size()));
  });
  CONDUIT_RETURN_IF_ERROR(dup_failed);
  if (reply_page_.data() != nullptr && reply_page_fd_.valid()) {
    UniqueFd dup;
    CONDUIT_RETURN_IF_ERROR(DupFd(reply_page_fd_.get(), "a reply page", &dup));
    fds->push_back(std::move(dup));
    s.set_reply_page(static_cast<uint32_t>(fds->size()));
    s.set_replies_in_page(replies_in_page_);
  }
  if (request_page_.attached()) {
    UniqueFd dup;
    CONDUIT_RETURN_IF_ERROR(DupFd(request_page_.fd(), "a request page", &dup));
    fds->push_back(std::move(dup));
    s.set_request_page(static_cast<uint32_t>(fds->size()));
    s.set_requests_from_page(request_page_.taken());
  }
  // After the shared segment's descriptor, which Restore expects first.
  for (const DeviceSession::Registration& r : device_.Registrations()) {
    upgrade::v1::DeviceBuffer* b = s.add_device_buffers();
    b->set_id(r.request.buffer_id);
    b->set_size(r.request.size);
    b->set_device_uuid(r.request.device.bytes, sizeof(r.request.device.bytes));
    b->set_ipc_handle(r.request.ipc_handle, sizeof(r.request.ipc_handle));
    if (r.fd >= 0) {
      UniqueFd dup;
      CONDUIT_RETURN_IF_ERROR(DupFd(r.fd, "a GPU allocation", &dup));
      fds->push_back(std::move(dup));
      b->set_fd(static_cast<uint32_t>(fds->size()));
    }
  }
  // After their pages, which Restore registers first.
  for (const DeviceSession::SpanRegistration& r : device_.Spans()) {
    upgrade::v1::DeviceSpan* span = s.add_device_spans();
    span->set_id(r.id);
    span->set_device_uuid(r.device.bytes, sizeof(r.device.bytes));
    for (uint64_t page : r.pages) span->add_pages(page);
  }
  *state = s.SerializeAsString();
  return Status::Ok();
}

Status ClientSession::Restore(const std::string& state, std::vector<UniqueFd> fds) {
  upgrade::v1::CollectiveSession s;
  if (!s.ParseFromString(state)) return InvalidArgument("the session state does not parse");
  who_ = exe_ + "[" + std::to_string(pid_) + "]";
  if (s.shm_size() > 0) {
    if (fds.empty() || !fds[0].valid()) return InvalidArgument("%s: its shared segment was not handed over", who_.c_str());
    CONDUIT_RETURN_IF_ERROR(shm_.Map(fds[0].get(), s.shm_size(), policy_->max_shm_bytes()));
    shm_fd_ = std::move(fds[0]);
  }
  for (const upgrade::v1::HostRegion& r : s.regions()) {
    UniqueFd fd;
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, r.fd(), &fd));
    if (Status st = regions_.Attach(r.id(), std::move(fd), r.size()); !st.ok()) {
      return InvalidArgument("%s: host region %llu: %s", who_.c_str(), static_cast<unsigned long long>(r.id()),
                             st.message().c_str());
    }
  }
  if (s.reply_page() != 0) {
    UniqueFd fd;
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, s.reply_page(), &fd));
    if (Status st = reply_page_.Map(fd.get(), kCallPageBytes, kCallPageBytes); !st.ok()) {
      return InvalidArgument("%s: its reply page: %s", who_.c_str(), st.message().c_str());
    }
    reply_page_fd_ = std::move(fd);
    replies_in_page_ = s.replies_in_page();
  }
  if (s.request_page() != 0) {
    if (s.reply_page() == 0) return InvalidArgument("%s: a request page without a reply page", who_.c_str());
    UniqueFd fd;
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, s.request_page(), &fd));
    if (Status st = request_page_.Attach(std::move(fd), s.requests_from_page()); !st.ok()) {
      return InvalidArgument("%s: its request page: %s", who_.c_str(), st.message().c_str());
    }
  }
  for (const upgrade::v1::DeviceBuffer& b : s.device_buffers()) {
    shimproto::RegisterBufferRequest r{};
    if (b.device_uuid().size() != sizeof(r.device.bytes) || b.ipc_handle().size() != sizeof(r.ipc_handle)) {
      return InvalidArgument("%s: device buffer %llu: malformed registration", who_.c_str(),
                             static_cast<unsigned long long>(b.id()));
    }
    r.buffer_id = b.id();
    r.size = b.size();
    memcpy(r.device.bytes, b.device_uuid().data(), sizeof(r.device.bytes));
    memcpy(r.ipc_handle, b.ipc_handle().data(), sizeof(r.ipc_handle));
    UniqueFd fd;  // a virtual-memory-managed allocation's descriptor
    if (b.fd() != 0) CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, b.fd(), &fd));
    if (Status st = device_.Register(r, fd.valid() ? fd.get() : -1); !st.ok()) {
      return InvalidArgument("%s: device buffer %llu: %s", who_.c_str(), static_cast<unsigned long long>(b.id()),
                             st.message().c_str());
    }
  }
  for (const upgrade::v1::DeviceSpan& span : s.device_spans()) {
    shimproto::DeviceUuid uuid{};
    if (span.device_uuid().size() != sizeof(uuid.bytes)) {
      return InvalidArgument("%s: device span %llu: malformed", who_.c_str(), static_cast<unsigned long long>(span.id()));
    }
    memcpy(uuid.bytes, span.device_uuid().data(), sizeof(uuid.bytes));
    const std::vector<uint64_t> pages(span.pages().begin(), span.pages().end());
    if (Status st = device_.RegisterSpan(span.id(), uuid, pages); !st.ok()) {
      return InvalidArgument("%s: device span %llu: %s", who_.c_str(), static_cast<unsigned long long>(span.id()),
                             st.message().c_str());
    }
  }
  if (s.async_error_result() != 0) {
    const int32_t r = s.async_error_result();
    const ncclResult_t code = r > 0 && r <= ncclInProgress ? static_cast<ncclResult_t>(r) : ncclSystemError;
    proxy_.RestoreError(Status(code, s.async_error_message()));
  }
  if (s.comm_key() != 0) {
    comm_ = registry_->TakeHandedOver(s.comm_key(), s.rank());
    if (!comm_) {
      return InvalidArgument("%s: rank %d of communicator %s, which was not handed over (or is taken already)",
                             who_.c_str(), s.rank(), CommKeyShort(s.comm_key()).c_str());
    }
    rank_ = s.rank();
  }
  hello_done_ = s.hello_done();
  return Status::Ok();
}

Status CollectiveService::ExportShared(HandedShared* out) {
  std::vector<HandedComm> comms;
  CONDUIT_RETURN_IF_ERROR(registry_->ExportForHandover(Deadline::AfterMs(kQuiesceMs), &comms));
  upgrade::v1::CollectivesState state;
  for (HandedComm& c : comms) Encode(c, state.add_communicators(), &out->fds);
  if (!comms.empty()) out->state = state.SerializeAsString();
  return Status::Ok();
}

Status CollectiveService::AdoptShared(HandedShared in) {
  upgrade::v1::CollectivesState state;
  if (!state.ParseFromString(in.state)) return InvalidArgument("the collectives state does not parse");
  std::vector<HandedComm> comms;
  for (const upgrade::v1::Communicator& c : state.communicators()) {
    HandedComm handed;
    if (Status bad = Decode(c, &in.fds, &handed); !bad.ok()) {
      return InvalidArgument("handed-over communicator %s: %s", CommKeyShort(c.key()).c_str(), bad.message().c_str());
    }
    comms.push_back(std::move(handed));
  }
  return registry_->AdoptHandedOver(std::move(comms));
}

void CollectiveService::StartShared() { registry_->StartHandedOver(); }

}  // namespace conduit
