// Pieces of the object service that need no daemon: its statuses' codes, consistent
// hashing, the reduce tree (shape, fill order, degree from eq. 2.1 of the Hoplite chapter)
// and a copy's memory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "objects/hash_ring.h"
#include "objects/local_store.h"
#include "objects/obj_status.h"
#include "objects/reduce_tree.h"

namespace conduit::objects {
namespace {

// Every object code made into a Status reaches libhoplite as itself, over a peer too, even
// where two share a canonical code; a status from the shared helpers gets the nearest.
TEST(ObjectStatus, EveryCodeCrossesTheEdgeAsItselfAndDecisionsGoOnCanonicalCodes) {
  for (int32_t c = objproto::kOk; c <= objproto::kLastCode; ++c) {
    const Code code = static_cast<Code>(c);
    Status st = Err(code, "code %d", c);
    EXPECT_EQ(st.ok(), code == objproto::kOk);
    EXPECT_EQ(st.canonical(), CanonicalOf(code)) << CodeName(code);
    EXPECT_EQ(ObjectCodeOf(st), code) << CodeName(code);
    const objproto::Status wire = ToObjectWire(st);
    EXPECT_EQ(wire.code, c);
    Status back = FromObjectWire(wire);
    EXPECT_EQ(ObjectCodeOf(back), code) << CodeName(code);
    EXPECT_EQ(back.canonical(), st.canonical());
    if (code != objproto::kOk) {
      EXPECT_EQ(back.message(), st.message());
    }
  }
  EXPECT_TRUE(IsResourceExhausted(Err(objproto::kOverQuota, "uid 7")));
  EXPECT_TRUE(IsResourceExhausted(Err(objproto::kOutOfMemory, "full")));
  EXPECT_TRUE(IsAborted(Err(objproto::kRetry, "moved")));
  EXPECT_TRUE(IsDataLoss(Err(objproto::kLost, "gone")));
  EXPECT_EQ(ObjectCodeOf(EndOfStream("hung up")), objproto::kUnavailable);
  EXPECT_EQ(ObjectCodeOf(InternalError("bug")), objproto::kInternal);
  EXPECT_EQ(ObjectCodeOf(FromConduit(SystemError("read"), objproto::kLost)), objproto::kLost);
  objproto::Status unknown{};
  unknown.code = objproto::kLastCode + 1;
  EXPECT_EQ(ObjectCodeOf(FromObjectWire(unknown)), objproto::kInternal);
}

TEST(HashRing, SpreadsIdsAndMovesFewWhenAMemberLeaves) {
  std::vector<std::string> members = {"10.0.0.1:7650", "10.0.0.2:7650", "10.0.0.3:7650", "10.0.0.4:7650"};
  HashRing ring(members);
  std::map<std::string, int> load;
  const int kIds = 20000;
  for (int i = 0; i < kIds; ++i) ++load[ring.Owner("obj-" + std::to_string(i))];
  for (const auto& m : members) {
    EXPECT_GT(load[m], kIds / 4 * 0.6) << m;
    EXPECT_LT(load[m], kIds / 4 * 1.4) << m;
  }
  // Without member 2, only its ids move, and they spread over the others.
  HashRing smaller({members[0], members[1], members[3]});
  int moved = 0;
  for (int i = 0; i < kIds; ++i) {
    std::string id = "obj-" + std::to_string(i);
    if (ring.Owner(id) != smaller.Owner(id)) {
      ++moved;
      EXPECT_EQ(ring.Owner(id), members[2]);
    }
  }
  EXPECT_EQ(moved, load[members[2]]);
  EXPECT_EQ(HashRing({}).Owner("x"), "");
  EXPECT_EQ(HashRing({"a:1"}).Owner("x"), "a:1");
}

TEST(ReduceTree, BinaryTreeOfSixFillsInOrder) {
  // The paper's Figure 2.5a: 6 objects, degree 2; arrivals fill the in-order traversal.
  ReduceTree t = BuildReduceTree(6, 2);
  EXPECT_EQ(t.parent, (std::vector<int>{-1, 0, 0, 1, 1, 2}));
  EXPECT_EQ(t.fill_order, (std::vector<int>{3, 1, 4, 0, 5, 2}));
}

TEST(ReduceTree, ChainFillsFromTheDeepestSlot) {
  ReduceTree t = BuildReduceTree(4, 1);
  EXPECT_EQ(t.parent, (std::vector<int>{-1, 0, 1, 2}));
  EXPECT_EQ(t.fill_order, (std::vector<int>{3, 2, 1, 0}));
  ReduceTree star = BuildReduceTree(4, 4);
  EXPECT_EQ(star.fill_order, (std::vector<int>{1, 0, 2, 3}));
  std::set<int> all(star.fill_order.begin(), star.fill_order.end());
  EXPECT_EQ(all.size(), 4u);
}

TEST(ReduceTree, DegreeFollowsEquation21) {
  const double B = 125e6;  // 1 Gbit/s
  const double L = 200e-6;
  // Large objects: bandwidth dominates, a pipelined chain (d = 1) wins.
  EXPECT_EQ(ChooseReduceDegree(8, 64e6, B, L), 1);
  // Tiny objects: latency dominates, every object straight to the root (d = n).
  EXPECT_EQ(ChooseReduceDegree(8, 8, B, L), 8);
  // In between, the formula's minimum.
  const int n = 16;
  const double S = 20e3;
  int d = ChooseReduceDegree(n, S, B, L);
  for (int k = 1; k <= n; ++k) EXPECT_LE(ReduceTreeTime(n, d, S, B, L), ReduceTreeTime(n, k, S, B, L)) << k;
  EXPECT_GT(d, 1);
  EXPECT_LT(d, n);
  EXPECT_DOUBLE_EQ(ReduceTreeTime(4, 1, 1e6, 1e6, 0.5), 4 * 0.5 + 1.0);
  EXPECT_DOUBLE_EQ(ReduceTreeTime(4, 2, 1e6, 1e6, 0.5), 0.5 * 2 + 2.0);
  EXPECT_EQ(ChooseReduceDegree(1, 1e9, B, L), 1);
}

// Pages of [offset, offset + len) of a mapping that are in memory (mincore).
size_t ResidentPages(const uint8_t* base, size_t offset, size_t len) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in(len / page);
  EXPECT_EQ(mincore(const_cast<uint8_t*>(base) + offset, len, in.data()), 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

// A fetched copy's pages are made by PrepareWrite, the range asked for and no more, before
// any byte is written (one call instead of a fault per page); a Put's copy, which its
// creator writes, is left alone.
TEST(LocalObject, PrepareWriteMakesExactlyTheRangesPages) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* probe = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  const bool supported = madvise(probe, page, 23 /* MADV_POPULATE_WRITE */) == 0;
  munmap(probe, page);
  if (!supported) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux < 5.14): faults make the pages";
  const size_t size = 64 * page;
  LocalObject fetched("prepared", size, CopyInfo{});
  ASSERT_TRUE(fetched.Allocate(/*shared_memory=*/true).ok());
  ASSERT_TRUE(fetched.has_fd());
  EXPECT_EQ(ResidentPages(fetched.data(), 0, size), 0u) << "a new memfd has no pages yet";
  fetched.PrepareWrite(8 * page + 1, 4 * page);  // an unaligned start covers its page too
  EXPECT_EQ(ResidentPages(fetched.data(), 0, 8 * page), 0u);
  EXPECT_EQ(ResidentPages(fetched.data(), 8 * page, 5 * page), 5u);
  EXPECT_EQ(ResidentPages(fetched.data(), 13 * page, size - 13 * page), 0u);
  fetched.PrepareWrite(60 * page, 100 * page);  // clipped at the end of the object
  EXPECT_EQ(ResidentPages(fetched.data(), 60 * page, 4 * page), 4u);
  fetched.PrepareWrite(size, page);  // nothing past it
  EXPECT_EQ(fetched.data()[8 * page + 1], 0) << "prepared pages read as zeros";

  CopyInfo put;
  put.creator_writes = true;
  LocalObject created("created", size, put);
  ASSERT_TRUE(created.Allocate(/*shared_memory=*/true).ok());
  created.PrepareWrite(0, size);
  EXPECT_EQ(ResidentPages(created.data(), 0, size), 0u) << "the daemon maps a Put read-only and never writes it";
}

// Readers waiting for different amounts of one copy each wake once theirs is there (the
// writer wakes nobody for blocks no one waits for yet), and a failure wakes them all.
TEST(LocalObject, EachWaiterWakesWhenItsBytesAreReady) {
  LocalObject obj("waited", 1 << 20, CopyInfo{});
  ASSERT_TRUE(obj.Allocate(/*shared_memory=*/true).ok());
  std::atomic<uint64_t> small_got{0}, whole_got{0};
  std::atomic<bool> small_done{false}, whole_done{false};
  std::thread small([&] {
    uint64_t r = 0;
    EXPECT_TRUE(obj.WaitReady(64 << 10, Deadline::AfterMs(10000), &r).ok());
    small_got = r;
    small_done = true;
  });
  std::thread whole([&] {
    uint64_t r = 0;
    EXPECT_TRUE(obj.WaitReady(1 << 20, Deadline::AfterMs(10000), &r).ok());
    whole_got = r;
    whole_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // both asleep in WaitReady
  obj.SetReady(32 << 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(small_done) << "32 KiB of the 64 KiB it waits for";
  obj.SetReady(128 << 10);
  small.join();
  EXPECT_EQ(small_got, 128u << 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(whole_done);
  obj.SetReady(512 << 10);
  obj.SetReady(256 << 10);  // ready never goes back
  EXPECT_EQ(obj.ready(), 512u << 10);
  obj.MarkComplete();
  whole.join();
  EXPECT_EQ(whole_got, 1u << 20);

  LocalObject lost("lost", 1 << 20, CopyInfo{});
  ASSERT_TRUE(lost.Allocate(/*shared_memory=*/true).ok());
  Status why;
  std::thread waiter([&] {
    uint64_t r = 0;
    why = lost.WaitReady(1 << 20, Deadline::AfterMs(10000), &r);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  lost.SetReady(4096);
  lost.Fail(Err(objproto::kLost, "its source died"));
  waiter.join();
  EXPECT_EQ(why.message(), "its source died");
  uint64_t r = 0;
  EXPECT_FALSE(lost.WaitReady(1, Deadline::AfterMs(10), &r).ok()) << "a failed copy answers at once";
}

ino_t Inode(const LocalObject& obj) {
  struct stat st {};
  EXPECT_EQ(fstat(obj.fd(), &st), 0);
  return st.st_ino;
}

// A reduce's partial result reuses the memfd of an earlier one of the same size (its pages
// already made) once that copy is gone; copies programs can see never are, and a
// different size gets a new memfd.
TEST(LocalStore, PartialResultsReuseTheMemfdOfAnEarlierOne) {
  LocalStore store(64 << 20, 64 << 10);
  CopyInfo partial;
  partial.internal = true;
  ObjectRef first;
  ASSERT_TRUE(store.Create("\x01r/1", 1 << 20, partial, &first).ok());
  ASSERT_TRUE(first->has_fd());
  const ino_t ino = Inode(*first);
  memset(first->data(), 7, first->size());
  first->MarkComplete();
  store.Remove("\x01r/1", Status::Ok());
  EXPECT_EQ(store.spare_bytes(), 0u) << "still referenced: nothing is reused yet";
  first.reset();
  EXPECT_EQ(store.spare_bytes(), 1u << 20);
  EXPECT_EQ(store.used(), 0u);

  ObjectRef other_size;
  ASSERT_TRUE(store.Create("\x01r/2", 2 << 20, partial, &other_size).ok());
  EXPECT_NE(Inode(*other_size), ino);
  ObjectRef fetched;  // a copy programs may map: never from the spares
  ASSERT_TRUE(store.Create("fetched", 1 << 20, CopyInfo{}, &fetched).ok());
  EXPECT_NE(Inode(*fetched), ino);
  ObjectRef second;
  ASSERT_TRUE(store.Create("\x01r/3", 1 << 20, partial, &second).ok());
  EXPECT_EQ(Inode(*second), ino) << "the spare memfd of the same size was taken";
  EXPECT_EQ(store.spare_bytes(), 0u);
  memset(second->data(), 9, second->size());  // still writable through the daemon's mapping
  second->MarkComplete();
  EXPECT_TRUE(second->complete());
  EXPECT_EQ(second->data()[12345], 9);
}

objproto::Owner OwnerOf(uint32_t uid, uint32_t access) { return objproto::Owner{uid, uid, access, 0}; }

// A copy programs could read (fetched, or a reduce's result) goes back to the spare memory
// only once no program holds its file: not while a descriptor or a mapping of it is left,
// nor after a live upgrade handed it over. It is reused only for a copy of the same owner
// and access, never for a partial result, and a partial result's memfd never for it.
TEST(LocalStore, ReadableCopiesAreReusedOnlyWhenNobodyHoldsThem) {
  LocalStore store(64 << 20, 64 << 10);
  const uint64_t size = 1 << 20;
  CopyInfo mine;
  mine.owner = OwnerOf(1000, objproto::kAccessOwner);
  auto make = [&](const std::string& id, const CopyInfo& info, ObjectRef* out) {
    ASSERT_TRUE(store.Create(id, size, info, out).ok()) << id;
    ASSERT_TRUE((*out)->has_fd());
  };
  auto drop = [&](ObjectRef& obj) {
    store.Remove(obj->id(), Status::Ok());
    obj.reset();
  };
  auto fill = [&](ObjectRef& obj, uint8_t v) {
    obj->PrepareWrite(0, size);
    memset(obj->data(), v, size);
    obj->MarkComplete();
    ASSERT_TRUE(obj->complete());
  };

  ObjectRef held;  // a program still has a descriptor
  make("held", mine, &held);
  fill(held, 1);
  UniqueFd program_fd;
  ASSERT_TRUE(held->ReadOnlyFd(&program_fd).ok());
  drop(held);
  EXPECT_EQ(store.spare_bytes(), 0u) << "a program holds a descriptor";
  program_fd.reset();

  ObjectRef mapped;  // a program closed its descriptor but still maps the copy
  make("mapped", mine, &mapped);
  fill(mapped, 2);
  UniqueFd fd;
  ASSERT_TRUE(mapped->ReadOnlyFd(&fd).ok());
  void* view = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(view, MAP_FAILED);
  fd.reset();
  drop(mapped);
  EXPECT_EQ(store.spare_bytes(), 0u) << "a program maps it";
  EXPECT_EQ(static_cast<uint8_t*>(view)[size - 1], 2) << "its view still shows its object";
  munmap(view, size);

  ObjectRef handed;  // given to the next daemon process by a live upgrade
  make("handed", mine, &handed);
  fill(handed, 3);
  handed->HandOver();
  drop(handed);
  EXPECT_EQ(store.spare_bytes(), 0u) << "handed over";

  ObjectRef released;  // mapped, unmapped, closed: nobody holds it any more
  make("released", mine, &released);
  fill(released, 4);
  const ino_t ino = Inode(*released);
  ASSERT_TRUE(released->ReadOnlyFd(&fd).ok());
  view = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(view, MAP_FAILED);
  munmap(view, size);
  fd.reset();
  drop(released);
  EXPECT_EQ(store.spare_bytes(), size);

  ObjectRef others;  // same size, another owner: new memory
  CopyInfo theirs;
  theirs.owner = OwnerOf(1001, objproto::kAccessOwner);
  make("others", theirs, &others);
  EXPECT_NE(Inode(*others), ino);
  ObjectRef wider;  // same owner, readable by more: new memory
  CopyInfo world = mine;
  world.owner.access = objproto::kAccessWorld;
  make("wider", world, &wider);
  EXPECT_NE(Inode(*wider), ino);
  ObjectRef partial;
  CopyInfo internal;
  internal.internal = true;
  make("\x01r/1", internal, &partial);
  EXPECT_NE(Inode(*partial), ino) << "a partial result never takes memory programs have seen";
  ObjectRef put;  // a Put's memfd is its creator's: never from the spares
  CopyInfo creator = mine;
  creator.creator_writes = true;
  creator.pinned = true;
  make("put", creator, &put);
  EXPECT_NE(Inode(*put), ino);

  ObjectRef again;
  make("again", mine, &again);
  EXPECT_EQ(Inode(*again), ino) << "the same owner's next copy of this size reuses the memfd";
  EXPECT_EQ(store.spare_bytes(), 0u);
  EXPECT_EQ(store.spare_reused(), 1u);
  fill(again, 5);  // writable through the daemon's mapping; sealing it again is no error
  ASSERT_TRUE(again->ReadOnlyFd(&fd).ok());
  view = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(static_cast<uint8_t*>(view)[0], 5);
  EXPECT_EQ(static_cast<uint8_t*>(view)[size - 1], 5);
  EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0), MAP_FAILED)
      << "still read-only for programs";
  munmap(view, size);
  const int seals = fcntl(again->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW);
  // A partial result's memfd, freed, is not taken by a readable copy either.
  drop(partial);
  EXPECT_EQ(store.spare_bytes(), size);
  ObjectRef after;
  make("after", mine, &after);
  EXPECT_EQ(store.spare_bytes(), size) << "the partial result's memfd stays for partial results";
}

// Spare memory counts against the store's limit and goes before any copy is evicted.
TEST(LocalStore, SpareMemoryIsGivenUpWhenTheStoreNeedsIt) {
  LocalStore store(16 << 20, 64 << 10);  // spares: at most 2 MiB
  CopyInfo partial;
  partial.internal = true;
  {
    std::vector<ObjectRef> held(3);
    const char* ids[] = {"\x01a", "\x01b", "\x01c"};
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store.Create(ids[i], 1 << 20, partial, &held[i]).ok());
    for (int i = 0; i < 3; ++i) store.Remove(ids[i], Status::Ok());
  }
  EXPECT_EQ(store.spare_bytes(), 2u << 20) << "the third went back to the kernel (cap)";
  CopyInfo pinned;
  pinned.pinned = true;
  ObjectRef big;
  ASSERT_TRUE(store.Create("big", 15 << 20, pinned, &big).ok()) << "the spares must make room";
  EXPECT_EQ(store.spare_bytes(), 0u);
  EXPECT_EQ(store.used(), 15u << 20);
}

// Copies a shard hands over (DirStoreCopy) take at most a 16th of the store, never evict
// anything to fit, and are evicted without asking the directory (the shard has the bytes).
TEST(LocalStore, CopiesFromShardsStayInTheirShareAndAreEvictedWithoutAsking) {
  LocalStore store(64 << 10, 64 << 10);  // every copy on the heap; 4 KiB for shards' copies
  std::vector<std::string> asked, evicted;
  store.SetEvictionHooks([&](const std::string& id) { asked.push_back(id); return true; },
                         [&](const std::string& id) { evicted.push_back(id); });
  CopyInfo from_shard;
  from_shard.from_shard = true;
  ObjectRef a, b, c;
  ASSERT_TRUE(store.Create("a", 2048, from_shard, &a).ok());
  ASSERT_TRUE(store.Create("b", 2048, from_shard, &b).ok());
  Status full = store.Create("c", 1, from_shard, &c);
  EXPECT_EQ(ObjectCodeOf(full), objproto::kOutOfMemory) << full.message();
  a->MarkComplete();
  b->MarkComplete();
  a.reset();
  b.reset();
  // A cached copy fills the rest; a shard's copy does not evict it, even with room in its share.
  CopyInfo cached;
  ObjectRef big;
  store.Remove("b", Status::Ok());
  ASSERT_TRUE(store.Create("cached", (62 << 10) - 2048 + 1, cached, &big).ok());  // 2047 bytes left
  big->MarkComplete();
  big.reset();
  full = store.Create("c", 4096 - 2048, from_shard, &c);
  EXPECT_EQ(ObjectCodeOf(full), objproto::kOutOfMemory) << full.message();
  EXPECT_TRUE(evicted.empty());
  // Room for a program's copy: the shard's copy ("a", least recently used) goes first,
  // without a question to the directory; then the cached copy, after one.
  ObjectRef mine;
  ASSERT_TRUE(store.Create("mine", 4096, cached, &mine).ok());
  EXPECT_EQ(evicted, std::vector<std::string>({"a", "cached"}));
  EXPECT_EQ(asked, std::vector<std::string>({"cached"}));
  // The share is free again.
  store.Remove("mine", Status::Ok());
  EXPECT_TRUE(store.Create("c", 4096, from_shard, &c).ok());
}

}  // namespace
}  // namespace conduit::objects
