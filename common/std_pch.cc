// The source of conduit_std_pch (common/CMakeLists.txt): the target exists to build the
// precompiled standard headers that conduit_common and the daemon's libraries share, and a
// target needs a source to compile.
