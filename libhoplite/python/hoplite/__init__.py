"""hoplite: Conduit's distributed object store from Python (numpy buffers).

    import numpy as np, hoplite
    c = hoplite.Client()                      # $CONDUIT_SOCKET or /run/conduit/conduitd.sock
    c.put("weights", np.ones(1 << 20, np.float32))
    w = c.get("weights", dtype=np.float32)              # a private, writable copy
    r = c.get("weights", dtype=np.float32, readonly=True)  # zero copy: maps the local store
    used = c.reduce("sum", ["g0", "g1", "g2"], num_objects=2, op="sum", dtype=np.float32)
    ready, not_ready = c.wait(["g0", "g1"], num_returns=1, timeout=5.0)
    c.delete("weights")

Objects belong to the user whose program created them: only that user and the operators may
delete one; who else may read it the creator says with access="owner" | "group" | "world"
(put and reduce; None: the daemon's default, the owner only unless the operator chose
otherwise).

Errors raise HopliteError (or a subclass named after the code: ObjectTimeout, ObjectExists,
OutOfMemory, ObjectLost, DaemonUnavailable, PermissionDenied, OverQuota, ...). Timeouts are in
seconds; None means the daemon's own bound. One Client runs one call at a time; use one per
thread.
"""
import ctypes
import json
import os
import weakref

import numpy as np

__all__ = ["Client", "HopliteError", "ObjectTimeout", "ObjectNotFound", "ObjectExists", "OutOfMemory",
           "InvalidArgument", "ObjectLost", "DaemonUnavailable", "Refused", "PermissionDenied", "OverQuota"]


class HopliteError(Exception):
    """A failed call: .code is the hoplite::Code value, .message the daemon's explanation."""

    def __init__(self, code, message):
        super().__init__("%s (code %d)" % (message, code))
        self.code = code
        self.message = message


class ObjectTimeout(HopliteError, TimeoutError):
    pass


class ObjectNotFound(HopliteError):
    pass


class ObjectExists(HopliteError):
    pass


class OutOfMemory(HopliteError, MemoryError):
    pass


class InvalidArgument(HopliteError, ValueError):
    pass


class ObjectLost(HopliteError):
    pass


class DaemonUnavailable(HopliteError, ConnectionError):
    pass


class Refused(HopliteError):
    pass


class PermissionDenied(HopliteError, PermissionError):
    """This program's user may not read (or delete) the object."""


class OverQuota(HopliteError):
    """This program's user has used its share of the local daemon's store."""


_ERRORS = {1: ObjectTimeout, 2: ObjectNotFound, 3: ObjectExists, 4: OutOfMemory, 5: InvalidArgument,
           6: ObjectLost, 7: DaemonUnavailable, 10: Refused, 11: PermissionDenied, 12: OverQuota}
_ACCESS = {None: 0, "owner": 1, "group": 2, "world": 3}

_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}
_DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
           "float32": 7, "float64": 8, "bfloat16": 9, "float8e4m3": 10, "float8e5m2": 11}

_ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)


def _load():
    candidates = [os.environ.get("HOPLITE_LIBRARY"),
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "libhoplite.so"),
                  "libhoplite.so"]
    errors = []
    for path in candidates:
        if not path:
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("cannot load libhoplite.so (set HOPLITE_LIBRARY): " + "; ".join(errors))


_lib = _load()
_c = ctypes
_ERR = (_c.c_char_p, _c.c_size_t)
_lib.hoplite_connect.argtypes = [_c.c_char_p, _c.POINTER(_c.c_void_p), *_ERR]
_lib.hoplite_close.argtypes = [_c.c_void_p]
_lib.hoplite_close.restype = None
_lib.hoplite_put_access.argtypes = [_c.c_void_p, _c.c_char_p, _c.c_size_t, _c.c_void_p, _c.c_uint64, _c.c_int,
                                    *_ERR]
_lib.hoplite_get.argtypes = [_c.c_void_p, _c.c_char_p, _c.c_size_t, _c.c_int, _ALLOC, _c.c_void_p, *_ERR]
_lib.hoplite_get_readonly.argtypes = [_c.c_void_p, _c.c_char_p, _c.c_size_t, _c.c_int, _c.POINTER(_c.c_void_p),
                                      _c.POINTER(_c.c_void_p), _c.POINTER(_c.c_uint64), *_ERR]
_lib.hoplite_view_release.argtypes = [_c.c_void_p]
_lib.hoplite_view_release.restype = None
_lib.hoplite_delete.argtypes = [_c.c_void_p, _c.c_char_p, _c.c_size_t, *_ERR]
_lib.hoplite_reduce_access.argtypes = [_c.c_void_p, _c.c_char_p, _c.c_size_t, _c.POINTER(_c.c_char_p),
                                       _c.POINTER(_c.c_size_t), _c.c_size_t, _c.c_size_t, _c.c_int, _c.c_int,
                                       _c.c_int, _c.c_int, _c.POINTER(_c.c_uint32), _c.POINTER(_c.c_size_t), *_ERR]
_lib.hoplite_wait.argtypes = [_c.c_void_p, _c.POINTER(_c.c_char_p), _c.POINTER(_c.c_size_t), _c.c_size_t,
                              _c.c_size_t, _c.c_int, _c.POINTER(_c.c_uint32), _c.POINTER(_c.c_size_t), *_ERR]
_lib.hoplite_state.argtypes = [_c.c_void_p, _c.c_char_p, _c.c_size_t, _c.POINTER(_c.c_size_t), *_ERR]


def _id(object_id):
    b = object_id.encode() if isinstance(object_id, str) else bytes(object_id)
    return b, len(b)


def _ms(timeout):
    return 0 if timeout is None else max(1, int(timeout * 1000))


def _access_code(access):
    if access not in _ACCESS:
        raise InvalidArgument(5, "access must be None, 'owner', 'group' or 'world', not %r" % (access,))
    return _ACCESS[access]


def _dtype_code(dtype):
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in _DTYPES:
        raise InvalidArgument(5, "unsupported reduce dtype %r (one of %s)" % (name, ", ".join(_DTYPES)))
    return _DTYPES[name]


def _check(code, err):
    if code != 0:
        raise _ERRORS.get(code, HopliteError)(code, err.value.decode(errors="replace"))


class Client:
    """One connection to the local conduitd's object store."""

    def __init__(self, socket=None):
        self._h = _c.c_void_p()
        err = _c.create_string_buffer(512)
        _check(_lib.hoplite_connect(socket.encode() if socket else None, _c.byref(self._h), err, 512), err)

    def close(self):
        if self._h:
            _lib.hoplite_close(self._h)
            self._h = _c.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def put(self, object_id, data, access=None):
        """Creates an immutable object from a numpy array (or any contiguous buffer), owned by
        this program's user; access: who else may read it ("owner", "group", "world"; None:
        the daemon's default)."""
        arr = np.ascontiguousarray(np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray, memoryview))
                                   else data)
        b, n = _id(object_id)
        code = _access_code(access)
        err = _c.create_string_buffer(512)
        _check(_lib.hoplite_put_access(self._h, b, n, arr.ctypes.data if arr.nbytes else None, arr.nbytes, code,
                                       err, 512), err)

    def get(self, object_id, timeout=None, readonly=False, dtype=np.uint8):
        """The object as a 1-D numpy array of `dtype`.

        readonly=False: a private writable copy (copied while the object still arrives).
        readonly=True: zero copy, a read-only array over the local store's shared memory,
        valid as long as the array (or anything viewing it) is alive.
        """
        b, n = _id(object_id)
        err = _c.create_string_buffer(512)
        if readonly:
            view, data, size = _c.c_void_p(), _c.c_void_p(), _c.c_uint64()
            _check(_lib.hoplite_get_readonly(self._h, b, n, _ms(timeout), _c.byref(view), _c.byref(data),
                                             _c.byref(size), err, 512), err)
            if size.value == 0:
                _lib.hoplite_view_release(view)
                empty = np.empty(0, dtype)
                empty.flags.writeable = False
                return empty
            raw = (_c.c_uint8 * size.value).from_address(data.value)
            weakref.finalize(raw, _lib.hoplite_view_release, view)
            arr = np.frombuffer(raw, np.uint8)
            arr.flags.writeable = False
            return arr.view(dtype)
        holder = {}

        def alloc(_ctx, size):
            holder["a"] = np.empty(size, np.uint8)
            return holder["a"].ctypes.data if size else None

        cb = _ALLOC(alloc)
        _check(_lib.hoplite_get(self._h, b, n, _ms(timeout), cb, None, err, 512), err)
        return holder["a"].view(dtype)

    def delete(self, object_id):
        b, n = _id(object_id)
        err = _c.create_string_buffer(512)
        _check(_lib.hoplite_delete(self._h, b, n, err, 512), err)

    def reduce(self, target, sources, num_objects=None, op="sum", dtype=np.float32, timeout=None, access=None):
        """Creates `target` = op over the first `num_objects` of `sources` to become
        available; returns the ids used, in arrival order. The target belongs to this
        program's user, readable as `access` says (see put)."""
        ids = [_id(s) for s in sources]
        arr_ids = (_c.c_char_p * len(ids))(*[i[0] for i in ids])
        arr_lens = (_c.c_size_t * len(ids))(*[i[1] for i in ids])
        used = (_c.c_uint32 * max(1, len(ids)))()
        nused = _c.c_size_t()
        tb, tn = _id(target)
        if op not in _OPS:
            raise InvalidArgument(5, "op must be one of %s" % ", ".join(_OPS))
        code = _access_code(access)
        err = _c.create_string_buffer(512)
        _check(_lib.hoplite_reduce_access(self._h, tb, tn, arr_ids, arr_lens, len(ids),
                                          len(ids) if num_objects is None else num_objects, _OPS[op],
                                          _dtype_code(dtype), _ms(timeout), code, used, _c.byref(nused), err, 512),
               err)
        return [sources[used[i]] for i in range(nused.value)]

    def wait(self, object_ids, num_returns=1, timeout=None):
        """Waits until num_returns objects have a complete copy somewhere. Returns
        (ready, not_ready) lists of ids, ready in the order they became ready."""
        ids = [_id(s) for s in object_ids]
        arr_ids = (_c.c_char_p * len(ids))(*[i[0] for i in ids])
        arr_lens = (_c.c_size_t * len(ids))(*[i[1] for i in ids])
        ready = (_c.c_uint32 * max(1, len(ids)))()
        nready = _c.c_size_t()
        err = _c.create_string_buffer(512)
        _check(_lib.hoplite_wait(self._h, arr_ids, arr_lens, len(ids), num_returns, _ms(timeout), ready,
                                 _c.byref(nready), err, 512), err)
        r = [object_ids[ready[i]] for i in range(nready.value)]
        return r, [x for x in object_ids if x not in r]

    def state(self):
        """The local daemon's object state (live daemons, local copies, directory shard)."""
        size = _c.c_size_t()
        err = _c.create_string_buffer(512)
        cap = 1 << 16
        while True:
            buf = _c.create_string_buffer(cap)
            _check(_lib.hoplite_state(self._h, buf, cap, _c.byref(size), err, 512), err)
            if size.value < cap:
                return json.loads(buf.value.decode())
            cap = size.value + 1
