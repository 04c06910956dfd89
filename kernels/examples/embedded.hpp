// The example family's kernel sources, embedded at build time (cmake/ZerojitEmbed.cmake).
#pragma once

#include "zerojit/embedded.hpp"

namespace zerojit::examples {

const EmbeddedFileSet& embedded_files();

}  // namespace zerojit::examples
