#include "command_line.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <set>

#include "option_values.hpp"

namespace zerojit::tool {
namespace {

// The commands of a tool for `families`: `run` only when a family can run.
std::vector<std::string> commands_of(std::span<const Family> families) {
  std::vector<std::string> commands = {"warmup", "keys"};
  if (std::any_of(families.begin(), families.end(), [](const Family& f) { return bool(f.run); })) {
    commands.push_back("run");
  }
  commands.push_back("cache");
  return commands;
}
const std::vector<std::string> kCacheActions = {"ls",      "verify", "gc",   "clear",
                                                "explain", "push",   "pull", "misses"};

// "ls, verify, gc, clear and explain"
std::string listed(const std::vector<std::string>& words, const std::string& last = " and ") {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == words.size() ? last : ", ") + words[i];
  }
  return out;
}

bool is_option(const std::string& word) { return word.size() > 1 && word[0] == '-'; }

// The command the arguments name, read before CLI11 parses them so that a mistyped command is
// named as such (CLI11 would only say that a subcommand is required): the first word that is
// not an option, and for `cache` the word after it. Top-level options take no values, so the
// first other word is the command.
std::optional<ToolError> read_command_words(const std::vector<std::string>& arguments,
                                            const std::vector<std::string>& kCommands,
                                            CommandLine& line) {
  const std::string& tool = program_name();
  // Words after `--` are arguments, never the command (parse_command_line refuses them).
  const auto option = [&](std::size_t at) {
    return arguments[at] != "--" && is_option(arguments[at]);
  };
  std::size_t i = 0;
  while (i < arguments.size() && option(i)) ++i;
  if (i == arguments.size() || arguments[i] == "--") return std::nullopt;
  const std::string& word = arguments[i];
  if (std::find(kCommands.begin(), kCommands.end(), word) == kCommands.end()) {
    const auto guess = nearest(word, kCommands);
    return ToolError{kExitUsage, "unknown command \"" + word + "\"",
                     (guess ? "did you mean `" + tool + " " + *guess + "`? " : std::string()) +
                         "The commands are " + listed(kCommands) + "; see `" + tool + " --help`"};
  }
  line.name = word;
  if (word != "cache") return std::nullopt;
  ++i;
  while (i < arguments.size() && option(i)) ++i;
  if (i == arguments.size() || arguments[i] == "--") return std::nullopt;
  const std::string& action = arguments[i];
  if (std::find(kCacheActions.begin(), kCacheActions.end(), action) == kCacheActions.end()) {
    const auto guess = nearest(action, kCacheActions);
    return ToolError{
        kExitUsage, "unknown cache command \"" + action + "\"",
        (guess ? "did you mean `" + tool + " cache " + *guess + "`? " : std::string()) +
            "The cache commands are " + listed(kCacheActions) + "; see `" + tool +
            " cache --help`"};
  }
  line.name = "cache " + action;
  return std::nullopt;
}

void add_json_flag(CLI::App& app, bool& target) {
  app.add_flag("--json", target, "Machine-readable output: one JSON document on standard output");
}

CLI::Option* add_remote_option(CLI::App& app, const std::string& command, std::string& target) {
  return add_text_option(app, command, "--remote-cache", target, "URL",
                         "A Redis cache shared by hosts, after the disk: redis://[user:password@]"
                         "host[:port][/db], rediss://..., unix:///path (also "
                         "$ZEROJIT_REMOTE_CACHE; " +
                             docs_page("CACHE.md") + ")");
}

void add_cache_selection(CLI::App& app, const std::string& command, std::string& cache_dir,
                         std::vector<std::string>& layers, bool& allow_shared,
                         std::string& remote_cache) {
  add_text_option(app, command, "--cache-dir", cache_dir, "DIR",
                  "Compile cache root (default: $ZEROJIT_CACHE_DIR, $XDG_CACHE_HOME/zerojit or "
                  "~/.cache/zerojit)")
      ->group("Cache");
  add_text_list_option(app, command, "--layer", layers, "DIR",
                       "A read-only cache layer searched first, e.g. an ahead-of-time pack "
                       "(repeatable; also $ZEROJIT_CACHE_READONLY_DIRS)")
      ->group("Cache");
  app.add_flag("--allow-shared", allow_shared,
               "Accept a cache root or layer other users can write (also "
               "ZEROJIT_CACHE_ALLOW_SHARED=1; " +
                   docs_page("CACHE.md") + ")")
      ->group("Cache");
  add_remote_option(app, command, remote_cache)->group("Cache");
}

// What the configuration options of every command write into while parsing.
struct FamilyChoice {
  std::string name;  // --family
  std::string flag;  // a family flag given (e.g. --examples)
  std::string flag_family;
};

// --family, the family flags, --arch and every family's options (run-only ones for `run`),
// on one command. A flag two families share is added once, with the first family's check.
void add_configuration(CLI::App& app, const std::string& command, std::span<const Family> families,
                       const ToolOptions& tool, bool run, FamilyChoice& choice, CommandLine& line) {
  if (families.size() > 1) {
    std::string names;
    for (const Family& family : families) {
      names += (names.empty() ? "" : ", ") + family.name +
               (family.summary.empty() ? "" : " (" + family.summary + ")");
    }
    add_text_option(app, command, "--family", choice.name, "NAME",
                    "Kernel family: " + names + " [" + families.front().name + "]")
        ->group("Configuration");
  }
  for (const FamilyFlag& flag : tool.family_flags) {
    app.add_flag_callback(
           flag.flag,
           [&choice, flag] {
             choice.flag = flag.flag;
             choice.flag_family = flag.family;
           },
           flag.help)
        ->group("Configuration");
  }
  add_arch_option(app, command, line.arch,
                  "Target arch, compiled for when no GPU loads the kernels [sm_90a]")
      ->group("Configuration");
  std::set<std::string> added;
  for (const Family& family : families) {
    for (const FamilyOption& option : family.options) {
      if ((option.run_only && !run) || !added.insert(option.flag).second) continue;
      const std::string flag = option.flag;
      add_family_option(app, command, option, [&line, flag](const std::string& value) {
        line.values.emplace_back(flag, value);
      });
    }
  }
}

// The family the options select; every family option given must be one of its own.
std::optional<ToolError> resolve_family(std::span<const Family> families,
                                        const FamilyChoice& choice, CommandLine& line) {
  std::vector<std::string> names;
  for (const Family& family : families) names.push_back(family.name);
  std::string wanted = choice.name;
  if (!choice.flag.empty()) {
    if (!wanted.empty() && wanted != choice.flag_family) {
      return option_error(line.name,
                          choice.flag + " selects the family " + choice.flag_family +
                              ", and --family names " + wanted,
                          "give one of them");
    }
    wanted = choice.flag_family;
  }
  if (wanted.empty()) wanted = families.front().name;
  for (const Family& family : families) {
    if (family.name == wanted) line.family = &family;
  }
  if (line.family == nullptr) {
    const auto guess = nearest(wanted, names);
    return option_error(
        line.name, "--family takes one of " + listed(names, " or ") + ", not \"" + wanted + "\"",
        guess ? "did you mean " + *guess + "?" : "");
  }
  for (const auto& given : line.values) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string& flag = given.first;
    const auto& own = line.family->options;
    if (std::any_of(own.begin(), own.end(),
                    [&](const FamilyOption& o) { return o.flag == flag; })) {
      continue;
    }
    std::string owner;
    for (const Family& family : families) {
      for (const FamilyOption& option : family.options) {
        if (option.flag == flag && owner.empty()) owner = family.name;
      }
    }
    return option_error(
        line.name, flag + " is an option of the family " + owner + ", not of " + line.family->name,
        "drop it, or pass --family " + owner);
  }
  return std::nullopt;
}

void add_warmup(CLI::App& app, WarmupCommand& command, std::span<const Family> families,
                const ToolOptions& tool, FamilyChoice& choice, CommandLine& line) {
  CLI::App* sub = app.add_subcommand(
      "warmup",
      "Compile every kernel specialization a configuration can reach (the manifest), and load "
      "it on each GPU");
  add_configuration(*sub, "warmup", families, tool, false, choice, line);
  add_cache_selection(*sub, "warmup", command.cache.cache_dir, command.cache.layers,
                      command.cache.allow_shared, command.cache.remote_cache);
  add_devices_option(*sub, "warmup", command.devices,
                     "GPUs to load on: all, or a list such as 0,1 [all]");
  add_whole_number_option(*sub, "warmup", "--jobs", command.jobs, 0, 1024,
                          "Parallel compiles, 0: one per core [0]");
  sub->add_flag("--in-process", command.in_process,
                "Compile in threads of this process instead of forked worker processes (NVRTC "
                "scales better across processes)");
  sub->add_flag("--compile-only", command.compile_only,
                "Compile (into the cache) and load nothing; with --cache-dir this makes an "
                "ahead-of-time pack");
  add_text_list_option(*sub, "warmup", "--also", command.also, "FILE",
                       "Also warm the keys serving processes missed, as recorded in this misses "
                       "file (ZEROJIT_MISSES_FILE; repeatable)");
  add_text_option(*sub, "warmup", "--ready-file", command.ready_file, "PATH",
                  "Remove PATH when warmup starts and write it (JSON: time, keys, manifest "
                  "digest) only when warmup succeeded: a readiness probe's file");
  add_text_option(*sub, "warmup", "--metrics-file", command.metrics_file, "PATH",
                  "Write the counters after warmup to PATH in Prometheus text format (also when "
                  "it failed; docs/METRICS.md)");
  sub->add_flag("-v,--verbose", command.verbose, "Also list every key with its origin and time");
  add_json_flag(*sub, command.json);
}

void add_keys(CLI::App& app, std::span<const Family> families, const ToolOptions& tool,
              FamilyChoice& choice, CommandLine& line) {
  CLI::App* sub = app.add_subcommand(
      "keys", "Print the warmup manifest of a configuration: one line per (kernel, key)");
  add_configuration(*sub, "keys", families, tool, false, choice, line);
  add_json_flag(*sub, line.keys.json);
}

// What a family says about its `run` (the one family with a run, or the first that says it).
std::string run_text(std::span<const Family> families, std::string Family::*field,
                     const std::string& otherwise) {
  for (const Family& family : families) {
    if (family.run && !(family.*field).empty()) return family.*field;
  }
  return otherwise;
}

void add_run(CLI::App& app, RunRequest& command, std::span<const Family> families,
             const ToolOptions& tool, FamilyChoice& choice, CommandLine& line) {
  CLI::App* sub = app.add_subcommand(
      "run", run_text(families, &Family::run_help,
                      "Warm up, arm the monitor, and drive the family's battery of runtime calls "
                      "through the kernels (on each GPU; without one, through dispatch alone), "
                      "each call's key checked against the warmup manifest"));
  add_configuration(*sub, "run", families, tool, true, choice, line);
  add_cache_selection(*sub, "run", command.cache_dir, command.layers, command.allow_shared,
                      command.remote_cache);
  add_whole_number_option(
      *sub, "run", "--steps", command.steps, 1, 100'000'000,
      run_text(families, &Family::steps_help, "Steps of the battery") + " [2000]");
  add_unsigned_option(*sub, "run", "--seed", command.seed, "Seed of the battery [1]");
  add_choice_option(*sub, "run", "--monitor", command.monitor, {"off", "warn", "error"},
                    "What a compile after warmup does: off, warn (report, go on) or error (fail "
                    "with exit code 1) [error]");
  sub->add_flag("--dispatch-only", command.dispatch_only,
                "No launches: check each call's key against the manifest (the default without "
                "a GPU)");
  add_devices_option(*sub, "run", command.devices,
                     "GPUs to run on: all, or a list such as 0,1 [all]");
  add_whole_number_option(*sub, "run", "--jobs", command.jobs, 0, 1024,
                          "Parallel compiles during warmup, 0: one per core [0]");
  sub->add_flag("--in-process", command.in_process,
                "Compile in threads of this process instead of forked worker processes");
  add_json_flag(*sub, command.json);
}

// The options every cache command takes.
CLI::App* add_cache_action(CLI::App& cache, const std::string& action, const std::string& help,
                           CacheCommand& command) {
  CLI::App* sub = cache.add_subcommand(action, help);
  const std::string name = "cache " + action;
  add_text_option(*sub, name, "--cache-dir", command.cache_dir, "DIR",
                  "Cache root (default: $ZEROJIT_CACHE_DIR, $XDG_CACHE_HOME/zerojit or "
                  "~/.cache/zerojit)");
  add_text_list_option(*sub, name, "--layer", command.layers, "DIR",
                       "A read-only layer searched before the root (repeatable; also "
                       "$ZEROJIT_CACHE_READONLY_DIRS)");
  sub->add_flag("--allow-shared", command.allow_shared,
                "Accept a root other users can write (also ZEROJIT_CACHE_ALLOW_SHARED=1)");
  add_json_flag(*sub, command.json);
  return sub;
}

void add_cache(CLI::App& app, CacheCommand& command, std::span<const Family> families,
               const ToolOptions& tool, FamilyChoice& choice, CommandLine& line) {
  CLI::App* cache = app.add_subcommand(
      "cache", "Manage the persistent compile cache (" + docs_page("CACHE.md") + ")");
  // Only so that `zerojit cache --json` (no command) fails with a JSON document.
  add_json_flag(*cache, command.json);
  CLI::App* ls =
      add_cache_action(*cache, "ls", "List entries: kernel, key, arch, size, age, layer", command);
  ls->add_flag("--long", command.long_listing,
               "Also each entry's language, compiler and what it fixes about its launch");
  CLI::App* verify = add_cache_action(
      *cache, "verify", "Check every entry's checksum and identity (exit 4 when some are bad)",
      command);
  verify->add_flag("--set-aside", command.set_aside, "Move bad entries of the root to quarantine/");
  CLI::App* gc = add_cache_action(
      *cache, "gc", "Trim the cache to its quota, least recently used first; remove leftover files",
      command);
  add_size_option(*gc, "cache gc", "--max-size", command.max_size,
                  "Quota to trim to: bytes, or with K, M, G, T, P or E (powers of 1024, e.g. 512M) "
                  "(default $ZEROJIT_CACHE_MAX_BYTES or 1G)");
  add_cache_action(*cache, "clear",
                   "Remove every entry (entries other processes are reading are left)", command);
  CLI::App* explain = add_cache_action(
      *cache, "explain",
      "For each key of the manifest: hit, or which identity components differ from the nearest "
      "entry of its kernel",
      command);
  // The same configuration options as warmup: the manifest explained is the one warmup compiles.
  add_configuration(*explain, "cache explain", families, tool, false, choice, line);
  add_text_option(*explain, "cache explain", "--kernel", command.kernel, "NAME",
                  "Only this kernel");
  explain
      ->add_option_function<std::string>(
          "--key",
          [&command](const std::string& key) {
            refuse_option_as_value("cache explain", "--key", key);
            command.key = key;
          },
          "Only keys whose text contains this")
      ->type_name("TEXT");
  add_text_option(*explain, "cache explain", "--nvrtc-version", command.nvrtc_version, "VERSION",
                  "NVRTC version to explain for (default: this machine's)");
  explain->add_flag("--misses", command.misses_only, "Only keys that miss");
  CLI::App* misses = cache->add_subcommand(
      "misses",
      "The keys serving processes missed (a ZEROJIT_MISSES_FILE): kernel, key, how many "
      "processes, since when; warm them with warmup --also FILE");
  misses->add_option("FILE", command.misses_file, "The misses file")->required();
  add_json_flag(*misses, command.json);
  for (const char* action : {"push", "pull"}) {
    const bool push = std::string_view(action) == "push";
    CLI::App* sub = add_cache_action(
        *cache, action,
        push ? "Copy the manifest's entries from the disk cache to the remote (--remote-cache)"
             : "Copy the manifest's entries from the remote (--remote-cache) to the disk cache",
        command);
    const std::string name = std::string("cache ") + action;
    // The same configuration options as warmup: the entries copied are those warmup compiles.
    add_configuration(*sub, name, families, tool, false, choice, line);
    add_remote_option(*sub, name, command.remote_cache);
  }
}

// The options of the command being parsed, for "did you mean".
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

const CLI::App* deepest_parsed(const CLI::App& app) {
  const CLI::App* current = &app;
  for (;;) {
    const auto parsed = current->get_subcommands();
    if (parsed.empty()) return current;
    current = parsed.front();
  }
}

// The commands other than `name` that take `option`: "run", "warmup and run", ...
std::vector<std::string> commands_taking(const CLI::App& app, const std::string& option,
                                         const std::string& name) {
  std::vector<std::string> commands;
  const auto visit = [&](const CLI::App& command, const std::string& label) {
    const std::vector<std::string> names = option_names(command);
    if (label != name && std::find(names.begin(), names.end(), option) != names.end()) {
      commands.push_back(label);
    }
  };
  for (const CLI::App* command : app.get_subcommands({})) {
    const std::string word = command->get_name();
    if (word != "cache") {
      visit(*command, word);
      continue;
    }
    for (const CLI::App* action : command->get_subcommands({})) {
      visit(*action, "cache " + action->get_name());
    }
  }
  return commands;
}

// CLI11's own errors (unknown options, missing values), said in words with what to do.
ToolError translate(const CLI::ParseError& error, const CLI::App& app, const std::string& name) {
  const CLI::App* command = deepest_parsed(app);
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    const std::vector<std::string> extras = app.remaining(true);
    const std::string first = extras.empty() ? std::string() : extras.front();
    if (is_option(first)) {
      const std::string option = first.substr(0, first.find('='));
      // An option of another command (--steps given to keys): say which commands take it.
      const std::vector<std::string> others = commands_taking(app, option, name);
      if (!others.empty()) {
        std::vector<std::string> quoted;
        for (const std::string& other : others) quoted.push_back("`" + other + "`");
        return ToolError{kExitUsage,
                         "`" + program_name() + " " + name + "` takes no " + option + ": only " +
                             listed(quoted) + (others.size() == 1 ? " takes" : " take") + " it",
                         "drop " + option + " here; " + see_help(others.front())};
      }
      const auto guess = nearest(option, option_names(*command));
      return option_error(name,
                          "unknown option " + option + " for `" + program_name() + " " + name + "`",
                          guess ? "did you mean " + *guess + "?" : "");
    }
    return option_error(name,
                        "unexpected argument \"" + first + "\" for `" + program_name() + " " +
                            name + "` (it takes options only)",
                        "");
  }
  const std::string message = error.what();
  // "--block-size: 1 required VALUE missing", "--steps: At Most 1 required but received 2":
  // the option comes first.
  const std::size_t colon = message.find(": ");
  const std::string option = colon == std::string::npos ? std::string() : message.substr(0, colon);
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr && is_option(option)) {
    if (message.find("missing") != std::string::npos) {
      return option_error(name, option + " needs a value", "");
    }
    if (message.find("At Most") != std::string::npos) {
      return option_error(name, option + " is given more than once", "give it once");
    }
  }
  // "Could not convert: --json = maybe": a value given to a flag.
  constexpr std::string_view kConversion = "Could not convert: ";
  if (dynamic_cast<const CLI::ConversionError*>(&error) != nullptr &&
      message.starts_with(kConversion)) {
    const std::string rest = message.substr(kConversion.size());
    const std::size_t equals = rest.find(" = ");
    if (equals != std::string::npos && is_option(rest.substr(0, equals))) {
      return option_error(name,
                          rest.substr(0, equals) + " is a flag: it takes no value, not \"" +
                              rest.substr(equals + 3) + "\"",
                          "drop the value");
    }
  }
  return option_error(name, "the command line is not understood: " + message, "");
}

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& arguments,
                               std::span<const Family> families, const ToolOptions& options) {
  CommandLine line;
  const std::string& tool = program_name();
  const std::vector<std::string> kCommands = commands_of(families);
  for (const std::string& argument : arguments) {
    if (argument == "--") break;
    if (argument == "--json") line.json = true;
  }
  if (auto error = read_command_words(arguments, kCommands, line)) {
    line.error = std::move(error);
    return line;
  }
  for (const std::string& argument : arguments) {
    if (argument == "--") break;
    // The pre-scan above decides the output format before parsing: a value would be ignored.
    if (argument.starts_with("--json=")) {
      line.error = option_error(line.name, "--json takes no value, got \"" + argument + "\"",
                                "write --json alone");
      return line;
    }
  }
  // `--` ends the options, for every command: what follows it is an argument, and no command
  // takes one. (Left to CLI11, `keys -- --json` ran as plain `keys`.) A `--` at the end is
  // accepted.
  const auto end_of_options = std::find(arguments.begin(), arguments.end(), "--");
  if (end_of_options != arguments.end() && end_of_options + 1 != arguments.end()) {
    const std::string command = line.name.empty() ? tool : tool + " " + line.name;
    line.error =
        option_error(line.name,
                     "unexpected argument \"" + *(end_of_options + 1) + "\" after `--` for `" +
                         command + "` (it takes options only, and `--` ends them)",
                     "drop the `--`, or put the options before it");
    return line;
  }

  CLI::App app{options.description.empty()
                   ? tool +
                         ": compile every kernel specialization before serving, and prove that "
                         "nothing compiles afterwards"
                   : options.description};
  app.name(tool);
  app.require_subcommand(0, 1);
  bool version = false;
  bool top_json = false;
  app.add_flag("--version", version,
               "The zerojit version, and the NVRTC and CUDA driver found (or why not)");
  app.add_flag("--json", top_json, "With --version: as a JSON document");
  FamilyChoice choice;
  add_warmup(app, line.warmup, families, options, choice, line);
  add_keys(app, families, options, choice, line);
  if (std::find(kCommands.begin(), kCommands.end(), "run") != kCommands.end()) {
    add_run(app, line.run, families, options, choice, line);
  }
  add_cache(app, line.cache, families, options, choice, line);
  app.footer(
      "Exit codes: 0 ok, 1 runtime JIT (monitor error mode), 2 usage or bad configuration, "
      "3 compile failure, 4 bad cache entries (cache verify), 5 other failure (also a missing "
      "NVRTC or driver).\n"
      "Run `" +
      tool + " <command> --help` for a command's options." +
      (options.epilog.empty() ? std::string() : " " + options.epilog));

  // CLI11 reads its arguments from the back; the `--` (now the last word, if any) is left out.
  std::vector<std::string> reversed(std::make_reverse_iterator(end_of_options), arguments.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    line.help = app.help();
    return line;
  } catch (const CLI::CallForAllHelp&) {
    line.help = app.help("", CLI::AppFormatMode::All);
    return line;
  } catch (const CLI::ParseError& error) {
    line.error = translate(error, app, line.name);
    return line;
  } catch (const ToolError& error) {
    line.error = error;
    return line;
  }

  const CLI::App* command = app.get_subcommands().empty() ? nullptr : app.get_subcommands()[0];
  if (command == nullptr) {
    if (version) {
      line.command = Command::version;
      line.name = "version";
      return line;
    }
    line.error =
        ToolError{kExitUsage, "no command given: " + tool + " needs a subcommand",
                  "name one of " + listed(kCommands, " or ") + "; see `" + tool + " --help`"};
    return line;
  }
  const std::string& word = command->get_name();
  if (word == "warmup") {
    line.command = Command::warmup;
    line.warmup.json = line.json;
  } else if (word == "keys") {
    line.command = Command::keys;
    line.keys.json = line.json;
  } else if (word == "run") {
    line.command = Command::run;
    line.run.json = line.json;
  } else {
    const auto actions = command->get_subcommands();
    if (actions.empty()) {
      line.error = ToolError{
          kExitUsage, "`" + tool + " cache` needs a command",
          "name one of " + listed(kCacheActions, " or ") + "; see `" + tool + " cache --help`"};
      return line;
    }
    const std::string& action = actions[0]->get_name();
    line.command = Command::cache;
    line.cache.action = action == "ls"       ? CacheAction::ls
                        : action == "verify" ? CacheAction::verify
                        : action == "gc"     ? CacheAction::gc
                        : action == "clear"  ? CacheAction::clear
                        : action == "push"   ? CacheAction::push
                        : action == "pull"   ? CacheAction::pull
                        : action == "misses" ? CacheAction::misses
                                             : CacheAction::explain;
    line.cache.json = line.json;
  }
  if (version) {
    line.command = Command::none;  // one outcome: the usage error
    line.error =
        option_error(line.name, "--version is an option of " + tool + " itself, not of a command",
                     "run `" + tool + " --version` alone");
    return line;
  }
  const bool configured =
      line.command == Command::warmup || line.command == Command::keys ||
      line.command == Command::run ||
      (line.command == Command::cache &&
       (line.cache.action == CacheAction::explain || line.cache.action == CacheAction::push ||
        line.cache.action == CacheAction::pull));
  if (!configured) return line;
  if (auto error = resolve_family(families, choice, line)) {
    line.command = Command::none;
    line.error = std::move(error);
    return line;
  }
  line.warmup.family = line.keys.family = line.family;
  line.warmup.values = line.keys.values = line.values;
  line.warmup.arch = line.keys.arch = line.arch;
  line.run.family = line.family->name;
  line.run.values = line.values;
  line.run.arch = line.arch;
  return line;
}

}  // namespace zerojit::tool
