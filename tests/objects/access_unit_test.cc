// The object store's rules for local users, without daemons: who may read and delete
// (access.h), per-uid quotas (quota.h) and what the local store's memfds let a creator and
// a reader do (local_store.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "objects/access.h"
#include "objects/local_store.h"
#include "objects/quota.h"

namespace conduit::objects {
namespace {

namespace op = objproto;

Caller UserCaller(uint32_t uid, uint32_t gid, std::vector<uint32_t> groups = {}) {
  Caller c;
  c.uid = uid;
  c.gid = gid;
  c.groups = std::move(groups);
  return c;
}

op::Owner OwnedBy(uint32_t uid, uint32_t gid, uint32_t access) { return op::Owner{uid, gid, access, 0}; }

// What a Put creates: the pinned origin copy its creator writes.
CopyInfo PutBy(uint32_t uid, uint32_t gid, bool charge) {
  CopyInfo put;
  put.pinned = true;
  put.creator_writes = true;
  put.charge = charge;
  put.owner = OwnedBy(uid, gid, op::kAccessOwner);
  return put;
}

TEST(ObjectAccess, ReadFollowsTheCreatorsChoice) {
  const Caller owner = UserCaller(1000, 100);
  const Caller same_primary_group = UserCaller(1001, 100);
  const Caller supplementary_member = UserCaller(1002, 200, {300, 100});
  const Caller stranger = UserCaller(1003, 200, {300});
  Caller op = UserCaller(1004, 200);
  op.is_operator = true;
  const op::Owner only = OwnedBy(1000, 100, op::kAccessOwner);
  const op::Owner group = OwnedBy(1000, 100, op::kAccessGroup);
  const op::Owner world = OwnedBy(1000, 100, op::kAccessWorld);
  const op::Owner unknown = OwnedBy(1000, 100, op::kAccessDefault);

  EXPECT_TRUE(MayRead(owner, only));
  EXPECT_FALSE(MayRead(same_primary_group, only));
  EXPECT_FALSE(MayRead(stranger, only));
  EXPECT_TRUE(MayRead(op, only));

  EXPECT_TRUE(MayRead(owner, group));
  EXPECT_TRUE(MayRead(same_primary_group, group));
  EXPECT_TRUE(MayRead(supplementary_member, group));
  EXPECT_FALSE(MayRead(stranger, group));
  EXPECT_TRUE(MayRead(op, group));

  for (const Caller& c : {owner, same_primary_group, supplementary_member, stranger, op}) {
    EXPECT_TRUE(MayRead(c, world));
  }
  // An owner nobody published yet: operators only.
  EXPECT_FALSE(MayRead(owner, unknown));
  EXPECT_TRUE(MayRead(op, unknown));
}

TEST(ObjectAccess, OnlyTheOwnerOrAnOperatorDeletes) {
  Caller op = UserCaller(7, 7);
  op.is_operator = true;
  for (uint32_t access : {op::kAccessOwner, op::kAccessGroup, op::kAccessWorld}) {
    const op::Owner o = OwnedBy(1000, 100, access);
    EXPECT_TRUE(MayDelete(UserCaller(1000, 555), o)) << access;  // the uid decides, not the group
    EXPECT_FALSE(MayDelete(UserCaller(1001, 100), o)) << access;
    EXPECT_TRUE(MayDelete(op, o)) << access;
  }
  EXPECT_FALSE(MayDelete(UserCaller(1000, 100), OwnedBy(1000, 100, op::kAccessDefault)));
}

TEST(ObjectAccess, OperatorsAreRootTheDaemonsUidAndListedUids) {
  EXPECT_TRUE(IsOperatorUid(0, {}));
  EXPECT_TRUE(IsOperatorUid(static_cast<uint32_t>(geteuid()), {}));
  EXPECT_TRUE(IsOperatorUid(4242, {17, 4242}));
  EXPECT_FALSE(IsOperatorUid(4243, {17, 4242}));
  EXPECT_FALSE(IsOperatorUid(static_cast<uint32_t>(-1), {-1}));
}

TEST(ObjectAccess, OwnerForUsesTheDaemonsDefaultAndRefusesUnknownValues) {
  const Caller c = UserCaller(1000, 100);
  op::Owner o;
  ASSERT_TRUE(OwnerFor(c, op::kAccessDefault, op::kAccessGroup, &o).ok());
  EXPECT_EQ(o.uid, 1000u);
  EXPECT_EQ(o.gid, 100u);
  EXPECT_EQ(o.access, static_cast<uint32_t>(op::kAccessGroup));
  ASSERT_TRUE(OwnerFor(c, op::kAccessWorld, op::kAccessOwner, &o).ok());
  EXPECT_EQ(o.access, static_cast<uint32_t>(op::kAccessWorld));
  Status bad = OwnerFor(c, 4, op::kAccessOwner, &o);
  EXPECT_EQ(ObjectCodeOf(bad), op::kInvalid) << bad.message();
  uint32_t a = 0;
  EXPECT_TRUE(ParseAccess("world", &a));
  EXPECT_EQ(a, static_cast<uint32_t>(op::kAccessWorld));
  EXPECT_FALSE(ParseAccess("default", &a));
  EXPECT_FALSE(ParseAccess("everyone", &a));
}

TEST(ObjectAccess, RefusalsNameTheObjectTheCallerAndTheOwner) {
  Status r = ReadDenied("w", UserCaller(1003, 1), OwnedBy(1000, 100, op::kAccessGroup));
  EXPECT_EQ(ObjectCodeOf(r), op::kPermissionDenied);
  EXPECT_EQ(r.message(), "uid 1003 may not read object w: it belongs to uid 1000 (gid 100) and is readable by its "
                         "owner and group");
  Status d = DeleteDenied("w", 1003, OwnedBy(1000, 100, op::kAccessWorld));
  EXPECT_EQ(ObjectCodeOf(d), op::kPermissionDenied);
  EXPECT_NE(d.message().find("uid 1003 may not delete object w: it belongs to uid 1000"), std::string::npos);
}

TEST(UidQuotas, CapsBytesAndObjectsPerUidAndGivesThemBack) {
  UidQuotas q(1000, 3);
  ASSERT_TRUE(q.Charge(7, 600, "a").ok());
  Status over = q.Charge(7, 401, "b");
  EXPECT_EQ(ObjectCodeOf(over), op::kOverQuota);
  EXPECT_NE(over.message().find("uid 7 is over its quota on this daemon: b of 401 bytes would need more bytes; it "
                                "has 1 of 3 objects and 600 of 1000 bytes"),
            std::string::npos)
      << over.message();
  EXPECT_TRUE(q.Charge(8, 1000, "other uid").ok());  // uids are apart
  ASSERT_TRUE(q.Charge(7, 400, "b").ok());            // exactly the limit
  ASSERT_TRUE(q.Charge(7, 0, "c").ok());
  Status count = q.Check(7, 0, "d");
  EXPECT_EQ(ObjectCodeOf(count), op::kOverQuota);
  EXPECT_NE(count.message().find("one more object; it has 3 of 3 objects"), std::string::npos) << count.message();
  EXPECT_EQ(ObjectCodeOf(q.Charge(7, UINT64_MAX, "huge")), op::kOverQuota);  // no overflow
  q.Release(7, 600);
  EXPECT_EQ(q.Usage(7).bytes, 400u);
  EXPECT_EQ(q.Usage(7).objects, 2u);
  EXPECT_TRUE(q.Charge(7, 600, "e").ok());
  EXPECT_EQ(q.StateJson(), "{\"limit_bytes\":1000,\"limit_objects\":3,\"uids\":[{\"uid\":7,\"bytes\":1000,"
                           "\"objects\":3},{\"uid\":8,\"bytes\":1000,\"objects\":1}]}");
}

TEST(LocalStoreQuota, ChargesOnlyOwnCopiesBeforeAllocatingAndReleasesOnRemove) {
  LocalStore store(10u << 20, 64 * 1024, /*quota_bytes=*/1u << 20, /*quota_objects=*/4);
  CopyInfo mine;
  mine.pinned = true;
  mine.owner = OwnedBy(1000, 100, op::kAccessOwner);
  mine.charge = true;
  ObjectRef a, b, cached;
  ASSERT_TRUE(store.Create("a", 512 << 10, mine, &a).ok());
  Status st = store.Create("b", 768 << 10, mine, &b);
  EXPECT_EQ(ObjectCodeOf(st), op::kOverQuota) << st.message();
  EXPECT_EQ(store.used(), 512u << 10) << "nothing may be reserved for a refused copy";
  CopyInfo other = mine;
  other.pinned = false;
  other.charge = false;  // a cached copy of someone's object
  ASSERT_TRUE(store.Create("cached", 768 << 10, other, &cached).ok());
  EXPECT_EQ(store.quotas().Usage(1000).bytes, 512u << 10);
  store.Remove("a", Err(op::kNotFound, "deleted"));
  EXPECT_EQ(store.quotas().Usage(1000).objects, 0u);
  EXPECT_TRUE(store.Create("b", 768 << 10, mine, &b).ok());
}

// What the memfds of the store allow: a Put's creator writes through its mapping until it
// is sealed; the seal is refused while it still maps the object; readers' descriptors
// never write.
TEST(LocalStoreSeal, APutIsSealedOnlyOnceItsCreatorUnmaps) {
  LocalStore store(64u << 20, 64 * 1024);
  const CopyInfo put = PutBy(0, 0, /*charge=*/false);
  ObjectRef obj;
  const size_t size = 1u << 20;
  ASSERT_TRUE(store.Create("sealed", size, put, &obj).ok());
  struct stat sb{};
  ASSERT_EQ(fstat(obj->fd(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0400u) << "nobody but the daemon may reopen it";
  // The creator's writable mapping (the daemon hands it the read-write descriptor).
  auto* w = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, obj->fd(), 0));
  ASSERT_NE(w, MAP_FAILED);
  memset(w, 7, size);
  Status st = obj->Seal();
  EXPECT_EQ(ObjectCodeOf(st), op::kInvalid);
  EXPECT_NE(st.message().find("the creator still maps the object writable"), std::string::npos) << st.message();
  EXPECT_EQ(fcntl(obj->fd(), F_GET_SEALS) & F_SEAL_WRITE, 0);
  munmap(w, size);
  ASSERT_TRUE(obj->Seal().ok());
  EXPECT_EQ(fcntl(obj->fd(), F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_SEAL), F_SEAL_WRITE | F_SEAL_SEAL);
  EXPECT_EQ(obj->data()[size - 1], 7) << "the daemon reads what the creator wrote";
  EXPECT_EQ(pwrite(obj->fd(), "x", 1, 0), -1);
  EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, obj->fd(), 0), MAP_FAILED);
  UniqueFd ro;
  ASSERT_TRUE(obj->ReadOnlyFd(&ro).ok());
  EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, ro.get(), 0), MAP_FAILED);
  EXPECT_TRUE(obj->Seal().ok()) << "idempotent";
}

// A child forked while the creator mapped the object keeps a writable mapping until it
// execs or exits, after the creator unmapped: the seal waits for it (a moment), instead of
// refusing a Put its creator did right.
TEST(LocalStoreSeal, AWritableMappingInAShortLivedChildDelaysTheSealButDoesNotRefuseIt) {
  LocalStore store(64u << 20, 64 * 1024);
  ObjectRef obj;
  const size_t size = 256u << 10;
  ASSERT_TRUE(store.Create("forked", size, PutBy(0, 0, /*charge=*/false), &obj).ok());
  auto* w = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, obj->fd(), 0));
  ASSERT_NE(w, MAP_FAILED);
  memset(w, 9, size);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    usleep(150 * 1000);  // holds the inherited mapping, then exits as an exec would drop it
    _exit(0);
  }
  munmap(w, size);
  Status st = obj->Seal();
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(fcntl(obj->fd(), F_GET_SEALS) & F_SEAL_WRITE, F_SEAL_WRITE);
  EXPECT_EQ(obj->data()[size - 1], 9);
}

TEST(LocalStoreSeal, CopiesTheDaemonWritesAcceptNoOtherWriterFromTheStart) {
  LocalStore store(64u << 20, 64 * 1024);
  CopyInfo cached;
  cached.owner = OwnedBy(1000, 100, op::kAccessWorld);
  ObjectRef obj;
  const size_t size = 256u << 10;
  ASSERT_TRUE(store.Create("fetched", size, cached, &obj).ok());
  EXPECT_NE(fcntl(obj->fd(), F_GET_SEALS) & F_SEAL_FUTURE_WRITE, 0);
  obj->data()[0] = 1;  // the daemon's own mapping still writes
  EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, obj->fd(), 0), MAP_FAILED);
  EXPECT_EQ(pwrite(obj->fd(), "x", 1, 0), -1);
  obj->MarkComplete();
  EXPECT_NE(fcntl(obj->fd(), F_GET_SEALS) & F_SEAL_SEAL, 0);
  EXPECT_EQ(obj->data()[0], 1);
}

// A live upgrade's new daemon takes a copy from the old one only if nobody can change it
// any more: a memfd of the stated size, sealed against resizing and writes; small copies
// only as bytes of the stated size. What it takes is complete, charged and read-only.
TEST(LocalStoreAdopt, TakesOnlySealedMemfdsOfTheStatedSize) {
  LocalStore old_store(64u << 20, 64 * 1024);
  const CopyInfo put = PutBy(1000, 100, /*charge=*/true);
  ObjectRef origin;
  const size_t size = 1u << 20;
  ASSERT_TRUE(old_store.Create("moved", size, put, &origin).ok());
  auto* w = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, origin->fd(), 0));
  ASSERT_NE(w, MAP_FAILED);
  memset(w, 9, size);
  auto dup_of = [](int fd) { return UniqueFd(fcntl(fd, F_DUPFD_CLOEXEC, 0)); };

  LocalStore store(64u << 20, 64 * 1024, /*quota_bytes=*/8u << 20, /*quota_objects=*/8);
  ObjectRef obj;
  // Still writable by its creator: not sealed, refused.
  munmap(w, size);
  Status st = store.Adopt("moved", size, put, dup_of(origin->fd()), "", &obj);
  EXPECT_EQ(ObjectCodeOf(st), op::kInvalid);
  EXPECT_NE(st.message().find("not sealed"), std::string::npos) << st.message();
  EXPECT_EQ(store.used(), 0u);
  EXPECT_EQ(store.quotas().Usage(1000).bytes, 0u) << "a refused copy is not charged";
  ASSERT_TRUE(origin->Seal().ok());
  // Sealed, but another size than stated.
  st = store.Adopt("moved", size + 1, put, dup_of(origin->fd()), "", &obj);
  EXPECT_EQ(ObjectCodeOf(st), op::kInvalid) << st.message();
  // Small copies: bytes of the stated size, under the inline limit.
  EXPECT_EQ(ObjectCodeOf(store.Adopt("small", 5, put, UniqueFd(), "1234", &obj)), op::kInvalid);
  EXPECT_EQ(ObjectCodeOf(store.Adopt("big-inline", 70000, put, UniqueFd(), std::string(70000, 'x'), &obj)), op::kInvalid);
  ASSERT_TRUE(store.Adopt("small", 4, put, UniqueFd(), "1234", &obj).ok());
  EXPECT_TRUE(obj->complete());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(obj->data()), 4), "1234");

  ASSERT_TRUE(store.Adopt("moved", size, put, dup_of(origin->fd()), "", &obj).ok());
  EXPECT_TRUE(obj->complete());
  EXPECT_EQ(obj->ready(), size);
  EXPECT_EQ(obj->data()[size - 1], 9);
  EXPECT_TRUE(obj->pinned());
  EXPECT_EQ(store.quotas().Usage(1000).bytes, size + 4);
  EXPECT_EQ(ObjectCodeOf(store.Adopt("moved", size, put, dup_of(origin->fd()), "", &obj)), op::kExists);
  EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, obj->fd(), 0), MAP_FAILED);
}

}  // namespace
}  // namespace conduit::objects
