// The source of conduit_test_pch (tests/CMakeLists.txt): the target exists to build the
// test programs' shared precompiled header, and a target needs a source to compile.
