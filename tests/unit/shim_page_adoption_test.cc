// Page adoption (libmccs-nccl/page_adoption.h) and adopted host regions (host_regions.h):
// a program's own buffer keeps its bytes and addresses while its interior becomes a memfd
// the daemon can map; its edge pages stay the program's and are copied through the memfd;
// only private anonymous read-write memory is adopted; a range mapped over or freed is
// noticed; a forked child gets private pages (also of pages a dropped region left
// behind, and never of memory the program put there since); regions never share pages and
// stay under the cap.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "host_regions.h"
#include "page_adoption.h"

namespace conduit {
namespace {

// Before any lookup reads them (they are read once): adoption on, from one page, under a
// small cap so the cap can be reached.
const bool g_env_set = [] {
  setenv("CONDUIT_ADOPT_HOST_BUFFERS", "1", 1);
  setenv("CONDUIT_ADOPT_MIN_BYTES", "4096", 1);
  setenv("CONDUIT_ADOPT_MAX_BYTES", std::to_string(size_t{24} << 20).c_str(), 1);
  return true;
}();

constexpr size_t kPage = 4096;

// Anonymous private memory of `bytes`, filled with a pattern by address.
uint8_t* Anonymous(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
  return b;
}

bool HasPattern(const uint8_t* b, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (b[i] != static_cast<uint8_t>(i * 7 + 3)) return false;
  }
  return true;
}

// Anonymous(bytes) with its pages adopted as a region (all but 16 bytes at either end):
// nullptr when either fails.
uint8_t* AdoptedBuffer(size_t bytes, RegionSpan* span) {
  uint8_t* mem = Anonymous(bytes);
  if (mem != nullptr && !AdoptRegion(mem + 16, bytes - 32, span).ok()) {
    munmap(mem, bytes);
    return nullptr;
  }
  return mem;
}

// Runs `child` in a forked child, which exits with what it returns (only what a child of a
// threaded process may do). The child's status as waitpid gives it; -1 when fork or
// waitpid failed.
int ForkAndWait(const std::function<int()>& child) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) _exit(child());
  int status = 0;
  return waitpid(pid, &status, 0) == pid ? status : -1;
}

// What ForkAndWait's status says when the child did not exit 0.
std::string ChildFailure(int status) {
  if (status == -1) return "fork or waitpid failed";
  if (WIFSIGNALED(status)) return "the child died of signal " + std::to_string(WTERMSIG(status));
  return "the child exited with " + std::to_string(WEXITSTATUS(status));
}

class PageAdoptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(g_env_set);
    if (sysconf(_SC_PAGESIZE) != static_cast<long>(kPage)) GTEST_SKIP() << "pages are not 4 KiB here";
    if (!PageAdoptionSupported()) GTEST_SKIP() << "this kernel has no PROCMAP_QUERY (Linux 6.11): nothing is adopted";
  }
};

TEST_F(PageAdoptionTest, InteriorBecomesTheMemfdAndEdgesStayTheProgramsOwn) {
  const size_t bytes = 16 * kPage;
  uint8_t* mem = Anonymous(bytes);
  ASSERT_NE(mem, nullptr);
  // A buffer from the middle of page 1 to the middle of page 10: pages 2-9 are its interior.
  uint8_t* buf = mem + kPage + 100;
  const size_t len = 9 * kPage;
  AdoptedPages pages;
  ASSERT_TRUE(AdoptPages(buf, len, &pages).ok());
  EXPECT_EQ(pages.base, reinterpret_cast<uintptr_t>(mem + kPage));
  EXPECT_EQ(pages.interior_begin, reinterpret_cast<uintptr_t>(mem + 2 * kPage));
  EXPECT_EQ(pages.interior_end, reinterpret_cast<uintptr_t>(mem + 10 * kPage));
  EXPECT_EQ(pages.size(), 10 * kPage);
  EXPECT_TRUE(StillAdopted(pages));
  EXPECT_TRUE(HasPattern(mem, 0, bytes)) << "adoption changed the program's bytes";
  EXPECT_EQ(memcmp(pages.copy.data() + 100, buf, len), 0);

  // The interior is one memory, seen from both sides.
  mem[5 * kPage + 1] = 0xEE;
  EXPECT_EQ(pages.copy.data()[4 * kPage + 1], 0xEE);
  pages.copy.data()[6 * kPage] = 0xDD;
  EXPECT_EQ(mem[7 * kPage], 0xDD);

  // The edges are not: an edge byte reaches the memfd only when copied in, and back only
  // when copied out; bytes outside the buffer are never copied.
  buf[0] = 0x11;           // head page
  buf[len - 1] = 0x22;     // tail page
  mem[kPage + 50] = 0x33;  // head page, before the buffer
  EXPECT_NE(pages.copy.data()[100], 0x11);
  CopyEdgesIn(pages, buf, len);
  EXPECT_EQ(pages.copy.data()[100], 0x11);
  EXPECT_EQ(pages.copy.data()[100 + len - 1], 0x22);
  EXPECT_NE(pages.copy.data()[50], 0x33);
  pages.copy.data()[100] = 0x44;
  pages.copy.data()[100 + len - 1] = 0x55;
  pages.copy.data()[60] = 0x66;
  CopyEdgesOut(pages, buf, len);
  EXPECT_EQ(buf[0], 0x44);
  EXPECT_EQ(buf[len - 1], 0x55);
  EXPECT_EQ(mem[kPage + 60], static_cast<uint8_t>((kPage + 60) * 7 + 3));
  munmap(mem, bytes);
}

TEST_F(PageAdoptionTest, OnlyPrivateAnonymousReadWriteMemoryIsAdopted) {
  const size_t bytes = 8 * kPage;
  AdoptedPages a;
  // Shared memory: another process may map it too.
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  EXPECT_FALSE(AdoptPages(static_cast<uint8_t*>(shared) + 10, bytes - 20, &a).ok());
  munmap(shared, bytes);
  // Read-only memory.
  AdoptedPages b;
  void* ro = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_FALSE(AdoptPages(static_cast<uint8_t*>(ro) + 10, bytes - 20, &b).ok());
  munmap(ro, bytes);
  // A private mapping of a file: its pages come from the file until written.
  AdoptedPages c;
  const int fd = memfd_create("adoption-test-file", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, bytes), 0);
  void* file = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ASSERT_NE(file, MAP_FAILED);
  EXPECT_FALSE(AdoptPages(static_cast<uint8_t*>(file) + 10, bytes - 20, &c).ok());
  munmap(file, bytes);
  close(fd);
  // No whole page inside.
  AdoptedPages d;
  uint8_t* mem = Anonymous(bytes);
  ASSERT_NE(mem, nullptr);
  EXPECT_FALSE(AdoptPages(mem + 100, kPage, &d).ok());
  munmap(mem, bytes);
}

TEST_F(PageAdoptionTest, ARangeMappedOverOrUnmappedIsNoLongerAdopted) {
  const size_t bytes = 8 * kPage;
  uint8_t* mem = Anonymous(bytes);
  ASSERT_NE(mem, nullptr);
  AdoptedPages pages;
  ASSERT_TRUE(AdoptPages(mem + 8, bytes - 16, &pages).ok());
  ASSERT_TRUE(StillAdopted(pages));
  // What a free followed by an allocation at the same address looks like to the kernel.
  ASSERT_NE(mmap(mem, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), MAP_FAILED);
  EXPECT_FALSE(StillAdopted(pages));
  AdoptedPages again;
  ASSERT_TRUE(AdoptPages(mem + 8, bytes - 16, &again).ok());
  munmap(mem, bytes);
  EXPECT_FALSE(StillAdopted(again));
}

TEST_F(PageAdoptionTest, RegionsOfAdoptedBuffers) {
  const size_t bytes = 64 * kPage;
  uint8_t* mem = Anonymous(bytes);
  ASSERT_NE(mem, nullptr);
  const uint64_t frees = RegionFrees();
  RegionSpan span;
  ASSERT_TRUE(AdoptRegion(mem + kPage + 8, 20 * kPage, &span).ok());
  EXPECT_TRUE(span.adopted);
  EXPECT_EQ(span.offset, 8u);
  EXPECT_EQ(span.size, 21 * kPage);
  EXPECT_TRUE(RegionLive(span.id));
  EXPECT_TRUE(RegionFd(span.id).valid());
  // Found again, whole or in part; not past its end.
  RegionSpan found;
  ASSERT_TRUE(FindRegion(mem + 3 * kPage, kPage, &found));
  EXPECT_EQ(found.id, span.id);
  EXPECT_EQ(found.offset, 2 * kPage);
  EXPECT_FALSE(FindRegion(mem + 3 * kPage, 20 * kPage, &found));
  // A buffer on one of its pages is refused; one on pages of its own is adopted.
  RegionSpan other;
  EXPECT_FALSE(AdoptRegion(mem + 21 * kPage + 100, 10 * kPage, &other).ok());
  ASSERT_TRUE(AdoptRegion(mem + 22 * kPage, 10 * kPage, &other).ok());
  EXPECT_NE(other.id, span.id);
  // Edges through the region calls: the head byte of the first buffer.
  mem[kPage + 8] = 0x5A;
  RegionEdgesIn(mem + kPage + 8, 20 * kPage);
  // Unmapped under it: the region goes, and counts as freed for the connections.
  ASSERT_EQ(munmap(mem + 2 * kPage, 4 * kPage), 0);
  EXPECT_FALSE(FindRegion(mem + kPage + 8, 20 * kPage, &found));
  EXPECT_FALSE(RegionLive(span.id));
  EXPECT_GT(RegionFrees(), frees);
  EXPECT_TRUE(RegionLive(other.id));
  // ncclMemFree never frees an adopted region.
  EXPECT_FALSE(FreeRegion(reinterpret_cast<void*>(mem + 22 * kPage)));
  munmap(mem, bytes);
  EXPECT_FALSE(FindRegion(mem + 22 * kPage, kPage, &found));
}

// A program that runs on a growing prefix of one allocation (a benchmark's sizes): the
// region of the larger buffer replaces those inside it, bytes kept; one that only
// overlaps a region is refused.
TEST_F(PageAdoptionTest, ALargerBufferSupersedesTheRegionsInsideIt) {
  const size_t bytes = 32 * kPage;
  uint8_t* mem = Anonymous(bytes);
  ASSERT_NE(mem, nullptr);
  RegionSpan small, large, other;
  ASSERT_TRUE(AdoptRegion(mem + 8, 4 * kPage, &small).ok());
  mem[2 * kPage] = 0x42;  // written through the first region's memfd
  RegionSpan overlapping;
  EXPECT_FALSE(AdoptRegion(mem + 3 * kPage + 8, 30 * kPage - 16 - 3 * kPage, &overlapping).ok())
      << "a buffer that overlaps a region without holding it";
  ASSERT_TRUE(AdoptRegion(mem + 8, 16 * kPage, &large).ok());
  EXPECT_FALSE(RegionLive(small.id));
  EXPECT_TRUE(RegionLive(large.id));
  EXPECT_EQ(mem[2 * kPage], 0x42);
  EXPECT_TRUE(HasPattern(mem, 0, 2 * kPage));
  EXPECT_TRUE(HasPattern(mem, 2 * kPage + 1, bytes));
  RegionSpan found;
  ASSERT_TRUE(FindRegion(mem + 8, 16 * kPage, &found));
  EXPECT_EQ(found.id, large.id);
  // A region wholly outside the next larger buffer stays.
  ASSERT_TRUE(AdoptRegion(mem + 20 * kPage, 4 * kPage, &other).ok());
  RegionSpan larger;
  ASSERT_TRUE(AdoptRegion(mem + 8, 18 * kPage, &larger).ok());
  EXPECT_FALSE(RegionLive(large.id));
  EXPECT_TRUE(RegionLive(other.id));
  EXPECT_EQ(mem[2 * kPage], 0x42);
  munmap(mem, bytes);
  EXPECT_FALSE(FindRegion(mem + 8, 1, &found));
  EXPECT_FALSE(FindRegion(mem + 20 * kPage, 1, &found));
}

// ncclMemAlloc's regions beside adopted ones: found, never superseded, freed by FreeRegion.
TEST_F(PageAdoptionTest, NcclMemAllocRegionsAreNotAdoptedOnes) {
  void* p = nullptr;
  ASSERT_TRUE(AllocateRegion(3 * kPage, &p).ok());
  RegionSpan span;
  ASSERT_TRUE(FindRegion(static_cast<uint8_t*>(p) + 10, 100, &span));
  EXPECT_FALSE(span.adopted);
  RegionSpan around;
  EXPECT_FALSE(AdoptRegion(p, 3 * kPage, &around).ok()) << "a region from ncclMemAlloc is not adopted over";
  const uint64_t frees = RegionFrees();
  EXPECT_TRUE(FreeRegion(p));
  EXPECT_EQ(RegionFrees(), frees + 1);
  EXPECT_FALSE(RegionLive(span.id));
  EXPECT_FALSE(FreeRegion(p));
}

TEST_F(PageAdoptionTest, AdoptedBytesStayUnderTheCap) {
  const size_t bytes = size_t{20} << 20;  // the cap is 24 MiB
  uint8_t* a = Anonymous(bytes);
  uint8_t* b = Anonymous(bytes);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  RegionSpan sa, sb;
  ASSERT_TRUE(AdoptRegion(a + 1, bytes - 2, &sa).ok());
  Status st = AdoptRegion(b + 1, bytes - 2, &sb);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("CONDUIT_ADOPT_MAX_BYTES"), std::string::npos) << st.message();
  munmap(a, bytes);  // gone from the table at the next look: then there is room
  RegionSpan found;
  EXPECT_FALSE(FindRegion(a + 1, 1, &found));
  EXPECT_TRUE(AdoptRegion(b + 1, bytes - 2, &sb).ok());
  munmap(b, bytes);
  EXPECT_FALSE(FindRegion(b + 1, 1, &found));
}

// A buffer the program unmapped and never names again: the sweep at each group finds it
// gone, so the connections release its memory.
TEST_F(PageAdoptionTest, TheSweepDropsRegionsThatAreGone) {
  const size_t bytes = 8 * kPage;
  uint8_t* mem = Anonymous(bytes);
  ASSERT_NE(mem, nullptr);
  RegionSpan span;
  ASSERT_TRUE(AdoptRegion(mem + 8, bytes - 16, &span).ok());
  SweepAdoptedRegions();
  EXPECT_TRUE(RegionLive(span.id));
  munmap(mem, bytes);
  const uint64_t frees = RegionFrees();
  usleep(110 * 1000);  // sweeps run at most every 100 ms
  SweepAdoptedRegions();
  EXPECT_FALSE(RegionLive(span.id));
  EXPECT_EQ(RegionFrees(), frees + 1);
}

// A forked child has its own copy of the heap, adopted pages included: what it writes
// stays its own, and what the parent writes after the fork does not reach it.
TEST_F(PageAdoptionTest, AForkedChildGetsPrivatePages) {
  const size_t bytes = 16 * kPage;
  RegionSpan span;
  uint8_t* mem = AdoptedBuffer(bytes, &span);
  ASSERT_NE(mem, nullptr);
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    RegionSpan found;
    if (FindRegion(mem + 16, bytes - 32, &found)) code |= 1;  // the child has no adopted region
    if (!HasPattern(mem, 0, bytes)) code |= 2;              // but the bytes, all of them
    memset(mem + 4 * kPage, 0x77, kPage);                   // its own from now on
    char c = 0;
    if (write(to_parent[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1) code |= 4;
    if (mem[8 * kPage] != static_cast<uint8_t>(8 * kPage * 7 + 3)) code |= 8;  // the parent's write is not here
    _exit(code);
  }
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_TRUE(HasPattern(mem, 4 * kPage, 5 * kPage)) << "the child's write reached the parent";
  mem[8 * kPage] = 0x99;
  ASSERT_EQ(write(to_child[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: region found in the child, 2: bytes differ, 4: pipe, 8: parent's write seen";
  RegionSpan found;
  EXPECT_TRUE(FindRegion(mem + 16, bytes - 32, &found)) << "the parent keeps its region";
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
  munmap(mem, bytes);
}

// The program unmapped an adopted buffer and forks before the shim looked again: the
// child's fork handler must not touch the pages that are gone (it read them: SIGSEGV).
TEST_F(PageAdoptionTest, AChildForkedAfterTheBufferWasUnmappedRunsOn) {
  const size_t bytes = 16 * kPage;
  RegionSpan span;
  uint8_t* mem = AdoptedBuffer(bytes, &span);
  ASSERT_NE(mem, nullptr);
  ASSERT_EQ(munmap(mem, bytes), 0);
  const int status = ForkAndWait([] { return 0; });
  EXPECT_EQ(status, 0) << ChildFailure(status);
  RegionSpan found;
  EXPECT_FALSE(FindRegion(mem + 16, 1, &found));
}

// The same with other memory mapped there since: the child keeps that mapping as fork
// gives it (here shared memory, whose writes the parent sees), not a private copy of it.
TEST_F(PageAdoptionTest, AChildForkedAfterTheBufferWasMappedOverKeepsTheNewMapping) {
  const size_t bytes = 16 * kPage;
  RegionSpan span;
  uint8_t* mem = AdoptedBuffer(bytes, &span);
  ASSERT_NE(mem, nullptr);
  ASSERT_NE(mmap(mem, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0), MAP_FAILED);
  const int status = ForkAndWait([mem] {
    mem[4 * kPage] = 0x5C;
    return 0;
  });
  ASSERT_EQ(status, 0) << ChildFailure(status);
  EXPECT_EQ(mem[4 * kPage], 0x5C) << "the child's write to shared memory did not reach the parent";
  RegionSpan found;
  EXPECT_FALSE(FindRegion(mem + 16, 1, &found));
  munmap(mem, bytes);
}

// Part of a region's interior changed (here its upper half unmapped, as when glibc trims
// the heap): the region goes, and the pages still the memfd's become private again, so a
// child forked later has its own copy of them, as of any heap page.
TEST_F(PageAdoptionTest, PagesADroppedRegionLeavesArePrivateInAForkedChild) {
  const size_t bytes = 16 * kPage;
  RegionSpan span;
  uint8_t* mem = AdoptedBuffer(bytes, &span);
  ASSERT_NE(mem, nullptr);
  ASSERT_EQ(munmap(mem + 8 * kPage, 8 * kPage), 0);
  RegionSpan found;
  EXPECT_FALSE(FindRegion(mem + 16, kPage, &found));
  EXPECT_FALSE(RegionLive(span.id));
  EXPECT_TRUE(HasPattern(mem, 0, 8 * kPage)) << "the pages left lost their bytes";
  mem[3 * kPage] = 0x31;  // the parent's, written after the drop
  int to_parent[2];
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int code = mem[3 * kPage] == 0x31 ? 0 : 1;
    memset(mem + 2 * kPage, 0x77, kPage);
    char c = 0;
    _exit(write(to_parent[1], &c, 1) == 1 ? code : 2);
  }
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_TRUE(HasPattern(mem, 2 * kPage, 3 * kPage)) << "the child's write reached the parent";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the parent's write is not in the child, 2: pipe";
  close(to_parent[0]);
  close(to_parent[1]);
  // They are the program's memory as before: a buffer on them is adopted again.
  ASSERT_TRUE(AdoptRegion(mem + 16, 8 * kPage - 32, &span).ok());
  munmap(mem, 8 * kPage);
  EXPECT_FALSE(FindRegion(mem + 16, 1, &found));
}

// The same around a hole the program unmapped: the pages on both sides of it.
TEST_F(PageAdoptionTest, PagesOnBothSidesOfAHoleArePrivateInAForkedChild) {
  const size_t bytes = 16 * kPage;
  RegionSpan span;
  uint8_t* mem = AdoptedBuffer(bytes, &span);
  ASSERT_NE(mem, nullptr);
  ASSERT_EQ(munmap(mem + 6 * kPage, 4 * kPage), 0);
  usleep(110 * 1000);  // sweeps run at most every 100 ms
  SweepAdoptedRegions();
  EXPECT_FALSE(RegionLive(span.id));
  const int status = ForkAndWait([mem] {
    memset(mem + 2 * kPage, 0x77, kPage);
    memset(mem + 12 * kPage, 0x77, kPage);
    return 0;
  });
  ASSERT_EQ(status, 0) << ChildFailure(status);
  EXPECT_TRUE(HasPattern(mem, 0, 6 * kPage)) << "the child's write below the hole reached the parent";
  EXPECT_TRUE(HasPattern(mem, 10 * kPage, bytes)) << "the child's write above the hole reached the parent";
  munmap(mem, bytes);
}

// A larger buffer supersedes a region whose first interior page is its own first page,
// an edge it does not remap: that page, where the program keeps other data, becomes
// private again too.
TEST_F(PageAdoptionTest, TheFirstPageASupersededRegionLeavesIsPrivateInAForkedChild) {
  const size_t bytes = 32 * kPage;
  uint8_t* mem = Anonymous(bytes);
  ASSERT_NE(mem, nullptr);
  RegionSpan small, large;
  ASSERT_TRUE(AdoptRegion(mem + kPage, 4 * kPage, &small).ok());
  ASSERT_TRUE(AdoptRegion(mem + kPage + 8, 16 * kPage, &large).ok());
  EXPECT_FALSE(RegionLive(small.id));
  const int status = ForkAndWait([mem] {
    mem[kPage] = 0x66;  // before the larger buffer, on its first page
    return 0;
  });
  ASSERT_EQ(status, 0) << ChildFailure(status);
  EXPECT_TRUE(HasPattern(mem, 0, bytes)) << "the child's write reached the parent";
  munmap(mem, bytes);
  RegionSpan found;
  EXPECT_FALSE(FindRegion(mem + kPage + 8, 1, &found));
}

// The permissions of the mapping that holds `p`, as /proc/self/maps writes them ("rw-p").
std::string MapsPermissions(const void* p) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == nullptr) return "";
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  char line[512], perms[8] = "";
  unsigned long begin = 0, end = 0;
  while (fgets(line, sizeof(line), maps) != nullptr) {
    if (sscanf(line, "%lx-%lx %7s", &begin, &end, perms) == 3 && begin <= at && at < end) break;
    perms[0] = '\0';
  }
  fclose(maps);
  return perms;
}

// Pages made private again keep the protection the program gave them; and a child forked
// while all adopted pages are protected (still adopted: one mapping) copies them all the
// same, with their protection (it read them: SIGSEGV).
TEST_F(PageAdoptionTest, PagesMadePrivateAgainKeepTheirProtection) {
  constexpr size_t bytes = 16 * kPage;
  RegionSpan span;
  uint8_t* mem = AdoptedBuffer(bytes, &span);
  ASSERT_NE(mem, nullptr);
  ASSERT_EQ(mprotect(mem + kPage, 15 * kPage, PROT_NONE), 0);
  const int status = ForkAndWait([mem] {
    int code = MapsPermissions(mem + 4 * kPage) == "---p" ? 0 : 1;
    if (mprotect(mem + kPage, 15 * kPage, PROT_READ | PROT_WRITE) != 0 || !HasPattern(mem, 0, bytes)) code |= 2;
    memset(mem + 4 * kPage, 0x77, kPage);
    return code;
  });
  EXPECT_EQ(status, 0) << ChildFailure(status) << " (1: not the parent's protection, 2: not the parent's bytes)";
  // Part of it writable again: the region goes, its pages stay as the program set them.
  ASSERT_EQ(mprotect(mem + kPage, 7 * kPage, PROT_READ | PROT_WRITE), 0);
  RegionSpan found;
  EXPECT_FALSE(FindRegion(mem + 16, 1, &found));
  EXPECT_EQ(MapsPermissions(mem + 4 * kPage), "rw-p");
  EXPECT_EQ(MapsPermissions(mem + 12 * kPage), "---p");
  ASSERT_EQ(mprotect(mem + 8 * kPage, 8 * kPage, PROT_READ), 0);
  EXPECT_TRUE(HasPattern(mem, 0, bytes)) << "the child's write reached the parent, or bytes were lost";
  munmap(mem, bytes);
}

// A userfaultfd for faults from user space (no privilege needed on Linux 5.11 and later),
// or -1 where the kernel or a seccomp filter refuses it.
int UserFaultFd() {
  const int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
  if (fd < 0) return -1;
  uffdio_api api{};
  api.api = UFFD_API;
  if (ioctl(fd, UFFDIO_API, &api) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The process's first adoption, held inside its copy of the buffer by a missing page
// (userfaultfd) while another thread forks: the fork must wait for the adoption, so that no
// child is forked between the remap and the fork handlers. The exit code says what failed.
int ForkDuringTheFirstAdoption() {
  const size_t bytes = 16 * kPage;
  uint8_t* mem = Anonymous(bytes);
  const int uffd = UserFaultFd();
  if (mem == nullptr || uffd < 0) return 1;
  madvise(mem + 5 * kPage, kPage, MADV_DONTNEED);  // missing again: the adoption's copy faults there
  uffdio_register reg{};
  reg.range = {reinterpret_cast<uintptr_t>(mem), bytes};
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) return 1;
  Status adopted;
  std::thread adopter([&] {
    RegionSpan span;
    adopted = AdoptRegion(mem + 16, bytes - 32, &span);
  });
  pollfd pfd{uffd, POLLIN, 0};
  uffd_msg msg{};
  if (poll(&pfd, 1, 10000) != 1 || read(uffd, &msg, sizeof(msg)) != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT) {
    _exit(2);  // the adopter is stuck or never faulted: no joining it
  }
  std::atomic<bool> forked{false};
  pid_t child = -1;
  std::thread forker([&] {
    child = fork();
    if (child == 0) {
      memset(mem + 8 * kPage, 0x77, kPage);  // an adopted page: the child's own copy
      _exit(0);
    }
    forked = true;
  });
  usleep(300 * 1000);
  int code = forked ? 4 : 0;  // forked in the middle of the adoption
  // The missing page, with the bytes Anonymous gave it.
  uint8_t* page = Anonymous(bytes);
  uffdio_copy copy{};
  copy.dst = reinterpret_cast<uintptr_t>(mem + 5 * kPage);
  copy.src = reinterpret_cast<uintptr_t>(page + 5 * kPage);
  copy.len = kPage;
  if (page == nullptr || ioctl(uffd, UFFDIO_COPY, &copy) != 0) _exit(code | 8);
  adopter.join();
  forker.join();
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) code |= 16;
  if (!adopted.ok()) code |= 32;
  if (!HasPattern(mem, 0, bytes)) code |= 64;  // the child's write reached the parent
  if (code != 0) fprintf(stderr, "ForkDuringTheFirstAdoption failed: %d\n", code);
  return code;
}

// Whether a userfaultfd can watch anonymous memory here.
bool UserFaultsWork() {
  const int uffd = UserFaultFd();
  if (uffd < 0) return false;
  void* page = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uffdio_register reg{};
  reg.range = {reinterpret_cast<uintptr_t>(page), kPage};
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  const bool works = page != MAP_FAILED && ioctl(uffd, UFFDIO_REGISTER, &reg) == 0;
  if (page != MAP_FAILED) munmap(page, kPage);
  close(uffd);
  return works;
}

TEST_F(PageAdoptionTest, AForkWaitsForTheFirstAdoptionInProgress) {
  if (!UserFaultsWork()) GTEST_SKIP() << "no userfaultfd here to hold an adoption in the middle";
  // A process of its own (the binary run again for this test), in which no buffer was
  // adopted yet.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(_exit(ForkDuringTheFirstAdoption()), ::testing::ExitedWithCode(0), "")
      << "1: no userfaultfd, 2: the adoption did not fault, 4: the fork did not wait for the adoption, 8: the "
         "fault was not resolved, 16: the child failed, 32: not adopted, 64: the child's write reached the parent";
}

}  // namespace
}  // namespace conduit
