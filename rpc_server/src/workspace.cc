#include "crosstune/server/workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "crosstune/crypto.h"

namespace crosstune::server {
namespace {

constexpr const char* kTempPrefix = kWorkspaceTempPrefix;

Status Refuse(const std::string& path, const std::string& why) {
  return Status(ErrorCode::kInvalidArgument, "refusing path '" + path + "': " + why);
}

Status ErrnoStatus(const std::string& what) {
  int e = errno;
  ErrorCode code = (e == ENOENT) ? ErrorCode::kNotFound : ErrorCode::kIoError;
  return Status(code, what + ": " + std::strerror(e));
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Expected<std::vector<std::string>> SplitWorkspacePath(const std::string& path) {
  if (path.empty()) return Refuse(path, "empty path");
  if (path.size() > Limits::kMaxPathBytes) {
    return Refuse(path.substr(0, 64) + "...",
                  "longer than " + std::to_string(Limits::kMaxPathBytes) + " bytes");
  }
  if (path.find('\0') != std::string::npos) return Refuse(path, "contains a NUL byte");
  if (path[0] == '/') return Refuse(path, "absolute paths are not allowed");
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(start, slash - start);
    start = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return Refuse(path, "'..' is not allowed");
    if (part.size() > 255) return Refuse(path, "a component is longer than 255 bytes");
    if (part.rfind(kTempPrefix, 0) == 0)
      return Refuse(path, "names starting with .ct-tmp- are reserved");
    parts.push_back(std::move(part));
  }
  if (parts.empty()) return Refuse(path, "names the workspace itself");
  return parts;
}

Expected<Workspace> Workspace::Open(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open workspace " + root);
  return Workspace(root, UniqueFd(fd));
}

Expected<UniqueFd> Workspace::OpenParent(const std::string& path,
                                         const std::vector<std::string>& parts, bool create) const {
  UniqueFd dir(::dup(root_fd_.get()));
  if (!dir.valid()) return ErrnoStatus("dup");
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& part = parts[i];
    int fd = ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus("cannot create directory '" + part + "' for '" + path + "'");
      }
      fd = ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      int e = errno;
      struct stat st;
      if (::fstatat(dir.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) return Refuse(path, "'" + part + "' is a symlink");
        if (!S_ISDIR(st.st_mode)) return Refuse(path, "'" + part + "' is not a directory");
      }
      errno = e;
      return ErrnoStatus("'" + path + "'");
    }
    dir.Reset(fd);
  }
  return dir;
}

Expected<Workspace::OpenFile> Workspace::OpenForRead(const std::string& path) const {
  CT_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitWorkspacePath(path));
  CT_ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(path, parts, /*create=*/false));
  const std::string& leaf = parts.back();
  struct stat st;
  if (::fstatat(dir.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus("'" + path + "'");
  }
  if (S_ISLNK(st.st_mode)) return Refuse(path, "'" + leaf + "' is a symlink");
  if (!S_ISREG(st.st_mode)) return Refuse(path, "not a regular file");
  int fd = ::openat(dir.get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("'" + path + "'");
  OpenFile f;
  f.fd.Reset(fd);
  if (::fstat(fd, &st) != 0) return ErrnoStatus("fstat '" + path + "'");
  f.size = static_cast<uint64_t>(st.st_size);
  for (const auto& p : parts) {
    if (!f.normalized.empty()) f.normalized += '/';
    f.normalized += p;
  }
  f.abs_path = root_ + "/" + f.normalized;
  return f;
}

Expected<Workspace::PendingFile> Workspace::CreateTemp(const std::string& path) {
  // "dir/" names a directory: without this check its empty last component would be dropped and
  // a file "dir" created.
  if (!path.empty() && path.back() == '/') {
    return Refuse(path, "names a directory (it ends with '/'); name the file to create");
  }
  CT_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitWorkspacePath(path));
  CT_ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(path, parts, /*create=*/true));
  PendingFile p;
  p.leaf = parts.back();
  struct stat st;
  if (::fstatat(dir.get(), p.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return Refuse(path, "'" + p.leaf + "' is a symlink");
    if (!S_ISREG(st.st_mode)) return Refuse(path, "exists and is not a regular file");
  }
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string name = kTempPrefix + RandomHex(8);
    int fd = ::openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0644);
    if (fd >= 0) {
      p.fd.Reset(fd);
      p.temp_name = std::move(name);
      break;
    }
    if (errno != EEXIST) return ErrnoStatus("cannot create a file for '" + path + "'");
  }
  if (!p.fd.valid()) return Status(ErrorCode::kIoError, "cannot create a temporary file");
  for (const auto& part : parts) {
    if (!p.normalized.empty()) p.normalized += '/';
    p.normalized += part;
  }
  p.dir = std::move(dir);
  return p;
}

Status Workspace::Commit(PendingFile& file) {
  struct stat st;
  if (::fstat(file.fd.get(), &st) != 0) {
    Status s = ErrnoStatus("fstat '" + file.normalized + "'");
    Abort(file);
    return s;
  }
  if (::renameat(file.dir.get(), file.temp_name.c_str(), file.dir.get(), file.leaf.c_str()) != 0) {
    Status s = ErrnoStatus("cannot move '" + file.normalized + "' into place");
    Abort(file);
    return s;
  }
  file.temp_name.clear();
  uint64_t& counted = stored_[file.normalized];
  stored_bytes_ = stored_bytes_ - counted + static_cast<uint64_t>(st.st_size);
  counted = static_cast<uint64_t>(st.st_size);
  return Status::Ok();
}

uint64_t Workspace::StoredBytesBesides(const std::string& path) const {
  auto parts = SplitWorkspacePath(path);
  if (!parts.ok()) return stored_bytes_;
  std::string normalized;
  for (const auto& part : *parts) normalized += (normalized.empty() ? "" : "/") + part;
  auto it = stored_.find(normalized);
  return it == stored_.end() ? stored_bytes_ : stored_bytes_ - it->second;
}

void Workspace::Abort(PendingFile& file) {
  if (!file.temp_name.empty() && file.dir.valid()) {
    ::unlinkat(file.dir.get(), file.temp_name.c_str(), 0);
  }
  file.temp_name.clear();
  file.fd.Reset();
}

Status Workspace::Remove(const std::string& path) {
  CT_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitWorkspacePath(path));
  CT_ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(path, parts, /*create=*/false));
  const std::string& leaf = parts.back();
  struct stat st;
  if (::fstatat(dir.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus("'" + path + "'");
  }
  int flags = S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0;
  if (::unlinkat(dir.get(), leaf.c_str(), flags) != 0)
    return ErrnoStatus("cannot remove '" + path + "'");
  std::string normalized;
  for (const auto& part : parts) normalized += (normalized.empty() ? "" : "/") + part;
  hashes_.erase(normalized);
  if (auto it = stored_.find(normalized); it != stored_.end()) {
    stored_bytes_ -= it->second;
    stored_.erase(it);
  }
  return Status::Ok();
}

Expected<std::string> Workspace::HashOf(int fd, const std::string& normalized) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("fstat '" + normalized + "'");
  HashKey key{static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size), MtimeNs(st)};
  auto it = hashes_.find(normalized);
  if (it != hashes_.end() && it->second.first == key) return it->second.second;
  Sha256 sha;
  std::vector<char> buf(Limits::kStreamChunkBytes);
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read '" + normalized + "'");
    if (n == 0) break;
    sha.Update(buf.data(), static_cast<size_t>(n));
    off += n;
  }
  std::string hex = sha.FinalHex();
  hashes_[normalized] = {key, hex};
  return hex;
}

void Workspace::RememberHash(int fd, const std::string& normalized, const std::string& sha256_hex) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return;
  hashes_[normalized] = {
      HashKey{static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size), MtimeNs(st)},
      sha256_hex};
}

Expected<std::vector<msg::FileEntry>> Workspace::List() {
  // Directories still to read, by their path below the root; walked without recursion and
  // without holding a descriptor per level, so a tree as deep as a path may name (hundreds of
  // levels) lists whole.
  std::vector<msg::FileEntry> out;
  std::vector<std::string> pending = {""};
  while (!pending.empty()) {
    std::string prefix = std::move(pending.back());
    pending.pop_back();
    UniqueFd dir;
    if (prefix.empty()) {
      dir.Reset(::openat(root_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    } else {
      auto parts = SplitWorkspacePath(prefix);
      if (!parts.ok()) continue;
      auto parent = OpenParent(prefix, *parts, /*create=*/false);
      if (!parent.ok()) continue;  // gone, or replaced by a link, since it was listed
      dir.Reset(::openat(parent->get(), parts->back().c_str(),
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (!dir.valid()) {
      if (prefix.empty()) return ErrnoStatus("open the workspace");
      continue;
    }
    // A fresh open file description: fdopendir takes it over, so read the names first, then
    // look at each through `dir` (closed by its UniqueFd).
    int read_fd = ::openat(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (read_fd < 0) return ErrnoStatus("open directory");
    DIR* d = ::fdopendir(read_fd);
    if (!d) {
      ::close(read_fd);
      return ErrnoStatus("opendir");
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      // Temporaries (uploads in flight, unpacked packages) are the server's own.
      if (name == "." || name == ".." || name.rfind(kTempPrefix, 0) == 0) continue;
      names.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    std::vector<std::string> subdirs;
    for (const auto& name : names) {
      std::string rel = prefix.empty() ? name : prefix + "/" + name;
      // No request can name a longer path, so nothing below it could be used.
      if (rel.size() > Limits::kMaxPathBytes) continue;
      struct stat st;
      if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        subdirs.push_back(std::move(rel));
      } else if (S_ISREG(st.st_mode)) {
        UniqueFd f(::openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
        if (!f.valid()) continue;
        CT_ASSIGN_OR_RETURN(std::string hex, HashOf(f.get(), rel));
        out.push_back(msg::FileEntry{rel, static_cast<uint64_t>(st.st_size), hex});
      }
    }
    pending.insert(pending.end(), std::make_move_iterator(subdirs.rbegin()),
                   std::make_move_iterator(subdirs.rend()));
  }
  return out;
}

}  // namespace crosstune::server
