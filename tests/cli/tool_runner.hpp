// Runs the zerojit tool as a user would, for the CLI tests: spawned with arguments and an
// environment, both output streams and the exit code collected.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

extern char** environ;

namespace zerojit::testing {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the tool with `arguments` and the environment changes in `environment` (an empty
// value unsets the variable), collecting both output streams. With `stderr_on_terminal`, the
// tool's standard error is a pseudo-terminal, as when a user runs it in a shell (what it
// draws there, e.g. the progress bar, is collected all the same).
// The tool under test: $ZEROJIT_TOOL overrides the built path, for running the tests from a
// copied build.
inline std::string tool_path() {
  const char* tool_override = std::getenv("ZEROJIT_TOOL");
  return tool_override != nullptr && *tool_override ? tool_override : ZEROJIT_TOOL_PATH;
}

inline Result run_tool(const std::vector<std::string>& arguments,
                       const std::map<std::string, std::string>& environment = {},
                       bool stderr_on_terminal = false) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (environment.count(name) == 0) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : environment) {
    if (!value.empty()) env_strings.push_back(name + "=" + value);
  }
  std::vector<char*> env;
  for (auto& entry : env_strings) env.push_back(entry.data());
  env.push_back(nullptr);
  std::vector<std::string> argv_strings = {tool_path()};
  argv_strings.insert(argv_strings.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& argument : argv_strings) argv.push_back(argument.data());
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) {
    ADD_FAILURE() << "pipe failed";
    return {};
  }
  if (stderr_on_terminal) {
    // The terminal's controller end replaces the pipe's reading end, its device the writing end.
    const int controller = posix_openpt(O_RDWR | O_NOCTTY);
    const char* device = controller >= 0 && grantpt(controller) == 0 && unlockpt(controller) == 0
                             ? ptsname(controller)
                             : nullptr;
    const int terminal = device != nullptr ? open(device, O_RDWR | O_NOCTTY) : -1;
    if (terminal < 0) {
      ADD_FAILURE() << "no pseudo-terminal";
      return {};
    }
    close(err_pipe[0]);
    close(err_pipe[1]);
    err_pipe[0] = controller;
    err_pipe[1] = terminal;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  Result result;
  if (spawned != 0) {
    ADD_FAILURE() << "cannot spawn " << argv[0];
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_streams = 2;
  char buffer[65536];
  while (open_streams > 0) {
    if (poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_streams;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

inline std::string describe(const Result& r) {
  return "exit code " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out.substr(0, 4000) +
         "\n--- stderr\n" + r.err.substr(0, 4000);
}

// The "result" of a successful run's JSON envelope (docs/TOOL.md), checking the envelope itself:
// schema 1, the command's name, ok, exit code 0.
inline nlohmann::json result_of(const Result& r, const std::string& command) {
  const nlohmann::json document = nlohmann::json::parse(r.out);
  EXPECT_EQ(document.at("schema"), 1) << r.out.substr(0, 400);
  EXPECT_EQ(document.at("command"), command) << r.out.substr(0, 400);
  EXPECT_TRUE(document.at("ok").get<bool>()) << r.out.substr(0, 400);
  EXPECT_EQ(document.at("exit_code"), 0) << r.out.substr(0, 400);
  EXPECT_FALSE(document.contains("error")) << r.out.substr(0, 400);
  return document.at("result");
}

// A fresh directory for one test, removed after it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "zerojit-cli-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A test that runs the tool with its own cache root and home (never the user's), and no
// inherited monitor mode, cache layers or NO_COLOR.
class ToolTest : public ::testing::Test {
 protected:
  Result run(const std::vector<std::string>& arguments) {
    return run_tool(arguments, {{"ZEROJIT_CACHE_DIR", (home_.path() / "cache").string()},
                                {"ZEROJIT_CACHE_READONLY_DIRS", ""},
                                {"ZEROJIT_MONITOR", ""},
                                {"NO_COLOR", ""},
                                {"HOME", home_.str()}});
  }
  TempDir home_;
};

}  // namespace zerojit::testing

// The names every tool test file uses, brought in with
// `using namespace zerojit::testing::tool_test;`.
namespace zerojit::testing::tool_test {

using nlohmann::json;
using zerojit::testing::describe;
using zerojit::testing::Result;
using zerojit::testing::result_of;
using zerojit::testing::run_tool;
using zerojit::testing::TempDir;

}  // namespace zerojit::testing::tool_test
