// The tests' name for the client library's LocalServer (crosstune/client/local_server.h): a
// crosstune-server or crosstune-tracker (native, or a cross-built server under qemu-user) started
// as a child process listening on port 0, its port read back from its "listening on" line.
#pragma once

#include "crosstune/client/local_server.h"

namespace crosstune {

using ServerProcess = client::LocalServer;

}  // namespace crosstune
