#include "crosstune/server/workspace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

namespace crosstune::server {
namespace {

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "ct-ws-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    outside_ = root_ + "-outside";
    std::filesystem::create_directories(outside_);
    std::ofstream(outside_ + "/secret") << "secret";
    auto ws = Workspace::Open(root_);
    ASSERT_TRUE(ws.ok()) << ws.status().ToString();
    ws_.emplace(std::move(ws).value());
  }
  void TearDown() override {
    std::filesystem::remove_all(root_);
    std::filesystem::remove_all(outside_);
  }
  Status Put(const std::string& path, const std::string& bytes) {
    CT_ASSIGN_OR_RETURN(Workspace::PendingFile p, ws_->CreateTemp(path));
    if (::write(p.fd.get(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
      return Status(ErrorCode::kIoError, "write");
    }
    return ws_->Commit(p);
  }

  std::string root_, outside_;
  std::optional<Workspace> ws_;
};

TEST(SplitWorkspacePath, NormalizesHarmlessComponents) {
  auto parts = SplitWorkspacePath("./a//b/./c.so");
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(*parts, (std::vector<std::string>{"a", "b", "c.so"}));
}

TEST(SplitWorkspacePath, RefusesEscapesAndNonsense) {
  for (const std::string& bad :
       std::vector<std::string>{"", "/etc/passwd", "..", "../x", "a/../../x", "a/..", ".", "./",
                                std::string("a\0b", 3), std::string(2000, 'a'), ".ct-tmp-1234"}) {
    auto parts = SplitWorkspacePath(bad);
    EXPECT_FALSE(parts.ok()) << "accepted '" << bad << "'";
    if (!parts.ok()) {
      EXPECT_EQ(parts.status().code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(parts.status().message().find("refusing path"), std::string::npos);
    }
  }
}

TEST_F(WorkspaceTest, WritesReadsAndRemovesFilesInsideTheRoot) {
  ASSERT_TRUE(Put("d/e/f.txt", "hello").ok());
  EXPECT_TRUE(std::filesystem::exists(root_ + "/d/e/f.txt"));
  auto f = ws_->OpenForRead("d//e/./f.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size, 5u);
  EXPECT_EQ(f->normalized, "d/e/f.txt");
  EXPECT_EQ(f->abs_path, root_ + "/d/e/f.txt");
  auto list = ws_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].path, "d/e/f.txt");
  EXPECT_TRUE(ws_->Remove("d/e/f.txt").ok());
  EXPECT_EQ(ws_->OpenForRead("d/e/f.txt").status().code(), ErrorCode::kNotFound);
}

TEST_F(WorkspaceTest, RefusesSymlinkedDirectoriesOnTheWay) {
  std::filesystem::create_directory_symlink(outside_, root_ + "/link");
  auto read = ws_->OpenForRead("link/secret");
  EXPECT_EQ(read.status().code(), ErrorCode::kInvalidArgument) << read.status().ToString();
  EXPECT_NE(read.status().message().find("'link' is a symlink"), std::string::npos);
  EXPECT_FALSE(Put("link/new.txt", "x").ok());
  EXPECT_FALSE(std::filesystem::exists(outside_ + "/new.txt"));
  EXPECT_FALSE(ws_->Remove("link/secret").ok());
  EXPECT_TRUE(std::filesystem::exists(outside_ + "/secret"));
}

TEST_F(WorkspaceTest, RefusesASymlinkAsTheFileItself) {
  std::filesystem::create_symlink(outside_ + "/secret", root_ + "/s");
  auto read = ws_->OpenForRead("s");
  EXPECT_EQ(read.status().code(), ErrorCode::kInvalidArgument) << read.status().ToString();
  auto write = Put("s", "overwrite");
  EXPECT_EQ(write.code(), ErrorCode::kInvalidArgument);
  std::ifstream in(outside_ + "/secret");
  std::string content;
  in >> content;
  EXPECT_EQ(content, "secret");
  auto list = ws_->List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());  // links are not listed, nor followed
}

TEST_F(WorkspaceTest, AbortLeavesNothingBehind) {
  auto p = ws_->CreateTemp("half.bin");
  ASSERT_TRUE(p.ok());
  ws_->Abort(*p);
  EXPECT_TRUE(std::filesystem::is_empty(root_));
}

TEST_F(WorkspaceTest, CachesHashesUntilTheFileChanges) {
  ASSERT_TRUE(Put("a.txt", "abc").ok());
  auto f = ws_->OpenForRead("a.txt");
  ASSERT_TRUE(f.ok());
  auto h = ws_->HashOf(f->fd.get(), f->normalized);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ASSERT_TRUE(Put("a.txt", "abcd").ok());
  auto g = ws_->OpenForRead("a.txt");
  ASSERT_TRUE(g.ok());
  auto h2 = ws_->HashOf(g->fd.get(), g->normalized);
  ASSERT_TRUE(h2.ok());
  EXPECT_NE(*h2, *h);
}

// ls used to stop 32 directories down and to hide every top-level name starting with .ctpkg-
// (the package loader's prefix then): a client's own files went missing from its listing.
TEST_F(WorkspaceTest, ListsFilesAsDeepAsAPathReachesAndNamesStartingWithCtpkg) {
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "d/";
  ASSERT_TRUE(Put(deep + "deep.bin", "x").ok());
  ASSERT_TRUE(Put(".ctpkg-mine", "y").ok());
  ASSERT_TRUE(Put("a/.ctpkg-too", "z").ok());
  auto list = ws_->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> paths;
  for (const auto& f : *list) paths.push_back(f.path);
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(paths, (std::vector<std::string>{".ctpkg-mine", "a/.ctpkg-too", deep + "deep.bin"}));
}

// "dir/" lost its empty last component and became the file "dir".
TEST_F(WorkspaceTest, RefusesToCreateAFileFromAPathEndingInASlash) {
  auto p = ws_->CreateTemp("dir/");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("names a directory"), std::string::npos)
      << p.status().ToString();
  EXPECT_TRUE(std::filesystem::is_empty(root_));
}

// The upload quota's running total: a replaced file counts once at its new size, a removed one
// not at all, whatever spelling of its path each call used.
TEST_F(WorkspaceTest, KeepsARunningTotalOfWhatItStored) {
  ASSERT_TRUE(Put("a.bin", std::string(100, 'a')).ok());
  ASSERT_TRUE(Put("dir/b.bin", std::string(30, 'b')).ok());
  EXPECT_EQ(ws_->stored_bytes(), 130u);
  ASSERT_TRUE(Put("./a.bin", std::string(10, 'c')).ok());
  EXPECT_EQ(ws_->stored_bytes(), 40u);
  EXPECT_EQ(ws_->StoredBytesBesides("dir//b.bin"), 10u);
  EXPECT_EQ(ws_->StoredBytesBesides("new.bin"), 40u);
  ASSERT_TRUE(ws_->Remove("dir/./b.bin").ok());
  EXPECT_EQ(ws_->stored_bytes(), 10u);
  ASSERT_TRUE(ws_->Remove("dir").ok());  // an empty directory counts nothing
  EXPECT_EQ(ws_->stored_bytes(), 10u);
  // An aborted upload stores nothing.
  auto p = ws_->CreateTemp("c.bin");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(::write(p->fd.get(), "xyz", 3), 3);
  ws_->Abort(*p);
  EXPECT_EQ(ws_->stored_bytes(), 10u);
}

}  // namespace
}  // namespace crosstune::server
