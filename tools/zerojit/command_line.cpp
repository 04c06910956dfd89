#include "command_line.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "option_values.hpp"

namespace zerojit::tool {
namespace {

const std::vector<std::string> kCommands = {"warmup", "keys", "run", "cache"};
const std::vector<std::string> kCacheActions = {"ls",      "verify", "gc",  "clear",
                                                "explain", "push",   "pull"};

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
                                            CommandLine& line) {
  std::size_t i = 0;
  while (i < arguments.size() && is_option(arguments[i])) ++i;
  if (i == arguments.size() || arguments[i] == "--") return std::nullopt;
  const std::string& word = arguments[i];
  if (std::find(kCommands.begin(), kCommands.end(), word) == kCommands.end()) {
    const auto guess = nearest(word, kCommands);
    return ToolError{kExitUsage, "unknown command \"" + word + "\"",
                     (guess ? "did you mean `zerojit " + *guess + "`? " : std::string()) +
                         "The commands are " + listed(kCommands) + "; see `zerojit --help`"};
  }
  line.name = word;
  if (word != "cache") return std::nullopt;
  ++i;
  while (i < arguments.size() && is_option(arguments[i])) ++i;
  if (i == arguments.size()) return std::nullopt;
  const std::string& action = arguments[i];
  if (std::find(kCacheActions.begin(), kCacheActions.end(), action) == kCacheActions.end()) {
    const auto guess = nearest(action, kCacheActions);
    return ToolError{kExitUsage, "unknown cache command \"" + action + "\"",
                     (guess ? "did you mean `zerojit cache " + *guess + "`? " : std::string()) +
                         "The cache commands are " + listed(kCacheActions) +
                         "; see `zerojit cache --help`"};
  }
  line.name = "cache " + action;
  return std::nullopt;
}

void add_json_flag(CLI::App& app, bool& target) {
  app.add_flag("--json", target,
               "Machine-readable output: one JSON document on standard output (docs/TOOL.md)");
}

CLI::Option* add_remote_option(CLI::App& app, const std::string& command, std::string& target) {
  return add_text_option(app, command, "--remote-cache", target, "URL",
                         "A Redis cache shared by hosts, after the disk: redis://[user:password@]"
                         "host[:port][/db], rediss://..., unix:///path (also "
                         "$ZEROJIT_REMOTE_CACHE; docs/CACHE.md)");
}

void add_cache_selection(CLI::App& app, const std::string& command, CacheSelection& selection) {
  add_text_option(app, command, "--cache-dir", selection.cache_dir, "DIR",
                  "Compile cache root (default: $ZEROJIT_CACHE_DIR, $XDG_CACHE_HOME/zerojit or "
                  "~/.cache/zerojit)")
      ->group("Cache");
  add_text_list_option(app, command, "--layer", selection.layers, "DIR",
                       "A read-only cache layer searched first, e.g. an ahead-of-time pack "
                       "(repeatable; also $ZEROJIT_CACHE_READONLY_DIRS)")
      ->group("Cache");
  app.add_flag("--allow-shared", selection.allow_shared,
               "Accept a cache root or layer other users can write (also "
               "ZEROJIT_CACHE_ALLOW_SHARED=1; docs/CACHE.md)")
      ->group("Cache");
  add_remote_option(app, command, selection.remote_cache)->group("Cache");
}

void add_warmup(CLI::App& app, WarmupCommand& command) {
  CLI::App* sub = app.add_subcommand(
      "warmup",
      "Compile every kernel specialization a configuration can reach (the manifest), and load "
      "it on each GPU");
  add_config_options(*sub, "warmup", command.config);
  add_cache_selection(*sub, "warmup", command.cache);
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
  sub->add_flag("--examples", command.examples,
                "Warm the built-in example kernels instead of a DSv4 configuration");
  sub->add_flag("-v,--verbose", command.verbose, "Also list every key with its origin and time");
  add_json_flag(*sub, command.json);
}

void add_keys(CLI::App& app, KeysCommand& command) {
  CLI::App* sub = app.add_subcommand(
      "keys", "Print the warmup manifest of a configuration: one line per (kernel, key)");
  add_config_options(*sub, "keys", command.config);
  sub->add_flag("--examples", command.examples, "The built-in example kernels instead");
  add_json_flag(*sub, command.json);
}

void add_run(CLI::App& app, RunCommand& command) {
  CLI::App* sub = app.add_subcommand(
      "run",
      "Warm up, arm the monitor, and run a randomized serving battery through the kernels as "
      "the attention layers call them (on each GPU; without one, through dispatch alone)");
  add_config_options(*sub, "run", command.config);
  add_cache_selection(*sub, "run", command.cache);
  add_whole_number_option(*sub, "run", "--steps", command.steps, 1, 100'000'000,
                          "Serving steps (forward passes) [2000]");
  add_unsigned_option(*sub, "run", "--seed", command.seed, "Seed of the battery [1]");
  add_choice_option(*sub, "run", "--monitor", command.monitor, {"off", "warn", "error"},
                    "What a compile after warmup does: off, warn (report, go on) or error (fail "
                    "with exit code 1) [error]");
  sub->add_flag("--dispatch-only", command.dispatch_only,
                "No launches: check each call's key against the manifest (the default without "
                "a GPU)");
  add_whole_number_option(*sub, "run", "--layers", command.layers, 1, 64,
                          "Layers of each kind: sliding-window, C4, C128 [1]");
  add_whole_number_option(*sub, "run", "--max-model-len", command.max_model_len, 0, 2147483647,
                          "Longest sequence of the battery, 0: min(max_position_embeddings, "
                          "65536) [0]");
  add_whole_number_option(*sub, "run", "--max-num-seqs", command.max_num_seqs, 1, 4096,
                          "Requests in one step [128]");
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

void add_cache(CLI::App& app, CacheCommand& command) {
  CLI::App* cache =
      app.add_subcommand("cache", "Manage the persistent compile cache (docs/CACHE.md)");
  // Only so that `zerojit cache --json` (no command) fails with a JSON document.
  add_json_flag(*cache, command.json);
  add_cache_action(*cache, "ls", "List entries: kernel, key, arch, size, age, layer", command);
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
  explain
      ->add_option_function<std::string>(
          "--arch",
          [&command](const std::string& arch) {
            refuse_option_as_value("cache explain", "--arch", arch);
            check_arch("cache explain", "--arch", arch);
            command.arch = arch;
          },
          "Target arch [sm_90a]")
      ->type_name("ARCH");
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
  for (const char* action : {"push", "pull"}) {
    const bool push = std::string_view(action) == "push";
    CLI::App* sub = add_cache_action(
        *cache, action,
        push ? "Copy the manifest's entries from the disk cache to the remote (--remote-cache)"
             : "Copy the manifest's entries from the remote (--remote-cache) to the disk cache",
        command);
    const std::string name = std::string("cache ") + action;
    add_remote_option(*sub, name, command.remote_cache);
    sub->add_flag("--examples", command.examples,
                  "The built-in example kernels' manifest instead of the default DSv4 one");
    sub->add_option_function<std::string>(
           "--arch",
           [&command, name](const std::string& arch) {
             refuse_option_as_value(name, "--arch", arch);
             check_arch(name, "--arch", arch);
             command.arch = arch;
           },
           "Target arch [sm_90a]")
        ->type_name("ARCH");
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

// CLI11's own errors (unknown options, missing values), said in words with what to do.
ToolError translate(const CLI::ParseError& error, const CLI::App& app, const std::string& name) {
  const CLI::App* command = deepest_parsed(app);
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    const std::vector<std::string> extras = app.remaining(true);
    const std::string first = extras.empty() ? std::string() : extras.front();
    if (is_option(first)) {
      const std::string option = first.substr(0, first.find('='));
      const auto guess = nearest(option, option_names(*command));
      return option_error(name, "unknown option " + option + " for `zerojit " + name + "`",
                          guess ? "did you mean " + *guess + "?" : "");
    }
    return option_error(
        name,
        "unexpected argument \"" + first + "\" for `zerojit " + name + "` (it takes options only)",
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

CommandLine parse_command_line(const std::vector<std::string>& arguments) {
  CommandLine line;
  for (const std::string& argument : arguments) {
    if (argument == "--") break;
    if (argument == "--json") line.json = true;
  }
  if (auto error = read_command_words(arguments, line)) {
    line.error = std::move(error);
    return line;
  }

  CLI::App app{
      "zerojit: compile every kernel specialization before serving, and prove that "
      "nothing compiles afterwards"};
  app.name("zerojit");
  app.require_subcommand(0, 1);
  bool version = false;
  bool top_json = false;
  app.add_flag("--version", version,
               "The zerojit version, and the NVRTC and CUDA driver found (or why not)");
  app.add_flag("--json", top_json, "With --version: as a JSON document");
  add_warmup(app, line.warmup);
  add_keys(app, line.keys);
  add_run(app, line.run);
  add_cache(app, line.cache);
  app.footer(
      "Exit codes: 0 ok, 1 runtime JIT (monitor error mode), 2 usage or bad configuration, "
      "3 compile failure, 4 bad cache entries (cache verify), 5 other failure (also a missing "
      "NVRTC or driver).\n"
      "Run `zerojit <command> --help` for a command's options; docs/TOOL.md has examples.");

  // CLI11 reads its arguments from the back.
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());
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
    line.error = ToolError{kExitUsage, "no command given: zerojit needs a subcommand",
                           "name one of " + listed(kCommands, " or ") + "; see `zerojit --help`"};
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
          kExitUsage, "`zerojit cache` needs a command",
          "name one of " + listed(kCacheActions, " or ") + "; see `zerojit cache --help`"};
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
                                             : CacheAction::explain;
    line.cache.json = line.json;
  }
  if (version) {
    line.error =
        option_error(line.name, "--version is an option of zerojit itself, not of a command",
                     "run `zerojit --version` alone");
  }
  return line;
}

}  // namespace zerojit::tool
