#include "admin_call.h"

#include <thread>

#include "admin_client.h"

namespace conduit::it {

AdminAnswer AdminCall(const Cluster& cluster, int host, const std::string& method, const std::string& target,
                      const std::string& body) {
  AdminClient client(cluster.AdminSocket(host), 30000);
  HttpResponse resp;
  AdminAnswer a;
  if (!client.Call(method, target, body, &resp).ok()) return a;
  a.status = resp.status;
  a.text = resp.body;
  if (!Json::Parse(resp.body, &a.body).ok()) a.body = Json();
  return a;
}

Json WaitForComm(const Cluster& cluster, int host, const std::function<bool(const Json& comm)>& match,
                 std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    AdminAnswer a = AdminCall(cluster, host, "GET", "/v1/communicators");
    const Json* list = a.body.is_object() ? a.body.find("communicators") : nullptr;
    if (list != nullptr) {
      for (const Json& c : list->items()) {
        const Json* ready = c.find("ready");
        if (ready != nullptr && ready->is_bool() && ready->as_bool() && match(c)) return c;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Json();
}

int CollectivePath(const Json& comm, int peer) {
  const Json* links = comm.is_object() ? comm.find("links") : nullptr;
  if (links == nullptr) return -2;
  for (const Json& l : links->items()) {
    const Json* host = l.find("host");
    const Json* channel = l.find("channel");
    if (host && channel && host->as_int() == peer && channel->as_string() == "collective") {
      return static_cast<int>(l.find("path")->as_int());
    }
  }
  return -2;
}

const Json& Field(const Json& body, std::string_view key) {
  static const Json kNull;
  const Json* member = body.is_object() ? body.find(key) : nullptr;
  return member != nullptr ? *member : kNull;
}

uint64_t Counter(const Json& body, std::string_view key) {
  const Json& v = Field(body, key);
  return v.is_number() ? static_cast<uint64_t>(v.as_int()) : UINT64_MAX;
}

std::vector<int64_t> Ints(const Json* array) {
  std::vector<int64_t> out;
  if (array == nullptr || !array->is_array()) return out;
  for (const Json& v : array->items()) out.push_back(v.as_int());
  return out;
}

}  // namespace conduit::it
