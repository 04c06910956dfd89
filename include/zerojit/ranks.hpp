// Ranks that agree, in C++: the check that every rank of a group warmed the same kernels
// (docs/DESIGN.md, "Ranks that agree"). agree_across_ranks follows the protocol of Python's
// zerojit.RankGroup (python/zerojit/runtime/ranks.py), for an engine that warms up from C++:
// each rank publishes a record of its warmup in a store the group shares, waits (bounded) for
// the others, and every rank compares the same records in the same way, so that every rank
// throws the same RankAgreementError, naming the ranks, the cause and the first keys that
// differ. Python's groups use these records (their JSON shape is the same), this digest and
// this comparison, so there is one set of rules, and one group may mix C++ and Python ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerojit/error.hpp"

namespace zerojit {

struct WarmupReport;
struct Manifest;

// What the agreement needs of a store, torch.distributed's three calls: zerojit::RedisStore is
// one; an engine with a rendezvous store of its own wraps it.
class RankStore {
 public:
  virtual ~RankStore() = default;
  virtual void set(std::string_view key, std::string_view value) = 0;
  // The value, or std::nullopt when the key is not set; never waits.
  virtual std::optional<std::string> read(std::string_view key) = 0;
  // Adds `amount` to the counter at `key` (0 when unset) and returns the sum; add(key, 0) reads
  // the counter without creating the key (how a rank probes the others without waiting).
  virtual std::int64_t add(std::string_view key, std::int64_t amount) = 0;
};

// One warmed key: its identity is the program identity's hex, or "failed: <first line>" for
// a key that did not compile.
struct RankEntry {
  std::string kernel;
  std::string key;
  std::string arch;
  std::string identity;
  auto operator<=>(const RankEntry&) const = default;
};

// What a rank publishes at the end of its warmup.
struct RankRecord {
  int rank = 0;
  std::optional<std::string> aborted;  // the error of a warmup that threw before its report
  std::vector<std::string> archs;
  std::map<std::string, std::string> compilers;  // "cuda@sm_90a" -> the compiler's version
  std::string config;                            // JSON text; empty: no configuration
  std::vector<RankEntry> entries;
  std::string digest;  // of archs, compilers, config and entries: what must be equal

  // Sorts archs and entries and computes the digest; call after filling the fields.
  void seal();
  // {"format":1,"rank":..,"aborted":..,"archs":[..],"compilers":{..},"config":..,
  //  "entries":[[kernel,key,arch,identity],..],"digest":".."}
  std::string to_json() const;
  // Throws zerojit::Error naming what is wrong with `text`.
  static RankRecord from_json(std::string_view text);
};

// This rank's record of a finished warmup: each key of `report` with the identity of its
// program (from the manifest entry of the same kernel and key text), the compiler version of
// each language used on each arch, and `config_json` (empty: none). `rank` is set when
// published.
RankRecord warmup_rank_record(const WarmupReport& report, const Manifest& manifest,
                              std::string config_json = {});

struct RankKeyDifference {
  std::string kernel;
  std::string key;
  std::string arch;
  std::optional<std::string> rank_identity;  // none: the key is only on the reference
  std::optional<std::string> reference_identity;
};

struct RankDifference {
  std::vector<int> ranks;
  std::optional<int> reference;  // none for an aborted rank
  std::string cause;
  std::vector<RankKeyDifference> keys;
};

struct RankDisagreement {
  std::string message;
  std::vector<int> ranks;    // at fault: the differing, the aborted and the missing
  std::vector<int> missing;  // never published within the timeout
  std::vector<RankDifference> differences;
};

// std::nullopt when every rank published and all agree. `records`: the ranks that published.
// The reference is the largest group of equal digests (the lowest rank's on a tie), so the
// message names the few that differ from the many.
std::optional<RankDisagreement> compare_ranks(const std::map<int, RankRecord>& records,
                                              int world_size, std::vector<int> missing,
                                              double timeout_s, std::string_view prefix);

class RankAgreementError : public Error {
 public:
  RankAgreementError(std::string message, std::vector<int> ranks, std::vector<int> missing)
      : Error(std::move(message)), ranks_(std::move(ranks)), missing_(std::move(missing)) {}
  const std::vector<int>& ranks() const { return ranks_; }
  const std::vector<int>& missing() const { return missing_; }

 private:
  std::vector<int> ranks_;
  std::vector<int> missing_;
};

// Publishes `record` as rank `rank`'s of round `round` (keys "<prefix>/warmup/<round>/..."),
// waits up to `timeout` for the other ranks' and compares them all; returns every rank's
// record, or throws RankAgreementError on every rank with the same message. Each rank must
// call it for the same rounds, numbered from 1. Throws zerojit::Error for a rank outside
// [0, world_size), and whatever the store throws.
std::map<int, RankRecord> agree_across_ranks(RankStore& store, int rank, int world_size,
                                             const RankRecord& record,
                                             std::chrono::milliseconds timeout,
                                             std::string_view prefix = "zerojit", int round = 1);

}  // namespace zerojit
