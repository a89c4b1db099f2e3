// Reading the files an ONNX model names, as a parser of untrusted input must (onnx_import.cc):
// regular files only, their size checked against the import's budget before anything is read,
// and external data found under the model's folder without following a symbolic link on the way.
// Errors are Status values whose text names the file and what is wrong, never an exception's.
//
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "crosstune/status.h"

namespace crosstune::model {

// The whole of the regular file at `path` (a link to one is fine: the user named it), or
// kInvalidArgument "PATH: not a regular file (a folder)" for anything else (a device such as
// /dev/zero, a FIFO, a folder), kLimitExceeded when it is larger than `max_bytes`, kNotFound or
// kIoError with the system's reason. A FIFO or device is never read, so it cannot block.
Expected<std::string> ReadModelFile(const std::string& path, uint64_t max_bytes);

// `length` bytes at `offset` of the file `location` under the folder `base_dir` (ONNX external
// data). `location` is relative, without "..", and every one of its components is opened with
// O_NOFOLLOW from the folder before it, so no link leads outside the folder; the file must be a
// regular one (opened with O_NONBLOCK: a FIFO cannot block) and hold offset + length bytes. With
// no `length`, the rest of the file from `offset`, which must then be `want` bytes. Errors begin
// "external data 'LOCATION'" for the caller to prefix with the tensor's name.
Expected<std::string> ReadExternalData(const std::string& base_dir, const std::string& location,
                                       uint64_t offset, std::optional<uint64_t> length,
                                       uint64_t want);

}  // namespace crosstune::model
