#include "crosstune/tuner/loser_cutoff.h"

#include <gtest/gtest.h>

namespace crosstune::tuner {
namespace {

TEST(LoserCutoff, NothingStopsUntilThreeMeasurementsShowTheNoise) {
  LoserCutoff c;
  EXPECT_EQ(c.StopAbove(), 0);
  c.AddFull({1.0, 1.0, 1.0});
  c.AddFull({2.0, 2.0, 2.0});
  EXPECT_EQ(c.StopAbove(), 0);
  c.AddFull({0.5, 0.5, 0.5});
  // Quiet rounds: the smallest margin, over the best mean.
  EXPECT_DOUBLE_EQ(c.best(), 0.5);
  EXPECT_DOUBLE_EQ(c.Margin(), 1 + LoserCutoff::kMinMargin);
  EXPECT_DOUBLE_EQ(c.StopAbove(), 0.5 * (1 + LoserCutoff::kMinMargin));
}

TEST(LoserCutoff, NoisyRoundsWidenTheMargin) {
  LoserCutoff c;
  // Each measurement's rounds spread by a coefficient of variation of 0.1: margin 1 + 4 x 0.1.
  for (double mean : {1.0, 2.0, 3.0}) c.AddFull({mean * 0.9, mean, mean * 1.1});
  EXPECT_NEAR(c.Margin(), 1.4, 1e-12);
  EXPECT_NEAR(c.StopAbove(), 1.4, 1e-12);
  // The median spread, not the mean: one wild measurement does not open the margin wide.
  c.AddFull({4.0, 40.0});
  c.AddFull({5.0, 5.0});
  EXPECT_NEAR(c.Margin(), 1.4, 1e-12);
}

TEST(LoserCutoff, OneRoundMeasurementsSetTheBestButShowNoNoise) {
  LoserCutoff c;
  for (int i = 0; i < 5; ++i) c.AddFull({1.0});
  EXPECT_DOUBLE_EQ(c.best(), 1.0);
  EXPECT_EQ(c.StopAbove(), 0);  // no rounds to stop between, and no noise known
  c.AddFull({});                // nothing measured: ignored
  c.AddFull({0.0, 0.0});        // a zero time: ignored
  EXPECT_DOUBLE_EQ(c.best(), 1.0);
}

}  // namespace
}  // namespace crosstune::tuner
