// The source of conduit_daemon_pch (daemon/CMakeLists.txt): the target exists to build the
// daemon libraries' shared precompiled header, and a target needs a source to compile.
