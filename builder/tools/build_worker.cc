// crosstune-build-worker: one worker of the builder's pool (builder.h). The pool starts it with
// its end of a socket as fd 3 and sends it build requests; it is never run by hand.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "crosstune/builder/builder.h"

int main() {
  if (::fcntl(3, F_GETFD) < 0) {
    std::fprintf(stderr, "crosstune-build-worker: started by the builder's pool, not by hand\n");
    return 2;
  }
  crosstune::builder::RunBuildWorker(3);
}
