// The build cache: finished builds stored under their key (BuildCacheKey, builder.h) in a
// directory that one user's runs, or every tuner and worker of a farm (on a shared file system),
// read and write at the same time.
//
//   DIR/3f/3fa9...e1.ctbuild   one entry: msgpack [format, key, sha256, payload]
//
// The key is a SHA-256 over everything that changes the built bytes: the source (a tuned
// candidate's is its template's generated code for the config, so the template's generator and
// the config are in it), the target as a string (triple, cpu, features), the compiler flags, the
// library name, the backend's compiler and its version, and the crosstune version.
//
// Reads verify before they trust: an entry whose format, key or SHA-256 of its payload does not
// match, or whose payload does not decode, is damaged: the caller gets a miss and a warning, and
// its fresh build replaces the entry. Writes go to a uniquely named temporary file beside the
// entry, then rename(2) over it: a reader sees no entry, a whole old one or a whole new one.
// Only successful builds are stored; a compile error, a timeout or a crash is built again.
//
// Size: each entry holds one library (a matmul candidate: ~10 KB). TrimBuildCache removes the
// least recently used entries (a hit touches its entry's mtime) down to a byte budget, and
// temporary files a killed writer left behind.
//
// Thread-safety: every function may run in any number of threads and processes at once on one
// directory.
#pragma once

#include <cstdint>
#include <string>

#include "crosstune/builder/builder.h"
#include "crosstune/status.h"

namespace crosstune::builder {

// Where the entry of `key` lives in `dir`.
std::string BuildCacheEntryPath(const std::string& dir, const std::string& key);

enum class CacheRead { kMiss, kHit, kDamaged };

// kHit fills `out` (and touches the entry's mtime for TrimBuildCache); kDamaged sets `why`
// ("DIR/3f/3fa9....ctbuild: SHA-256 of the entry does not match"); kMiss: no entry.
CacheRead LoadCachedBuild(const std::string& dir, const std::string& key, BuildResult* out,
                          std::string* why);

// Stores a successful build and returns the entry's size in bytes; kInvalidArgument for a failed
// build, kIoError (with the path) when the directory cannot be written.
Expected<uint64_t> StoreCachedBuild(const std::string& dir, const std::string& key,
                                    const BuildResult& result);

struct BuildCacheUsage {
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

// What the cache holds; an absent directory holds nothing.
BuildCacheUsage ReadBuildCacheUsage(const std::string& dir);

// Removes the least recently used entries until the cache holds at most `max_bytes`, and
// temporary files older than an hour (a writer killed between write and rename). Returns what
// is left.
BuildCacheUsage TrimBuildCache(const std::string& dir, uint64_t max_bytes);

}  // namespace crosstune::builder
