// `zerojit --version`: the tool's version, and what it found of NVRTC and the CUDA driver (or
// why not). Works on any machine: nothing missing is an error here.
#pragma once

namespace zerojit::tool {

int run_version(bool json);

}  // namespace zerojit::tool
