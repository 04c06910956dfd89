// `zerojit cache ls | verify | gc | clear | explain`: the disk cache's management commands.
//
// Exit codes: 0 ok; 2 bad usage or a cache root that cannot be used (refused as writable by
// others, not a directory, ...); 4 `verify` found bad entries.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>

#include "zerojit/registry.hpp"

namespace zerojit::tool {

inline constexpr int kExitCacheBadEntries = 4;

struct CacheCommandContext {
  // The keys `cache explain` explains: the same manifest that `warmup` compiles.
  std::function<Manifest()> manifest;
  // Optional: adds the options that select that manifest (model, serving options, ...) to the
  // `cache explain` command; `manifest` reads them when it is called.
  std::function<void(CLI::App& explain)> add_manifest_options;
  // Set by the cache command that ran, to the process's exit code.
  std::optional<int> exit_code;
};

// Adds the `cache` subcommand (and its five commands) to `app`. The chosen command runs when
// app.parse() completes and leaves its exit code in `context`, which must outlive the parse.
void add_cache_commands(CLI::App& app, CacheCommandContext& context);

}  // namespace zerojit::tool
