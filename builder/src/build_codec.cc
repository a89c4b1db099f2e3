#include "crosstune/builder/build_codec.h"

#include "build_wire.h"
#include "crosstune/builder/backend.h"

namespace crosstune::builder {
namespace {

template <typename T>
std::string Pack(const T& value) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, value);
  return std::string(buf.data(), buf.size());
}

// Decodes into an owned struct at once (the object lives only as long as its handle). The bytes
// come from another host: container sizes are bounded by them, as in common's frame decoder, so a
// few bytes claiming a huge array cannot allocate for it.
template <typename T>
Expected<T> Unpack(std::string_view bytes, const char* what) {
  try {
    const size_t n = bytes.size();
    msgpack::unpack_limit limit(n, n, n, n, n, /*depth=*/32);
    msgpack::object_handle h;
    size_t off = 0;
    msgpack::unpack(h, bytes.data(), n, off, nullptr, nullptr, limit);
    if (off != n)
      return Status(ErrorCode::kProtocolError, std::string("trailing bytes after ") + what);
    T out{};
    h.get().convert(out);
    return out;
  } catch (const std::exception& e) {
    return Status(ErrorCode::kProtocolError, std::string("malformed ") + what + ": " + e.what());
  }
}

}  // namespace

std::string EncodeBuildRequest(const BuildRequest& request) { return Pack(wire::ToWire(request)); }

Expected<BuildRequest> DecodeBuildRequest(std::string_view bytes) {
  CT_ASSIGN_OR_RETURN(wire::WireRequest w, Unpack<wire::WireRequest>(bytes, "build request"));
  // Every later step asks the kind's backend (BackendFor, which has one for each TargetKind).
  if (FindBackend(static_cast<TargetKind>(w.kind)) == nullptr) {
    std::string known;
    for (TargetKind kind : TargetKinds()) {
      known += (known.empty() ? "" : ", ") + std::string(BackendFor(kind).kind());
    }
    return Status(ErrorCode::kInvalidArgument, "the build request names target kind " +
                                                   std::to_string(w.kind) +
                                                   ", which this builder does not know (it "
                                                   "builds " +
                                                   known + ")");
  }
  return wire::FromWire(w);
}

std::string EncodeBuildResult(const BuildResult& result) { return Pack(wire::ToWire(result)); }

Expected<BuildResult> DecodeBuildResult(std::string_view bytes) {
  CT_ASSIGN_OR_RETURN(wire::WireResult w, Unpack<wire::WireResult>(bytes, "build result"));
  return wire::FromWire(std::move(w));
}

}  // namespace crosstune::builder
