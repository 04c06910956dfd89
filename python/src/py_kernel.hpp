// A kernel defined in Python (zerojit.Kernel, TritonKernel, CuteKernel), held by the same C++ core
// as every C++ kernel: the executor cache, the artifact tiers, the monitor and the warmup
// registry.
//
// Its keys are Python values the core cannot name as a C++ type, so each distinct key is
// interned once, with the GIL held, into a slot: the key's fields (DynamicKey, rendered as C++
// keys are) and the program Python produced for it. The executor cache is keyed by the slot,
// so a warmed launch is the same lock-free lookup as a C++ kernel's; compiles read the slot's
// program in C++ and never call back into Python, so they run in the warmup pool without the
// GIL.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "zerojit/dynamic_key.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::python {

// An interned key of a Python kernel.
struct KeySlot {
  std::int64_t slot = -1;
  static constexpr auto fields() { return std::tuple{field("slot", &KeySlot::slot)}; }
  auto operator<=>(const KeySlot&) const = default;
};

// A launch's tensors, described only for a miss's messages (the monitor, a refusal).
struct CallDescriptors {
  std::string tensors;
  static constexpr auto fields() { return std::tuple{field("tensors", &CallDescriptors::tensors)}; }
};

// How a program renders its key (what zerojit.Program's `key_as` names).
enum class KeyRendering { template_arguments, macros, none };

// What Python hands over for one key: everything Program needs, by value.
struct ProgramText {
  std::string source_path;                                 // the entry file, among `files`
  std::vector<std::pair<std::string, std::string>> files;  // path -> content (entry + headers)
  std::string function;                                    // e.g. "zj::examples::axpby"
  KeyRendering rendering = KeyRendering::template_arguments;
  std::string macro_prefix = "ZJ_";
  std::vector<std::string> options;
  bool toolkit_headers = false;
  // A Triton program: its source as the identity sees it in `files`, the function's qualified
  // name in `function`, and the specialization (signature, constexprs, attributes, options) in
  // `compile_request` (program.hpp).
  Language language = kNvrtcLanguage;
  std::string compile_request;
};

class DynamicKernel final : public JitKernel<DynamicKernel, KeySlot, CallDescriptors> {
 public:
  explicit DynamicKernel(std::string name) : JitKernel(std::move(name)) {}

  // Dispatch is the Python kernel's own; the core never evaluates it.
  KeySlot dispatch(const CallDescriptors&) const override;
  Program program(const KeySlot& key) const override;
  // A slot's key as its fields (what the Python owner's Key holds), not the slot number.
  std::string key_json(const void* key) const override {
    return slot_json(static_cast<const KeySlot*>(key)->slot);
  }

  // The slot of `key` (the same slot for the same key text), its program stored with it.
  // Throws zerojit::Error naming the kernel and the key when the program is malformed.
  std::int64_t intern(DynamicKey key, ProgramText text);
  std::string slot_text(std::int64_t slot) const;
  std::string slot_json(std::int64_t slot) const;
  std::size_t slot_count() const;

  // The kernel of this name, made on first use and alive for the process (a launch in flight
  // or a warmed executor may refer to it at any time, as to a C++ kernel's singleton).
  static DynamicKernel& named(const std::string& name);

 private:
  struct Slot {
    DynamicKey key;
    std::string text;
    std::string json;
    ProgramText program;
    std::vector<EmbeddedFile> views;  // into program.files
    std::unique_ptr<EmbeddedFileSet> files;
    std::string name_expression;
    std::vector<std::string> options;
  };
  const Slot& slot(std::int64_t index) const;

  mutable std::mutex mutex_;  // guards slots_; a Slot never moves once made (views into it)
  std::vector<std::unique_ptr<Slot>> slots_;
};

// A key whose program Python could not build (a broken program(), a missing fake or constexpr),
// or a space it could not expand: a failed key of the warmup, as a compile error is, naming
// the kernel, the key and the arch; the other keys still warm.
struct FailedKey {
  std::string key_text;
  std::string key_json;
  std::string error;
};

// One Python kernel's registration for a warmup: its interned keys, the keys that failed before
// they could be interned, and its dead axes.
struct DynamicRegistration {
  DynamicKernel* kernel = nullptr;
  std::string tag;
  std::vector<std::int64_t> slots;
  std::vector<std::string> dead_axes;
  std::vector<FailedKey> failed;
};

void add_dynamic_registrations(WarmupRegistry& registry,
                               const std::vector<DynamicRegistration>& registrations);

}  // namespace zerojit::python
