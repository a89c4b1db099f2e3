// The CPUs this process may use.
#pragma once

namespace crosstune {

// CPUs in this thread's affinity mask (taskset, cgroup cpusets), at least 1; the online CPUs when
// the mask cannot be read.
int UsableCpus();

}  // namespace crosstune
