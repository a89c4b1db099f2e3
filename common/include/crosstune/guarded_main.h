// main() for crosstune's programs: a stray exception becomes one error line
// ("<program>: error: <what>") and exit status 1, never std::terminate and a core dump.
//
//   int main(int argc, char** argv) {
//     return crosstune::GuardedMain("crosstune-bench-rpc", [&] { return BenchMain(argc, argv); });
//   }
#pragma once

#include <cstdio>
#include <exception>

namespace crosstune {

template <typename Body>
int GuardedMain(const char* program, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: error: unknown exception\n", program);
  }
  return 1;
}

}  // namespace crosstune
