// The DSv4 kernel sources and the headers they include, embedded at build time.
#pragma once

#include "zerojit/embedded.hpp"

namespace zerojit::dsv4 {

const EmbeddedFileSet& embedded_files();

}  // namespace zerojit::dsv4
