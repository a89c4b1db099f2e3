// onnx_files.h: POSIX reads of the model and its external data, checked before they start.
#include "onnx_files.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "crosstune/checked_math.h"

namespace crosstune::model {
namespace {

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

std::string Reason(int err) { return std::strerror(err); }

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a plain file";
}

std::string BudgetText(uint64_t max_bytes) {
  return "over the import budget of " + std::to_string(max_bytes) + " bytes (--max-model-mb)";
}

// `length` bytes at `offset` of an open regular file; `what` names it in errors.
Expected<std::string> ReadAt(int fd, uint64_t offset, uint64_t length, const std::string& what) {
  std::string bytes(static_cast<size_t>(length), '\0');
  uint64_t done = 0;
  while (done < length) {
    const ssize_t got = ::pread(fd, bytes.data() + done, static_cast<size_t>(length - done),
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status(ErrorCode::kIoError, what + ": read failed: " + Reason(errno));
    if (got == 0) return Status(ErrorCode::kIoError, what + ": the file shrank while it was read");
    done += static_cast<uint64_t>(got);
  }
  return bytes;
}

}  // namespace

Expected<std::string> ReadModelFile(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer must not wait for one.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.ok()) {
    const int err = errno;
    return Status(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
                  path + ": cannot open: " + Reason(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Status(ErrorCode::kIoError, path + ": cannot stat: " + Reason(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::kInvalidArgument,
                  path + ": not a regular file (" + KindOf(st.st_mode) + ")");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return Status(ErrorCode::kLimitExceeded, path + ": the file is " + std::to_string(size) +
                                                 " bytes, " + BudgetText(max_bytes));
  }
  return ReadAt(fd.get(), 0, size, path);
}

Expected<std::string> ReadExternalData(const std::string& base_dir, const std::string& location,
                                       uint64_t offset, std::optional<uint64_t> length,
                                       uint64_t want) {
  const std::string what = "external data '" + location + "'";
  auto invalid = [&](const std::string& why) {
    return Status(ErrorCode::kInvalidArgument, what + " " + why);
  };
  if (location.empty() || location[0] == '/' || location.find('\0') != std::string::npos) {
    return invalid("needs a relative location inside the model's folder");
  }
  // The components, each one a name in the folder opened before it.
  std::vector<std::string> parts;
  for (size_t at = 0; at <= location.size();) {
    size_t slash = location.find('/', at);
    if (slash == std::string::npos) slash = location.size();
    const std::string part = location.substr(at, slash - at);
    if (part == "..") return invalid("is outside the model's folder");
    if (!part.empty() && part != ".") parts.push_back(part);
    at = slash + 1;
  }
  if (parts.empty()) return invalid("names no file");
  const std::string base = base_dir.empty() ? "." : base_dir;
  auto dir = std::make_unique<Fd>(::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir->ok()) {
    return Status(ErrorCode::kNotFound,
                  what + ": the model's folder " + base + " cannot be opened: " + Reason(errno));
  }
  auto refuse_link = [&](const std::string& part, int err) -> Status {
    const std::string where = parts.size() == 1 ? what : what + ": '" + part + "'";
    if (err == ELOOP || err == ENOTDIR || err == EMLINK) {
      // O_NOFOLLOW's refusal: say so when the component is a link.
      struct stat st {};
      if (::fstatat(dir->get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        return Status(ErrorCode::kInvalidArgument,
                      where + " is a symbolic link (links are not followed)");
      }
    }
    return Status(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
                  where + ": cannot open: " + Reason(err));
  };
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto next = std::make_unique<Fd>(
        ::openat(dir->get(), parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next->ok()) return refuse_link(parts[i], errno);
    dir = std::move(next);
  }
  Fd fd(::openat(dir->get(), parts.back().c_str(),
                 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.ok()) return refuse_link(parts.back(), errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Status(ErrorCode::kIoError, what + ": cannot stat: " + Reason(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid(std::string("is not a regular file (") + KindOf(st.st_mode) + ")");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (offset > size) {
    return invalid("starts at offset " + std::to_string(offset) + ", past the end of the file (" +
                   std::to_string(size) + " bytes)");
  }
  const uint64_t take = length ? *length : size - offset;
  uint64_t end = 0;
  if (!CheckedAdd(offset, take, &end, size)) {
    return invalid("runs past the end of the file (" + std::to_string(size) + " bytes)");
  }
  if (take != want) {
    return invalid("holds " + std::to_string(take) + " bytes from offset " +
                   std::to_string(offset) + ", the tensor " + std::to_string(want));
  }
  return ReadAt(fd.get(), offset, take, what);
}

}  // namespace crosstune::model
