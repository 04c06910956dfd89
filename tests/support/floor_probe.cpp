// A shared object linked against the system's C++ runtime, as zerojit's own never are: the
// glibc floor check must refuse it (tests/CMakeLists.txt, glibc_floor_sees_the_cxx_runtime).
#include <string>

std::string zerojit_floor_probe(const std::string& text) { return text + " probed"; }
