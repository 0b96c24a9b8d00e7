// DeviceSession: one program connection's device buffers (shim protocol, "Device
// buffers"): the allocations it registered, mapped through the daemon-wide cache, and the
// ready event its shim records on the program's stream.
#ifndef CONDUIT_DAEMON_SESSION_DEVICE_SESSION_H_
#define CONDUIT_DAEMON_SESSION_DEVICE_SESSION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "common/status.h"
#include "gpu/ipc_memory.h"
#include "protocol/shim_protocol.h"

namespace conduit {

class DeviceSession {
 public:
  explicit DeviceSession(int pid) : pid_(pid) {}
  ~DeviceSession();
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;

  // The DeviceInfo reply: whether this daemon serves device buffers, and its GPUs.
  static std::vector<uint8_t> InfoReply();

  // `fd`: a virtual-memory-managed allocation's descriptor (kRegisterVmmBuffer, borrowed),
  // or -1 for one shared by its IPC handle.
  Status Register(const shimproto::RegisterBufferRequest& request, int fd = -1);
  // RegisterSpan: `pages` (ids of this connection's virtual-memory registrations on
  // `device`, in the program's address order) mapped back to back as buffer `span_id`.
  // The same span again is accepted; a span id in use for other pages is refused.
  Status RegisterSpan(uint64_t span_id, const shimproto::DeviceUuid& device, const std::vector<uint64_t>& pages);
  // A buffer or a span. Releasing a page releases the spans it is part of.
  Status Release(uint64_t buffer_id);
  // Whether the program's interprocess event was opened (the event-ordered path): its
  // stream may still have to wait on this process's done event, so a live upgrade waits.
  bool holds_event() const { return ready_ != nullptr; }
  // For a live upgrade: every registration as the program sent it. The new process
  // Registers them again (mapping the program's memory anew). `fd` is this process's
  // descriptor of a virtual-memory-managed allocation (valid while the session lives), -1
  // for one shared by its IPC handle.
  struct Registration {
    shimproto::RegisterBufferRequest request;
    int fd = -1;
  };
  std::vector<Registration> Registrations() const;
  // For a live upgrade, after Registrations: every span as the program registered it (the
  // new process calls RegisterSpan again once the pages are registered).
  struct SpanRegistration {
    uint64_t id = 0;
    shimproto::DeviceUuid device{};
    std::vector<uint64_t> pages;
  };
  std::vector<SpanRegistration> Spans() const;

  // Resolves a device group of `rank` of a communicator of `nranks`: each kOpDevice op's buffers,
  // checked against the registered sizes, and the program's ready event (opened once and
  // reused while the program keeps recording the same one). *event_unusable is set when the
  // error is that CUDA will not open that event here (the program then stages instead).
  Status Resolve(const shimproto::DeviceGroupHeader& header, const std::vector<shimproto::OpDesc>& ops,
                 const std::vector<shimproto::DeviceOpRef>& refs, int rank, int nranks,
                 std::vector<DeviceOpBuffers>* out, cuda::CUevent* ready, bool* event_unusable);

  // Where an asynchronous group's words are (shimproto::DeviceAsyncHeader), as mapped here.
  struct AsyncWords {
    uint64_t ready = 0;  // address of the ready word; the done word follows it
    uint64_t done = 0;
    uint32_t seq = 0;
    int device = -1;  // the GPU of the program's stream, as this daemon numbers it
    std::shared_ptr<const gpu::DeviceMapping> keep;
  };
  // Resolve for an asynchronous group: every op must be a device op.
  Status ResolveAsync(const shimproto::DeviceAsyncHeader& header, const std::vector<shimproto::OpDesc>& ops,
                      const std::vector<shimproto::DeviceOpRef>& refs, int rank, int nranks,
                      std::vector<DeviceOpBuffers>* out, AsyncWords* words);

 private:
  // Each kOpDevice op's buffers, on `stream_device`.
  Status ResolveBuffers(int stream_device, const std::vector<shimproto::OpDesc>& ops,
                        const std::vector<shimproto::DeviceOpRef>& refs, int rank, int nranks,
                        std::vector<DeviceOpBuffers>* out) const;
  // The mapping of `id` if it covers [offset, offset + bytes).
  Status Find(uint64_t id, uint64_t offset, uint64_t bytes, const char* what,
              std::shared_ptr<const gpu::DeviceMapping>* out) const;

  // Every registration (a span too) holds a mapping of the program's memory here (and a virtual-memory
  // one a file descriptor): a program cannot make the daemon hold more than this many per
  // connection. PyTorch's expandable segments map 20 MiB pages: 16384 of them are 320 GiB.
  static constexpr size_t kMaxBuffers = 16384;
  // A span maps each of its pages again: the pages of all of a connection's spans together
  // are capped the same way (a program could otherwise name 4096 pages in each of 16384
  // spans).
  static constexpr size_t kMaxSpannedPages = 16384;

  const int pid_;
  std::map<uint64_t, std::shared_ptr<const gpu::DeviceMapping>> buffers_;  // pages and spans
  std::map<uint64_t, std::vector<uint64_t>> spans_;  // span id -> its pages' ids
  size_t span_pages_ = 0;  // the pages of spans_, counted with repeats
  uint8_t ready_handle_[shimproto::kIpcHandleBytes] = {};
  cuda::CUevent ready_ = nullptr;
  bool event_refusal_logged_ = false;  // one warning per connection
  int ready_device_ = -1;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_DEVICE_SESSION_H_
