#include "args.h"

#include <gtest/gtest.h>

#include <cstring>

namespace crosstune::cli {
namespace {

TEST(ArgSpec, ParsesIntegersAndFloats) {
  auto a = ParseArgSpec("42");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, ArgSpec::Kind::kInt);
  EXPECT_EQ(a->i, 42);
  EXPECT_EQ(ParseArgSpec("-7")->i, -7);
  auto f = ParseArgSpec("2.5");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, ArgSpec::Kind::kFloat);
  EXPECT_EQ(f->f, 2.5);
  EXPECT_EQ(ParseArgSpec("1e-3")->kind, ArgSpec::Kind::kFloat);
  EXPECT_EQ(ParseArgSpec("i:5")->i, 5);
  auto ef = ParseArgSpec("f:2");
  EXPECT_EQ(ef->kind, ArgSpec::Kind::kFloat);
  EXPECT_EQ(ef->f, 2.0);
}

TEST(ArgSpec, ParsesTensorForms) {
  auto n = ParseArgSpec("dir/a.npy");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->kind, ArgSpec::Kind::kNpy);
  EXPECT_EQ(n->path, "dir/a.npy");
  auto g = ParseArgSpec("16x4xf32:random");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->kind, ArgSpec::Kind::kGenerated);
  EXPECT_EQ(g->shape, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(g->fill, ArgSpec::Fill::kRandom);
  EXPECT_EQ(ParseArgSpec("8xi32:zeros")->fill, ArgSpec::Fill::kZeros);
  EXPECT_EQ(ParseArgSpec("8xf64:ones")->fill, ArgSpec::Fill::kOnes);
}

TEST(ArgSpec, RefusesNonsenseWithAHint) {
  auto a = ParseArgSpec("banana");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("SHAPExDTYPE"), std::string::npos);
  EXPECT_FALSE(ParseArgSpec("16xf32:pink").ok());
  EXPECT_FALSE(ParseArgSpec("16xq9:zeros").ok());
  EXPECT_FALSE(ParseArgSpec("i:2.5").ok());
  EXPECT_FALSE(ParseArgSpec("").ok());
}

TEST(HostTensor, GeneratesSeededRandomData) {
  auto spec = *ParseArgSpec("64xf32:random");
  auto a = MakeHostTensor(spec, 1);
  auto b = MakeHostTensor(spec, 1);
  auto c = MakeHostTensor(spec, 2);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->data.size(), 256u);
  EXPECT_EQ(a->data, b->data);
  EXPECT_NE(a->data, c->data);
  const float* p = reinterpret_cast<const float*>(a->data.data());
  for (int i = 0; i < 64; ++i) {
    EXPECT_GE(p[i], -1.0f);
    EXPECT_LT(p[i], 1.0f);
  }
}

TEST(HostTensor, FillsOnesInEveryDType) {
  auto h = MakeHostTensor(*ParseArgSpec("2xf16:ones"), 0);
  ASSERT_TRUE(h.ok());
  uint16_t half[2];
  std::memcpy(half, h->data.data(), 4);
  EXPECT_EQ(half[0], 0x3c00);
  auto i = MakeHostTensor(*ParseArgSpec("3xi64:ones"), 0);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(i->data.data())[2], 1);
  auto z = MakeHostTensor(*ParseArgSpec("3xu8:zeros"), 0);
  EXPECT_EQ(z->data, (std::vector<uint8_t>{0, 0, 0}));
}

TEST(OutSpec, SavesLastTensorOrTheNamedArgument) {
  std::vector<ArgSpec> args = {*ParseArgSpec("4xf32:random"), *ParseArgSpec("4xf32:zeros"),
                               *ParseArgSpec("42")};
  auto last = ParseOutSpecs({"out.npy"}, args);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->at(1), "out.npy");
  auto named = ParseOutSpecs({"0=in.npy"}, args);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->at(0), "in.npy");
  EXPECT_FALSE(ParseOutSpecs({"2=x.npy"}, args).ok());  // a scalar
  EXPECT_FALSE(ParseOutSpecs({"7=x.npy"}, args).ok());  // out of range
  EXPECT_FALSE(ParseOutSpecs({"x.npy"}, {*ParseArgSpec("1")}).ok());
}

TEST(Signature, ChecksCountsAndKindsAndWidensInts) {
  std::vector<ArgSpec> args = {*ParseArgSpec("4xf32:random"), *ParseArgSpec("3")};
  EXPECT_TRUE(MatchSignature("scale", "tf", &args).ok());
  EXPECT_EQ(args[1].kind, ArgSpec::Kind::kFloat);
  EXPECT_EQ(args[1].f, 3.0);
  auto wrong_count = MatchSignature("vadd", "ttt", &args);
  ASSERT_FALSE(wrong_count.ok());
  EXPECT_NE(wrong_count.message().find("takes 3 arguments"), std::string::npos);
  std::vector<ArgSpec> scalar_for_tensor = {*ParseArgSpec("1")};
  EXPECT_FALSE(MatchSignature("f", "t", &scalar_for_tensor).ok());
  std::vector<ArgSpec> float_for_int = {*ParseArgSpec("1.5")};
  EXPECT_FALSE(MatchSignature("f", "i", &float_for_int).ok());
}

}  // namespace
}  // namespace crosstune::cli
