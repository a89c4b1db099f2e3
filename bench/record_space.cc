#include "record_space.h"

#include <cstdio>

#include "crosstune/builder/builder.h"
#include "crosstune/client/local_server.h"
#include "crosstune/client/session.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"

namespace crosstune::bench {

Status RecordMatmulSpace(const std::string& log, const std::vector<int64_t>& shape,
                         const nlohmann::json& pins, const std::string& server_bin) {
  CT_ASSIGN_OR_RETURN(auto builder, builder::Builder::Create({.workers = 2}));
  client::LocalServer server;
  CT_RETURN_IF_ERROR(
      server.Start({server_bin, "--host", "127.0.0.1", "--port", "0"}, std::chrono::seconds(30)));
  client::ConnectOptions co;
  co.server = server.address();
  CT_ASSIGN_OR_RETURN(auto session, client::Session::Connect(co));
  CT_ASSIGN_OR_RETURN(msg::DeviceInfo info, session->Info());
  (void)session->Close();
  CT_ASSIGN_OR_RETURN(builder::Target target, builder::TargetFromDevice(info));
  CT_ASSIGN_OR_RETURN(auto task, tuner::MakeTask("matmul", shape, target));
  tuner::DeviceSpec device;
  device.name = "local";
  device.server = server.address();
  tuner::TuneOptions o;
  o.tuner = "grid";
  o.include_default = false;
  o.pins = pins;
  // Grid ends when the space is used up; the trial goal only has to be large enough.
  o.trials = static_cast<int>(std::min<uint64_t>(task->space().size(), 1'000'000));
  o.batch = 16;
  o.log_path = log;
  // One after the other: on this host the builder and the device share cores, and a compile
  // running in the timed window slowed kernels by up to 2x (the table showed a config's twins
  // at 0.5 and 0.97 of the best at random), which no cost model can learn.
  o.overlap = false;
  o.measure.timing.repeat = 3;
  o.measure.timing.min_repeat_ms = 10;
  o.on_progress = [](const tuner::TuneProgress& p) {
    if (p.batch_end && p.measured % 256 == 0) {
      std::fprintf(stderr, "crosstune-bench-tuners: recording the matmul space: %d trials\n",
                   p.done);
    }
  };
  CT_ASSIGN_OR_RETURN(tuner::TuneSummary s, tuner::Tune(*task, {device}, *builder, o));
  std::fprintf(stderr, "crosstune-bench-tuners: %s: %d configs recorded (%d now)\n", log.c_str(),
               s.trials_in_log, s.measured);
  return Status::Ok();
}

}  // namespace crosstune::bench
