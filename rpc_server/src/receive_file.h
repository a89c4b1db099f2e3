// Receiving an upload: bytes from the socket, hashed and written to a file.
#pragma once

#include <cstdint>

#include "crosstune/channel.h"
#include "crosstune/crypto.h"

namespace crosstune::server {

// Reads exactly `size` bytes from `ch` into `file_fd`, feeding every byte to `sha`. Large files
// are pipelined: this thread keeps reading the socket while one helper thread hashes and another
// writes the previous chunks, so the three costs overlap instead of adding up. Holds at most
// eight Limits::kStreamChunkBytes chunks in memory.
//
// On a transport failure the stream is lost (*in_step false). A failed write to the file (disk
// full) still reads every byte, so the error comes back with *in_step true and the session can
// answer it and go on.
Status ReceiveFile(Channel& ch, int file_fd, uint64_t size, Deadline deadline, Sha256* sha,
                   bool* in_step);

}  // namespace crosstune::server
