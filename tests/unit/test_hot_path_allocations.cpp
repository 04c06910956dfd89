// The launch path of a warmed key allocates nothing on the heap: counted with a replacement
// global operator new over many launches of the example kernels and a DSv4 kernel.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "dsv4/indexer_q/indexer_q.hpp"
#include "examples/examples.hpp"
#include "support/null_backend.hpp"

// The replacements below pair malloc with free, but once GCC inlines them into a container's
// code it sees `operator delete` free a pointer that `operator new` returned and warns
// (-Wmismatched-new-delete): a false positive for replaced global operators.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<std::uint64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace zerojit {
namespace {

TEST(HotPath, AWarmedLaunchAllocatesNothing) {
  auto backend = std::make_shared<testing::NullBackend>();
  Runtime::instance().set_backend(backend);
  Runtime::instance().set_artifact_store(nullptr);
  auto& empty = examples::EmptyKernel::instance();
  auto& scale_add = examples::ScaleAddKernel::instance();
  auto& indexer = dsv4::IndexerQFp8Kernel::instance();

  examples::ScaleAddArgs add;
  const auto vector = TensorDesc::contiguous(DType::f32, {4096});
  add.x = make_tensor_ref(reinterpret_cast<void*>(0x100000), vector);
  add.y = make_tensor_ref(reinterpret_cast<void*>(0x200000), vector);
  dsv4::IndexerQFp8Args args;
  const std::int64_t tokens = 600, heads = 64, dim = 128;
  args.positions = make_tensor_ref(reinterpret_cast<void*>(0x1000000),
                                   TensorDesc::contiguous(DType::i64, {tokens}));
  args.q = make_tensor_ref(reinterpret_cast<void*>(0x2000000),
                           TensorDesc::contiguous(DType::bf16, {tokens, heads, dim}));
  args.cos_sin_cache = make_tensor_ref(reinterpret_cast<void*>(0x3000000),
                                       TensorDesc::contiguous(DType::f32, {4096, 64}));
  args.weights = make_tensor_ref(reinterpret_cast<void*>(0x4000000),
                                 TensorDesc::contiguous(DType::bf16, {tokens, heads}));
  args.scale = 0.01f;
  args.q_fp8 = make_tensor_ref(reinterpret_cast<void*>(0x5000000),
                               TensorDesc::contiguous(DType::u8, {tokens, heads, dim}));
  args.weights_out = make_tensor_ref(reinterpret_cast<void*>(0x6000000),
                                     TensorDesc::contiguous(DType::f32, {tokens, heads}));

  // First calls compile (NVRTC) and load: allocations are expected there.
  empty(32, LaunchTarget{});
  scale_add(add);
  indexer(args);
  const std::uint64_t launches_before = backend->launches.load();
  const std::uint64_t before = g_allocations.load();
  constexpr int kLaunches = 1000;
  for (int i = 0; i < kLaunches; ++i) {
    empty(32, LaunchTarget{});
    scale_add(add);
    indexer(args);
  }
  const std::uint64_t allocations = g_allocations.load() - before;
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hit path over " << 3 * kLaunches
                             << " launches";
  EXPECT_EQ(backend->launches.load() - launches_before, 3u * kLaunches);
  EXPECT_EQ(backend->loads.load(), 3u);
  Runtime::instance().set_backend(make_cuda_backend());
}

}  // namespace
}  // namespace zerojit
