// The CPUs this process may use, CPU lists as Linux writes them ("0-3,6"), and pinning a thread
// or a process to some of them (what `crosstune tune` does to keep builds off the cores a local
// server times kernels on).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "crosstune/status.h"

namespace crosstune {

// CPUs in this thread's affinity mask (taskset, cgroup cpusets), at least 1; the online CPUs when
// the mask cannot be read.
int UsableCpus();

// The CPU numbers in this thread's affinity mask, ascending; empty when it cannot be read.
std::vector<int> AllowedCpus();

// "0-3,6" -> {0,1,2,3,6}: ascending, without repeats. kInvalidArgument on anything else (empty
// text, a negative or reversed range, a number past CPU_SETSIZE).
Expected<std::vector<int>> ParseCpuList(const std::string& text);
// {0,1,2,3,6} -> "0-3,6".
std::string FormatCpuList(const std::vector<int>& cpus);

// Sets the affinity of `pid` (0: the calling thread) to `cpus`; threads and processes it starts
// afterwards inherit it. kInvalidArgument when `cpus` is empty or holds a CPU the caller may not
// use (naming it and the allowed list), kIoError when the kernel refuses.
Status PinToCpus(const std::vector<int>& cpus, pid_t pid = 0);

// Gives the calling thread back the CPUs it had before a PinToCpus (`cpus`, as AllowedCpus() read
// them then). Unlike PinToCpus it widens the mask, so it takes only what the thread had: the
// kernel refuses CPUs outside the process's cpuset (kIoError).
Status RestoreCpus(const std::vector<int>& cpus);

}  // namespace crosstune
