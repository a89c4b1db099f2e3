// Workspace: the directory a session may read and write, and nothing outside it.
//
// Every path a client names is relative to the workspace root. A path is refused when it is empty,
// longer than Limits::kMaxPathBytes, absolute, contains a NUL byte or a `..` component, or when any
// component that exists is a symbolic link. Components are walked with openat(O_NOFOLLOW) from a
// directory fd held open on the root, so nothing a path names can resolve outside the workspace.
//
// Not thread-safe: one session thread uses a Workspace.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::server {

// An fd that closes itself. -1 means none.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(o.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Names starting with this are the server's own temporaries (uploads in flight, unpacked
// packages): no client path may use it, and listings skip them.
inline constexpr const char* kWorkspaceTempPrefix = ".ct-tmp-";

// Splits `path` into its components, refusing what would leave the workspace ("." and empty
// components are dropped) and names starting with .ct-tmp- (the server's own temporaries). The
// error names the path: `refusing path '../x': '..' is not allowed`.
Expected<std::vector<std::string>> SplitWorkspacePath(const std::string& path);

class Workspace {
 public:
  // Opens `root` (which must exist and be a directory) as the workspace.
  static Expected<Workspace> Open(const std::string& root);

  const std::string& root() const { return root_; }

  // An open file inside the workspace and what is known about it.
  struct OpenFile {
    UniqueFd fd;
    std::string normalized;  // components joined with '/'
    std::string abs_path;    // root + '/' + normalized, for dlopen
    uint64_t size = 0;
  };
  // Opens an existing regular file for reading. kNotFound when missing.
  Expected<OpenFile> OpenForRead(const std::string& path) const;

  // Receives a new file: CreateTemp makes a hidden temporary file next to the destination (creating
  // missing parent directories); Commit renames it into place; Abort removes it. A destination that
  // exists as a symlink or directory is refused.
  struct PendingFile {
    UniqueFd dir;
    UniqueFd fd;
    std::string temp_name;
    std::string leaf;
    std::string normalized;
  };
  Expected<PendingFile> CreateTemp(const std::string& path);
  Status Commit(PendingFile& file);
  void Abort(PendingFile& file);

  Status Remove(const std::string& path);

  // The bytes of the files this workspace stored (Commit) and has not removed since (Remove): a
  // running total for the session's quota, so an upload costs the same with 10 files in the
  // workspace as with 10,000 (summing the tree before each one made uploads slow down as files
  // piled up). A file committed again counts once, at its new size. Files a kernel writes itself
  // are not counted.
  uint64_t stored_bytes() const { return stored_bytes_; }
  // stored_bytes() less what the file `path` counts, i.e. what stays if an upload replaces it.
  uint64_t StoredBytesBesides(const std::string& path) const;

  // Regular files under the root, recursively (as deep as a path may name), without following
  // links; the server's temporaries (.ct-tmp-*) are skipped, every name a client can give shows.
  // sha256_hex comes from `hash_cache` when the file is unchanged since it was cached, otherwise it
  // is computed (and cached).
  Expected<std::vector<msg::FileEntry>> List();

  // SHA-256 of an open file, cached by (inode, size, mtime).
  Expected<std::string> HashOf(int fd, const std::string& normalized);
  void RememberHash(int fd, const std::string& normalized, const std::string& sha256_hex);

 private:
  Workspace(std::string root, UniqueFd root_fd)
      : root_(std::move(root)), root_fd_(std::move(root_fd)) {}
  // Walks to the directory holding the last component; `create` makes missing directories.
  Expected<UniqueFd> OpenParent(const std::string& path, const std::vector<std::string>& parts,
                                bool create) const;

  // Fixed-width fields: this header is compiled with and without _FILE_OFFSET_BITS=64.
  struct HashKey {
    uint64_t ino;
    int64_t size;
    int64_t mtime_ns;
    bool operator==(const HashKey&) const = default;
  };
  std::string root_;
  UniqueFd root_fd_;
  std::map<std::string, std::pair<HashKey, std::string>> hashes_;
  std::map<std::string, uint64_t> stored_;  // normalized path -> size at its last Commit
  uint64_t stored_bytes_ = 0;               // their sum
};

}  // namespace crosstune::server
