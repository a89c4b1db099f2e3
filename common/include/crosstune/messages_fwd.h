// Forward declarations of the message structs (messages.h) that headers take by reference only.
// A header that names a message in a declaration includes this one, and the files that read the
// message's fields include messages.h: a field appended to a message (every protocol minor)
// then recompiles the files that use it, not every file that reads a header naming it.
#pragma once

namespace crosstune::msg {

struct DeviceInfo;
struct FunctionInfo;
struct GpuInfo;
struct TimeReply;

}  // namespace crosstune::msg
