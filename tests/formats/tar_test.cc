// The ustar reader under package.h: every header's checksum is checked before anything in it is
// used.
#include <gtest/gtest.h>

#include <filesystem>

#include "crosstune/package.h"
#include "crosstune/testing/support.h"

namespace crosstune::pkg {
namespace {

// A byte of the first header flipped: in mtime (no other check reads it), or in the size field
// (which would otherwise send the reader elsewhere in the file).
TEST(Tar, RefusesAHeaderWhoseChecksumDoesNotMatch) {
  std::string dir = testing::MakeTempDir();
  std::string path = dir + "/a.tar";
  ASSERT_TRUE(WriteTar(path, {{"a.txt", "hello", ""}, {"b.txt", "world", ""}}).ok());
  ASSERT_TRUE(ListTar(path).ok());
  const std::string good = testing::ReadFile(path);
  constexpr size_t kMtime = 136, kSize = 124, kSecondHeader = 1024;
  for (size_t at : {kMtime, kSize + 10, kSecondHeader + kMtime}) {
    std::string bad = good;
    bad[at] = bad[at] == '1' ? '2' : '1';
    testing::WriteFile(path, bad);
    auto members = ListTar(path);
    ASSERT_FALSE(members.ok()) << "a flipped byte at " << at << " was accepted";
    EXPECT_EQ(members.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(members.status().message().find("bad header checksum at byte " +
                                              std::to_string(at / 512 * 512)),
              std::string::npos)
        << members.status().message();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crosstune::pkg
