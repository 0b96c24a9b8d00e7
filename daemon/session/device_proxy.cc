#include "session/device_proxy.h"

#include <system_error>
#include <utility>

#include "common/thread_guard.h"

namespace conduit {

DeviceProxy::~DeviceProxy() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

Status DeviceProxy::Push(Job job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return InvalidUsage("the connection is closing");
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { Loop(); });
    } catch (const std::system_error& e) {
      return SystemError("cannot start the thread for asynchronous device groups: %s", e.what());
    }
  }
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return Status::Ok();
}

void DeviceProxy::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !running_job_; });
}

void DeviceProxy::Stop() {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
    cv_.notify_all();
  }
  for (Job& job : dropped) {
    RunGuarded("letting an asynchronous device group go", [&] { (void)job(false); });
  }
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

Status DeviceProxy::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void DeviceProxy::RestoreError(const Status& error) {
  std::lock_guard<std::mutex> lock(mu_);
  Note(error);
}

bool DeviceProxy::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_job_ || !queue_.empty();
}

void DeviceProxy::Note(const Status& st) {
  if (!st.ok() && error_.ok()) error_ = st;
}

void DeviceProxy::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    running_job_ = true;
    lock.unlock();
    Status st = InternalError("an asynchronous device group stopped on an unexpected error");
    RunGuarded("an asynchronous device group", [&] { st = job(true); });
    lock.lock();
    running_job_ = false;
    Note(st);
    cv_.notify_all();
  }
}

}  // namespace conduit
