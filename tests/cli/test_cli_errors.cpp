// How the tool fails: every usage error names the option (or command) at fault, says what is
// wrong in words and what to do, exits 2 and, with --json, prints one JSON failure document on
// standard output, whatever bytes the arguments hold. Spawned as a user runs it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tool_runner.hpp"

namespace {

using nlohmann::json;
using zerojit::testing::describe;
using zerojit::testing::Result;
using zerojit::testing::TempDir;

using ZerojitToolErrors = zerojit::testing::ToolTest;

struct UsageCase {
  std::vector<std::string> arguments;
  std::string command;   // the envelope's "command"
  std::string expected;  // in the message
};

// The failure document of a run: schema 1, the command, not ok, the exit code in both places,
// a message and a hint.
json failure_of(const Result& r, const std::string& command, int code) {
  const json document = json::parse(r.out);  // throws on anything but one valid document
  EXPECT_EQ(document.at("schema"), 1) << r.out;
  EXPECT_EQ(document.at("command"), command) << r.out;
  EXPECT_FALSE(document.at("ok").get<bool>()) << r.out;
  EXPECT_EQ(document.at("exit_code"), code) << r.out;
  EXPECT_EQ(document.at("error").at("code"), code) << r.out;
  EXPECT_FALSE(document.at("error").at("message").get<std::string>().empty()) << r.out;
  EXPECT_FALSE(document.at("error").at("hint").get<std::string>().empty()) << r.out;
  return document.at("error");
}

TEST_F(ZerojitToolErrors, EveryUsageErrorNamesTheProblemAndWhatToDoAlsoAsJson) {
  const std::vector<UsageCase> cases = {
      {{"keys", "--block-size"}, "keys", "--block-size needs a value"},
      {{"warmup", "--jobs", "-1"}, "warmup", "--jobs takes a whole number from 0 to 1,024"},
      {{"warmup", "--jobs", "1025"}, "warmup", "--jobs"},
      {{"run", "--steps", "99999999999999999999"}, "run", "--steps takes a whole number"},
      {{"run", "--steps", "0"}, "run", "from 1 to 100,000,000"},
      {{"run", "--steps", "12abc"}, "run", "--steps"},
      {{"run", "--seed", "-1"}, "run", "--seed takes a whole number from 0 to"},
      {{"run", "--seed", "18446744073709551616"}, "run", "--seed"},
      {{"run", "--testing-warmup-max-tokens", "0"}, "run", "--testing-warmup-max-tokens"},
      {{"run", "--layers", "65"}, "run", "--layers"},
      {{"run", "--max-num-seqs", "0"}, "run", "--max-num-seqs"},
      {{"run", "--max-model-len", "-5"}, "run", "--max-model-len"},
      {{"run", "--monitor", "sometimes"}, "run", "--monitor takes off, warn or error"},
      {{"run", "--steps", "5", "--steps", "6"}, "run", "--steps is given more than once"},
      {{"keys", "--arch", "sm_-90"}, "keys", "--arch"},
      {{"keys", "--arch", "sm_9"}, "keys", "target_arch"},
      {{"keys", "--arch", "sm_89"}, "keys", "target_arch' must be sm_90 or newer"},
      {{"warmup", "--compile-only", "--arch", "sm_999"}, "warmup", "cannot compile for sm_999"},
      {{"warmup", "--devices", "0,0"}, "warmup", "--devices names device 0 twice"},
      {{"warmup", "--devices", "-1"}, "warmup", "--devices"},
      {{"warmup", "--cache-dir", ""}, "warmup", "--cache-dir needs a DIR"},
      {{"warmup", "--in-process=maybe"}, "warmup", "--in-process is a flag"},
      {{"cache", "ls", "--cache-dir", "--layer", "x"}, "cache ls", "--cache-dir needs a value"},
      {{"warmup", "--no-such-option"}, "warmup", "unknown option --no-such-option"},
      // An option of another command is named as such, not as unknown.
      {{"keys", "--steps", "5"}, "keys", "`zerojit keys` takes no --steps: only `run` takes it"},
      {{"keys", "--layers", "2"}, "keys", "takes no --layers: only `run` takes it"},
      {{"keys", "--jobs", "2"}, "keys", "only `warmup` and `run` take it"},
      {{"keys", "extra"}, "keys", "unexpected argument \"extra\""},
      {{"keys", "--kv-cache-dtype", "fp9"}, "keys", "kv_cache_dtype"},
      {{"cache", "gc", "--max-size", "17179869184G"}, "cache gc", "--max-size"},
      {{"cache", "gc", "--max-size", "lots"}, "cache gc", "--max-size"},
      {{"cache", "explain", "--arch", "sm_x"}, "cache explain", "--arch"},
      // A filter that selects nothing (before: "0 keys: 0 hits, 0 misses", exit 0).
      {{"cache", "explain", "--kernel", "bogus"},
       "cache explain",
       "--kernel \"bogus\" is no kernel"},
      {{"cache", "explain", "--kernel", "dsv4.c4_stor"},
       "cache explain",
       "--kernel \"dsv4.c4_stor\""},
      {{"cache", "explain", "--key", "no-such-text"}, "cache explain", "no key of the manifest"},
      {{"cache", "ls", "--cache-dir"}, "cache ls", "--cache-dir needs a value"},
      {{"cache"}, "cache", "needs a command"},
      {{"warmpu"}, "zerojit", "unknown command \"warmpu\""},
      {{"cache", "lss"}, "cache", "unknown cache command \"lss\""},
      {{}, "zerojit", "no command given"},
      {{"keys", "--json=true"}, "keys", "--json takes no value"},
      {{"cache", "verify", "--cache-dir", "/nonexistent/zerojit-no-pack"},
       "cache verify",
       "there is no cache at /nonexistent/zerojit-no-pack"},
      // Without a GPU the run falls back to dispatch, but devices named must still exist.
      {{"run", "--devices", "1000", "--steps", "5"}, "run", "device 1000 does not exist"},
  };
  for (const UsageCase& c : cases) {
    std::string line;
    for (const std::string& argument : c.arguments) line += " " + argument;
    const Result r = run(c.arguments);
    EXPECT_EQ(r.exit_code, 2) << line << "\n" << describe(r);
    EXPECT_NE(r.err.find("zerojit: error: "), std::string::npos) << line << "\n" << describe(r);
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << line << "\n" << describe(r);
    EXPECT_NE(r.err.find("what to do: "), std::string::npos) << line << "\n" << describe(r);
    EXPECT_TRUE(r.out.empty()) << line << "\n" << describe(r);

    std::vector<std::string> with_json = c.arguments;
    with_json.push_back("--json");
    const Result j = run(with_json);
    EXPECT_EQ(j.exit_code, 2) << line << " --json\n" << describe(j);
    const json error = failure_of(j, c.command, 2);
    EXPECT_NE(error.at("message").get<std::string>().find(c.expected), std::string::npos)
        << line << " --json\n"
        << j.out;
  }
}

TEST_F(ZerojitToolErrors, MistypedCommandsAndOptionsGetASuggestion) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"warmpu"}, "did you mean `zerojit warmup`?"},
      {{"kyes", "--json"}, "did you mean `zerojit keys`?"},
      {{"cache", "lss"}, "did you mean `zerojit cache ls`?"},
      {{"cache", "verfy"}, "did you mean `zerojit cache verify`?"},
      {{"warmup", "--job", "3"}, "did you mean --jobs?"},
      {{"run", "--dispatch-onyl"}, "did you mean --dispatch-only?"},
      {{"run", "--monitor", "erorr"}, "did you mean --monitor error?"},
      {{"--verison"}, "did you mean --version?"},
      {{"cache", "explain", "--kernel", "dsv4.c4_stor"}, "did you mean --kernel dsv4.c4_store?"},
  };
  for (const auto& [arguments, suggestion] : cases) {
    const Result r = run(arguments);
    EXPECT_EQ(r.exit_code, 2) << arguments[0] << "\n" << describe(r);
    EXPECT_NE(r.err.find(suggestion), std::string::npos) << arguments[0] << "\n" << describe(r);
  }
  // Something far from every command gets the list instead of a guess.
  const Result far = run({"frobnicate"});
  EXPECT_EQ(far.exit_code, 2) << describe(far);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << describe(far);
  EXPECT_NE(far.err.find("warmup, keys, run and cache"), std::string::npos) << describe(far);
}

// `--` ends the options of every command: a word after it is an argument, which no command
// takes (before, `keys -- --json` ran as plain `keys` and printed text, exit 0, and other
// options after it were "unknown option --X ... did you mean --X?"). A `--` at the end is
// accepted.
TEST_F(ZerojitToolErrors, DoubleDashEndsTheOptionsOfEveryCommand) {
  const std::vector<std::vector<std::string>> commands = {{"warmup"},
                                                          {"keys"},
                                                          {"run"},
                                                          {"cache", "ls"},
                                                          {"cache", "verify"},
                                                          {"cache", "gc"},
                                                          {"cache", "clear"},
                                                          {"cache", "explain"},
                                                          {"cache", "push"},
                                                          {"cache", "pull"},
                                                          {}};
  for (const std::vector<std::string>& command : commands) {
    std::string name;
    for (const std::string& word : command) name += (name.empty() ? "" : " ") + word;
    for (const std::string& after :
         {std::string("--json"), std::string("--cache-dir"), std::string("extra")}) {
      std::vector<std::string> arguments = command;
      arguments.push_back("--");
      arguments.push_back(after);
      const Result r = run(arguments);
      EXPECT_EQ(r.exit_code, 2) << name << " -- " << after << "\n" << describe(r);
      EXPECT_NE(r.err.find("unexpected argument \"" + after + "\" after `--`"), std::string::npos)
          << name << " -- " << after << "\n"
          << describe(r);
      EXPECT_TRUE(r.out.empty()) << "--json after -- is not the option: " << describe(r);
    }
    // --json before the `--` is the option: the failure is a JSON document.
    std::vector<std::string> as_json = command;
    as_json.insert(as_json.end(), {"--json", "--", "x"});
    const Result j = run(as_json);
    EXPECT_EQ(j.exit_code, 2) << name << "\n" << describe(j);
    const json error = failure_of(j, name.empty() ? "zerojit" : name, 2);
    EXPECT_NE(error.at("message").get<std::string>().find("after `--`"), std::string::npos)
        << j.out;
  }
  const Result trailing = run({"keys", "--json", "--"});
  EXPECT_EQ(trailing.exit_code, 0) << describe(trailing);
  EXPECT_EQ(zerojit::testing::result_of(trailing, "keys").at("count"), 9) << trailing.out;
}

// An option holding bytes that are not UTF-8, a config.json holding them, and a cache root
// whose path holds them: the JSON printed stays valid (nlohmann's parser rejects invalid
// UTF-8, so parsing it is the proof), with U+FFFD where the bad bytes were.
TEST_F(ZerojitToolErrors, JsonIsValidWhateverBytesTheInputsHold) {
  const std::string replacement = "\xEF\xBF\xBD";
  const Result arch = run({"keys", "--arch", "sm_9\xff", "--json"});
  EXPECT_EQ(arch.exit_code, 2) << describe(arch);
  const json error = failure_of(arch, "keys", 2);
  EXPECT_NE(error.at("message").get<std::string>().find("sm_9" + replacement), std::string::npos)
      << arch.out;

  TempDir scratch;
  const std::string config = (scratch.path() / "c.json").string();
  {
    std::FILE* file = std::fopen(config.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fputs("{\"head_dim\": 512, \"x\": \"\xe9\"}", file);
    std::fclose(file);
  }
  const Result model = run({"keys", "--json", "--model", config});
  EXPECT_EQ(model.exit_code, 2) << describe(model);
  failure_of(model, "keys", 2);

  const std::string root = (scratch.path() / "cache-\xe9\xff-root").string();
  const Result warm =
      run({"warmup", "--examples", "--compile-only", "--cache-dir", root, "--json"});
  ASSERT_EQ(warm.exit_code, 0) << describe(warm);
  const json warmed = zerojit::testing::result_of(warm, "warmup");
  EXPECT_EQ(warmed.at("totals").at("keys"), 5);
  EXPECT_TRUE(warmed.at("cache_writable").get<bool>());
  EXPECT_NE(warmed.at("cache").get<std::string>().find("cache-" + replacement), std::string::npos);

  const Result listed = run({"cache", "ls", "--cache-dir", root, "--json"});
  ASSERT_EQ(listed.exit_code, 0) << describe(listed);
  const json entries = zerojit::testing::result_of(listed, "cache ls").at("entries");
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_NE(entries[0].at("layer").get<std::string>().find(replacement), std::string::npos);
}

}  // namespace

// An arch this NVRTC cannot compile for is a usage error said once (exit 2), both when the
// tool asks NVRTC up front and when NVRTC is loaded only by the first compile (the cache knew
// its version): before, every key failed with NVRTC's log and the tool exited 3.
TEST_F(ZerojitToolErrors, AnArchNvrtcCannotCompileForIsOneUsageError) {
  const Result up_front = run({"warmup", "--compile-only", "--arch", "sm_999"});
  EXPECT_EQ(up_front.exit_code, 2) << describe(up_front);
  EXPECT_NE(up_front.err.find("cannot compile for sm_999: it compiles for sm_"), std::string::npos)
      << describe(up_front);
  EXPECT_EQ(up_front.err.find("FAILED"), std::string::npos) << describe(up_front);

  ASSERT_EQ(run({"warmup", "--compile-only"}).exit_code, 0);  // the cache now knows NVRTC
  const Result per_key = run({"warmup", "--compile-only", "--arch", "sm_999"});
  EXPECT_EQ(per_key.exit_code, 2) << describe(per_key);
  const std::string said = "zerojit: error: NVRTC ";
  EXPECT_NE(per_key.err.find(said), std::string::npos) << describe(per_key);
  EXPECT_NE(per_key.err.find("cannot compile for sm_999"), std::string::npos) << describe(per_key);
  EXPECT_EQ(per_key.err.find("keys failed to compile"), std::string::npos) << describe(per_key);
  // This time each key's line said it (NVRTC was loaded by the first compile, not before).
  EXPECT_NE(per_key.err.find("] FAILED"), std::string::npos) << describe(per_key);
}
