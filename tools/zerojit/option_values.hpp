// The values options take, each with a documented domain: whole numbers within a range, byte
// sizes, one of a few words, device lists, architecture names, non-empty paths. A value outside
// its domain is a ToolError (exit 2) that names the option, says what is wrong in words and
// what is allowed, and points at the command's --help. Nothing here compiles, touches the disk
// or asks the driver, so the whole command line can be checked (and fuzzed) before anything runs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exit_codes.hpp"
#include "zerojit/tool.hpp"

namespace zerojit::tool {

// The tool's name in messages and --help ("zerojit", or a project's own tool built on
// run_cli). Set once, before the command line is parsed.
void set_program_name(std::string name);
const std::string& program_name();

// A value as an error message shows it: quoted, control bytes escaped (it goes to a terminal),
// and cut short when long.
std::string shown(std::string_view text);

// CLI11 hands an option the next word as its value even when that word is an option
// (`--cache-dir --json` would name a directory "--json"); every value option refuses a value
// that starts with "--" through this. A path that starts so can be given as ./--name.
void refuse_option_as_value(std::string_view command, const std::string& option,
                            const std::string& value);

// A page of zerojit's documentation, as the tool's text names it: "docs/CACHE.md" in zerojit's
// own tool, "zerojit's docs/CACHE.md" in a project's (whose users have other docs/).
std::string docs_page(std::string_view page);

// "see `zerojit warmup --help`": the what-to-do of every usage error of `command`.
std::string see_help(std::string_view command);

// A usage error of `option`: message as given, hint = `hint` then the command's --help.
ToolError option_error(std::string_view command, std::string message, std::string_view hint = {});

// A whole number in decimal digits only (no sign for a domain that starts at 0 or above, no
// spaces, no hex), within [minimum, maximum].
std::optional<std::int64_t> parse_whole_number(std::string_view text, std::int64_t minimum,
                                               std::int64_t maximum);
std::optional<std::uint64_t> parse_unsigned_number(std::string_view text, std::uint64_t maximum);

// "1,048,576"
std::string number_text(std::uint64_t value);

// Adds `--name N`, parsed into `target` when the command line is parsed; a value outside
// [minimum, maximum] (or not a number, or overflowing) is a usage error naming the option.
CLI::Option* add_whole_number_option(CLI::App& app, std::string_view command,
                                     const std::string& name, std::int64_t& target,
                                     std::int64_t minimum, std::int64_t maximum,
                                     const std::string& help);
CLI::Option* add_whole_number_option(CLI::App& app, std::string_view command,
                                     const std::string& name, int& target, int minimum, int maximum,
                                     const std::string& help);
CLI::Option* add_unsigned_option(CLI::App& app, std::string_view command, const std::string& name,
                                 std::uint64_t& target, const std::string& help);

// A byte count, read by the library's one size parser (zerojit/bytes.hpp), as
// ZEROJIT_CACHE_MAX_BYTES is.
CLI::Option* add_size_option(CLI::App& app, std::string_view command, const std::string& name,
                             std::optional<std::uint64_t>& target, const std::string& help);

// One of `choices` (exactly as written).
CLI::Option* add_choice_option(CLI::App& app, std::string_view command, const std::string& name,
                               std::string& target, std::vector<std::string> choices,
                               const std::string& help);

// A non-empty text (a path, a name); `type` is what --help calls it (DIR, PATH, NAME).
CLI::Option* add_text_option(CLI::App& app, std::string_view command, const std::string& name,
                             std::string& target, const std::string& type, const std::string& help);
CLI::Option* add_text_list_option(CLI::App& app, std::string_view command, const std::string& name,
                                  std::vector<std::string>& target, const std::string& type,
                                  const std::string& help);

// A family's option (zerojit/tool.hpp): its value is checked (not an option, its whole-number
// domain, its own check) and then passed to `store`.
CLI::Option* add_family_option(CLI::App& app, std::string_view command, const FamilyOption& option,
                               std::function<void(const std::string&)> store);

// --arch ARCH, checked with the compiler's rule.
CLI::Option* add_arch_option(CLI::App& app, std::string_view command,
                             std::optional<std::string>& target, const std::string& help);

// --devices all|LIST: "all" (or empty) -> {}, else distinct ordinals such as 0,1. Throws
// ToolError (usage) naming --devices.
std::vector<int> parse_devices(const std::string& text);
CLI::Option* add_devices_option(CLI::App& app, std::string_view command, std::string& target,
                                const std::string& help);

// A target architecture as the compiler accepts it (sm_90a, sm_100a, sm_89): checked with the
// compiler's own rule, so what is accepted here compiles. `what` names it in the message.
void check_arch(std::string_view command, const std::string& option, const std::string& arch,
                std::string_view what = "a target architecture");

// The candidate nearest to `word` (edit distance at most 2, or a prefix), for "did you mean".
std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string>& candidates);

}  // namespace zerojit::tool
