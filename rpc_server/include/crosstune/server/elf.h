// ELF header checks, so a module built for another machine is refused with a named error before
// dlopen ever sees it (the loader's own message, "wrong ELF class", says nothing useful).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "crosstune/status.h"

namespace crosstune::server {

// What the first bytes of an ELF file say about the machine it was built for.
struct ElfIdent {
  uint16_t machine = 0;   // e_machine (EM_X86_64, EM_AARCH64, ...)
  uint8_t elf_class = 0;  // ELFCLASS32 or ELFCLASS64
  uint8_t data = 0;       // ELFDATA2LSB or ELFDATA2MSB
  uint16_t type = 0;      // e_type (ET_DYN for a shared object)
};

// The machine this server was compiled for (compile-time macros, so qemu-user reports the guest).
ElfIdent HostElfIdent();
// "x86_64", "aarch64", "arm", "i386", "riscv64", ... for messages.
std::string ElfMachineName(uint16_t machine, uint8_t elf_class);

// True when `head` starts with the ELF magic.
bool LooksLikeElf(std::string_view head);

// Parses an ELF header from `head` (at least 20 bytes). Not ELF or truncated: kInvalidArgument.
Expected<ElfIdent> ParseElfIdent(std::string_view head, const std::string& display_name);

// Checks that `head` is a shared object for `host`: otherwise kInvalidArgument (not ELF, not a
// shared object) or kWrongArch: "kernel.so: built for aarch64, device is x86_64".
Status CheckElfForHost(std::string_view head, const std::string& display_name,
                       const ElfIdent& host = HostElfIdent());

}  // namespace crosstune::server
