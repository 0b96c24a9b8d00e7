#!/usr/bin/env python3
"""Every function libgrpc exports that takes a grpc_call* must be interposed by the shim.

A managed call is an object of the shim's own that the program holds as a grpc_call*; any
libgrpc function that received one would read it as a core call and crash (gRPC's interop
server did, in grpc_call_test_only_get_compression_algorithm). This test lists libgrpc's
exports (nm), picks those with a grpc_call* parameter (C functions by the public headers'
prototypes, C++ ones by their demangled signatures), and fails naming any the shim does not
export. A new gRPC release's additions are caught here, not in a program.

    shim_exports_test.py SHIM_SO [LIBGRPC_SO] [GRPC_INCLUDE_DIR]
"""
import glob
import re
import subprocess
import sys

# Exports whose grpc_call* is not a call the program can hand in (reason each).
NOT_REACHABLE = {
    "grpc_core::internal::alts_handshaker_client_set_grpc_caller_for_testing":
        "takes a function pointer with a grpc_call* parameter, not a call",
}


def exports(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TWi":
            names.add(parts[2])
    return names


def demangle(names):
    names = sorted(names)
    out = subprocess.run(["c++filt"], input="\n".join(names), check=True, capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


# A parameter of type grpc_call* or const grpc_call* (not grpc_call**, not grpc_call_x*).
CALL_PARAM = re.compile(r"(?:^|[(,])\s*(?:const\s+)?grpc_call\s*(?:const\s*)?\*(?!\*)")


def c_functions_taking_call(include_dir):
    text = ""
    for path in glob.glob(include_dir + "/**/*.h", recursive=True):
        with open(path, encoding="utf-8", errors="replace") as f:
            text += f.read() + "\n"
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    found = set()
    for m in re.finditer(r"\b(\w+)\s*\(([^;{}()]*(?:\([^()]*\)[^;{}()]*)*)\)\s*;", text):
        if CALL_PARAM.search("(" + m.group(2)):
            found.add(m.group(1))
    return found


def find_libgrpc():
    out = subprocess.run(["ldconfig", "-p"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if re.match(r"\s*libgrpc\.so\.\d+ \(", line):
            return line.split("=>")[1].strip()
    sys.exit("shim_exports_test: libgrpc.so not found (ldconfig -p)")


def main():
    shim = sys.argv[1]
    libgrpc = sys.argv[2] if len(sys.argv) > 2 else find_libgrpc()
    include_dir = sys.argv[3] if len(sys.argv) > 3 else "/usr/include/grpc"
    grpc_names = exports(libgrpc)
    shim_names = exports(shim)

    needed = {}  # symbol -> readable signature
    for name in c_functions_taking_call(include_dir):
        if name in grpc_names:
            needed[name] = name
    for symbol, readable in demangle(n for n in grpc_names if n.startswith("_Z")).items():
        paren = readable.find("(")
        if paren < 0 or not CALL_PARAM.search(readable[paren:]):
            continue
        if readable[:paren] in NOT_REACHABLE:
            continue
        needed[symbol] = readable

    missing = sorted(readable for symbol, readable in needed.items() if symbol not in shim_names)
    print(f"libgrpc ({libgrpc}): {len(grpc_names)} exports, {len(needed)} take a grpc_call*; "
          f"the shim exports {len(needed) - len(missing)} of them")
    for symbol in sorted(needed):
        print(("  ok       " if symbol in shim_names else "  MISSING  ") + needed[symbol])
    if len(needed) < 20:
        sys.exit("shim_exports_test: found too few functions taking a grpc_call* (is the scan broken?)")
    if missing:
        sys.exit("shim_exports_test: libgrpc functions taking a grpc_call* that libmrpc-grpc does not "
                 "interpose (a managed call reaching them crashes the program):\n  " + "\n  ".join(missing))


if __name__ == "__main__":
    main()
