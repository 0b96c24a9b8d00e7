"""The hoplite Python package against real daemons (started by python_test.cc).

$HOPLITE_SOCKETS lists the daemons' program sockets (one per host). $HOPLITE_EXPECT_VENV, when
set, is the venv the package must have been installed into (from its wheel): hoplite and the
libhoplite.so it loaded must both come from that venv's site-packages."""
import os
import sys
import sysconfig
import threading
import time
import unittest

import numpy as np

import hoplite

SOCKETS = os.environ["HOPLITE_SOCKETS"].split(",")
EXPECT_VENV = os.environ.get("HOPLITE_EXPECT_VENV")


class Installation(unittest.TestCase):
    def test_package_and_library_location(self):
        pkg = os.path.realpath(os.path.dirname(hoplite.__file__))
        lib = os.path.realpath(hoplite._lib._name)
        print("\nhoplite from %s, library %s" % (pkg, lib), file=sys.stderr)
        if not EXPECT_VENV:
            self.assertTrue(os.path.isfile(lib), lib)
            return
        venv = os.path.realpath(EXPECT_VENV)
        self.assertEqual(os.path.realpath(sys.prefix), venv)
        self.assertNotIn("HOPLITE_LIBRARY", os.environ)
        site = os.path.realpath(sysconfig.get_paths()["platlib"])
        self.assertTrue(site.startswith(venv + os.sep), site)
        self.assertEqual(os.path.dirname(pkg), site, "hoplite is not imported from the venv's site-packages")
        self.assertEqual(lib, os.path.join(pkg, "libhoplite.so"), "hoplite did not load the library it bundles")


def client(host):
    return hoplite.Client(SOCKETS[host])


class PythonApi(unittest.TestCase):
    def test_put_get_copy_and_readonly(self):
        for size in (0, 10, 70000, 5 << 20):
            arr = (np.arange(size // 4, dtype=np.float32) * 0.5) if size else np.empty(0, np.float32)
            oid = "py-%d" % size
            client(0).put(oid, arr)
            got = client(1).get(oid, dtype=np.float32, timeout=10)
            np.testing.assert_array_equal(got, arr)
            got[:1] = 7  # a private copy is writable
            ro = client(1).get(oid, dtype=np.float32, readonly=True, timeout=10)
            np.testing.assert_array_equal(ro, arr)
            self.assertFalse(ro.flags.writeable)
            if size:
                with self.assertRaises(ValueError):
                    ro[0] = 1

    def test_readonly_get_is_zero_copy(self):
        arr = np.random.default_rng(1).integers(0, 255, 8 << 20, dtype=np.uint8)
        client(0).put("py-zc", arr)
        c = client(1)
        a = c.get("py-zc", readonly=True, timeout=10)
        b = c.get("py-zc", readonly=True, timeout=10)
        np.testing.assert_array_equal(a, arr)
        # Both views map the store's memfd; the process did not allocate a copy.
        with open("/proc/self/maps") as f:
            maps = f.read()
        addr = a.ctypes.data
        line = [l for l in maps.splitlines()
                if int(l.split("-")[0], 16) <= addr < int(l.split()[0].split("-")[1], 16)][0]
        self.assertIn("memfd:hoplite:py-zc", line)
        self.assertIn(" r--s ", line)
        state = c.state()
        mine = [o for o in state["store"]["objects"] if o["id"] == "py-zc"][0]
        self.assertEqual(mine["users"], 2)
        del a, b
        for _ in range(100):
            mine = [o for o in c.state()["store"]["objects"] if o["id"] == "py-zc"][0]
            if mine["users"] == 0:
                break
            time.sleep(0.02)
        self.assertEqual(mine["users"], 0)

    def test_errors(self):
        c = client(0)
        c.put("py-dup", b"abc")
        with self.assertRaises(hoplite.ObjectExists):
            c.put("py-dup", b"abc")
        t0 = time.time()
        with self.assertRaises(hoplite.ObjectTimeout):
            client(1).get("py-never", timeout=0.3)
        self.assertLess(time.time() - t0, 3)
        with self.assertRaises(hoplite.InvalidArgument):
            c.put("x" * 64, b"a")
        with self.assertRaises(hoplite.DaemonUnavailable):
            hoplite.Client("/nonexistent/socket")

    def test_access(self):
        # The creator's choice travels with the object (checked against other users by
        # tests/objects/security_test.cc; this test runs as root, an operator).
        c = client(0)
        c.put("py-world", np.arange(20000, dtype=np.float32), access="world")
        owner = [o for o in c.state()["store"]["objects"] if o["id"] == "py-world"][0]
        self.assertEqual(owner["access"], "world")
        self.assertEqual(owner["owner"], os.getuid())
        c.put("py-default", b"abc")
        mine = [o for o in c.state()["store"]["objects"] if o["id"] == "py-default"][0]
        self.assertEqual(mine["access"], "owner")
        used = client(1).reduce("py-world-sum", ["py-world"], access="group", timeout=5)
        self.assertEqual(used, ["py-world"])
        self.assertEqual(client(1).get("py-world-sum", dtype=np.float32, timeout=5)[3], 3.0)
        with self.assertRaises(hoplite.InvalidArgument):
            c.put("py-bad-access", b"a", access="everyone")
        self.assertTrue(issubclass(hoplite.PermissionDenied, PermissionError))
        for oid in ("py-world", "py-default", "py-world-sum"):
            c.delete(oid)

    def test_delete(self):
        client(0).put("py-del", np.ones(100000, np.uint8))
        client(1).get("py-del", timeout=5)
        client(1).delete("py-del")
        # The directory's shard drops every copy before it answers the Delete (DropCopy,
        # acknowledged since object protocol 5, docs/object-protocol.md): a Get on host 0
        # waits for a new Put at once.
        with self.assertRaises(hoplite.ObjectTimeout):
            client(0).get("py-del", timeout=0.2)

    def test_reduce_and_wait(self):
        srcs = ["py-g%d" % i for i in range(4)]
        vals = [np.full(300000, i + 1, np.int64) for i in range(4)]
        client(0).put(srcs[2], vals[2])
        client(1).put(srcs[0], vals[0])
        ready, not_ready = client(1).wait(srcs, num_returns=1, timeout=5)
        self.assertIn(ready[0], (srcs[0], srcs[2]))
        self.assertEqual(len(ready) + len(not_ready), 4)

        def later():
            time.sleep(0.2)
            client(1).put(srcs[3], vals[3])

        t = threading.Thread(target=later)
        t.start()
        used = client(0).reduce("py-sum", srcs, num_objects=3, op="sum", dtype=np.int64, timeout=10)
        t.join()
        self.assertEqual(sorted(used), sorted([srcs[0], srcs[2], srcs[3]]))
        np.testing.assert_array_equal(client(1).get("py-sum", dtype=np.int64, timeout=5), np.full(300000, 1 + 3 + 4))
        used = client(1).reduce("py-max", [srcs[0], srcs[2], srcs[3]], op="max", dtype="int64", timeout=10)
        self.assertEqual(len(used), 3)
        np.testing.assert_array_equal(client(0).get("py-max", dtype=np.int64, readonly=True), vals[3])
        f = [np.linspace(0, 1, 1000, dtype=np.float16) * (i + 1) for i in range(2)]
        client(0).put("py-h0", f[0])
        client(1).put("py-h1", f[1])
        client(0).reduce("py-hmin", ["py-h0", "py-h1"], op="min", dtype=np.float16)
        np.testing.assert_array_equal(client(1).get("py-hmin", dtype=np.float16), np.minimum(f[0], f[1]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
