// `zerojit cache ls | verify | gc | clear | explain | push | pull | misses`: the disk cache's
// management commands. The struct is what the command line says (command_line.cpp fills it);
// nothing in it runs.
//
// Exit codes: 0 ok; 2 bad usage or a cache root that cannot be used (refused as writable by
// others, not a directory, ...); 4 `verify` found bad entries; 5 `explain` without NVRTC and
// without --nvrtc-version.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerojit/misses.hpp"
#include "zerojit/registry.hpp"

namespace zerojit::tool {

inline constexpr int kExitCacheBadEntries = 4;

enum class CacheAction { ls, verify, gc, clear, explain, push, pull, misses };
// "cache ls", ...: the command's name in messages and in the JSON envelope.
std::string_view cache_command_name(CacheAction action);

struct CacheCommand {
  CacheAction action = CacheAction::ls;
  std::string cache_dir;
  std::vector<std::string> layers;
  bool json = false;
  bool allow_shared = false;
  bool set_aside = false;                 // verify
  bool long_listing = false;              // ls: each entry's language, compiler and launch
  std::optional<std::uint64_t> max_size;  // gc
  // explain: the arch to explain for (the configuration's, set when the family is configured)
  std::string arch = "sm_90a";
  std::string kernel;
  std::string key;
  std::string nvrtc_version;
  bool misses_only = false;
  std::string remote_cache;  // push, pull
  std::string misses_file;   // misses
};

struct CacheCommandContext {
  // The keys `cache explain` explains and `cache push|pull` copy: the same manifest that
  // `warmup` compiles for the same family and options.
  std::function<Manifest()> manifest;
};

// `cache push` / `cache pull` (remote_command.cpp): exit 0, or 5 when some key could not be
// copied (listed).
int run_remote_transfer(const CacheCommand& command, const CacheCommandContext& context);

// `cache misses` (misses_command.cpp): the keys a misses file learned.
int run_misses(const CacheCommand& command);
// A misses file read for `command`; a file that cannot be read is a usage error naming it.
MissesFile read_misses_for_tool(const std::string& path, std::string_view command);

// Runs the command and returns its exit code (0, or 4 when verify found bad entries). Throws
// ToolError for a usage problem or a root that cannot be used.
int run_cache_command(const CacheCommand& command, const CacheCommandContext& context);

}  // namespace zerojit::tool
