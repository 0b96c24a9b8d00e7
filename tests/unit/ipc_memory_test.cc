// IpcMemoryCache's bookkeeping: one mapping per (program, buffer id) however many
// connections register it, closed when the last user lets go, refused when an id comes
// back with a different handle. The open/close functions here stand in for
// cuIpcOpenMemHandle/cuIpcCloseMemHandle, which need a GPU; they record what was asked.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "gpu/ipc_memory.h"

namespace conduit::gpu {
namespace {

struct Driver {
  std::mutex mu;
  int opens = 0;
  std::vector<uint64_t> closed;  // bases
  bool fail_next = false;
  uint64_t next_base = 0x100000;
};

IpcMemoryCache MakeCache(Driver* d) {
  return IpcMemoryCache(
      [d](const shimproto::RegisterBufferRequest& req, int fd, int, DeviceMapping* out) -> Status {
        std::lock_guard<std::mutex> lock(d->mu);
        if (d->fail_next) {
          d->fail_next = false;
          return Status(ncclUnhandledCudaError, "cuIpcOpenMemHandle: CUDA_ERROR_INVALID_VALUE");
        }
        ++d->opens;
        out->base = d->next_base;
        out->fd = fd;  // the runtime keeps a duplicate; here the caller's number stands in
        d->next_base += req.size;
        return Status::Ok();
      },
      [d](const DeviceMapping& m) {
        std::lock_guard<std::mutex> lock(d->mu);
        d->closed.push_back(m.base);
      });
}

shimproto::RegisterBufferRequest Request(uint64_t id, uint64_t size, uint8_t tag) {
  shimproto::RegisterBufferRequest r{};
  r.buffer_id = id;
  r.size = size;
  r.ipc_handle[0] = tag;
  return r;
}

TEST(IpcMemoryCacheTest, SharedAcrossConnectionsClosedByLastUser) {
  Driver d;
  IpcMemoryCache cache = MakeCache(&d);
  std::shared_ptr<const DeviceMapping> a, b;
  ASSERT_TRUE(cache.Acquire(42, Request(7, 4096, 1), -1, 0, &a).ok());
  ASSERT_TRUE(cache.Acquire(42, Request(7, 4096, 1), -1, 0, &b).ok());
  EXPECT_EQ(d.opens, 1);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a->size, 4096u);
  EXPECT_EQ(cache.open_count(), 1u);
  a.reset();
  EXPECT_TRUE(d.closed.empty());
  const uint64_t base = b->base;
  b.reset();
  ASSERT_EQ(d.closed.size(), 1u);
  EXPECT_EQ(d.closed[0], base);
  EXPECT_EQ(cache.open_count(), 0u);
  // Registered again after being closed: opened afresh.
  ASSERT_TRUE(cache.Acquire(42, Request(7, 4096, 1), -1, 0, &a).ok());
  EXPECT_EQ(d.opens, 2);
}

TEST(IpcMemoryCacheTest, ProgramsAndIdsAreSeparate) {
  Driver d;
  IpcMemoryCache cache = MakeCache(&d);
  std::shared_ptr<const DeviceMapping> a, b, c;
  ASSERT_TRUE(cache.Acquire(1, Request(7, 100, 1), -1, 0, &a).ok());
  ASSERT_TRUE(cache.Acquire(2, Request(7, 100, 2), -1, 0, &b).ok());  // another program, same id
  ASSERT_TRUE(cache.Acquire(1, Request(8, 100, 3), -1, 0, &c).ok());  // same program, another allocation
  EXPECT_EQ(d.opens, 3);
  EXPECT_NE(a->base, b->base);
  EXPECT_NE(a->base, c->base);
  EXPECT_EQ(cache.open_count(), 3u);
}

TEST(IpcMemoryCacheTest, LiveIdWithAnotherHandleIsRefused) {
  Driver d;
  IpcMemoryCache cache = MakeCache(&d);
  std::shared_ptr<const DeviceMapping> a, b;
  ASSERT_TRUE(cache.Acquire(1, Request(7, 100, 1), -1, 0, &a).ok());
  Status st = cache.Acquire(1, Request(7, 100, 9), -1, 0, &b);
  EXPECT_EQ(st.code(), ncclInvalidArgument) << st.message();
  st = cache.Acquire(1, Request(7, 200, 1), -1, 0, &b);
  EXPECT_EQ(st.code(), ncclInvalidArgument) << st.message();
  st = cache.Acquire(1, Request(7, 100, 1), -1, 1, &b);  // another GPU
  EXPECT_EQ(st.code(), ncclInvalidArgument) << st.message();
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(d.opens, 1);
}

// A buffer id registered through its IPC handle cannot come back as a virtual-memory
// allocation's descriptor (or the other way round) while it is mapped.
TEST(IpcMemoryCacheTest, LiveIdOfAnotherKindIsRefused) {
  Driver d;
  IpcMemoryCache cache = MakeCache(&d);
  std::shared_ptr<const DeviceMapping> ipc, vmm, again;
  ASSERT_TRUE(cache.Acquire(1, Request(7, 100, 1), -1, 0, &ipc).ok());
  Status st = cache.Acquire(1, Request(7, 100, 1), 5, 0, &vmm);
  EXPECT_EQ(st.code(), ncclInvalidArgument) << st.message();
  ASSERT_TRUE(cache.Acquire(1, Request(8, 100, 0), 5, 0, &vmm).ok());
  EXPECT_EQ(vmm->fd, 5);
  st = cache.Acquire(1, Request(8, 100, 0), -1, 0, &again);
  EXPECT_EQ(st.code(), ncclInvalidArgument) << st.message();
  ASSERT_TRUE(cache.Acquire(1, Request(8, 100, 0), 6, 0, &again).ok());  // the same allocation, sent again
  EXPECT_EQ(again.get(), vmm.get());
  EXPECT_EQ(d.opens, 2);
}

TEST(IpcMemoryCacheTest, OpenFailureIsReportedAndNotCached) {
  Driver d;
  IpcMemoryCache cache = MakeCache(&d);
  d.fail_next = true;
  std::shared_ptr<const DeviceMapping> a;
  Status st = cache.Acquire(1, Request(7, 100, 1), -1, 0, &a);
  EXPECT_EQ(st.code(), ncclUnhandledCudaError);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(cache.open_count(), 0u);
  ASSERT_TRUE(cache.Acquire(1, Request(7, 100, 1), -1, 0, &a).ok());
  EXPECT_EQ(d.opens, 1);
}

TEST(IpcMemoryCacheTest, ConcurrentUsersBalanceOpensAndCloses) {
  Driver d;
  IpcMemoryCache cache = MakeCache(&d);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::shared_ptr<const DeviceMapping> m;
        ASSERT_TRUE(cache.Acquire(5, Request(1 + i % 3, 64, 1), -1, 0, &m).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  // Every mapping was closed as often as it was opened, and none is left open.
  EXPECT_EQ(static_cast<size_t>(d.opens), d.closed.size());
  EXPECT_EQ(cache.open_count(), 0u);
}

}  // namespace
}  // namespace conduit::gpu
