#include "unit/disk_cache/support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "examples/examples.hpp"
#include "zerojit/zerojit.hpp"

extern char** environ;

namespace zerojit::test {

namespace {

// This process's environment with the NAME=VALUE settings of `environment` replacing or
// adding to it.
std::vector<std::string> environment_with(const std::vector<std::string>& environment) {
  std::vector<std::string> settings = environment;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string_view text = *variable;
    const std::string_view name = text.substr(0, text.find('='));
    const bool replaced = std::any_of(environment.begin(), environment.end(), [&](const auto& set) {
      return set.size() > name.size() && set.compare(0, name.size(), name) == 0 &&
             set[name.size()] == '=';
    });
    if (!replaced) settings.emplace_back(text);
  }
  return settings;
}

// A program's command line and environment as exec takes them: null-terminated arrays into
// strings this object owns (so it must outlive the exec or spawn).
class ExecArguments {
 public:
  ExecArguments(const std::string& program, const std::vector<std::string>& args,
                const std::vector<std::string>& environment)
      : all_{program}, settings_(environment_with(environment)) {
    all_.insert(all_.end(), args.begin(), args.end());
    for (auto& arg : all_) argv_.push_back(arg.data());
    argv_.push_back(nullptr);
    for (auto& setting : settings_) envp_.push_back(setting.data());
    envp_.push_back(nullptr);
  }
  char* const* argv() { return argv_.data(); }
  char* const* envp() { return envp_.data(); }

 private:
  std::vector<std::string> all_;
  std::vector<std::string> settings_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

}  // namespace

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "zerojit-cache-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(path_, error);
       it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_directory(error) && !it->is_symlink(error)) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, error);
    }
  }
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, error);
  fs::remove_all(path_, error);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> entry_files(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(root / "entries", error)) {
    const std::string name = item.path().filename().string();
    if (name.ends_with(".zjc")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::size_t count_files(const fs::path& directory) {
  std::error_code error;
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& item : fs::directory_iterator(directory, error)) ++count;
  return count;
}

std::vector<std::string> WorkerRun::warnings() const {
  std::vector<std::string> lines;
  if (out.is_object()) {
    for (const auto& line : out["warnings"]) lines.push_back(line.get<std::string>());
  }
  return lines;
}

std::string WorkerRun::describe() const {
  return "exit " + std::to_string(exit_code) + " signal " + std::to_string(signal) +
         "\nstdout: " + stdout_text + "\nstderr: " + stderr_text;
}

Worker::Worker(const std::string& program, const std::vector<std::string>& args,
               const fs::path& scratch, const std::vector<std::string>& environment) {
  static int serial = 0;
  const std::string stem = "worker-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
  stdout_path_ = scratch / (stem + ".out");
  stderr_path_ = scratch / (stem + ".err");
  ExecArguments exec(program, args, environment);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  const int error =
      posix_spawn(&pid_, program.c_str(), &actions, nullptr, exec.argv(), exec.envp());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::runtime_error("posix_spawn " + program + " failed");
}

Worker::~Worker() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool Worker::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == 0) return true;
  finish(status);
  return false;
}

void Worker::kill_now() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

WorkerRun Worker::wait() {
  if (pid_ > 0) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    finish(status);
  }
  return run_;
}

void Worker::finish(int status) {
  pid_ = -1;
  if (WIFEXITED(status)) run_.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run_.signal = WTERMSIG(status);
  run_.stdout_text = read_file(stdout_path_);
  run_.stderr_text = read_file(stderr_path_);
  std::error_code error;
  fs::remove(stdout_path_, error);
  fs::remove(stderr_path_, error);
  const std::size_t start = run_.stdout_text.rfind("{\"ok\"");
  if (start != std::string::npos) {
    run_.out = json::parse(run_.stdout_text.substr(start), nullptr, false);
    if (run_.out.is_discarded()) run_.out = nullptr;
  }
}

void DiskCacheProcesses::SetUp() {
  ::unsetenv("ZEROJIT_CACHE_ALLOW_SHARED");
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << nvrtc_unavailable_reason();
}

std::vector<std::string> DiskCacheProcesses::args(const fs::path& root,
                                                  std::vector<std::string> extra) const {
  std::vector<std::string> all{"--cache-dir", root.string()};
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

std::unique_ptr<Worker> DiskCacheProcesses::start(const fs::path& root,
                                                  std::vector<std::string> extra,
                                                  const std::vector<std::string>& environment) {
  return std::make_unique<Worker>(ZEROJIT_CACHE_WORKER, args(root, std::move(extra)),
                                  scratch.path(), environment);
}

WorkerRun DiskCacheProcesses::run(const fs::path& root, std::vector<std::string> extra,
                                  const std::vector<std::string>& environment) {
  return start(root, std::move(extra), environment)->wait();
}

std::unique_ptr<Worker> DiskCacheProcesses::hold_lock(const fs::path& root, int index,
                                                      std::chrono::seconds bound) {
  auto holder = start(root, {"--hold-lock", std::to_string(index)});
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (holder->stdout_so_far().find("\"locked\":true") == std::string::npos) {
    if (!holder->running() || std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the holder did not take the lock: " << holder->wait().describe();
      return holder;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return holder;
}

std::size_t DiskCacheProcesses::expect_all_valid(const fs::path& root) {
  DiskCacheOptions options;
  options.root = root;
  options.create_root = false;
  options.warning_sink = [](std::string_view line) { ADD_FAILURE() << line; };
  DiskCache cache(options);
  const CacheVerifyReport report = cache.verify();
  for (const auto& bad : report.bad) {
    ADD_FAILURE() << bad.path << ": " << to_string(bad.problem) << ": " << bad.detail;
  }
  return report.valid;
}

void expect_warm(const WorkerRun& run, int compiled, int from_disk) {
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  ASSERT_TRUE(run.out.is_object()) << run.describe();
  EXPECT_TRUE(run.out["ok"].get<bool>()) << run.describe();
  EXPECT_EQ(run.count("keys"), kExampleKeys);
  EXPECT_EQ(run.count("failed"), 0) << run.describe();
  if (compiled >= 0) {
    EXPECT_EQ(run.count("compiled"), compiled) << run.describe();
  }
  if (from_disk >= 0) {
    EXPECT_EQ(run.count("from_disk"), from_disk) << run.describe();
  }
}

std::map<std::string, std::string> identities_by_key(const WorkerRun& run) {
  std::map<std::string, std::string> out;
  for (const auto& item : run.out["identities"]) {
    out[item["kernel"].get<std::string>() + " " + item["key"].get<std::string>()] =
        item["identity"].get<std::string>();
  }
  return out;
}

std::string cubin_of(const fs::path& file) {
  const std::string bytes = read_file(file);
  const DecodedEntry decoded =
      decode_entry(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
  EXPECT_TRUE(decoded.ok()) << file << ": " << decoded.detail;
  return decoded.artifact ? decoded.artifact->cubin : std::string();
}

CompiledArtifact synthetic_artifact(int block_threads, std::size_t cubin_bytes,
                                    std::string_view arch, std::string_view nvrtc) {
  const Program program =
      examples::EmptyKernel::instance().program(examples::EmptyKey{block_threads});
  CompiledArtifact artifact;
  artifact.components = identity_components(program, arch, nvrtc);
  artifact.identity = identity_from_components(artifact.components);
  artifact.kernel_name = program.kernel_name;
  artifact.key_text = program.key_text;
  artifact.arch = std::string(arch);
  artifact.compiler_version = std::string(nvrtc);
  artifact.cubin.resize(cubin_bytes);
  for (std::size_t i = 0; i < cubin_bytes; ++i) {
    artifact.cubin[i] =
        static_cast<char>((i * 131 + static_cast<std::size_t>(block_threads)) & 0xff);
  }
  artifact.lowered_names = {{"zj::examples::empty_kernel", "_ZN2zj8examples12empty_kernelEv"}};
  artifact.compile_seconds = 0.25;
  artifact.log = "a warning";
  return artifact;
}

std::span<const std::byte> as_bytes(const std::string& text) {
  return std::span(reinterpret_cast<const std::byte*>(text.data()), text.size());
}

void DiskCacheStore::SetUp() { ::unsetenv("ZEROJIT_CACHE_ALLOW_SHARED"); }

DiskCacheOptions DiskCacheStore::options(const fs::path& root) {
  DiskCacheOptions o;
  o.root = root;
  o.warning_sink = [this](std::string_view line) { warnings.emplace_back(line); };
  return o;
}

ToolRun run_tool(const std::vector<std::string>& args, const fs::path& scratch,
                 const std::vector<std::string>& environment) {
  Worker tool(ZEROJIT_TOOL, args, scratch, environment);
  const WorkerRun run = tool.wait();
  return {run.exit_code, run.stdout_text, run.stderr_text};
}

namespace {

std::string drain(int fd) {
  std::string out;
  char buffer[4096];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    out.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return out;
}

}  // namespace

ToolRun run_tool_with_file_size_limit(const std::vector<std::string>& args,
                                      std::uint64_t file_size_limit,
                                      const std::vector<std::string>& environment) {
  ExecArguments exec(ZEROJIT_TOOL, args, environment);
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) throw std::runtime_error("pipe failed");
  const rlimit limit{static_cast<rlim_t>(file_size_limit), static_cast<rlim_t>(file_size_limit)};
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::signal(SIGXFSZ, SIG_IGN);
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[0]);
    ::close(err[0]);
    ::execve(exec.argv()[0], exec.argv(), exec.envp());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  ToolRun run;
  // Standard error first would deadlock only past 64 KiB of standard output; the tool prints
  // a few lines.
  run.out = drain(out[0]);
  run.err = drain(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace zerojit::test
