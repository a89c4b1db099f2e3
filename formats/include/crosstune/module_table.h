// The function table of a CPU module (kernel_abi.h's CT_DEFINE_MODULE), read from the library's
// ELF image without loading it, so that `crosstune inspect` holds a package's manifest against its
// library as the server does once it has loaded it: both apply pkg::CheckLibraryFunctions.
//
// It finds the table CT_DEFINE_MODULE defines (the symbol ct_module_table_ in the symbol table)
// and follows its pointers through the library's relative relocations: what crosstune's builder
// makes for x86_64, aarch64, armhf and riscv64 (ELF64 and ELF32, little-endian) has both. A
// stripped library, or one whose table it cannot follow, is kNotFound saying why; nothing here
// runs the library, so the server's check after loading it stays the one that counts.
//
// Thread-safety: reentrant.
#pragma once

#include <string_view>
#include <vector>

#include "crosstune/messages_fwd.h"
#include "crosstune/package.h"
#include "crosstune/status.h"

namespace crosstune {

// The functions (name, signature) in table order. Names and signatures are held to the server's
// rules: at most 4,096 functions, each string at most 256 bytes of UTF-8.
Expected<std::vector<msg::FunctionInfo>> ReadModuleTable(std::string_view elf);

namespace pkg {

// A CPU package's library must export the manifest's functions, in order, by name and signature:
// the server's loader checks the table of the module it loaded, `crosstune inspect` the table
// read from the library's ELF image (ReadModuleTable). kBadHash naming the first difference, e.g.
// "the library's functions differ from the manifest's: function 0 is 'vadd' (ttt) in the
// library, 'vsub' (ttt) in the manifest".
Status CheckLibraryFunctions(const Manifest& manifest,
                             const std::vector<msg::FunctionInfo>& library);

}  // namespace pkg

}  // namespace crosstune
