// The factories behind MakeTask (templates/registry.cc), one per template file. A factory checks
// the shape against its template's syntax and makes the task for the target (a CUDA target's
// task, where the template has one); MakeTask checks the threads before and every argument's
// size after, for all of them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/status.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner::templates {

using TemplateFactory = Expected<std::unique_ptr<Task>> (*)(const std::vector<int64_t>& shape,
                                                            const builder::Target& target,
                                                            const TaskOptions& options);

Expected<std::unique_ptr<Task>> MakeMatmulTask(const std::vector<int64_t>& shape,
                                               const builder::Target& target,
                                               const TaskOptions& options);
Expected<std::unique_ptr<Task>> MakeConv2dTask(const std::vector<int64_t>& shape,
                                               const builder::Target& target,
                                               const TaskOptions& options);
Expected<std::unique_ptr<Task>> MakeDepthwiseConv2dTask(const std::vector<int64_t>& shape,
                                                        const builder::Target& target,
                                                        const TaskOptions& options);
Expected<std::unique_ptr<Task>> MakeConv2dInt8Task(const std::vector<int64_t>& shape,
                                                   const builder::Target& target,
                                                   const TaskOptions& options);
Expected<std::unique_ptr<Task>> MakeDenseTask(const std::vector<int64_t>& shape,
                                              const builder::Target& target,
                                              const TaskOptions& options);

// "matmul takes --shape M,N,K": how a template's errors about its shape begin.
std::string ShapeUsage(const std::string& name);

}  // namespace crosstune::tuner::templates
