// Apache TVM's params blob as `crosstune params import` reads it (tvm_params.h): every length is
// checked against what is left before anything is allocated or copied. What imports must serialize
// as params.bin, read back, and export again to the same tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "crosstune/params.h"
#include "crosstune/tvm_params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pkg = crosstune::pkg;
  pkg::ParamsWriter writer;
  if (!pkg::ImportTvmParams(std::string_view(reinterpret_cast<const char*>(data), size), &writer)
           .ok()) {
    return 0;
  }
  const std::string bin = writer.Serialize();
  std::unique_ptr<void, decltype(&std::free)> buf(
      std::aligned_alloc(64, (bin.size() + 63) / 64 * 64 + 64), &std::free);
  std::memcpy(buf.get(), bin.data(), bin.size());
  auto file = pkg::ParamsFile::FromBuffer(buf.get(), bin.size());
  if (!file.ok()) std::abort();
  const std::string blob = pkg::ExportTvmParams(**file);
  pkg::ParamsWriter again;
  if (!pkg::ImportTvmParams(blob, &again).ok() || again.Serialize() != bin) std::abort();
  return 0;
}
