// Per-kernel map from compile key to the function loaded on each device.
//
// Launches read it on every call, so the read side is lock-free and allocation-free: readers
// load one atomic pointer to an immutable open-addressing table and probe it. Writers
// (misses, already slow: they compiled or loaded a module) serialize on a mutex, build a new
// table when the old one fills, and publish it. Old tables stay alive until the cache dies,
// because a reader may still be probing one; their number is logarithmic in the key count.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "zerojit/backend.hpp"
#include "zerojit/error.hpp"
#include "zerojit/key.hpp"

namespace zerojit {

inline constexpr int kMaxDevices = 32;

template <CompileKey Key>
class ExecutorCache {
 public:
  ExecutorCache() = default;
  ExecutorCache(const ExecutorCache&) = delete;
  ExecutorCache& operator=(const ExecutorCache&) = delete;

  // The function for (key, device), or nullptr. Lock-free; never allocates.
  const LoadedFunction* find(const Key& key, int device) const noexcept {
    if (device < 0 || device >= kMaxDevices) return nullptr;
    const Entry* entry = find_entry(key, key_hash(key));
    if (entry == nullptr) return nullptr;
    return entry->by_device[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
  }

  // Stores the function for (key, device) unless one is there already; returns the stored one.
  const LoadedFunction& insert(const Key& key, int device, const LoadedFunction& function) {
    if (device < 0 || device >= kMaxDevices) {
      throw Error("device ordinal " + std::to_string(device) + " is outside zerojit's range [0, " +
                  std::to_string(kMaxDevices) + ")");
    }
    std::lock_guard lock(writer_mutex_);
    const std::uint64_t hash = key_hash(key);
    Entry* entry = const_cast<Entry*>(find_entry(key, hash));
    if (entry == nullptr) entry = add_entry(key, hash);
    auto& slot = entry->by_device[static_cast<std::size_t>(device)];
    if (const LoadedFunction* existing = slot.load(std::memory_order_acquire)) return *existing;
    functions_.push_back(std::make_unique<LoadedFunction>(function));
    slot.store(functions_.back().get(), std::memory_order_release);
    return *functions_.back();
  }

  std::size_t size() const {
    std::lock_guard lock(writer_mutex_);
    return entries_.size();
  }

  // Forgets everything. Only for tests, with no reader running.
  void clear() {
    std::lock_guard lock(writer_mutex_);
    table_.store(nullptr, std::memory_order_release);
    tables_.clear();
    entries_.clear();
    functions_.clear();
  }

 private:
  struct Entry {
    Key key;
    std::uint64_t hash;
    std::array<std::atomic<const LoadedFunction*>, kMaxDevices> by_device{};
  };
  struct Table {
    std::size_t mask = 0;
    std::size_t used = 0;  // written under writer_mutex_ only
    std::unique_ptr<std::atomic<const Entry*>[]> slots;
  };

  const Entry* find_entry(const Key& key, std::uint64_t hash) const noexcept {
    const Table* table = table_.load(std::memory_order_acquire);
    if (table == nullptr) return nullptr;
    for (std::size_t index = hash & table->mask;; index = (index + 1) & table->mask) {
      const Entry* entry = table->slots[index].load(std::memory_order_acquire);
      if (entry == nullptr) return nullptr;
      if (entry->hash == hash && entry->key == key) return entry;
    }
  }

  static void place(Table& table, const Entry* entry) {
    std::size_t index = entry->hash & table.mask;
    while (table.slots[index].load(std::memory_order_relaxed) != nullptr) {
      index = (index + 1) & table.mask;
    }
    // A reader probing concurrently sees either null (a miss: it takes the slow path, which
    // locks and looks again) or the complete entry.
    table.slots[index].store(entry, std::memory_order_release);
    ++table.used;
  }

  // Called with writer_mutex_ held.
  Entry* add_entry(const Key& key, std::uint64_t hash) {
    auto entry = std::make_unique<Entry>();
    entry->key = key;
    entry->hash = hash;
    Entry* raw = entry.get();
    entries_.push_back(std::move(entry));
    Table* table = tables_.empty() ? nullptr : tables_.back().get();
    if (table != nullptr && (table->used + 1) * 2 <= table->mask + 1) {
      place(*table, raw);
      return raw;
    }
    // Past half load: publish a table twice the size. Old tables are only ever read.
    const std::size_t capacity = table == nullptr ? 16 : (table->mask + 1) * 2;
    auto grown = std::make_unique<Table>();
    grown->mask = capacity - 1;
    grown->slots = std::make_unique<std::atomic<const Entry*>[]>(capacity);
    for (std::size_t i = 0; i < capacity; ++i) grown->slots[i].store(nullptr);
    for (const auto& existing : entries_) place(*grown, existing.get());
    table_.store(grown.get(), std::memory_order_release);
    tables_.push_back(std::move(grown));
    return raw;
  }

  std::atomic<const Table*> table_{nullptr};
  mutable std::mutex writer_mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::unique_ptr<LoadedFunction>> functions_;
  std::vector<std::unique_ptr<Table>> tables_;  // current and retired
};

}  // namespace zerojit
