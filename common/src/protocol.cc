#include "crosstune/protocol.h"

#include "crosstune/status.h"
#include "crosstune/version.h"

namespace crosstune {

// 1: model opcodes; 2: kBuild (crosstune-build-worker serves builds to a tuner on another host);
// 3: the tracker keeps the farm's tuning records (kRecordsPut, kRecordsQuery, kRecordsClaim);
// 4: kRecordsList, and TuneProgress says a run's early stops and warm start.
// 5: RecordsQuery::any_target and RecordsReply::target (warm start from another target's records),
// GpuInfo::driver.
const uint16_t kProtocolMinor = 5;
const std::string_view kCrosstuneVersion = CROSSTUNE_VERSION_STRING;

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "Ok";
    case ErrorCode::kDisconnected:
      return "Disconnected";
    case ErrorCode::kTimeout:
      return "Timeout";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kRemoteCrash:
      return "RemoteCrash";
    case ErrorCode::kWrongArch:
      return "WrongArch";
    case ErrorCode::kUnauthorized:
      return "Unauthorized";
    case ErrorCode::kBusy:
      return "Busy";
    case ErrorCode::kVersionMismatch:
      return "VersionMismatch";
    case ErrorCode::kProtocolError:
      return "ProtocolError";
    case ErrorCode::kLimitExceeded:
      return "LimitExceeded";
    case ErrorCode::kIoError:
      return "IoError";
    case ErrorCode::kBadHash:
      return "BadHash";
    case ErrorCode::kKernelError:
      return "KernelError";
    case ErrorCode::kBuildError:
      return "BuildError";
    case ErrorCode::kNoDevice:
      return "NoDevice";
    case ErrorCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string_view OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kResult:
      return "Result";
    case Opcode::kError:
      return "Error";
    case Opcode::kHello:
      return "Hello";
    case Opcode::kChallenge:
      return "Challenge";
    case Opcode::kAuth:
      return "Auth";
    case Opcode::kPing:
      return "Ping";
    case Opcode::kClose:
      return "Close";
    case Opcode::kInfo:
      return "Info";
    case Opcode::kUpload:
      return "Upload";
    case Opcode::kDownload:
      return "Download";
    case Opcode::kListFiles:
      return "ListFiles";
    case Opcode::kRemoveFile:
      return "RemoveFile";
    case Opcode::kLoadModule:
      return "LoadModule";
    case Opcode::kUnloadModule:
      return "UnloadModule";
    case Opcode::kListFunctions:
      return "ListFunctions";
    case Opcode::kCall:
      return "Call";
    case Opcode::kTimeCall:
      return "TimeCall";
    case Opcode::kTensorAlloc:
      return "TensorAlloc";
    case Opcode::kTensorFree:
      return "TensorFree";
    case Opcode::kTensorCopyIn:
      return "TensorCopyIn";
    case Opcode::kTensorCopyOut:
      return "TensorCopyOut";
    case Opcode::kLoadModel:
      return "LoadModel";
    case Opcode::kUnloadModel:
      return "UnloadModel";
    case Opcode::kSetInput:
      return "SetInput";
    case Opcode::kRunModel:
      return "RunModel";
    case Opcode::kGetOutput:
      return "GetOutput";
    case Opcode::kTimeModel:
      return "TimeModel";
    case Opcode::kProfileModel:
      return "ProfileModel";
    case Opcode::kRegister:
      return "Register";
    case Opcode::kHeartbeat:
      return "Heartbeat";
    case Opcode::kRequestDevice:
      return "RequestDevice";
    case Opcode::kQueueUpdate:
      return "QueueUpdate";
    case Opcode::kGrant:
      return "Grant";
    case Opcode::kRenewLease:
      return "RenewLease";
    case Opcode::kReleaseLease:
      return "ReleaseLease";
    case Opcode::kCancelRequest:
      return "CancelRequest";
    case Opcode::kQuery:
      return "Query";
    case Opcode::kAdmin:
      return "Admin";
    case Opcode::kSessionEnded:
      return "SessionEnded";
    case Opcode::kCheckLease:
      return "CheckLease";
    case Opcode::kTuneProgress:
      return "TuneProgress";
    case Opcode::kRecordsPut:
      return "RecordsPut";
    case Opcode::kRecordsQuery:
      return "RecordsQuery";
    case Opcode::kRecordsClaim:
      return "RecordsClaim";
    case Opcode::kRecordsList:
      return "RecordsList";
    case Opcode::kBuild:
      return "Build";
  }
  return "Unknown";
}

bool IsKnownOpcode(uint16_t op) { return OpcodeName(static_cast<Opcode>(op)) != "Unknown"; }

std::string Status::ToString() const {
  if (ok()) return "Ok";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

}  // namespace crosstune
