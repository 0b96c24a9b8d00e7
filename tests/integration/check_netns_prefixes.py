#!/usr/bin/env python3
"""Every test executable's namespace prefix must be its own.

Starting or stopping a test cluster deletes every namespace under its prefix, so two test
executables that share one break each other when ctest runs them in parallel (their links
go silent and collectives stall until the TCP timeout). The harness also refuses a prefix
that a running cluster holds; this check catches a clash before anything runs.
"""
import pathlib
import re
import sys

PATTERNS = [
    re.compile(r'\.prefix\s*=\s*"([^"]+)"'),          # ClusterConfig c; c.prefix = "..."
    re.compile(r'ObjectCluster\b[^"\n;]*?\(\s*"([^"]+)"'),  # ObjectCluster oc("...", subnet, ...)
]


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "tests"
    users = {}
    for path in sorted(root.rglob("*.cc")):
        for pattern in PATTERNS:
            for prefix in pattern.findall(path.read_text()):
                users.setdefault(prefix, set()).add(str(path.relative_to(root.parent)))
    clashes = {p: sorted(files) for p, files in users.items() if len(files) > 1}
    for prefix, files in sorted(clashes.items()):
        print(f"namespace prefix '{prefix}' is used by {len(files)} test sources: {', '.join(files)}")
    if not users:
        print(f"no namespace prefixes found under {root}; the patterns in {__file__} are stale")
        return 1
    print(f"{len(users)} namespace prefixes, {len(clashes)} shared")
    return 1 if clashes else 0


if __name__ == "__main__":
    sys.exit(main())
