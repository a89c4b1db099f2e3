#include "crosstune/server/elf.h"

#include <elf.h>

#include <cstring>

namespace crosstune::server {

ElfIdent HostElfIdent() {
  ElfIdent id;
#if defined(__x86_64__)
  id.machine = EM_X86_64;
#elif defined(__i386__)
  id.machine = EM_386;
#elif defined(__aarch64__)
  id.machine = EM_AARCH64;
#elif defined(__arm__)
  id.machine = EM_ARM;
#elif defined(__riscv)
  id.machine = EM_RISCV;
#elif defined(__powerpc64__)
  id.machine = EM_PPC64;
#else
#error "crosstune-server: unknown host machine; add it to HostElfIdent"
#endif
  id.elf_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  id.data = ELFDATA2LSB;
#else
  id.data = ELFDATA2MSB;
#endif
  id.type = ET_DYN;
  return id;
}

std::string ElfMachineName(uint16_t machine, uint8_t elf_class) {
  switch (machine) {
    case EM_X86_64:
      return elf_class == ELFCLASS32 ? "x32" : "x86_64";
    case EM_386:
      return "i386";
    case EM_AARCH64:
      return elf_class == ELFCLASS32 ? "aarch64_ilp32" : "aarch64";
    case EM_ARM:
      return "arm";
    case EM_RISCV:
      return elf_class == ELFCLASS32 ? "riscv32" : "riscv64";
    case EM_PPC64:
      return "ppc64";
    case EM_PPC:
      return "ppc";
    case EM_MIPS:
      return "mips";
    case EM_S390:
      return "s390x";
    case EM_CUDA:
      return "cuda";
    case EM_BPF:
      return "bpf";
    default:
      return "machine " + std::to_string(machine);
  }
}

bool LooksLikeElf(std::string_view head) {
  return head.size() >= 4 && std::memcmp(head.data(), ELFMAG, SELFMAG) == 0;
}

Expected<ElfIdent> ParseElfIdent(std::string_view head, const std::string& display_name) {
  if (!LooksLikeElf(head)) {
    return Status(ErrorCode::kInvalidArgument,
                  display_name + ": not an ELF file (expected a shared object or a package)");
  }
  if (head.size() < 20) {
    return Status(ErrorCode::kInvalidArgument, display_name + ": truncated ELF header");
  }
  ElfIdent id;
  id.elf_class = static_cast<uint8_t>(head[EI_CLASS]);
  id.data = static_cast<uint8_t>(head[EI_DATA]);
  if (id.elf_class != ELFCLASS32 && id.elf_class != ELFCLASS64) {
    return Status(ErrorCode::kInvalidArgument, display_name + ": bad ELF class");
  }
  if (id.data != ELFDATA2LSB && id.data != ELFDATA2MSB) {
    return Status(ErrorCode::kInvalidArgument, display_name + ": bad ELF byte order");
  }
  auto u16 = [&](size_t off) {
    auto b0 = static_cast<uint8_t>(head[off]), b1 = static_cast<uint8_t>(head[off + 1]);
    return id.data == ELFDATA2LSB ? static_cast<uint16_t>(b0 | b1 << 8)
                                  : static_cast<uint16_t>(b1 | b0 << 8);
  };
  // e_type and e_machine sit at the same offsets in Elf32_Ehdr and Elf64_Ehdr.
  id.type = u16(16);
  id.machine = u16(18);
  return id;
}

Status CheckElfForHost(std::string_view head, const std::string& display_name,
                       const ElfIdent& host) {
  CT_ASSIGN_OR_RETURN(ElfIdent id, ParseElfIdent(head, display_name));
  if (id.machine != host.machine || id.elf_class != host.elf_class || id.data != host.data) {
    std::string built = ElfMachineName(id.machine, id.elf_class);
    if (id.machine == host.machine && id.data != host.data) built += " (other byte order)";
    if (id.machine == host.machine && id.elf_class != host.elf_class) {
      built += id.elf_class == ELFCLASS32 ? " (32-bit)" : " (64-bit)";
    }
    return Status(ErrorCode::kWrongArch, display_name + ": built for " + built + ", device is " +
                                             ElfMachineName(host.machine, host.elf_class));
  }
  if (id.type != ET_DYN) {
    return Status(ErrorCode::kInvalidArgument,
                  display_name + ": not a shared object (link it with -shared)");
  }
  return Status::Ok();
}

}  // namespace crosstune::server
