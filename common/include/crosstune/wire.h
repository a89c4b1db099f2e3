// The msgpack encoding of frames and messages: what frame.h declares, defined. A message (a struct
// of messages.h or tracker_messages.h) travels as a msgpack array of its CT_WIRE_FIELDS in order,
// unpacked leniently as msgpack's own array adaptor does: trailing fields a peer does not know
// are skipped, missing trailing ones keep their defaults.
//
// Include this only where msgpack objects are handled directly (decoding a body, reading a payload
// field by field, packing a message of a new kind); sending and receiving messages through frame.h
// and channel.h needs only those headers: frame.cc instantiates the templates for every message.
#pragma once

#include <msgpack.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "crosstune/frame.h"
#include "crosstune/messages.h"
#include "crosstune/tracker_messages.h"

namespace crosstune {

template <typename T, typename = void>
inline constexpr bool kIsWireMessage = false;
template <typename T>
inline constexpr bool kIsWireMessage<T, std::void_t<decltype(std::declval<T&>().WireFields())>> =
    true;

struct FrameBody {
  msgpack::object_handle handle;  // owns the zone `payload` points into
  msgpack::object payload;
};

// The frame's payload (an empty msgpack object for a frame that has no body).
inline const msgpack::object& PayloadOf(const Frame& f) {
  static const msgpack::object kNil;
  return f.body ? f.body->payload : kNil;
}

template <typename T>
Expected<T> Frame::As() const {
  try {
    T out{};
    PayloadOf(*this).convert(out);
    return out;
  } catch (const std::exception& e) {
    return Status(
        ErrorCode::kProtocolError,
        std::string("malformed ") + std::string(OpcodeName(op)) + " payload: " + e.what());
  }
}

template <typename T>
std::string EncodeFrame(Opcode op, uint32_t request_id, const T& payload) {
  msgpack::sbuffer body;
  body.write("\0\0\0\0", 4);  // room for the length prefix
  msgpack::packer<msgpack::sbuffer> pk(&body);
  pk.pack_array(3);
  pk.pack(static_cast<uint16_t>(op));
  pk.pack(request_id);
  pk.pack(payload);
  std::string out(body.data(), body.size());
  uint32_t n = static_cast<uint32_t>(out.size() - 4);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// Every message, for frame.cc's instantiations (and the declarations below that spare other files
// instantiating them again).
// clang-format off
#define CT_WIRE_MESSAGES(X)                                                                      \
  X(Empty) X(Error) X(Hello) X(HelloReply) X(Auth) X(GpuInfo) X(DeviceInfo) X(UploadRequest)     \
  X(FileRef) X(FileEntry) X(ListFilesRequest) X(FileList) X(FunctionInfo) X(LoadModuleRequest)   \
  X(ModuleInfo) X(ModuleRef) X(Arg) X(CallRequest) X(CallReply) X(TimeRequest) X(TimeReply)      \
  X(TensorAllocRequest) X(TensorRef) X(TensorCopy) X(TensorInfo) X(ModelInfo) X(ModelRef)        \
  X(SetInputRequest) X(RunModelRequest) X(GetOutputRequest) X(TimeModelRequest) X(NodeProfile)   \
  X(ProfileHeader) X(BuildJob) X(BuildJobReply) X(Register) X(RegisterReply) X(ServerHeartbeat)  \
  X(SetLease) X(SelfCheck) X(LeaseRef) X(SessionEnded) X(DeviceRequest) X(QueueUpdate) X(Grant)  \
  X(CancelRequest) X(RenewLease) X(LeaseInfo) X(ReleaseLease) X(TuneProgress) X(QueryReply)      \
  X(AdminRequest) X(FarmRecord) X(RecordsPut) X(RecordsPutReply) X(RecordsQuery)               \
  X(RecordsReply) X(RecordsClaim) X(RecordsClaimReply) X(RecordsSummaryRow) X(RecordsList)     \
  X(RecordsListReply)
// clang-format on

#define CT_WIRE_EXTERN(T)                                     \
  extern template Expected<msg::T> Frame::As<msg::T>() const; \
  extern template std::string EncodeFrame<msg::T>(Opcode, uint32_t, const msg::T&);
CT_WIRE_MESSAGES(CT_WIRE_EXTERN)
#undef CT_WIRE_EXTERN

}  // namespace crosstune

// msgpack's adaptors for every message: an array of its fields, through msgpack's define_array
// (what its own MSGPACK_DEFINE uses, so the bytes and the lenient unpacking are the same).
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <typename T>
  struct convert<T, std::enable_if_t<crosstune::kIsWireMessage<T>>> {
    const msgpack::object& operator()(const msgpack::object& o, T& v) const {
      std::apply([&](auto&... f) { msgpack::type::make_define_array(f...).msgpack_unpack(o); },
                 v.WireFields());
      return o;
    }
  };

  template <typename T>
  struct pack<T, std::enable_if_t<crosstune::kIsWireMessage<T>>> {
    template <typename Stream>
    msgpack::packer<Stream>& operator()(msgpack::packer<Stream>& o, const T& v) const {
      std::apply([&](auto&... f) { msgpack::type::make_define_array(f...).msgpack_pack(o); },
                 v.WireFields());
      return o;
    }
  };

  template <typename T>
  struct object_with_zone<T, std::enable_if_t<crosstune::kIsWireMessage<T>>> {
    void operator()(msgpack::object::with_zone& o, const T& v) const {
      std::apply(
          [&](auto&... f) { msgpack::type::make_define_array(f...).msgpack_object(&o, o.zone); },
          v.WireFields());
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
