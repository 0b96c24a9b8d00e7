// DeviceProxy: one program connection's asynchronous device groups (shimproto::kGroupAsync),
// run in order on a thread of their own after the session has told the program it accepted
// them (MCCS's per-communicator proxy). The session thread goes on serving the connection;
// the program's call returns at once and its stream waits for the group's done word.
#ifndef CONDUIT_DAEMON_SESSION_DEVICE_PROXY_H_
#define CONDUIT_DAEMON_SESSION_DEVICE_PROXY_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace conduit {

class DeviceProxy {
 public:
  // Runs one group (run = true) or lets it go without running it (run = false: the proxy
  // stopped first); either way it must release the streams waiting on it. A failure
  // becomes the connection's asynchronous error.
  using Job = std::function<Status(bool run)>;

  DeviceProxy() = default;
  ~DeviceProxy();  // Stop, then waits for the job under way
  DeviceProxy(const DeviceProxy&) = delete;
  DeviceProxy& operator=(const DeviceProxy&) = delete;

  // Queues `job` behind the ones before it. Fails (without calling it) when the proxy has
  // stopped or no thread can be started.
  Status Push(Job job);
  // Waits until every job queued so far has run.
  void Drain();
  // Jobs still queued are let go (run = false); later pushes fail.
  void Stop();
  // The first failure of a job on this connection, OK if none.
  Status error() const;
  // A live upgrade: the connection's asynchronous error as the old process had it.
  void RestoreError(const Status& error);
  bool busy() const;

 private:
  void Loop();
  void Note(const Status& st);  // caller holds mu_

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool running_job_ = false;
  bool stopping_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_DEVICE_PROXY_H_
