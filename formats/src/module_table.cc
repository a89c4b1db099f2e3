#include "crosstune/module_table.h"

#include <elf.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "crosstune/kernel_abi.h"
#include "crosstune/text.h"

namespace crosstune {
namespace {

// The server's bounds on a module's table (rpc_server/src/cpu_module.cc).
constexpr uint64_t kMaxFunctions = 4096;
constexpr size_t kMaxNameBytes = 256;

Status Unreadable(const std::string& why) {
  return Status(ErrorCode::kNotFound, "cannot read the library's function table: " + why);
}

// One ELF class: the header, program and section headers, symbols and relocations of ELF64 or
// ELF32, every read checked against the image's bounds.
template <typename Ehdr, typename Phdr, typename Shdr, typename Sym, typename Rel, typename Rela,
          typename Addr>
class ElfImage {
 public:
  explicit ElfImage(std::string_view bytes) : b_(bytes) {}

  Expected<std::vector<msg::FunctionInfo>> ReadTable() {
    Ehdr eh;
    if (!Read(0, &eh)) return Unreadable("truncated ELF header");
    CT_RETURN_IF_ERROR(ReadHeaders(eh));
    uint32_t relative = 0;
    switch (eh.e_machine) {
      case EM_X86_64:
      case EM_386:
        static_assert(R_X86_64_RELATIVE == R_386_RELATIVE, "one relocation number for both");
        relative = R_X86_64_RELATIVE;
        break;
      case EM_AARCH64:
        relative = R_AARCH64_RELATIVE;
        break;
      case EM_ARM:
        relative = R_ARM_RELATIVE;
        break;
      case EM_RISCV:
        relative = R_RISCV_RELATIVE;
        break;
      default:
        return Unreadable("machine " + std::to_string(eh.e_machine) + " is not one it knows");
    }
    CT_RETURN_IF_ERROR(ReadRelocations(relative));
    CT_ASSIGN_OR_RETURN(uint64_t table, FindSymbol("ct_module_table_"));

    const uint64_t p = sizeof(Addr);
    uint32_t abi = 0, count = 0;
    uint64_t functions = 0;
    if (!ReadAt(table, &abi) || !ReadAt(table + 2 * p, &count) ||
        !ReadPointer(table + 3 * p, &functions)) {
      return Unreadable("ct_module_table_ lies outside the loaded image");
    }
    if (abi != CT_ABI_VERSION) {
      return Unreadable("its ABI version is " + std::to_string(abi) + ", not " +
                        std::to_string(CT_ABI_VERSION));
    }
    if (count > kMaxFunctions) {
      return Unreadable("it lists " + std::to_string(count) + " functions (at most " +
                        std::to_string(kMaxFunctions) + ")");
    }
    std::vector<msg::FunctionInfo> out;
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t entry = functions + i * 3 * p;  // ct_function: name, fn, signature
      uint64_t name = 0, signature = 0;
      msg::FunctionInfo f;
      if (!ReadPointer(entry, &name) || !ReadPointer(entry + 2 * p, &signature) ||
          !ReadString(name, &f.name) || !ReadString(signature, &f.signature)) {
        return Unreadable("function " + std::to_string(i) +
                          " has a name or signature it cannot follow");
      }
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  template <typename T>
  bool Read(uint64_t offset, T* out) const {
    if (offset > b_.size() || b_.size() - offset < sizeof(T)) return false;
    std::memcpy(out, b_.data() + offset, sizeof(T));
    return true;
  }

  Status ReadHeaders(const Ehdr& eh) {
    if (eh.e_phentsize != sizeof(Phdr) || eh.e_shentsize != sizeof(Shdr)) {
      return Unreadable("unexpected header sizes");
    }
    for (uint64_t i = 0; i < eh.e_phnum; ++i) {
      Phdr ph;
      if (!Read(eh.e_phoff + i * sizeof(Phdr), &ph)) return Unreadable("truncated program header");
      if (ph.p_type == PT_LOAD) loads_.push_back(ph);
    }
    for (uint64_t i = 0; i < eh.e_shnum; ++i) {
      Shdr sh;
      if (!Read(eh.e_shoff + i * sizeof(Shdr), &sh)) return Unreadable("truncated section header");
      sections_.push_back(sh);
    }
    return Status::Ok();
  }

  // The file offset of `n` bytes at address `vaddr`, when a loaded segment's file image holds them.
  bool Offset(uint64_t vaddr, uint64_t n, uint64_t* offset) const {
    for (const Phdr& ph : loads_) {
      if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr <= ph.p_filesz &&
          ph.p_filesz - (vaddr - ph.p_vaddr) >= n) {
        // The segment's file range is the file's word: it may point past the end of the image.
        const uint64_t at = ph.p_offset + (vaddr - ph.p_vaddr);
        if (at < ph.p_offset || at > b_.size() || b_.size() - at < n) return false;
        *offset = at;
        return true;
      }
    }
    return false;
  }

  template <typename T>
  bool ReadAt(uint64_t vaddr, T* out) const {
    uint64_t offset = 0;
    return Offset(vaddr, sizeof(T), &offset) && Read(offset, out);
  }

  // A pointer in the image as the dynamic loader leaves it: a RELA relative relocation's addend,
  // else (REL, or no relocation) the value in place. A slot another relocation fills is refused.
  bool ReadPointer(uint64_t vaddr, uint64_t* out) const {
    if (auto it = rela_.find(vaddr); it != rela_.end()) {
      *out = it->second;
      return true;
    }
    if (other_.count(vaddr)) return false;
    Addr v = 0;
    if (!ReadAt(vaddr, &v)) return false;
    *out = v;
    return true;
  }

  bool ReadString(uint64_t vaddr, std::string* out) const {
    uint64_t offset = 0;
    if (!Offset(vaddr, 1, &offset)) return false;
    const std::string_view rest = b_.substr(offset, kMaxNameBytes + 1);
    const size_t end = rest.find('\0');
    if (end == std::string_view::npos || !IsValidUtf8(rest.substr(0, end))) return false;
    *out = std::string(rest.substr(0, end));
    return true;
  }

  static uint32_t Type(uint64_t info) {
    return sizeof(Addr) == 8 ? static_cast<uint32_t>(info & 0xffffffffu)
                             : static_cast<uint32_t>(info & 0xffu);
  }

  // Whether a section's bytes lie in the image (so walking it ends with it).
  bool InImage(const Shdr& sh) const {
    return sh.sh_offset <= b_.size() && sh.sh_size <= b_.size() - sh.sh_offset;
  }

  Status ReadRelocations(uint32_t relative) {
    for (const Shdr& sh : sections_) {
      const bool rela = sh.sh_type == SHT_RELA;
      if (!rela && sh.sh_type != SHT_REL) continue;
      if (!InImage(sh)) return Unreadable("truncated relocations");
      const uint64_t size = rela ? sizeof(Rela) : sizeof(Rel);
      for (uint64_t at = 0; at + size <= sh.sh_size; at += size) {
        if (rela) {
          Rela r;
          if (!Read(sh.sh_offset + at, &r)) return Unreadable("truncated relocations");
          if (Type(r.r_info) == relative) {
            rela_[r.r_offset] = static_cast<uint64_t>(r.r_addend);
          } else {
            other_.insert(r.r_offset);
          }
        } else {
          Rel r;
          if (!Read(sh.sh_offset + at, &r)) return Unreadable("truncated relocations");
          if (Type(r.r_info) != relative) other_.insert(r.r_offset);
        }
      }
    }
    return Status::Ok();
  }

  Expected<uint64_t> FindSymbol(std::string_view name) const {
    for (const Shdr& sh : sections_) {
      if (sh.sh_type != SHT_SYMTAB || sh.sh_link >= sections_.size()) continue;
      const Shdr& strtab = sections_[sh.sh_link];
      if (!InImage(sh) || !InImage(strtab)) return Unreadable("truncated symbol table");
      const std::string_view names = b_.substr(strtab.sh_offset, strtab.sh_size);
      for (uint64_t at = 0; at + sizeof(Sym) <= sh.sh_size; at += sizeof(Sym)) {
        Sym s;
        if (!Read(sh.sh_offset + at, &s)) return Unreadable("truncated symbol table");
        if (s.st_name >= names.size()) continue;
        const std::string_view sym = names.substr(s.st_name, name.size() + 1);
        if (sym.size() == name.size() + 1 && sym.substr(0, name.size()) == name &&
            sym.back() == '\0') {
          return static_cast<uint64_t>(s.st_value);
        }
      }
    }
    return Unreadable("no symbol ct_module_table_ (a stripped library?)");
  }

  std::string_view b_;
  std::vector<Phdr> loads_;
  std::vector<Shdr> sections_;
  std::unordered_map<uint64_t, uint64_t> rela_;  // slot -> relative relocation's addend
  std::unordered_set<uint64_t> other_;           // slots other relocations fill
};

}  // namespace

Expected<std::vector<msg::FunctionInfo>> ReadModuleTable(std::string_view elf) {
  if (elf.size() < EI_NIDENT || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0) {
    return Unreadable("not an ELF file");
  }
  if (static_cast<unsigned char>(elf[EI_DATA]) != ELFDATA2LSB) {
    return Unreadable("not a little-endian ELF file");
  }
  switch (static_cast<unsigned char>(elf[EI_CLASS])) {
    case ELFCLASS64:
      return ElfImage<Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr, Elf64_Sym, Elf64_Rel, Elf64_Rela,
                      uint64_t>(elf)
          .ReadTable();
    case ELFCLASS32:
      return ElfImage<Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr, Elf32_Sym, Elf32_Rel, Elf32_Rela,
                      uint32_t>(elf)
          .ReadTable();
    default:
      return Unreadable("unknown ELF class");
  }
}

namespace pkg {

Status CheckLibraryFunctions(const Manifest& m, const std::vector<msg::FunctionInfo>& library) {
  auto differ = [](const std::string& how) {
    return Status(ErrorCode::kBadHash,
                  "the library's functions differ from the manifest's: " + how);
  };
  auto show = [](const std::string& name, const std::string& signature) {
    return "'" + EscapeForLog(name, 80) + "' (" + EscapeForLog(signature, 80) + ")";
  };
  if (library.size() != m.functions.size()) {
    return differ("the library has " + std::to_string(library.size()) +
                  " functions, the manifest lists " + std::to_string(m.functions.size()));
  }
  for (size_t i = 0; i < library.size(); ++i) {
    const msg::FunctionInfo& l = library[i];
    const Function& f = m.functions[i];
    if (l.name != f.name || l.signature != f.signature) {
      return differ("function " + std::to_string(i) + " is " + show(l.name, l.signature) +
                    " in the library, " + show(f.name, f.signature) + " in the manifest");
    }
  }
  return Status::Ok();
}

}  // namespace pkg

}  // namespace crosstune
