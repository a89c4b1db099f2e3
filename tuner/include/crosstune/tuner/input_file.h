// The check every reader of a file a user names (a records log, a Kernel Tuner cache) makes before
// it reads: what cannot be read as a file is an error at once, not a read that never ends.
#pragma once

#include <cstddef>
#include <string>

#include "crosstune/status.h"

namespace crosstune::tuner {

// Ok for a regular file or a pipe. NotFound when `path` does not exist, InvalidArgument for a
// directory ("is a directory") or a device ("not a regular file or a pipe": /dev/zero would never
// end), IoError when its type cannot be read. (Defined in records.cc, beside ReadLog.)
Status CheckInputFile(const std::string& path);

// The file, gunzipped when it is gzip (zlib reads plain files through unchanged): all of it up to
// `limit` bytes, past which it is kLimitExceeded (a small .json.gz can expand to gigabytes), or
// with `head_only` its first `limit` bytes. CheckInputFile's errors first. (In replay.cc.)
Expected<std::string> ReadMaybeGz(const std::string& path, size_t limit, bool head_only = false);

}  // namespace crosstune::tuner
