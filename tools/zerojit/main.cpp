// The zerojit command-line tool: warm a DSv4 configuration's kernels (`warmup`), print its
// manifest (`keys`), prove that serving compiles nothing (`run`), manage the compile cache
// (`cache`). docs/TOOL.md describes the commands. The commands are the tool library's
// (zerojit/tool.hpp, tool.cpp); this binary passes it zerojit's own families
// (builtin_families.hpp), as a project passes its own, and as `python -m zerojit` does.
#include "builtin_families.hpp"

int main(int argc, char** argv) {
  using namespace zerojit::tool;
  const std::vector<Family> families = builtin_families();
  return run_cli(argc, argv, families, builtin_tool_options("zerojit"));
}
