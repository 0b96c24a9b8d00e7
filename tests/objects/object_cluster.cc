#include "object_cluster.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/frame.h"
#include "protocol/object_protocol.h"
#include "protocol/shim_protocol.h"

namespace conduit::it {

std::vector<uint8_t> Pattern(size_t size, uint64_t seed) {
  std::vector<uint8_t> v(size);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 12345;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(&v[i], &x, 8);
  }
  for (; i < size; ++i) v[i] = static_cast<uint8_t>(x >> (8 * (i & 7)));
  return v;
}

uint64_t Fnv(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

long long JsonNumber(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return atoll(json.c_str() + at + key.size() + 3);
}

ObjectCluster::ObjectCluster(const std::string& prefix, const std::string& subnet, int hosts,
                             std::vector<std::string> extra_args, const std::string& rate,
                             const std::string& daemon_binary)
    : cluster_([&] {
        ClusterConfig c;
        c.prefix = prefix;
        c.subnet = subnet;
        c.hosts = hosts;
        c.timeout_ms = 10000;
        c.object_peers = true;
        c.daemon_args = std::move(extra_args);
        c.rate = rate;
        c.daemon_binary = daemon_binary;
        return c;
      }()) {}

bool ObjectCluster::Start(std::string* error) {
  if (!cluster_.Start(error)) return false;
  for (int h = 0; h < hosts(); ++h) {
    if (!WaitLive(h, hosts())) {
      *error = "daemon " + std::to_string(h) + " does not see all daemons: " + State(h);
      return false;
    }
  }
  return true;
}

std::unique_ptr<hoplite::Client> ObjectCluster::Connect(int host) {
  std::unique_ptr<hoplite::Client> c;
  hoplite::Status st = hoplite::Client::Connect(&c, cluster_.Socket(host));
  if (!st.ok()) return nullptr;
  return c;
}

std::string ObjectCluster::State(int host) {
  auto c = Connect(host);
  std::string json;
  if (c == nullptr || !c->State(&json).ok()) return "";
  return json;
}

bool ObjectCluster::WaitLive(int host, int live, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    // Both the live set and the hash ring built from it (directory shard owners).
    std::string s = State(host);
    auto count = [&](const std::string& key) {
      size_t at = s.find("\"" + key + "\":[");
      if (at == std::string::npos) return -1;
      size_t end = s.find(']', at);
      int n = 0;
      for (size_t i = at; i < end; ++i) n += s[i] == ':' && s[i - 1] != '"' ? 1 : 0;
      return n;
    };
    if (count("live") == live && count("ring") == live) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string ObjectCluster::DirectoryEntry(const std::string& id) {
  for (int h = 0; h < hosts(); ++h) {
    std::string s = State(h);
    size_t at = s.find("\"id\":\"" + id + "\",\"size\":", s.find("\"directory\""));
    if (at != std::string::npos) return s.substr(at, s.find("\"owner\":", at) - at);
  }
  return "";
}

long long ObjectCluster::ReadyOf(int host, const std::string& id) {
  // Local copies are listed as {"id":..,"size":..,"ready":..}; directory entries have no "ready".
  std::string s = State(host);
  size_t at = s.find("{\"id\":\"" + id + "\",\"size\":");
  while (at != std::string::npos) {
    size_t end = s.find('}', at);
    std::string entry = s.substr(at, end - at);
    if (entry.find("\"ready\":") != std::string::npos) return JsonNumber(entry, "ready");
    at = s.find("{\"id\":\"" + id + "\",\"size\":", end);
  }
  return -1;
}

long long ObjectCluster::ReduceJobNumber(int host, const std::string& target, const std::string& key) {
  std::string s = State(host);
  size_t at = s.find("{\"target\":\"" + target + "\"");
  if (at == std::string::npos) return -1;
  return JsonNumber(s.substr(at, s.find('}', at) - at), key);
}

bool WaitFor(const std::function<bool()>& done, int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

bool ObjectCluster::RestartDaemon(int host, std::string* error) {
  if (!cluster_.StartDaemon(host, error)) return false;
  for (int h = 0; h < hosts(); ++h) {
    if (cluster_.DaemonAlive(h) && !WaitLive(h, hosts())) {
      *error = "daemon " + std::to_string(h) + " does not see the restarted one";
      return false;
    }
  }
  return true;
}

bool RawPutter::Begin(const std::string& socket_path, const std::string& id, size_t size, std::string* error,
                      uint32_t access) {
  namespace op = objproto;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = "connect failed";
    return false;
  }
  auto call = [&](uint16_t type, const void* body, size_t len, uint16_t reply_type, Frame* reply) {
    Status st = WriteFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, type, 0, body,
                           static_cast<uint32_t>(len), Deadline::AfterMs(10000));
    if (st.ok()) {
      st = ReadFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, op::kMaxPayload, reply,
                     Deadline::AfterMs(20000), true);
    }
    if (!st.ok()) *error = st.message();
    if (st.ok() && reply->header.type != reply_type) *error = "unexpected reply type";
    op::Status ws{};
    if (st.ok() && reply->payload.size() >= sizeof(ws)) {
      memcpy(&ws, reply->payload.data(), sizeof(ws));
      if (ws.code != 0) *error = FromCString(ws.message);
    }
    return error->empty();
  };
  op::HelloRequest hello{};
  hello.pid = static_cast<uint32_t>(getpid());
  hello.version = op::kVersion;
  CopyCString(hello.exe, "raw-putter");
  Frame reply;
  error->clear();
  if (!call(op::kHello, &hello, sizeof(hello), op::kHelloReply, &reply)) return false;
  op::PutRequest put{};
  put.id.len = static_cast<uint8_t>(id.size());
  memcpy(put.id.bytes, id.data(), id.size());
  put.size = size;
  put.access = access;
  if (!call(op::kPut, &put, sizeof(put), op::kPutReply, &reply)) return false;
  if (!reply.fd.valid()) {
    *error = "no memfd with the Put reply";
    return false;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, reply.fd.get(), 0);
  if (p == MAP_FAILED) {
    *error = "mmap failed";
    return false;
  }
  map_ = static_cast<uint8_t*>(p);
  size_ = size;
  memfd_ = std::move(reply.fd);
  return true;
}

bool RawPutter::Write(const std::vector<uint8_t>& data, size_t from, size_t to) {
  memcpy(map_ + from, data.data() + from, to - from);
  if (to == size_ && !keep_mapping_) {
    munmap(map_, size_);
    map_ = nullptr;
  }
  objproto::Progress prog{to};
  return WriteFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, objproto::kPutProgress, 0, &prog, sizeof(prog),
                    Deadline::AfterMs(10000))
      .ok();
}

bool RawPutter::Finish(std::string* error) {
  Frame reply;
  Status st = ReadFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, objproto::kMaxPayload, &reply,
                        Deadline::AfterMs(20000));
  if (!st.ok()) {
    *error = st.message();
    return false;
  }
  objproto::Status ws{};
  memcpy(&ws, reply.payload.data(), sizeof(ws));
  if (reply.header.type != objproto::kPutDone || ws.code != 0) {
    *error = "Put not acknowledged: " + FromCString(ws.message);
    return false;
  }
  return true;
}

void RawPutter::Abandon() { fd_.reset(); }

RawPutter::~RawPutter() {
  if (map_ != nullptr) munmap(map_, size_);
}

}  // namespace conduit::it
