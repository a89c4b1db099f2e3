// CPU kernels: clang (libclang-cpp) compiles C to LLVM IR, the module table is read from the IR,
// LLVM emits the object, lld links it -shared. All in-process; no cross toolchain or sysroot.
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/BackendUtil.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <fcntl.h>
#include <lld/Common/Driver.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/Triple.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DiagnosticHandler.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "crosstune/builder/compiler.h"
#include "crosstune/kernel_abi.h"

#ifndef CROSSTUNE_CLANG_RESOURCE_DIR
#error "CROSSTUNE_CLANG_RESOURCE_DIR must name clang's resource dir"
#endif

namespace crosstune::builder {
namespace {

namespace fs = std::filesystem;

std::mutex g_cpu_mutex;

void InitLlvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

Status BuildError(std::string text) { return Status(ErrorCode::kBuildError, std::move(text)); }

// User flags allowed through to cc1, and what the driver would expand them to.
Status TranslateFlags(const std::vector<std::string>& flags, std::vector<std::string>* out,
                      bool* has_opt) {
  for (const std::string& f : flags) {
    if (f == "-ffast-math") {
      out->insert(out->end(), {"-ffast-math", "-menable-no-infs", "-menable-no-nans",
                               "-menable-unsafe-fp-math", "-fno-signed-zeros", "-mreassociate",
                               "-freciprocal-math", "-ffp-contract=fast", "-fapprox-func"});
    } else if (f == "-O0" || f == "-O1" || f == "-O2" || f == "-O3" || f == "-Os") {
      *has_opt = true;
      out->push_back(f);
    } else if (((f.rfind("-D", 0) == 0 || f.rfind("-U", 0) == 0) && f.size() > 2) ||
               f.rfind("-W", 0) == 0 || f == "-w" || f == "-funroll-loops" ||
               f == "-fno-unroll-loops" || f == "-fno-vectorize" || f == "-fno-slp-vectorize") {
      out->push_back(f);
    } else {
      return Status(ErrorCode::kInvalidArgument,
                    "unsupported compiler flag '" + f +
                        "' (allowed: -DNAME[=V] -UNAME -O0..-O3 -Os -W... -w -ffast-math "
                        "-funroll-loops -fno-unroll-loops -fno-vectorize -fno-slp-vectorize)");
    }
  }
  return Status::Ok();
}

// Reads the ct_module table that CT_DEFINE_MODULE put behind crosstune_module_v1().
Expected<std::vector<pkg::Function>> ReadModuleTable(llvm::Module& mod) {
  llvm::Function* entry = mod.getFunction(CT_MODULE_SYMBOL);
  if (entry == nullptr || entry->isDeclaration()) {
    return BuildError(std::string("the kernel defines no ") + CT_MODULE_SYMBOL +
                      "() (declare its functions with CT_DEFINE_MODULE from kernel_abi.h)");
  }
  const llvm::GlobalVariable* table = nullptr;
  for (const auto& bb : *entry) {
    for (const auto& inst : bb) {
      if (const auto* ret = llvm::dyn_cast<llvm::ReturnInst>(&inst); ret && ret->getReturnValue()) {
        table = llvm::dyn_cast<llvm::GlobalVariable>(ret->getReturnValue()->stripPointerCasts());
      }
    }
  }
  auto unreadable = [] {
    return BuildError(std::string(CT_MODULE_SYMBOL) +
                      "() must return a constant table (use CT_DEFINE_MODULE from kernel_abi.h)");
  };
  if (table == nullptr || !table->hasInitializer()) return unreadable();
  const auto* init = llvm::dyn_cast<llvm::ConstantStruct>(table->getInitializer());
  if (init == nullptr || init->getNumOperands() < 4) return unreadable();
  const auto* abi = llvm::dyn_cast<llvm::ConstantInt>(init->getOperand(0));
  if (abi == nullptr || abi->getZExtValue() != CT_ABI_VERSION) {
    return BuildError("the module table has another ABI version than this builder's (" +
                      std::to_string(CT_ABI_VERSION) + ")");
  }
  const auto* count = llvm::dyn_cast<llvm::ConstantInt>(init->getOperand(2));
  std::vector<pkg::Function> out;
  if (count == nullptr) return unreadable();
  if (count->getZExtValue() == 0) return out;
  const auto* arr_gv =
      llvm::dyn_cast<llvm::GlobalVariable>(init->getOperand(3)->stripPointerCasts());
  if (arr_gv == nullptr || !arr_gv->hasInitializer()) return unreadable();
  const llvm::Constant* arr = arr_gv->getInitializer();
  for (uint64_t i = 0; i < count->getZExtValue(); ++i) {
    const llvm::Constant* elem = arr->getAggregateElement(static_cast<unsigned>(i));
    if (elem == nullptr) return unreadable();
    llvm::StringRef name, sig;
    const llvm::Constant* name_c = elem->getAggregateElement(0u);
    const llvm::Constant* sig_c = elem->getAggregateElement(2u);
    if (name_c == nullptr || sig_c == nullptr || !llvm::getConstantStringInfo(name_c, name) ||
        !llvm::getConstantStringInfo(sig_c, sig)) {
      return BuildError("function " + std::to_string(i) +
                        " of the module table has no constant name or signature");
    }
    for (char c : sig) {
      if (c != 't' && c != 'i' && c != 'f') {
        return BuildError("function '" + name.str() + "' has signature '" + sig.str() +
                          "'; only t (tensor), i (int64) and f (float64) are allowed");
      }
    }
    pkg::Function fn;
    fn.name = name.str();
    fn.signature = sig.str();
    out.push_back(std::move(fn));
  }
  return out;
}

// The compiler's view of the file system: only the trees under `roots` (the resource dir and the
// kernel include tree) exist. `#include "/etc/passwd"` is then "file not found" (no line of it
// is quoted) and `__has_include` cannot probe what is there; the source itself is a remapped
// buffer, never read from disk. Paths are made absolute and their dots removed before the test,
// so "include/../../x" is judged where it leads. (Assembler input, `.incbin`, bypasses this file
// system: the build processes' Landlock box, sandbox.h, stops that.)
class ConfinedFileSystem : public llvm::vfs::ProxyFileSystem {
 public:
  ConfinedFileSystem(llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> base,
                     std::vector<std::string> roots)
      : ProxyFileSystem(std::move(base)), roots_(std::move(roots)) {}

  llvm::ErrorOr<llvm::vfs::Status> status(const llvm::Twine& path) override {
    if (!Allowed(path)) return NotFound();
    return ProxyFileSystem::status(path);
  }
  llvm::ErrorOr<std::unique_ptr<llvm::vfs::File>> openFileForRead(
      const llvm::Twine& path) override {
    if (!Allowed(path)) return NotFound();
    return ProxyFileSystem::openFileForRead(path);
  }
  llvm::vfs::directory_iterator dir_begin(const llvm::Twine& dir, std::error_code& ec) override {
    if (!Allowed(dir)) {
      ec = NotFound();
      return {};
    }
    return ProxyFileSystem::dir_begin(dir, ec);
  }
  std::error_code getRealPath(const llvm::Twine& path,
                              llvm::SmallVectorImpl<char>& output) const override {
    if (!Allowed(path)) return NotFound();
    return ProxyFileSystem::getRealPath(path, output);
  }

 private:
  static std::error_code NotFound() {
    return std::make_error_code(std::errc::no_such_file_or_directory);
  }
  bool Allowed(const llvm::Twine& path) const {
    llvm::SmallString<256> p;
    path.toVector(p);
    if (makeAbsolute(p)) return false;
    llvm::sys::path::remove_dots(p, /*remove_dot_dot=*/true);
    const llvm::StringRef s = p.str();
    for (const std::string& root : roots_) {
      if (s == root || (s.startswith(root) && s.size() > root.size() && s[root.size()] == '/')) {
        return true;
      }
    }
    return false;
  }

  std::vector<std::string> roots_;
};

// The roots of ConfinedFileSystem, in the spelling the compiler is given them.
std::vector<std::string> CompilerRoots() {
  std::vector<std::string> roots;
  for (std::string dir : {std::string(CROSSTUNE_CLANG_RESOURCE_DIR), KernelIncludeDir()}) {
    llvm::SmallString<256> p(dir);
    (void)llvm::sys::fs::make_absolute(p);
    llvm::sys::path::remove_dots(p, /*remove_dot_dot=*/true);
    roots.emplace_back(p.str());
  }
  return roots;
}

// A link input must be what an object_only build makes: an ELF relocatable object of the target's
// class. Anything else would reach lld's other readers (a text is read as a linker script, whose
// INPUT() and INCLUDE open other files).
Status CheckLinkObject(const std::string& bytes, size_t index, const llvm::Triple& triple) {
  auto refuse = [&](const std::string& why) {
    return BuildError("link input " + std::to_string(index) + " " + why);
  };
  static constexpr char kElfMagic[] = {0x7f, 'E', 'L', 'F'};
  if (bytes.size() < 52 || bytes.compare(0, sizeof(kElfMagic), kElfMagic, sizeof(kElfMagic)) != 0) {
    return refuse("is not an ELF object (linker scripts are not accepted)");
  }
  const unsigned char elf_class = static_cast<unsigned char>(bytes[4]);
  const unsigned char data = static_cast<unsigned char>(bytes[5]);
  const unsigned char want_class = triple.isArch64Bit() ? 2 : 1;
  if (elf_class != want_class) {
    return refuse(std::string("is a ") + (elf_class == 2 ? "64" : "32") +
                  "-bit ELF object; the target's are " + (want_class == 2 ? "64" : "32") + "-bit");
  }
  if (elf_class == 2 && bytes.size() < 64) return refuse("is a truncated ELF object");
  if (data != 1 && data != 2) return refuse("is not an ELF object (no byte order)");
  const auto b0 = static_cast<unsigned char>(bytes[16]);
  const auto b1 = static_cast<unsigned char>(bytes[17]);
  const unsigned e_type = data == 1 ? (b0 | (b1 << 8)) : ((b0 << 8) | b1);
  if (e_type != 1) {  // ET_REL
    return refuse("is an ELF file of type " + std::to_string(e_type) +
                  ", not a relocatable object (build it with object_only)");
  }
  return Status::Ok();
}

// Code generation's diagnostics (an inline asm statement the assembler refuses, a `.incbin` it
// cannot open) into the build's text. Without a handler LLVMContext prints them and calls
// exit(1), which would end a pool's worker or a build worker's session instead of failing a build.
class BackendDiagnostics : public llvm::DiagnosticHandler {
 public:
  BackendDiagnostics(llvm::raw_ostream& os, bool* failed) : os_(os), failed_(failed) {}
  bool handleDiagnostics(const llvm::DiagnosticInfo& info) override {
    const bool error = info.getSeverity() == llvm::DS_Error;
    if (error) *failed_ = true;
    if (error || info.getSeverity() == llvm::DS_Warning) {
      os_ << (error ? "error: " : "warning: ");
      llvm::DiagnosticPrinterRawOStream printer(os_);
      info.print(printer);
      os_ << "\n";
    }
    return true;
  }

 private:
  llvm::raw_ostream& os_;
  bool* failed_;
};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "crosstune-build-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Expected<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kIoError, path + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

std::string LlvmVersion() { return LLVM_VERSION_STRING; }

namespace {

// clang + LLVM: `source` to an object file's bytes in out->library; the module table is read
// into out->functions when `read_table`. The caller holds g_cpu_mutex.
Status CompileObjectLocked(const std::string& source, const Target& target,
                           const std::vector<std::string>& user_flags, bool has_opt,
                           const std::string& file_name, bool read_table, CompileOutput* out) {
  const std::string arch = target.Arch();
  const std::string input = file_name.empty() ? "kernel.c" : file_name;
  std::vector<std::string> args = {"-triple",
                                   target.triple,
                                   "-emit-obj",
                                   "-ffreestanding",
                                   "-mrelocation-model",
                                   "pic",
                                   "-pic-level",
                                   "2",
                                   "-mframe-pointer=none",
                                   "-ffp-contract=on",
                                   "-fno-rounding-math",
                                   "-resource-dir",
                                   CROSSTUNE_CLANG_RESOURCE_DIR,
                                   "-internal-isystem",
                                   std::string(CROSSTUNE_CLANG_RESOURCE_DIR) + "/include",
                                   "-nostdsysteminc",
                                   "-I",
                                   KernelIncludeDir(),
                                   "-fmessage-length=0",
                                   "-ferror-limit",
                                   "20",
                                   "-fgnuc-version=4.2.1",
                                   "-vectorize-loops",
                                   "-vectorize-slp"};
  if (!has_opt) args.push_back("-O3");
  if (arch != "x86_64") args.push_back("-fno-signed-char");
  for (auto& a : Cc1TargetArgs(target)) args.push_back(a);
  for (auto& a : user_flags) args.push_back(a);
  args.insert(args.end(), {"-x", "c", input});
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());

  std::string diag_text;
  llvm::raw_string_ostream diag_os(diag_text);
  llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_opts(new clang::DiagnosticOptions());
  diag_opts->ShowColors = false;
  auto* printer = new clang::TextDiagnosticPrinter(diag_os, diag_opts.get());

  clang::CompilerInstance ci;
  ci.createDiagnostics(printer, /*ShouldOwnClient=*/true);
  auto invocation = std::make_shared<clang::CompilerInvocation>();
  if (!clang::CompilerInvocation::CreateFromArgs(*invocation, argv, ci.getDiagnostics())) {
    diag_os.flush();
    return BuildError("bad compiler arguments: " + diag_text);
  }
  // ExecuteAction prints "N errors generated." to stderr when carets are on; the printer keeps its
  // own options (with carets), so only that summary line goes away.
  invocation->getDiagnosticOpts().ShowCarets = false;
  ci.setInvocation(invocation);
  ci.createFileManager(llvm::makeIntrusiveRefCnt<ConfinedFileSystem>(llvm::vfs::getRealFileSystem(),
                                                                     CompilerRoots()));
  ci.getPreprocessorOpts().addRemappedFile(
      input, llvm::MemoryBuffer::getMemBufferCopy(source, input).release());

  llvm::LLVMContext context;
  clang::EmitLLVMOnlyAction action(&context);
  bool ok = ci.ExecuteAction(action);
  diag_os.flush();
  if (!ok || ci.getDiagnostics().hasErrorOccurred()) {
    return BuildError(diag_text.empty() ? "compile failed" : diag_text);
  }
  std::unique_ptr<llvm::Module> mod = action.takeModule();
  if (!mod) return BuildError("compile produced no module\n" + diag_text);
  if (read_table) {
    CT_ASSIGN_OR_RETURN(out->functions, ReadModuleTable(*mod));
  }

  // The IR is optimized already (EmitLLVMOnly runs the -O pipeline); only code generation is left.
  llvm::SmallString<0> object;
  ci.getCodeGenOpts().DisableLLVMPasses = true;
  bool backend_failed = false;
  context.setDiagnosticHandler(std::make_unique<BackendDiagnostics>(diag_os, &backend_failed));
  clang::EmitBackendOutput(ci.getDiagnostics(), ci.getHeaderSearchOpts(), ci.getCodeGenOpts(),
                           ci.getTargetOpts(), ci.getLangOpts(), mod->getDataLayoutStr(), mod.get(),
                           clang::Backend_EmitObj,
                           std::make_unique<llvm::raw_svector_ostream>(object));
  diag_os.flush();
  if (backend_failed || ci.getDiagnostics().hasErrorOccurred()) return BuildError(diag_text);
  out->library.assign(object.data(), object.size());
  out->diagnostics = diag_text;
  return Status::Ok();
}

// lld: the objects to one shared library's bytes.
Expected<std::string> LinkShared(const std::vector<const std::string*>& objects) {
  TempDir tmp;
  if (tmp.path().empty()) return Status(ErrorCode::kIoError, "cannot create a temporary directory");
  const std::string so_path = tmp.path() + "/kernel.so";
  std::vector<std::string> obj_paths;
  for (size_t i = 0; i < objects.size(); ++i) {
    obj_paths.push_back(tmp.path() + "/kernel" + std::to_string(i) + ".o");
    std::ofstream f(obj_paths.back(), std::ios::binary);
    f.write(objects[i]->data(), static_cast<std::streamsize>(objects[i]->size()));
    if (!f) return Status(ErrorCode::kIoError, obj_paths.back() + ": write failed");
  }
  // --threads=1: lld's parallel loops would start LLVM's thread pool, which a forked worker
  // inherits without its threads (and then waits on forever); one build per core is the pool's
  // parallelism.
  // --no-dependent-libraries: an object's .deplibs section (`#pragma comment(lib, "...")` in a
  // source) would make lld open the files it names.
  std::vector<const char*> lld_args = {
      "ld.lld", "-shared",     "--threads=1", "--build-id=sha1", "--no-dependent-libraries",
      "-z",     "noexecstack", "-o",          so_path.c_str()};
  for (const auto& p : obj_paths) lld_args.push_back(p.c_str());
  std::string link_out, link_err;
  llvm::raw_string_ostream link_out_os(link_out), link_err_os(link_err);
  bool linked = lld::elf::link(lld_args, link_out_os, link_err_os, /*exitEarly=*/false,
                               /*disableOutput=*/false);
  lld::CommonLinkerContext::destroy();
  link_err_os.flush();
  if (!linked) return BuildError("link failed: " + link_err);
  return ReadWholeFile(so_path);
}

}  // namespace

Expected<CompileOutput> CompileCpu(const std::string& source, const Target& target,
                                   const std::vector<std::string>& flags,
                                   const std::string& file_name,
                                   const std::vector<std::string>& link_objects) {
  if (target.kind != TargetKind::kCpu)
    return Status(ErrorCode::kInvalidArgument, "CompileCpu needs an llvm target");
  std::vector<std::string> user_flags;
  bool has_opt = false;
  CT_RETURN_IF_ERROR(TranslateFlags(flags, &user_flags, &has_opt));
  CT_ASSIGN_OR_RETURN(std::vector<std::string> features, RequiredFeatures(target));
  const llvm::Triple triple(target.triple);
  for (size_t i = 0; i < link_objects.size(); ++i) {
    CT_RETURN_IF_ERROR(CheckLinkObject(link_objects[i], i + 1, triple));
  }

  std::lock_guard<std::mutex> lock(g_cpu_mutex);
  InitLlvmOnce();
  CompileOutput out;
  CT_RETURN_IF_ERROR(
      CompileObjectLocked(source, target, user_flags, has_opt, file_name, true, &out));
  std::vector<const std::string*> objects = {&out.library};
  for (const auto& o : link_objects) objects.push_back(&o);
  CT_ASSIGN_OR_RETURN(std::string library, LinkShared(objects));
  out.library = std::move(library);
  out.required_features = std::move(features);
  return out;
}

Expected<CompileOutput> CompileCpuObject(const std::string& source, const Target& target,
                                         const std::vector<std::string>& flags,
                                         const std::string& file_name) {
  if (target.kind != TargetKind::kCpu)
    return Status(ErrorCode::kInvalidArgument, "CompileCpuObject needs an llvm target");
  std::vector<std::string> user_flags;
  bool has_opt = false;
  CT_RETURN_IF_ERROR(TranslateFlags(flags, &user_flags, &has_opt));
  CT_ASSIGN_OR_RETURN(std::vector<std::string> features, RequiredFeatures(target));

  std::lock_guard<std::mutex> lock(g_cpu_mutex);
  InitLlvmOnce();
  CompileOutput out;
  CT_RETURN_IF_ERROR(
      CompileObjectLocked(source, target, user_flags, has_opt, file_name, false, &out));
  out.required_features = std::move(features);
  return out;
}

}  // namespace crosstune::builder
