// `zerojit cache push` / `cache pull`: copy a manifest's entries between the disk cache and the
// remote tier (docs/CACHE.md, "The remote tier"). Both verify what they copy: push sends only
// entries that the disk cache verified, pull keeps only entries that verify against the
// identity asked for.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cache_command.hpp"
#include "exit_codes.hpp"
#include "json_output.hpp"
#include "option_values.hpp"
#include "setup.hpp"
#include "terminal.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/remote_cache.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {

namespace {

// Why a pull of one identity got nothing, from what the remote counted meanwhile.
std::string pull_problem(const RemoteCacheCounters& before, const RemoteCacheCounters& after) {
  if (after.bad_entries > before.bad_entries) return "bad entry in the remote (not loaded)";
  if (after.too_large > before.too_large) return "over the entry limit (not loaded)";
  if (after.errors > before.errors || after.skipped > before.skipped) return "remote error";
  return "not in the remote";
}

}  // namespace

int run_remote_transfer(const CacheCommand& command, const CacheCommandContext& context) {
  const bool push = command.action == CacheAction::push;
  const std::string name(cache_command_name(command.action));
  CacheSelection selection;
  selection.cache_dir = command.cache_dir;
  selection.layers = command.layers;
  selection.allow_shared = command.allow_shared;
  selection.remote_cache = command.remote_cache;
  install_cache(selection, name);
  RemoteCache* remote = installed_remote_cache();
  if (remote == nullptr) {
    throw option_error(name, "no remote cache is named",
                       "pass --remote-cache URL or set ZEROJIT_REMOTE_CACHE");
  }
  ArtifactStore* local = local_store_of(Runtime::instance().artifact_store().get());
  std::string not_kept;
  if (local == nullptr || (!push && !cache_is_writable(not_kept))) {
    throw option_error(name,
                       "no writable disk cache to copy " + std::string(push ? "from" : "into") +
                           (not_kept.empty() ? std::string() : ": " + not_kept),
                       "name one with --cache-dir DIR");
  }
  if (const RemoteProbe probe = remote->probe(); probe.status != RemoteProbe::Status::ok) {
    throw ToolError{kExitFailure, probe.message,
                    "check that the server is up and reachable from here"};
  }
  if (!context.manifest)
    throw ToolError{kExitUsage, "this tool has no kernel manifest to copy", ""};
  const Manifest manifest = context.manifest();
  DiskCache* disk = installed_disk_cache();

  nlohmann::json missing = nlohmann::json::array();
  std::string listed;
  std::size_t copied = 0;
  for (const ManifestEntry& entry : manifest.entries) {
    const ProgramIdentity identity = Runtime::instance().identity_of(entry.program(), command.arch);
    std::string problem;
    if (push) {
      const std::optional<CompiledArtifact> artifact = local->find(identity);
      if (!artifact) {
        problem = "not in the disk cache";
      } else if (!remote->store(*artifact)) {
        problem = "not stored in the remote (see the warning above)";
      }
    } else {
      const RemoteCacheCounters before = remote->counters();
      const std::optional<CompiledArtifact> artifact = remote->fetch(identity);
      if (!artifact) {
        problem = pull_problem(before, remote->counters());
      } else {
        local->publish(*artifact);
        const auto kept = disk != nullptr ? disk->root_entry(identity) : std::nullopt;
        if (disk != nullptr && (!kept || kept->busy || kept->problem != EntryProblem::none)) {
          problem = "fetched but not saved on disk (see the cache warnings above)";
        }
      }
    }
    if (problem.empty()) {
      ++copied;
      continue;
    }
    missing.push_back({{"kernel", entry.kernel->name()},
                       {"key", entry.key_text},
                       {"identity", identity.hex()},
                       {"problem", problem}});
    listed += "\n  " + entry.kernel->name() + " [" + entry.key_text + "]: " + problem;
  }

  const std::string summary = std::string(push ? "pushed " : "pulled ") + std::to_string(copied) +
                              " of " + std::to_string(manifest.size()) + " entries " +
                              (push ? "to " : "from ") + remote->describe();
  std::optional<ToolError> failure;
  if (!missing.empty()) {
    failure = ToolError{
        kExitFailure,
        summary + "; " + std::to_string(missing.size()) + " could not be copied:" + listed,
        push ? "warm them first (" + program_name() + " warmup --compile-only --cache-dir DIR)"
             : std::string("push them from a host that has them, or warm them here")};
  }
  if (command.json) {
    nlohmann::json result = {{"copied", copied},
                             {"keys", manifest.size()},
                             {"remote", remote->describe()},
                             {"remote_cache", parse_library_json(to_json(remote->counters()))}};
    if (!missing.empty()) result["missing"] = missing;
    if (failure) print_error(failure->message, failure->hint);
    print_json(failure ? failure_document(name, *failure, std::move(result))
                       : success_document(name, std::move(result)));
    return failure ? failure->exit_code : kExitOk;
  }
  if (failure) throw *failure;
  std::printf("%s %s\n", Style::for_stream(stdout).green("ok:").c_str(), summary.c_str());
  return kExitOk;
}

}  // namespace zerojit::tool
