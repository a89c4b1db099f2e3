// Build requests and results as bytes: what a tuner and a crosstune-build-worker on another host
// send each other in a Build job (common's build_job.h carries them as opaque bytes), in the same
// msgpack form as the pool's workers and the build cache use.
//
// The request's timeout is not in these bytes (the job's header carries it), nor are the result's
// cache fields (cache_hit, cache_key, cache_warning), which describe the side that built it.
#pragma once

#include <string>
#include <string_view>

#include "crosstune/builder/builder.h"
#include "crosstune/status.h"

namespace crosstune::builder {

std::string EncodeBuildRequest(const BuildRequest& request);
// kProtocolError when the bytes are not a request.
Expected<BuildRequest> DecodeBuildRequest(std::string_view bytes);

std::string EncodeBuildResult(const BuildResult& result);
// kProtocolError when the bytes are not a result.
Expected<BuildResult> DecodeBuildResult(std::string_view bytes);

}  // namespace crosstune::builder
