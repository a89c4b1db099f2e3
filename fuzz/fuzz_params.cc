// params.bin as the server maps it from an uploaded package.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "crosstune/params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The server maps the file: page-aligned, exactly `size` bytes long.
  size_t room = (size + 63) / 64 * 64;
  std::unique_ptr<void, decltype(&std::free)> buf(std::aligned_alloc(64, room ? room : 64),
                                                  &std::free);
  if (size) std::memcpy(buf.get(), data, size);
  auto p = crosstune::pkg::ParamsFile::FromBuffer(buf.get(), size);
  if (p.ok()) {
    for (const auto& t : (*p)->tensors()) (void)(*p)->Find(t.name);
  }
  return 0;
}
