#include "crosstune/tvm_params.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "crosstune/tensor.h"

namespace crosstune::pkg {
namespace {

constexpr DLDataType kF32{kDLFloat, 32, 1};

// A serialized params.bin in 64-byte aligned memory, opened in place.
struct OpenParams {
  std::shared_ptr<char> bytes;
  std::unique_ptr<ParamsFile> file;
};
OpenParams Open(const std::string& serialized) {
  OpenParams p;
  p.bytes.reset(static_cast<char*>(std::aligned_alloc(64, (serialized.size() + 63) / 64 * 64)),
                std::free);
  std::memcpy(p.bytes.get(), serialized.data(), serialized.size());
  auto f = ParamsFile::FromBuffer(p.bytes.get(), serialized.size());
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (f.ok()) p.file = std::move(f).value();
  return p;
}

void PutLe(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// {"w": float32 [2] = {1.5, -2}}, laid out by hand from the format description in tvm_params.h.
std::string HandMadeBlob() {
  std::string b;
  PutLe(&b, 0xF7E58D4F05049CB7ull, 8);
  PutLe(&b, 0, 8);
  PutLe(&b, 1, 8);  // one name
  PutLe(&b, 1, 8);
  b += "w";
  PutLe(&b, 1, 8);  // one tensor
  PutLe(&b, 0xDD5E40F096B4A13Full, 8);
  PutLe(&b, 0, 8);
  PutLe(&b, 1, 4);  // kDLCPU
  PutLe(&b, 0, 4);
  PutLe(&b, 1, 4);  // ndim
  b.push_back(static_cast<char>(kDLFloat));
  b.push_back(32);
  PutLe(&b, 1, 2);
  PutLe(&b, 2, 8);  // shape
  PutLe(&b, 8, 8);  // data bytes
  const float data[2] = {1.5f, -2.0f};
  b.append(reinterpret_cast<const char*>(data), sizeof(data));
  return b;
}

TEST(TvmParams, ReadsABlobLaidOutAsTheFormatSays) {
  ParamsWriter w;
  Status s = ImportTvmParams(HandMadeBlob(), &w);
  ASSERT_TRUE(s.ok()) << s.ToString();
  OpenParams p = Open(w.Serialize());
  ASSERT_EQ(p.file->tensors().size(), 1u);
  const ParamTensor& t = p.file->tensors()[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(DTypeName(t.dtype), "f32");
  const auto* v = static_cast<const float*>(p.file->data(t));
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], -2.0f);
}

TEST(TvmParams, WritesTheSameBytesItReads) {
  ParamsWriter w;
  ASSERT_TRUE(ImportTvmParams(HandMadeBlob(), &w).ok());
  OpenParams p = Open(w.Serialize());
  EXPECT_EQ(ExportTvmParams(*p.file), HandMadeBlob());
}

TEST(TvmParams, RoundTripsParamsBinThroughABlob) {
  ParamsWriter w;
  std::vector<float> conv(2 * 3 * 3 * 3);
  for (size_t i = 0; i < conv.size(); ++i) conv[i] = 0.25f * static_cast<float>(i) - 3.0f;
  const int64_t shape_ids[4] = {7, -1, 1LL << 40, 0};
  const uint8_t flag = 1;
  ASSERT_TRUE(w.Add("conv1.weight", kF32, {2, 3, 3, 3}, conv.data(), conv.size() * 4).ok());
  ASSERT_TRUE(w.Add("ids", DLDataType{kDLInt, 64, 1}, {4}, shape_ids, sizeof(shape_ids)).ok());
  ASSERT_TRUE(w.Add("flag", DLDataType{kDLUInt, 8, 1}, {}, &flag, 1).ok());
  ASSERT_TRUE(w.Add("empty", kF32, {0, 3}, &flag, 0).ok());
  const std::string original = w.Serialize();
  OpenParams p = Open(original);
  const std::string blob = ExportTvmParams(*p.file);
  ParamsWriter back;
  Status s = ImportTvmParams(blob, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(back.Serialize(), original);
}

TEST(TvmParams, RefusesEveryTruncation) {
  const std::string blob = HandMadeBlob();
  for (size_t n = 0; n < blob.size(); ++n) {
    ParamsWriter w;
    Status s = ImportTvmParams(std::string_view(blob).substr(0, n), &w);
    ASSERT_FALSE(s.ok()) << "prefix of " << n << " bytes";
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(TvmParams, RefusesMalformedBlobsNamingTheParam) {
  ParamsWriter w;
  std::string b = HandMadeBlob();
  b[0] ^= 1;
  EXPECT_NE(ImportTvmParams(b, &w).message().find("wrong magic"), std::string::npos);

  b = HandMadeBlob();
  b += "x";
  EXPECT_NE(ImportTvmParams(b, &w).message().find("1 bytes after the last tensor"),
            std::string::npos);

  b = HandMadeBlob();
  b[24 + 8 + 1 + 8 + 8 + 8 + 4 + 4 + 4 + 1] = 64;  // bits 64: the data size no longer fits
  Status s = ImportTvmParams(b, &w);
  EXPECT_NE(s.message().find("param 'w' says 8 bytes of data"), std::string::npos) << s.ToString();

  // A name params.bin's JSON index cannot hold (found by fuzz_tvm_params: it imported, and
  // writing the file then threw).
  b = HandMadeBlob();
  b[32] = '\xff';
  ParamsWriter fresh;  // (w may hold 'w' from an import above that got as far as adding it)
  s = ImportTvmParams(b, &fresh);
  EXPECT_NE(s.message().find("is not valid UTF-8"), std::string::npos) << s.ToString();

  // A dtype params.bin cannot name (code 5; found by fuzz_tvm_params: the file written did not
  // read back).
  b = HandMadeBlob();
  b[24 + 8 + 1 + 8 + 8 + 8 + 4 + 4 + 4] = 5;
  s = ImportTvmParams(b, &fresh);
  EXPECT_NE(s.message().find("unknown dtype"), std::string::npos) << s.ToString();

  b = HandMadeBlob();
  b[16] = 0x7f;  // a name count far past the blob
  EXPECT_NE(ImportTvmParams(b, &w).message().find("names"), std::string::npos);

  b = HandMadeBlob();
  b[24 + 8 + 1 + 8 + 8 + 8 + 4 + 4] = 9;  // rank 9
  EXPECT_NE(ImportTvmParams(b, &w).message().find("rank 9"), std::string::npos);

  b = HandMadeBlob();
  b[24 + 8 + 1 + 8 + 8 + 8 + 4 + 4 + 4 + 2] = 4;  // lanes 4
  EXPECT_NE(ImportTvmParams(b, &w).message().find("whole-byte scalar"), std::string::npos);
}

TEST(TvmParams, RefusesDuplicateNames) {
  std::string b;
  PutLe(&b, kTvmParamsMagic, 8);
  PutLe(&b, 0, 8);
  PutLe(&b, 2, 8);
  for (int i = 0; i < 2; ++i) {
    PutLe(&b, 1, 8);
    b += "w";
  }
  ParamsWriter w;
  EXPECT_NE(ImportTvmParams(b, &w).message().find("'w' appears twice"), std::string::npos);
}

}  // namespace
}  // namespace crosstune::pkg
