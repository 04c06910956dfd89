// `zerojit cache misses FILE`: what a misses file (ZEROJIT_MISSES_FILE of serving processes)
// learned: each missed (kernel, key), how many processes missed it, since when; and the lines
// it skipped. `zerojit warmup --also FILE` warms those keys.
#include <cstdio>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "cache_command.hpp"
#include "exit_codes.hpp"
#include "json_output.hpp"
#include "terminal.hpp"
#include "zerojit/misses.hpp"

namespace zerojit::tool {
namespace {

std::string utc_text(std::int64_t seconds) {
  const std::time_t time = static_cast<std::time_t>(seconds);
  std::tm parts{};
  gmtime_r(&time, &parts);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M UTC", &parts);
  return buffer;
}

}  // namespace

MissesFile read_misses_for_tool(const std::string& path, std::string_view command) {
  try {
    return read_misses(path);
  } catch (const Error& error) {
    throw ToolError{kExitUsage, error.what(),
                    "give `" + std::string(command) +
                        "` the misses file serving processes write (their ZEROJIT_MISSES_FILE)"};
  }
}

int run_misses(const CacheCommand& command) {
  const MissesFile file = read_misses_for_tool(command.misses_file, "cache misses");
  if (command.json) {
    nlohmann::ordered_json misses = nlohmann::ordered_json::array();
    for (const LearnedMiss& miss : file.misses) {
      misses.push_back({{"kernel", miss.kernel},
                        {"key", miss.key_text},
                        {"key_fields", nlohmann::ordered_json::parse(miss.key_json)},
                        {"processes", miss.count},
                        {"first_seen", miss.first_seen},
                        {"last_seen", miss.last_seen},
                        {"descriptors", miss.descriptors}});
    }
    print_json(success_document(
        "cache misses",
        {{"file", command.misses_file}, {"misses", misses}, {"skipped", file.skipped}}));
    return kExitOk;
  }
  const Style out = Style::for_stream(stdout);
  Table table(
      {{"kernel"}, {"key"}, {"processes", Table::Align::right}, {"first seen"}, {"last seen"}});
  for (const LearnedMiss& miss : file.misses) {
    table.add_row({miss.kernel, miss.key_text, std::to_string(miss.count),
                   utc_text(miss.first_seen), utc_text(miss.last_seen)});
    if (!miss.descriptors.empty()) table.add_note("  first call: " + miss.descriptors);
  }
  if (!table.empty()) table.print(stdout, out);
  std::printf("%zu missed keys in %s; warm them with: warmup --also %s\n", file.misses.size(),
              command.misses_file.c_str(), command.misses_file.c_str());
  for (const std::string& skipped : file.skipped) {
    print_warning(command.misses_file + ": skipped " + skipped);
  }
  return kExitOk;
}

}  // namespace zerojit::tool
