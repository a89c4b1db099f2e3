// Request constraints on devices: "name=value", "name!=value", "name>=number", "name<=number" or
// "+feature". A name is looked up in the device's tags first, then in its DeviceInfo (arch, triple,
// cpu, cores, memory_mb, gpus, gpu_arch, os, version); a feature in its CPU features or tags.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::tracker {

// InvalidArgument naming what is wrong with `text`, or Ok.
Status ParseConstraint(const std::string& text);
// Whether a device with these tags and info meets every constraint (a malformed one: never).
bool MatchesConstraints(const std::map<std::string, std::string>& tags, const msg::DeviceInfo& info,
                        const std::vector<std::string>& constraints);

}  // namespace crosstune::tracker
