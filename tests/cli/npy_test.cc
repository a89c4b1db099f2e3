#include "crosstune/client/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "crosstune/testing/support.h"

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

// numpy itself is the reference: it reads what we write, and we read what it writes in each
// format version (3.0 included), for every dtype the CLI takes.
class NpyWithNumpy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("crosstune-npy");
    ASSERT_FALSE(dir_.empty());
    auto probe = testing::RunCommand(std::string(CT_NUMPY_PYTHON) + " -c 'import numpy'");
    ASSERT_EQ(probe.exit_code, 0) << CT_NUMPY_PYTHON << " cannot import numpy "
                                  << "(scripts/install-deps.sh installs python3-numpy): "
                                  << probe.err;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs a Python snippet with numpy imported as np and `d` the work dir.
  testing::CommandResult Python(const std::string& code) {
    std::string script = testing::WriteFile(
        dir_ + "/script.py", "import numpy as np, sys\nd = '" + dir_ + "'\n" + code + "\n");
    return testing::RunCommand(std::string(CT_NUMPY_PYTHON) + " " + script);
  }

  std::string dir_;
};

TEST_F(NpyWithNumpy, NumpyReadsWhatWeWrite) {
  std::vector<float> f32 = {0.5f, -1, 2, 3.25f, 4, 5};
  ASSERT_TRUE(
      WriteNpy(dir_ + "/f32.npy", {2, 3}, DLDataType{kDLFloat, 32, 1}, f32.data(), 24).ok());
  std::vector<int64_t> i64 = {-3, 0, 1LL << 40};
  ASSERT_TRUE(WriteNpy(dir_ + "/i64.npy", {3}, DLDataType{kDLInt, 64, 1}, i64.data(), 24).ok());
  std::vector<uint8_t> b = {1, 0, 1, 1};
  ASSERT_TRUE(
      WriteNpy(dir_ + "/bool.npy", {2, 2}, DLDataType{kDLUInt, 8, 1}, b.data(), 4, true).ok());
  uint16_t half = 0x3c00;  // 1.0
  ASSERT_TRUE(WriteNpy(dir_ + "/f16.npy", {}, DLDataType{kDLFloat, 16, 1}, &half, 2).ok());
  ASSERT_TRUE(WriteNpy(dir_ + "/empty.npy", {0, 4}, DLDataType{kDLFloat, 64, 1}, nullptr, 0).ok());

  auto r = Python(R"(
def check(name, want):
    got = np.load(f'{d}/{name}.npy', allow_pickle=False)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
    assert np.array_equal(got, want), (name, got)
check('f32', np.array([[0.5, -1, 2], [3.25, 4, 5]], dtype=np.float32))
check('i64', np.array([-3, 0, 1 << 40], dtype=np.int64))
check('bool', np.array([[True, False], [True, True]]))
check('f16', np.array(1.0, dtype=np.float16))
check('empty', np.zeros((0, 4)))
print('ok'))");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok\n") << r.err;
}

TEST_F(NpyWithNumpy, ReadsWhatNumpyWritesInFormatsOneTwoAndThree) {
  auto r = Python(R"(
a = np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5
for v in (1, 2, 3):
    with open(f'{d}/v{v}.npy', 'wb') as f:
        np.lib.format.write_array(f, a, version=(v, 0))
np.save(f'{d}/u16.npy', np.array([1, 65535], dtype=np.uint16))
np.save(f'{d}/bool.npy', np.array([True, False]))
np.save(f'{d}/i8.npy', np.array([[-128], [127]], dtype=np.int8))
print('ok'))");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (int v = 1; v <= 3; ++v) {
    std::string path = dir_ + "/v" + std::to_string(v) + ".npy";
    ASSERT_EQ(testing::ReadFile(path)[6], static_cast<char>(v)) << "numpy wrote another version";
    auto a = ReadNpy(path);
    ASSERT_TRUE(a.ok()) << "version " << v << ": " << a.status().ToString();
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a->dtype.code, kDLFloat);
    EXPECT_EQ(a->dtype.bits, 32);
    ASSERT_EQ(a->data.size(), 24u);
    float f[6];
    std::memcpy(f, a->data.data(), 24);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(f[i], 1.5f * i) << "version " << v << " element " << i;
  }
  auto u16 = ReadNpy(dir_ + "/u16.npy");
  ASSERT_TRUE(u16.ok()) << u16.status().ToString();
  EXPECT_EQ(u16->dtype.code, kDLUInt);
  EXPECT_EQ(u16->dtype.bits, 16);
  uint16_t u[2];
  std::memcpy(u, u16->data.data(), 4);
  EXPECT_EQ(u[1], 65535);
  auto b = ReadNpy(dir_ + "/bool.npy");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->is_bool);
  EXPECT_EQ(b->data, (std::vector<uint8_t>{1, 0}));
  auto i8 = ReadNpy(dir_ + "/i8.npy");
  ASSERT_TRUE(i8.ok()) << i8.status().ToString();
  EXPECT_EQ(i8->shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(static_cast<int8_t>(i8->data[0]), -128);
}

}  // namespace
}  // namespace crosstune::client
