// zerojit's own kernel families as its tools pass them to run_cli (zerojit/tool.hpp): the DSv4
// family (the default; its configuration options and `run`) and the example family. The
// `zerojit` binary (main.cpp) and `python -m zerojit` (python/src/cli.cpp) both use them, so
// the two commands are one tool.
#pragma once

#include <string>
#include <vector>

#include "zerojit/tool.hpp"

namespace zerojit::tool {

// The DSv4 family, then the example family.
std::vector<Family> builtin_families();

// The tool options for them, under `program`'s name (`--examples` selects the example family).
ToolOptions builtin_tool_options(std::string program);

}  // namespace zerojit::tool
