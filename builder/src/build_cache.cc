#include "crosstune/builder/build_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <msgpack.hpp>
#include <vector>

#include "build_wire.h"
#include "crosstune/crypto.h"

namespace crosstune::builder {
namespace {

namespace fs = std::filesystem;

constexpr char kFormat[] = "crosstune-build-cache-1";
constexpr char kEntrySuffix[] = ".ctbuild";
constexpr char kTempMarker[] = ".tmp-";
// A temporary file this old belongs to a writer that died before its rename.
constexpr auto kStaleTemp = std::chrono::hours(1);

// One file: the payload (a packed wire::WireResult) with what proves it whole and its own.
struct Envelope {
  std::string format;
  std::string key;
  std::string sha256;  // of payload
  std::string payload;
  MSGPACK_DEFINE(format, key, sha256, payload)
};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct FileInfo {
  fs::path path;
  uint64_t bytes = 0;
  fs::file_time_type mtime;
};

// Entries (and, with remove_stale_temps, stale temporary files removed) under dir.
std::vector<FileInfo> ScanEntries(const std::string& dir, bool remove_stale_temps) {
  std::vector<FileInfo> entries;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) return entries;
  const auto now = fs::file_time_type::clock::now();
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;
    const std::string name = it->path().filename().string();
    const fs::file_time_type mtime = it->last_write_time(fec);
    if (fec) continue;  // removed meanwhile by another process
    if (name.find(kTempMarker) != std::string::npos) {
      if (remove_stale_temps && now - mtime > kStaleTemp) fs::remove(it->path(), fec);
      continue;
    }
    if (!EndsWith(name, kEntrySuffix)) continue;
    const uint64_t bytes = it->file_size(fec);
    if (fec) continue;
    entries.push_back({it->path(), bytes, mtime});
  }
  return entries;
}

}  // namespace

std::string BuildCacheEntryPath(const std::string& dir, const std::string& key) {
  return dir + "/" + key.substr(0, 2) + "/" + key + kEntrySuffix;
}

CacheRead LoadCachedBuild(const std::string& dir, const std::string& key, BuildResult* out,
                          std::string* why) {
  const std::string path = BuildCacheEntryPath(dir, key);
  std::ifstream f(path, std::ios::binary);
  if (!f) return CacheRead::kMiss;
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  auto damaged = [&](const std::string& what) {
    if (why) *why = path + ": " + what;
    return CacheRead::kDamaged;
  };
  if (f.bad()) return damaged("cannot be read");
  Envelope e;
  try {
    msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
    oh.get().convert(e);
  } catch (const std::exception&) {
    return damaged("not a whole cache entry (truncated or overwritten)");
  }
  if (e.format != kFormat) return damaged("unknown entry format '" + e.format.substr(0, 40) + "'");
  if (e.key != key) return damaged("holds the entry of another key");
  if (Sha256Hex(e.payload) != e.sha256) return damaged("SHA-256 of the entry does not match");
  wire::WireResult w;
  try {
    msgpack::object_handle oh = msgpack::unpack(e.payload.data(), e.payload.size());
    oh.get().convert(w);
  } catch (const std::exception&) {
    return damaged("the build result in it does not decode");
  }
  BuildResult r = wire::FromWire(std::move(w));
  if (!r.ok() || r.library.empty()) return damaged("holds no successful build");
  *out = std::move(r);
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used; fails harmlessly read-only
  return CacheRead::kHit;
}

Expected<uint64_t> StoreCachedBuild(const std::string& dir, const std::string& key,
                                    const BuildResult& result) {
  if (!result.ok()) {
    return Status(ErrorCode::kInvalidArgument, "a failed build is not stored in the build cache");
  }
  wire::WireResult w = wire::ToWire(result);
  w.seconds = 0;  // a hit costs no build time; and one build's entry is the same bytes everywhere
  msgpack::sbuffer payload;
  msgpack::pack(payload, w);
  Envelope e{kFormat, key, "", std::string(payload.data(), payload.size())};
  e.sha256 = Sha256Hex(e.payload);
  msgpack::sbuffer buf;
  msgpack::pack(buf, e);

  const std::string path = BuildCacheEntryPath(dir, key);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec)
    return Status(ErrorCode::kIoError, fs::path(path).parent_path().string() + ": " + ec.message());
  // Unique across the processes and hosts sharing the directory.
  const std::string tmp = path + kTempMarker + RandomHex(8);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return Status(ErrorCode::kIoError, tmp + ": " + std::strerror(errno));
  const char* p = buf.data();
  size_t left = buf.size();
  int err = 0;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  // No fsync: an entry a machine crash leaves torn fails its SHA-256 check and is rebuilt.
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return Status(ErrorCode::kIoError, path + ": " + std::strerror(err));
  }
  return static_cast<uint64_t>(buf.size());
}

BuildCacheUsage ReadBuildCacheUsage(const std::string& dir) {
  BuildCacheUsage u;
  for (const FileInfo& f : ScanEntries(dir, false)) {
    ++u.entries;
    u.bytes += f.bytes;
  }
  return u;
}

BuildCacheUsage TrimBuildCache(const std::string& dir, uint64_t max_bytes) {
  std::vector<FileInfo> entries = ScanEntries(dir, true);
  BuildCacheUsage u;
  for (const FileInfo& f : entries) u.bytes += f.bytes;
  u.entries = entries.size();
  if (u.bytes <= max_bytes) return u;
  std::sort(entries.begin(), entries.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.mtime < b.mtime; });
  for (const FileInfo& f : entries) {
    if (u.bytes <= max_bytes) break;
    std::error_code ec;
    // Another process may have removed it first; either way it is gone.
    fs::remove(f.path, ec);
    u.bytes -= f.bytes;
    --u.entries;
  }
  return u;
}

}  // namespace crosstune::builder
