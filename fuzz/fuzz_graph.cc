// graph.json as the server reads it from an uploaded model package (graph.h): ParseGraph through
// the bounded JSON reader, then ValidateGraph. Whatever validates must also give lifetimes and
// entry names without reading out of bounds, and must survive a round trip through GraphToJson
// (the compiler writes what the server reads: a valid graph that does not read back is a bug).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "crosstune/graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace graph = crosstune::graph;
  auto g = graph::ParseGraph(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!g.ok()) return 0;
  if (!graph::ValidateGraph(*g).ok()) return 0;
  (void)graph::EntryLifetimes(*g);
  for (uint32_t e = 0; e < g->num_entries(); ++e) (void)graph::EntryName(*g, e);
  (void)graph::ParamNodes(*g);
  auto again = graph::ParseGraph(graph::GraphToJson(*g));
  if (!again.ok() || !graph::ValidateGraph(*again).ok()) std::abort();
  return 0;
}
