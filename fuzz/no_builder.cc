// fuzz_onnx links the tuner's conv layout helpers (the model's blocked convs and pools evaluate
// through them) but not the builder, whose targets need LLVM. The one helper that asks a target
// for its architecture (BlockedChannels, used when compile plans layouts) is never reached from
// the importer or the passes; this definition only satisfies the linker, and stops the run if
// that ever changes.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "crosstune/builder/target.h"

namespace crosstune::builder {

std::string Target::Arch() const {
  std::fprintf(stderr,
               "fuzz_onnx: builder::Target::Arch() reached (the fuzz build has no builder)\n");
  std::abort();
}

}  // namespace crosstune::builder
