// The `crosstune` binary loads no compiler unless a command needs one (compiler_module.h): its
// ELF NEEDED entries name no compiler library, the dynamic loader loads none for the commands
// that talk to devices or the tracker, and the compiler commands find their module or fail with
// a named error. No timings: what is loaded, not how long it takes.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "compiler_module.h"
#include "crosstune/testing/support.h"

namespace crosstune {
namespace {

// What must not load when no compiler is needed: LLVM, clang, lld, NVRTC, XGBoost and the module
// that links them.
const std::vector<std::string> kCompilerLibraries = {
    "libLLVM", "libclang", "liblld", "libnvrtc", "libxgboost", cli::kCompilerModuleFile};

// The DT_NEEDED entries of a 64-bit ELF file ("" entries never; empty on a malformed file, which
// the caller's expectations then catch).
std::vector<std::string> NeededLibraries(const std::string& path) {
  const std::string bytes = testing::ReadFile(path);
  std::vector<std::string> needed;
  auto in_file = [&](uint64_t offset, uint64_t size) {
    return offset <= bytes.size() && size <= bytes.size() - offset;
  };
  Elf64_Ehdr eh;
  if (!in_file(0, sizeof eh)) return needed;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return needed;
  }
  std::vector<Elf64_Phdr> segments(eh.e_phnum);
  for (size_t i = 0; i < segments.size(); ++i) {
    uint64_t at = eh.e_phoff + i * sizeof(Elf64_Phdr);
    if (!in_file(at, sizeof(Elf64_Phdr))) return needed;
    std::memcpy(&segments[i], bytes.data() + at, sizeof(Elf64_Phdr));
  }
  // The string table is named by its address; the loadable segments map it to a file offset.
  auto file_offset = [&](uint64_t vaddr) -> uint64_t {
    for (const auto& s : segments) {
      if (s.p_type == PT_LOAD && vaddr >= s.p_vaddr && vaddr < s.p_vaddr + s.p_filesz) {
        return vaddr - s.p_vaddr + s.p_offset;
      }
    }
    return UINT64_MAX;
  };
  std::vector<Elf64_Dyn> dynamic;
  for (const auto& s : segments) {
    if (s.p_type != PT_DYNAMIC) continue;
    for (uint64_t at = s.p_offset; at + sizeof(Elf64_Dyn) <= s.p_offset + s.p_filesz;
         at += sizeof(Elf64_Dyn)) {
      if (!in_file(at, sizeof(Elf64_Dyn))) return needed;
      Elf64_Dyn d;
      std::memcpy(&d, bytes.data() + at, sizeof d);
      if (d.d_tag == DT_NULL) break;
      dynamic.push_back(d);
    }
  }
  uint64_t strtab = UINT64_MAX;
  for (const auto& d : dynamic) {
    if (d.d_tag == DT_STRTAB) strtab = file_offset(d.d_un.d_ptr);
  }
  if (strtab == UINT64_MAX) return needed;
  for (const auto& d : dynamic) {
    if (d.d_tag != DT_NEEDED || !in_file(strtab + d.d_un.d_val, 1)) continue;
    needed.emplace_back(bytes.c_str() + strtab + d.d_un.d_val);
  }
  return needed;
}

// Runs `crosstune <args>` with the dynamic loader reporting every library it loads (LD_DEBUG
// writes to stderr, dlopen'ed ones included).
testing::CommandResult RunWithLoaderLog(const std::string& cli, const std::string& args) {
  return testing::RunCommand("LD_DEBUG=libs " + cli + " " + args);
}

// The compiler libraries that `loader_log` shows loading.
std::vector<std::string> CompilerLibrariesIn(const std::string& loader_log) {
  std::vector<std::string> found;
  for (const auto& lib : kCompilerLibraries) {
    if (loader_log.find(lib) != std::string::npos) found.push_back(lib);
  }
  return found;
}

TEST(CliLightTest, BinaryNeedsNoCompilerLibrary) {
  const auto needed = NeededLibraries(CT_CLI);
  std::string all;
  for (const auto& lib : needed) all += lib + " ";
  // The reader works: it finds libc among the entries.
  ASSERT_NE(all.find("libc.so"), std::string::npos) << CT_CLI << " needs: " << all;
  EXPECT_EQ(CompilerLibrariesIn(all), std::vector<std::string>{}) << CT_CLI << " needs: " << all;
}

TEST(CliLightTest, ModuleNeedsTheCompiler) {
  // The other side of the split, and a check that the reader sees compiler libraries at all.
  const auto needed = NeededLibraries(CT_CLI_MODULE);
  bool llvm = false;
  for (const auto& lib : needed) llvm = llvm || lib.rfind("libLLVM", 0) == 0;
  EXPECT_TRUE(llvm) << CT_CLI_MODULE << " does not need libLLVM";
}

TEST(CliLightTest, CommandsWithoutACompilerLoadNone) {
  testing::ClosedPort closed;
  const std::vector<std::string> commands = {
      "--help",       "--version", "query --help", "query --tracker " + closed.address(),
      "lease --help", "ls --help", "info --help",  "inspect --help",
      "run --help"};
  for (const std::string& args : commands) {
    auto r = RunWithLoaderLog(CT_CLI, args);
    // The loader log is there (LD_DEBUG took effect), so an absent library is a real absence.
    ASSERT_NE(r.err.find("libc.so"), std::string::npos) << args << ": no loader log\n" << r.err;
    EXPECT_EQ(CompilerLibrariesIn(r.err), std::vector<std::string>{}) << args;
  }
}

TEST(CliLightTest, CompilerCommandsLoadTheModule) {
  for (const auto& c : cli::kCompilerCommands) {
    auto r = RunWithLoaderLog(CT_CLI, std::string(c.name) + " --help");
    EXPECT_EQ(r.exit_code, 0) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(cli::kCompilerModuleFile), std::string::npos) << c.name;
    EXPECT_NE(r.err.find("libLLVM"), std::string::npos) << c.name;
  }
}

TEST(CliLightTest, HelpListsEveryCommand) {
  // Written out here, not taken from the CLI's own tables, so a command that drops out of the
  // help (or one added without a test) fails.
  const std::vector<std::string> expected = {
      "info",        "upload", "download", "ls",      "rm",     "run",    "bench",   "run-model",
      "bench-model", "params", "build",    "inspect", "query",  "lease",  "drain",   "undrain",
      "kick",        "tune",   "log",      "export",  "replay", "import", "compile", "records"};
  auto r = testing::RunCommand(std::string(CT_CLI) + " --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The names in the "Subcommands:" section (the first word of each line indented by two), each
  // with a help line after it.
  const size_t section = r.out.find("\nSubcommands:\n");
  ASSERT_NE(section, std::string::npos) << r.out;
  std::vector<std::string> listed;
  std::istringstream lines(r.out.substr(section + 14));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  ", 0) != 0 || line.size() < 3 || line[2] == ' ') continue;
    const size_t name_end = line.find(' ', 2);
    listed.push_back(line.substr(2, name_end - 2));
    EXPECT_NE(line.find_first_not_of(' ', name_end), std::string::npos) << "no help: " << line;
  }
  EXPECT_EQ(listed, expected) << r.out;
}

TEST(CliLightTest, MissingModuleIsANamedError) {
  // The binary alone, without its module beside it or in ../lib/crosstune.
  const std::string dir = testing::MakeTempDir("crosstune-cli-light");
  ASSERT_FALSE(dir.empty());
  const std::string cli = dir + "/bin/crosstune";
  std::filesystem::create_directories(dir + "/bin");
  std::filesystem::copy_file(CT_CLI, cli);
  for (const auto& c : cli::kCompilerCommands) {
    auto r = testing::RunCommand(cli + " " + c.name + " --help");
    EXPECT_EQ(r.exit_code, 1) << c.name;
    EXPECT_EQ(r.err.rfind(std::string("crosstune: error: '") + c.name +
                              "' needs the compiler module " + cli::kCompilerModuleFile,
                          0),
              0u)
        << r.err;
    EXPECT_NE(r.err.find(dir + "/lib/crosstune/" + cli::kCompilerModuleFile), std::string::npos)
        << "the error names where it looked: " << r.err;
  }
  // Everything else works without it.
  auto help = testing::RunCommand(cli + " --help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("build"), std::string::npos);
  auto query = testing::RunCommand(cli + " query --help");
  EXPECT_EQ(query.exit_code, 0) << query.err;

  // A file that is not a module is refused by name, not loaded blindly.
  std::filesystem::create_directories(dir + "/lib/crosstune");
  testing::WriteFile(dir + "/lib/crosstune/" + cli::kCompilerModuleFile, "not an ELF file");
  auto bad = testing::RunCommand(cli + " build --help");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("cannot load the compiler module"), std::string::npos) << bad.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crosstune
