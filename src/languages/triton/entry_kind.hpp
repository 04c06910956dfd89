// The triton row of the language table (src/languages/table.cpp).
#pragma once

#include "zerojit/language.hpp"

namespace zerojit::languages {

const EntryKind& triton_entry_kind();

}  // namespace zerojit::languages
