#include "kernels/cases.hpp"

#include <utility>

#include "dsv4/family.hpp"

namespace zerojit::bench {

namespace {

// Filled during static initialization by the registrars of bench/dsv4/*.cpp, in whatever order
// the linker put them: registered_kernels() sorts.
std::vector<KernelCases>& registry() {
  static std::vector<KernelCases> kernels;
  return kernels;
}

}  // namespace

CaseRegistrar::CaseRegistrar(KernelCases cases) { registry().push_back(std::move(cases)); }

std::vector<KernelCases> registered_kernels() {
  std::vector<std::string> family;
  for (const KernelBase* kernel : dsv4::all_kernels()) family.push_back(kernel->name());
  auto rank = [&family](const KernelCases& cases) {
    const auto found = std::find(family.begin(), family.end(), "dsv4." + cases.kernel);
    return found - family.begin();
  };
  std::vector<KernelCases> kernels = registry();
  std::sort(kernels.begin(), kernels.end(), [&](const KernelCases& a, const KernelCases& b) {
    return std::pair(rank(a), a.kernel) < std::pair(rank(b), b.kernel);
  });
  return kernels;
}

int input_sets_for(const Context& context, std::int64_t bytes, std::int64_t allocated) {
  const std::int64_t wanted =
      (kColdFootprintInL2s * context.l2_bytes + std::max<std::int64_t>(bytes, 1) - 1) /
      std::max<std::int64_t>(bytes, 1);
  const std::int64_t affordable =
      std::max<std::int64_t>(1, kMaxSetBytes / std::max<std::int64_t>(allocated, 1));
  return static_cast<int>(std::clamp<std::int64_t>(std::min(wanted, affordable), 1, kMaxInputSets));
}

std::uint64_t seed_of(std::string_view kernel, std::string_view size) {
  std::uint64_t seed = 0xC0FFEEull;
  for (char ch : kernel) seed = seed * 131 + static_cast<unsigned char>(ch);
  for (char ch : size) seed = seed * 131 + static_cast<unsigned char>(ch);
  return seed;
}

}  // namespace zerojit::bench
