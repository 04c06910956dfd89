#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <tuple>

#include "zerojit/space.hpp"

namespace zerojit {
namespace {

struct Desc {
  std::int64_t tokens = 1;
  DType dtype = DType::f32;
  int block = 0;
  bool gather = false;
  static constexpr auto fields() {
    return std::tuple{field("tokens", &Desc::tokens), field("dtype", &Desc::dtype),
                      field("block", &Desc::block), field("gather", &Desc::gather)};
  }
};

struct Key {
  int coarsen = 1;
  DType dtype = DType::f32;
  int block = 0;
  bool gather = false;
  static constexpr auto fields() {
    return std::tuple{field("coarsen", &Key::coarsen), field("dtype", &Key::dtype),
                      field("block", &Key::block), field("gather", &Key::gather)};
  }
  auto operator<=>(const Key&) const = default;
};

Key dispatch(const Desc& d) { return Key{d.tokens < 512 ? 1 : 4, d.dtype, d.block, d.gather}; }

auto set_tokens = [](Desc& d, std::int64_t v) { d.tokens = v; };

std::vector<std::int64_t> tokens_of(const WarmupSpace<Desc>& space) {
  std::vector<std::int64_t> out;
  space.for_each_point([&](std::size_t, const std::vector<std::size_t>&, const Desc* d) {
    if (d) out.push_back(d->tokens);
  });
  return out;
}

TEST(WarmupSpace, RangeWithStep) {
  WarmupSpace<Desc> space;
  space.range("tokens", 1, 10, 4, set_tokens);
  EXPECT_EQ(tokens_of(space), (std::vector<std::int64_t>{1, 5, 9}));
  EXPECT_THROW(WarmupSpace<Desc>().range("tokens", 1, 10, 0, set_tokens), Error);
}

TEST(WarmupSpace, MonotonicAdvanceAlwaysEndsAtTheBound) {
  WarmupSpace<Desc> space;
  space.advance("tokens", 1, 600, next_power_of_two, set_tokens);
  EXPECT_EQ(tokens_of(space),
            (std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600}));
  WarmupSpace<Desc> exact;
  exact.advance("tokens", 1, 8, next_power_of_two, set_tokens);
  EXPECT_EQ(tokens_of(exact), (std::vector<std::int64_t>{1, 2, 4, 8}));
  WarmupSpace<Desc> stuck;
  EXPECT_THROW(stuck.advance(
                   "tokens", 1, 8, [](std::int64_t v) { return v; }, set_tokens),
               Error);
}

TEST(WarmupSpace, NextPowerOfTwoSaturatesInsteadOfOverflowing) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(next_power_of_two(-5), 1);
  EXPECT_EQ(next_power_of_two(0), 1);
  EXPECT_EQ(next_power_of_two(1), 2);
  EXPECT_EQ(next_power_of_two(600), 1024);
  EXPECT_EQ(next_power_of_two((std::int64_t{1} << 62) - 1), std::int64_t{1} << 62);
  // 2^63 does not fit: the largest value stands in for it.
  EXPECT_EQ(next_power_of_two(std::int64_t{1} << 62), kMax);
  EXPECT_EQ(next_power_of_two(kMax), kMax);
}

// Each of these once overflowed a signed int64 and looped (zerojit keys
// --max-num-batched-tokens 4611686018427387904 never returned); a hang fails the test by
// timing out, so the calls are also timed here.
TEST(WarmupSpace, AdvanceUpToTheLargestBoundsTerminates) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const auto start = std::chrono::steady_clock::now();
  for (const std::int64_t last : {std::int64_t{1} << 62, (std::int64_t{1} << 62) + 1, kMax}) {
    SCOPED_TRACE(last);
    WarmupSpace<Desc> space;
    space.advance("tokens", 1, last, next_power_of_two, set_tokens);
    const std::vector<std::int64_t> tokens = tokens_of(space);
    ASSERT_EQ(tokens.size(), last == std::int64_t{1} << 62 ? 63u : 64u);
    for (std::size_t i = 0; i < 63; ++i) EXPECT_EQ(tokens[i], std::int64_t{1} << i);
    EXPECT_EQ(tokens.back(), last);
  }
  // An advance that would overflow just past the end is never asked for that step.
  WarmupSpace<Desc> near_end;
  near_end.advance(
      "tokens", kMax - 2, kMax, [](std::int64_t v) { return v + 1; }, set_tokens);
  EXPECT_EQ(tokens_of(near_end), (std::vector<std::int64_t>{kMax - 2, kMax - 1, kMax}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(WarmupSpace, AxesLongerThanTheBoundAreRefusedAtOnce) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const auto start = std::chrono::steady_clock::now();
  // 2^64 values: once a loop that never ended (v += step overflowed), now refused by count.
  try {
    WarmupSpace<Desc>().range("tokens", kMin, kMax, 1, set_tokens);
    FAIL() << "expected the bound to refuse the axis";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'tokens'"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(kDefaultMaxSpacePoints)), std::string::npos) << message;
    EXPECT_NE(message.find("narrow the axis"), std::string::npos) << message;
  }
  EXPECT_THROW(WarmupSpace<Desc>().max_points(100).range("tokens", 1, 101, 1, set_tokens), Error);
  EXPECT_NO_THROW(WarmupSpace<Desc>().max_points(101).range("tokens", 1, 101, 1, set_tokens));
  EXPECT_THROW(WarmupSpace<Desc>().advance(
                   "tokens", 0, kMax, [](std::int64_t v) { return v + 1; }, set_tokens),
               Error);
  // A range ending at the largest value lists it without stepping past it.
  WarmupSpace<Desc> top;
  top.range("tokens", kMax - 4, kMax, 2, set_tokens);
  EXPECT_EQ(tokens_of(top), (std::vector<std::int64_t>{kMax - 4, kMax - 2, kMax}));
  EXPECT_TRUE(tokens_of(WarmupSpace<Desc>().range("tokens", 5, 4, 1, set_tokens)).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(WarmupSpace, ZippedRowsVaryTogether) {
  struct Row {
    int block;
    bool gather;
  };
  WarmupSpace<Desc> space;
  space.zip({"block", "gather"}, std::vector<Row>{{256, true}, {64, false}, {2, false}},
            [](Desc& d, const Row& r) {
              d.block = r.block;
              d.gather = r.gather;
            });
  const auto expansion = space.expand(dispatch);
  ASSERT_EQ(expansion.keys.size(), 3u);
  EXPECT_EQ(expansion.keys[0], (Key{1, DType::f32, 256, true}));
  EXPECT_EQ(expansion.keys[1], (Key{1, DType::f32, 64, false}));
  EXPECT_EQ(expansion.keys[2], (Key{1, DType::f32, 2, false}));
  EXPECT_EQ(expansion.points, 3u);
}

TEST(WarmupSpace, ProductDedupsInFirstSeenOrderAndFindsDeadAxes) {
  WarmupSpace<Desc> space;
  space
      .choices("dtype", std::vector<DType>{DType::f32, DType::bf16},
               [](Desc& d, DType v) { d.dtype = v; })
      .choices("tokens", std::vector<std::int64_t>{1, 100, 511, 512, 8192}, set_tokens)
      .choices("unused", std::vector<int>{0, 1, 2}, [](Desc&, int) {});
  const auto expansion = space.expand(dispatch);
  EXPECT_EQ(expansion.points, 30u);
  ASSERT_EQ(expansion.keys.size(), 4u);
  EXPECT_EQ(expansion.keys[0], (Key{1, DType::f32, 0, false}));
  EXPECT_EQ(expansion.keys[1], (Key{4, DType::f32, 0, false}));
  EXPECT_EQ(expansion.keys[2], (Key{1, DType::bf16, 0, false}));
  EXPECT_EQ(expansion.keys[3], (Key{4, DType::bf16, 0, false}));
  EXPECT_EQ(expansion.dead_axes, std::vector<std::string>{"unused"});
}

TEST(WarmupSpace, FilterDropsPointsBeforeDispatch) {
  WarmupSpace<Desc> space;
  space.choices("tokens", std::vector<std::int64_t>{1, 512, 8192}, set_tokens)
      .filter("fits_batch", [](const Desc& d) { return d.tokens <= 256; });
  const auto expansion = space.expand(dispatch);
  EXPECT_EQ(expansion.filtered_out, 2u);
  ASSERT_EQ(expansion.keys.size(), 1u);
  EXPECT_EQ(expansion.keys[0].coarsen, 1);
  EXPECT_EQ(expansion.dead_axes, std::vector<std::string>{"tokens"});  // only one point kept
}

TEST(WarmupSpace, RefusesAProductOverTheBoundNamingTheAxes) {
  WarmupSpace<Desc> space;
  space.range("tokens", 1, 1000, 1, set_tokens)
      .range("block", 1, 1000, 1, [](Desc& d, std::int64_t v) { d.block = static_cast<int>(v); })
      .max_points(10000);
  try {
    space.expand(dispatch);
    FAIL() << "expected the bound to refuse the space";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("tokens(1000)"), std::string::npos) << message;
    EXPECT_NE(message.find("block(1000)"), std::string::npos) << message;
    EXPECT_NE(message.find("10000"), std::string::npos) << message;
  }
}

TEST(WarmupSpace, APointDispatchRejectsIsReportedWithThePoint) {
  WarmupSpace<Desc> space;
  space.choices("tokens", std::vector<std::int64_t>{1, -5}, set_tokens);
  try {
    space.expand([](const Desc& d) {
      if (d.tokens < 0) throw std::invalid_argument("negative tokens");
      return dispatch(d);
    });
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("tokens=-5"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("negative tokens"), std::string::npos);
  }
}

}  // namespace
}  // namespace zerojit
