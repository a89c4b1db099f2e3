// Frames as the tracker and the server read them: the length prefix, the msgpack body, and every
// message type a peer can send, decoded from whatever the body holds.
#include <cstddef>
#include <cstdint>

#include "crosstune/frame.h"
#include "crosstune/handshake.h"
#include "crosstune/messages.h"
#include "crosstune/tracker_messages.h"

namespace {

template <typename... T>
void DecodeAs(const crosstune::Frame& f) {
  (static_cast<void>(f.As<T>()), ...);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune;
  if (size >= 4) {
    (void)DecodeFrameLength(data);
    (void)DecodeFrameLength(data, Limits::kMaxHandshakeFrameBytes);
  }
  auto f = DecodeFrameBody(reinterpret_cast<const char*>(data), size);
  if (!f.ok()) return 0;
  (void)f->AsStatus();
  (void)HelloIsComplete(*f);
  DecodeAs<msg::Hello, msg::HelloReply, msg::Auth, msg::Error, msg::UploadRequest, msg::FileRef,
           msg::FileEntry, msg::FileList, msg::LoadModuleRequest, msg::ModuleInfo, msg::ModuleRef,
           msg::CallRequest, msg::CallReply, msg::TimeRequest, msg::TimeReply,
           msg::TensorAllocRequest, msg::TensorRef, msg::TensorCopy, msg::DeviceInfo, msg::BuildJob,
           msg::BuildJobReply>(*f);
  DecodeAs<msg::Register, msg::RegisterReply, msg::ServerHeartbeat, msg::SetLease, msg::LeaseRef,
           msg::SessionEnded, msg::DeviceRequest, msg::QueueUpdate, msg::Grant, msg::CancelRequest,
           msg::RenewLease, msg::LeaseInfo, msg::ReleaseLease, msg::QueryReply, msg::AdminRequest>(
      *f);
  DecodeAs<msg::TuneProgress, msg::FarmRecord, msg::RecordsPut, msg::RecordsPutReply,
           msg::RecordsQuery, msg::RecordsReply, msg::RecordsClaim, msg::RecordsClaimReply,
           msg::RecordsList, msg::RecordsListReply>(*f);
  return 0;
}
