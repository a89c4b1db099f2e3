// .npy images as `crosstune run --arg file.npy` reads them.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "crosstune/client/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto a = crosstune::client::ParseNpy(std::string_view(reinterpret_cast<const char*>(data), size),
                                       "fuzz.npy");
  if (a.ok()) {
    // What parses must encode back.
    (void)crosstune::client::EncodeNpy(a->shape, a->dtype, a->data.data(), a->data.size(),
                                       a->is_bool);
  }
  return 0;
}
