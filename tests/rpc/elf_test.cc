#include "crosstune/server/elf.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>

#include "crosstune/server/module.h"

namespace crosstune::server {
namespace {

std::string Header(uint8_t elf_class, uint16_t machine, uint16_t type = ET_DYN) {
  std::string h(64, '\0');
  std::memcpy(h.data(), ELFMAG, SELFMAG);
  h[EI_CLASS] = static_cast<char>(elf_class);
  h[EI_DATA] = ELFDATA2LSB;
  h[EI_VERSION] = EV_CURRENT;
  h[16] = static_cast<char>(type & 0xff);
  h[17] = static_cast<char>(type >> 8);
  h[18] = static_cast<char>(machine & 0xff);
  h[19] = static_cast<char>(machine >> 8);
  return h;
}

const ElfIdent kX86{EM_X86_64, ELFCLASS64, ELFDATA2LSB, ET_DYN};

TEST(ElfCheck, AcceptsASharedObjectForThisMachine) {
  EXPECT_TRUE(CheckElfForHost(Header(ELFCLASS64, EM_X86_64), "k.so", kX86).ok());
}

TEST(ElfCheck, NamesBothArchitecturesWhenTheyDiffer) {
  Status s = CheckElfForHost(Header(ELFCLASS64, EM_AARCH64), "kernel.so", kX86);
  EXPECT_EQ(s.code(), ErrorCode::kWrongArch);
  EXPECT_EQ(s.message(), "kernel.so: built for aarch64, device is x86_64");
  Status arm = CheckElfForHost(Header(ELFCLASS32, EM_ARM), "k.so", kX86);
  EXPECT_EQ(arm.message(), "k.so: built for arm, device is x86_64");
  const ElfIdent aarch64{EM_AARCH64, ELFCLASS64, ELFDATA2LSB, ET_DYN};
  Status x86 = CheckElfForHost(Header(ELFCLASS64, EM_X86_64), "k.so", aarch64);
  EXPECT_EQ(x86.message(), "k.so: built for x86_64, device is aarch64");
}

TEST(ElfCheck, RefusesTheWrongWordSize) {
  Status s = CheckElfForHost(Header(ELFCLASS32, EM_X86_64), "k.so", kX86);
  EXPECT_EQ(s.code(), ErrorCode::kWrongArch);
}

TEST(ElfCheck, RefusesNonElfAndNonSharedFiles) {
  EXPECT_EQ(CheckElfForHost("#!/bin/sh\n", "x", kX86).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(CheckElfForHost("", "x", kX86).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(CheckElfForHost(std::string(ELFMAG) + "\x02", "x", kX86).code(),
            ErrorCode::kInvalidArgument);
  Status exec = CheckElfForHost(Header(ELFCLASS64, EM_X86_64, ET_EXEC), "a.out", kX86);
  EXPECT_EQ(exec.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(exec.message().find("not a shared object"), std::string::npos);
}

TEST(ElfCheck, HostIdentMatchesThisBuild) {
  ElfIdent host = HostElfIdent();
#if defined(__x86_64__)
  EXPECT_EQ(host.machine, EM_X86_64);
#endif
  EXPECT_EQ(host.elf_class, sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32);
}

TEST(Signature, ChecksCountAndKinds) {
  msg::Arg t;
  t.kind = static_cast<uint8_t>(msg::ArgKind::kTensor);
  msg::Arg i;
  i.kind = static_cast<uint8_t>(msg::ArgKind::kInt64);
  msg::Arg f;
  f.kind = static_cast<uint8_t>(msg::ArgKind::kFloat64);
  EXPECT_TRUE(CheckSignature("g", "tif", {t, i, f}).ok());
  EXPECT_TRUE(CheckSignature("g", "", {}).ok());
  EXPECT_EQ(CheckSignature("g", "tt", {t}).code(), ErrorCode::kInvalidArgument);
  Status s = CheckSignature("g", "ti", {t, f});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "'g' argument 1 must be an int64, got a float64");
  msg::Arg bad;
  bad.kind = 9;
  EXPECT_FALSE(CheckSignature("g", "t", {bad}).ok());
}

}  // namespace
}  // namespace crosstune::server
