#!/usr/bin/env python3
"""The Kubernetes manifests (packaging/kubernetes/) name only what Conduit accepts.

Every path, port, flag and environment variable the DaemonSet and the example Job name is
checked against the real programs: conduitd is started with the DaemonSet's entrypoint
(Containerfile.daemon), arguments and ConfigMap, its paths moved under a scratch directory,
in a network namespace of its own; its ports must answer, its readiness probe must pass, the
Secret and ConfigMap mounts must be the files its configuration reads, and the Job's command
must run against it with the Job's environment. Environment variables must be ones the
shims or the manifests themselves read.

usage: manifests_test.py SOURCE_DIR BIN_DIR   (root; exit 77 = skipped)
"""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import yaml

SRC = pathlib.Path(sys.argv[1]).resolve()
BIN = pathlib.Path(sys.argv[2]).resolve()
NETNS = "conduit-manifests-%d" % os.getpid()


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load(name):
    return list(yaml.safe_load_all((SRC / "packaging/kubernetes" / name).read_text()))


def find(docs, kind):
    found = [d for d in docs if d and d.get("kind") == kind]
    if len(found) != 1:
        fail("expected one %s, found %d" % (kind, len(found)))
    return found[0]


def shim_variables():
    """The environment variables Conduit's programs read (string literals in the sources)."""
    names = set()
    for part in ("libmccs-nccl", "libmrpc-grpc", "libhoplite", "daemon", "protocol"):
        for path in (SRC / part).rglob("*"):
            if path.suffix in (".cc", ".h"):
                names.update(re.findall(r'"(CONDUIT_[A-Z0-9_]+)"', path.read_text(errors="replace")))
    return names


def config_entries(text):
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, value = line.partition("=")
            entries.append((name.strip(), value.strip()))
    return entries


def in_ns(*argv):
    return ["ip", "netns", "exec", NETNS] + [str(a) for a in argv]


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    fail("timed out waiting for " + what)


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespace)")
        return 77
    daemonset_docs = load("conduitd-daemonset.yaml")
    ds = find(daemonset_docs, "DaemonSet")
    cm = find(daemonset_docs, "ConfigMap")
    job = find(load("example-job.yaml"), "Job")
    pod = ds["spec"]["template"]["spec"]
    (ctr,) = pod["containers"]
    if not (pod.get("hostNetwork") and pod.get("hostPID")):
        fail("the DaemonSet needs hostNetwork (peers reach the node) and hostPID (SO_PEERCRED pids)")

    # The image's entrypoint, as Containerfile.daemon builds it.
    containerfile = (SRC / "packaging/containers/Containerfile.daemon").read_text()
    entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", containerfile, re.M).group(1))
    if entry[1:3] != ["--config", "/etc/conduit/conduitd.conf"]:
        fail("unexpected entrypoint %s" % entry)

    mounts = {m["mountPath"]: m for m in ctr["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The config file and the key are the files the mounts put there, from keys that exist.
    conf_mount = mounts.get("/etc/conduit/conduitd.conf") or fail("no mount at the entrypoint's --config path")
    conf_volume = volumes[conf_mount["name"]]
    if conf_volume["configMap"]["name"] != cm["metadata"]["name"] or conf_mount["subPath"] not in cm["data"]:
        fail("the config mount does not come from the ConfigMap's %s" % conf_mount["subPath"])
    config = dict(config_entries(cm["data"][conf_mount["subPath"]]))
    key_mount = mounts.get(config.get("cluster-key", "")) or fail("cluster-key is not a mounted file")
    if "secret" not in volumes[key_mount["name"]] or "subPath" not in key_mount:
        fail("the cluster key must be a Secret mounted with subPath (a Secret volume's files are symlinks)")
    socket_dir = os.path.dirname(config["socket"])
    if socket_dir not in mounts or volumes[mounts[socket_dir]["name"]]["hostPath"]["path"] != socket_dir:
        fail("the socket directory %s is not the host's (hostPath)" % socket_dir)

    # Ports: the containerPorts are the ports conduitd's configuration listens on.
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    if config["listen"].rsplit(":", 1)[1] != str(ports["peers"]):
        fail("listen %s is not containerPort %d" % (config["listen"], ports["peers"]))
    if config["metrics-listen"].rsplit(":", 1)[1] != str(ports["metrics"]):
        fail("metrics-listen is not containerPort %d" % ports["metrics"])
    annotations = ds["spec"]["template"]["metadata"]["annotations"]
    if annotations["prometheus.io/port"] != str(ports["metrics"]) or annotations["prometheus.io/path"] != "/metrics":
        fail("the Prometheus annotations do not name the metrics port and path")

    # Environment: every variable is read by Conduit or used by the manifest itself.
    known = shim_variables()
    env_names = [e["name"] for e in ctr.get("env", [])]
    args = [re.sub(r"\$\((\w+)\)", lambda m: m.group(1) in env_names and "127.0.0.1" or fail("undefined " + m.group(0)), a)
            for a in ctr.get("args", [])]
    for e in ctr.get("env", []):
        if "$(%s)" % e["name"] not in " ".join(ctr.get("args", [])) and e["name"] not in known:
            fail("DaemonSet variable %s is used by nothing" % e["name"])
    (jctr,) = job["spec"]["template"]["spec"]["containers"]
    for e in jctr.get("env", []):
        if e["name"] not in known:
            fail("Job variable %s is not one Conduit reads (%s)" % (e["name"], sorted(known)))
    jenv = {e["name"]: e["value"] for e in jctr.get("env", [])}
    jmounts = {m["mountPath"] for m in jctr["volumeMounts"]}
    jvolumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    if os.path.dirname(jenv["CONDUIT_SOCKET"]) not in jmounts or jenv["CONDUIT_SOCKET"] != config["socket"]:
        fail("the Job's CONDUIT_SOCKET is not the daemon's socket in a mounted directory")
    if any(v["hostPath"]["path"] != socket_dir for v in jvolumes.values() if "hostPath" in v):
        fail("the Job mounts another host directory than the daemon's socket directory")
    preload = re.search(r"^ENV LD_PRELOAD=(\S+)", (SRC / "packaging/containers/Containerfile.job").read_text(), re.M)
    for lib in preload.group(1).split(":"):
        if not (BIN.parent / "lib" / os.path.basename(lib)).exists():
            fail("the job layer preloads %s, which the build does not make" % os.path.basename(lib))

    # Now for real: conduitd with the entrypoint, ConfigMap and args, paths moved to scratch.
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="conduit-manifests-"))
    moved = lambda p: str(scratch / p.lstrip("/"))  # noqa: E731
    (scratch / "etc/conduit").mkdir(parents=True)
    (scratch / socket_dir.lstrip("/")).mkdir(parents=True)
    subprocess.run([BIN / "conduitctl", "keygen", moved(config["cluster-key"])], check=True, stdout=subprocess.DEVNULL)
    text = cm["data"][conf_mount["subPath"]]
    for path in (socket_dir, "/etc/conduit"):
        text = text.replace(path + "/", moved(path) + "/")
    pathlib.Path(moved(entry[2])).write_text(text)
    subprocess.run(["ip", "netns", "add", NETNS], check=True)
    daemon = None
    try:
        subprocess.run(in_ns("ip", "link", "set", "lo", "up"), check=True)
        argv = [BIN / "conduitd", entry[1], moved(entry[2])] + args
        print("conduitd:", " ".join(map(str, argv)))
        log = open(scratch / "conduitd.log", "w")
        daemon = subprocess.Popen(in_ns(*argv), stdout=log, stderr=subprocess.STDOUT)
        probe = ctr["readinessProbe"]["exec"]["command"]
        if probe[0] != "/usr/bin/conduitctl":
            fail("the probe runs %s" % probe[0])
        probe = [BIN / "conduitctl"] + [moved(a) if a.startswith(socket_dir + "/") else a for a in probe[1:]]
        wait_for(lambda: daemon.poll() is not None or subprocess.run(
            in_ns(*probe), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0, 20,
            "the readiness probe to pass")
        if daemon.poll() is not None:
            fail("conduitd exited %d:\n%s" % (daemon.returncode, (scratch / "conduitd.log").read_text()))
        for name, port in ports.items():
            check = "import socket; socket.create_connection(('127.0.0.1', %d), 5).close()" % port
            if subprocess.run(in_ns(sys.executable, "-c", check)).returncode != 0:
                fail("nothing listens on containerPort %s (%d)" % (name, port))
        metrics = subprocess.run(in_ns(sys.executable, "-c",
                                       "import urllib.request; print(urllib.request.urlopen("
                                       "'http://127.0.0.1:%d/metrics', timeout=5).read().decode())" % ports["metrics"]),
                                 capture_output=True, text=True)
        if "conduit_build_info" not in metrics.stdout:
            fail("GET /metrics on the metrics port: %s" % (metrics.stdout + metrics.stderr)[-500:])
        # The Job's command with its environment (its socket moved like the daemon's).
        command = jctr["command"]
        tool = BIN / os.path.basename(command[0])
        if not command[0].startswith("/usr/bin/") or not tool.exists():
            fail("the Job runs %s, which Conduit does not install" % command[0])
        env = dict(os.environ, CONDUIT_SOCKET=moved(jenv["CONDUIT_SOCKET"]))
        run = subprocess.run(in_ns("env", "CONDUIT_SOCKET=" + env["CONDUIT_SOCKET"], tool, *command[1:]),
                             capture_output=True, text=True, timeout=300)
        print(run.stdout[-2000:])
        if run.returncode != 0:
            fail("the Job's command failed (%d): %s" % (run.returncode, run.stderr[-2000:]))
    finally:
        if daemon is not None:
            daemon.kill()
            daemon.wait()
        subprocess.run(["ip", "netns", "del", NETNS])
        shutil.rmtree(scratch, ignore_errors=True)
    print("OK: every path, port, flag and variable of the manifests is accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
