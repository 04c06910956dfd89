#include "py_kernel.hpp"

#include <algorithm>
#include <map>

namespace zerojit::python {

KeySlot DynamicKernel::dispatch(const CallDescriptors&) const {
  throw Error("kernel " + name() + ": a Python kernel dispatches in Python (zerojit.Kernel)");
}

const DynamicKernel::Slot& DynamicKernel::slot(std::int64_t index) const {
  std::lock_guard lock(mutex_);
  if (index < 0 || static_cast<std::size_t>(index) >= slots_.size()) {
    throw Error("kernel " + name() + ": no interned key " + std::to_string(index));
  }
  return *slots_[static_cast<std::size_t>(index)];
}

Program DynamicKernel::program(const KeySlot& key) const {
  const Slot& entry = slot(key.slot);
  Program program;
  program.kernel_name = name();
  program.files = entry.files.get();
  program.source_path = entry.program.source_path;
  program.name_expressions = {entry.name_expression};
  program.options = entry.options;
  program.key_text = entry.text;
  program.needs_toolkit_headers = entry.program.toolkit_headers;
  program.language = entry.program.language;
  program.compile_request = entry.program.compile_request;
  return program;
}

std::int64_t DynamicKernel::intern(DynamicKey key, ProgramText text) {
  std::string key_text = key.text();
  // Slots are told apart by the key's JSON, whose strings are escaped: the text is not (fields
  // a="x, b=y", b="z" and a="x", b="y, b=z" print alike), and two such keys would share one slot.
  const std::string key_json = key.json();
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i]->json == key_json) return static_cast<std::int64_t>(i);
    }
  }
  const std::string where = "kernel " + name() + " [" + key_text + "]: ";
  if (text.function.empty()) throw Error(where + "the program names no kernel function");
  bool has_entry = false;
  for (const auto& [path, content] : text.files) has_entry = has_entry || path == text.source_path;
  if (!has_entry) {
    throw Error(where + "the program's source '" + text.source_path + "' is not among its files");
  }
  auto made = std::make_unique<Slot>();
  Slot& entry = *made;
  entry.json = key_json;
  switch (text.rendering) {
    case KeyRendering::template_arguments:
      entry.name_expression = text.function + "<" + key.template_arguments() + ">";
      entry.options = text.options;
      break;
    case KeyRendering::macros:
      entry.name_expression = text.function;
      entry.options = key.macro_definitions(text.macro_prefix);
      entry.options.insert(entry.options.end(), text.options.begin(), text.options.end());
      break;
    case KeyRendering::none:
      entry.name_expression = text.function;
      entry.options = text.options;
      break;
  }
  entry.key = std::move(key);
  entry.text = std::move(key_text);
  entry.program = std::move(text);
  for (const auto& [path, content] : entry.program.files) entry.views.push_back({path, content});
  entry.files = std::make_unique<EmbeddedFileSet>(entry.views);
  // The program must resolve now, where the error reaches the Python caller that defined it,
  // not in a warmup worker. (Another language's source is taken as it is.)
  if (entry_kind(entry.program.language).compiled_by_nvrtc) {
    Program check;
    check.kernel_name = name();
    check.files = entry.files.get();
    check.source_path = entry.program.source_path;
    check.key_text = entry.text;
    check.needs_toolkit_headers = entry.program.toolkit_headers;
    (void)resolve_program_source(check);
  }

  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < slots_.size(); ++i) {  // interned meanwhile by another thread
    if (slots_[i]->json == entry.json) return static_cast<std::int64_t>(i);
  }
  slots_.push_back(std::move(made));
  return static_cast<std::int64_t>(slots_.size() - 1);
}

std::string DynamicKernel::slot_text(std::int64_t index) const { return slot(index).text; }
std::string DynamicKernel::slot_json(std::int64_t index) const { return slot(index).json; }

std::size_t DynamicKernel::slot_count() const {
  std::lock_guard lock(mutex_);
  return slots_.size();
}

DynamicKernel& DynamicKernel::named(const std::string& name) {
  // Never destroyed: executors and the monitor's counters refer to the kernels until exit, and
  // no destructor order at exit could be right for a kernel Python still launches.
  static std::mutex mutex;
  static auto* kernels = new std::map<std::string, std::unique_ptr<DynamicKernel>>();
  std::lock_guard lock(mutex);
  auto& kernel = (*kernels)[name];
  if (!kernel) kernel = std::make_unique<DynamicKernel>(name);
  return *kernel;
}

namespace {

// A manifest entry whose warm fails as a compile does, naming the kernel, the key and the arch.
ManifestEntry failed_entry(DynamicKernel& kernel, const FailedKey& failed) {
  ManifestEntry entry;
  entry.kernel = &kernel;
  entry.key_text = failed.key_text;
  entry.key_json = failed.key_json;
  const std::string name = kernel.name();
  entry.warm = [name, failed](std::string_view arch, std::span<const int>) -> WarmResult {
    throw CompileError(name, failed.key_text, {},
                       "kernel " + name + " [" + failed.key_text + "] for " + std::string(arch) +
                           ": " + failed.error);
  };
  entry.program = [name, failed]() -> Program {
    throw Error("kernel " + name + " [" + failed.key_text + "]: " + failed.error);
  };
  return entry;
}

}  // namespace

void add_dynamic_registrations(WarmupRegistry& registry,
                               const std::vector<DynamicRegistration>& registrations) {
  for (const DynamicRegistration& registration : registrations) {
    DynamicKernel& kernel = *registration.kernel;
    registry.add_expansion(kernel, registration.tag,
                           [&kernel, registration](std::vector<ManifestEntry>& entries,
                                                   std::vector<std::string>& dead_axes) {
                             dead_axes = registration.dead_axes;
                             for (const std::int64_t slot : registration.slots) {
                               const KeySlot key{slot};
                               ManifestEntry entry;
                               entry.kernel = &kernel;
                               entry.key_text = kernel.slot_text(slot);
                               entry.key_json = kernel.slot_json(slot);
                               entry.warm = [&kernel, key](std::string_view arch,
                                                           std::span<const int> devices) {
                                 return kernel.warm(key, arch, devices);
                               };
                               entry.program = [&kernel, key] { return kernel.program(key); };
                               entries.push_back(std::move(entry));
                             }
                             for (const FailedKey& failed : registration.failed) {
                               entries.push_back(failed_entry(kernel, failed));
                             }
                           });
  }
}

}  // namespace zerojit::python
