// A CPU library's function table read from its ELF image without loading it (module_table.h), as
// `crosstune inspect` does with a package's library: section headers, the symbol table and
// relocations are all offsets the file chooses. Whatever it returns is held to the server's rules.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "crosstune/messages.h"
#include "crosstune/module_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto table =
      crosstune::ReadModuleTable(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!table.ok()) return 0;
  if (table->size() > 4096) std::abort();
  for (const auto& f : *table) {
    if (f.name.size() > 256 || f.signature.size() > 256) std::abort();
  }
  return 0;
}
