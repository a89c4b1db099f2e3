#include "crosstune/client/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace crosstune::client {
namespace {

// A .npy image as numpy writes it: magic, version, header length, padded dict, data.
std::string NumpyImage(const std::string& dict, const std::string& data, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  size_t prefix = major == 1 ? 10 : 12;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  size_t hlen = total - prefix;
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i)
    out += static_cast<char>((hlen >> (8 * i)) & 0xff);
  std::string h = dict;
  h.append(hlen - h.size() - 1, ' ');
  h += '\n';
  return out + h + data;
}

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(Npy, ReadsVersionOneFloatMatrix) {
  auto a = ParseNpy(NumpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                               Floats({0, 1, 2, 3, 4, 5})));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->dtype.code, kDLFloat);
  EXPECT_EQ(a->dtype.bits, 32);
  ASSERT_EQ(a->data.size(), 24u);
  float f[6];
  std::memcpy(f, a->data.data(), 24);
  EXPECT_EQ(f[5], 5.0f);
}

TEST(Npy, ReadsVersionTwoHeader) {
  auto a = ParseNpy(NumpyImage("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
                               std::string(8, '\x01'), 2));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->dtype.code, kDLInt);
  EXPECT_EQ(a->dtype.bits, 64);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{1}));
}

TEST(Npy, ReadsScalarAndEmptyArrays) {
  auto s = ParseNpy(
      NumpyImage("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", std::string(8, '\0')));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->num_elements(), 1u);
  auto e = ParseNpy(NumpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", ""));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->num_elements(), 0u);
}

TEST(Npy, MapsEveryIntegerFloatAndBoolDType) {
  struct Case {
    const char* descr;
    uint8_t code;
    uint8_t bits;
    bool is_bool;
  };
  for (const Case& c : {Case{"<f2", kDLFloat, 16, false}, Case{"<f8", kDLFloat, 64, false},
                        Case{"|i1", kDLInt, 8, false}, Case{"<i2", kDLInt, 16, false},
                        Case{"<i4", kDLInt, 32, false}, Case{"|u1", kDLUInt, 8, false},
                        Case{"<u2", kDLUInt, 16, false}, Case{"<u4", kDLUInt, 32, false},
                        Case{"<u8", kDLUInt, 64, false}, Case{"|b1", kDLUInt, 8, true}}) {
    std::string dict =
        std::string("{'descr': '") + c.descr + "', 'fortran_order': False, 'shape': (2,), }";
    auto a = ParseNpy(NumpyImage(dict, std::string(2 * c.bits / 8, '\0')));
    ASSERT_TRUE(a.ok()) << c.descr << ": " << a.status().ToString();
    EXPECT_EQ(a->dtype.code, c.code) << c.descr;
    EXPECT_EQ(a->dtype.bits, c.bits) << c.descr;
    EXPECT_EQ(a->is_bool, c.is_bool) << c.descr;
    EXPECT_EQ(*NpyDescr(a->dtype, a->is_bool), c.descr);
  }
}

TEST(Npy, RoundTripsThroughFile) {
  std::vector<int32_t> v = {1, -2, 3, -4, 5, -6, 7, -8};
  std::string path = ::testing::TempDir() + "/npy_roundtrip.npy";
  ASSERT_TRUE(WriteNpy(path, {2, 2, 2}, DLDataType{kDLInt, 32, 1}, v.data(), 32).ok());
  auto a = ReadNpy(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(std::memcmp(a->data.data(), v.data(), 32), 0);
}

TEST(Npy, WritesHeaderNumpyCanRead) {
  float x[3] = {1, 2, 3};
  auto bytes = EncodeNpy({3}, DLDataType{kDLFloat, 32, 1}, x, sizeof(x));
  ASSERT_TRUE(bytes.ok());
  // Data starts 64-byte aligned after a version 1.0 header ending in '\n'.
  EXPECT_EQ((bytes->size() - sizeof(x)) % 64, 0u);
  EXPECT_EQ((*bytes)[6], '\x01');
  EXPECT_EQ((*bytes)[bytes->size() - sizeof(x) - 1], '\n');
  EXPECT_NE(bytes->find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"),
            std::string::npos);
}

TEST(Npy, RefusesFortranOrder) {
  auto a = ParseNpy(NumpyImage("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                               Floats({1, 2, 3, 4})),
                    "a.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("Fortran"), std::string::npos) << a.status().message();
  EXPECT_EQ(a.status().message().rfind("a.npy: ", 0), 0u);
}

TEST(Npy, RefusesBigEndian) {
  auto a = ParseNpy(
      NumpyImage("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", Floats({1})));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("big-endian"), std::string::npos) << a.status().message();
}

TEST(Npy, RefusesTruncatedData) {
  auto a = ParseNpy(
      NumpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", Floats({1, 2, 3})));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("truncated data"), std::string::npos) << a.status().message();
  EXPECT_NE(a.status().message().find("needs 16 bytes"), std::string::npos);
}

TEST(Npy, RefusesBadHeaders) {
  EXPECT_FALSE(ParseNpy("hello world").ok());
  EXPECT_FALSE(ParseNpy(NumpyImage("not a dict", "")).ok());
  EXPECT_FALSE(ParseNpy(NumpyImage("{'descr': '<f4', 'shape': (1,), }", Floats({1}))).ok());
  EXPECT_FALSE(ParseNpy(NumpyImage("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                                   std::string(8, '\0')))
                   .ok());
  EXPECT_FALSE(
      ParseNpy(NumpyImage("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                          Floats({1})))
          .ok());
  EXPECT_FALSE(ParseNpy(NumpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
                                   Floats({1})))
                   .ok());
  std::string image =
      NumpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", Floats({1}));
  EXPECT_FALSE(ParseNpy(image.substr(0, 20)).ok());  // header cut short
  std::string v9 = image;
  v9[6] = 9;
  auto a = ParseNpy(v9);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("version 9.0"), std::string::npos) << a.status().message();
}

TEST(Npy, RefusesMissingFile) {
  auto a = ReadNpy("/nonexistent/crosstune.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), ErrorCode::kIoError);
}

}  // namespace
}  // namespace crosstune::client
