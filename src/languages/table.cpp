// The one table of kernel languages: each language is a folder beside this file, whose entry
// kind says what the core needs to know of its compiled entries (include/zerojit/language.hpp).
// Adding a language adds a row here and a folder (docs/ADDING_A_KERNEL.md, "Adding a kernel
// language").
#include <array>

#include "languages/cuda/entry_kind.hpp"
#include "languages/cutedsl/entry_kind.hpp"
#include "languages/triton/entry_kind.hpp"
#include "zerojit/language.hpp"

namespace zerojit {
namespace {

// In the order of their stored numbers (Language): the row of language n is at index n.
const std::array<const EntryKind*, 3>& table() {
  static const std::array<const EntryKind*, 3> kinds = {
      &languages::cuda_entry_kind(),
      &languages::triton_entry_kind(),
      &languages::cutedsl_entry_kind(),
  };
  return kinds;
}

}  // namespace

const EntryKind* find_entry_kind(std::uint32_t stored) {
  const auto& kinds = table();
  if (stored >= kinds.size()) return nullptr;
  return kinds[stored]->language == static_cast<Language>(stored) ? kinds[stored] : nullptr;
}

const EntryKind& entry_kind(Language language) {
  const EntryKind* kind = find_entry_kind(static_cast<std::uint32_t>(language));
  return kind != nullptr ? *kind : *table().front();  // an enum value has its row
}

std::span<const EntryKind* const> entry_kinds() { return table(); }

std::string_view to_string(Language language) {
  const EntryKind* kind = find_entry_kind(static_cast<std::uint32_t>(language));
  return kind != nullptr ? kind->name : std::string_view("?");
}

std::optional<Language> parse_language(std::string_view text) {
  for (const EntryKind* kind : table()) {
    if (kind->name == text) return kind->language;
  }
  return std::nullopt;
}

}  // namespace zerojit
