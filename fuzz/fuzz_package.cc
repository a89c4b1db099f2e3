// A .ctpkg as the server opens it: the tar listing, the manifest JSON and every check that does not
// depend on the device, on a file holding the input. Inputs starting with '{' also go to the
// manifest parser alone.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "crosstune/package.h"

namespace {

const std::string& ScratchPath() {
  static const std::string path = [] {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp && *tmp ? tmp : "/tmp") + "/crosstune-fuzz-package-" +
           std::to_string(::getpid()) + ".ctpkg";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!text.empty() && text.front() == '{') {
    auto m = pkg::ManifestFromJson(text);
    if (m.ok()) (void)pkg::ManifestToJson(*m);
    return 0;
  }
  const std::string& path = ScratchPath();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  for (size_t done = 0; done < size;) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  (void)pkg::ListTar(path);
  (void)pkg::OpenPackage(path);
  ::unlink(path.c_str());
  return 0;
}
