// A generated kernel (kernels.h) compiled for this machine with the in-process compiler and
// loaded into the test's process, to run on the host interpreter's values.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "crosstune/builder/compiler.h"
#include "crosstune/kernel_abi.h"
#include "crosstune/model/graph.h"
#include "crosstune/model/kernels.h"

namespace crosstune::model::testing {

// A compiled kernel loaded into this process.
class Loaded {
 public:
  static Expected<std::unique_ptr<Loaded>> Compile(const GeneratedKernel& k) {
    auto target = builder::ParseTarget("llvm -mtriple=x86_64-linux-gnu");
    if (!target.ok()) return target.status();
    CT_ASSIGN_OR_RETURN(auto out, builder::CompileCpu(k.source, *target, {}, k.function + ".c"));
    char path[] = "/tmp/crosstune-kernel-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) return Status(ErrorCode::kIoError, "mkstemp");
    const bool written = ::write(fd, out.library.data(), out.library.size()) ==
                         static_cast<ssize_t>(out.library.size());
    ::close(fd);
    void* h = written ? ::dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    ::unlink(path);
    if (!h) return Status(ErrorCode::kIoError, std::string("dlopen: ") + ::dlerror());
    auto l = std::unique_ptr<Loaded>(new Loaded());
    l->handle_ = h;
    l->runtime_slot_ = static_cast<const ct_runtime**>(::dlsym(h, CT_RUNTIME_SYMBOL));
    l->module_ = reinterpret_cast<ct_module_entry>(::dlsym(h, CT_MODULE_SYMBOL))();
    return l;
  }
  ~Loaded() { ::dlclose(handle_); }
  // Points the module's crosstune_runtime_v1 at `rt` (null: its loops run serially on the
  // caller), as the server does after dlopen; false when the module has no such variable.
  bool SetRuntime(const ct_runtime* rt) {
    if (runtime_slot_ == nullptr) return false;
    *runtime_slot_ = rt;
    return true;
  }
  // Float32 tensors of the values' data and shapes (outputs too: their data is written).
  int32_t Call(std::vector<Value*>& args) const {
    std::vector<DLTensor> t(args.size());
    std::vector<ct_arg> a(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      t[i] = {};
      t[i].data = const_cast<uint8_t*>(args[i]->data->data());
      t[i].ndim = static_cast<int32_t>(args[i]->shape.size());
      t[i].shape = args[i]->shape.data();
      t[i].dtype = {kDLFloat, 32, 1};
      a[i].kind = CT_ARG_TENSOR;
      a[i].value.v_tensor = &t[i];
    }
    return module_->functions[0].fn(a.data(), static_cast<int32_t>(a.size()));
  }
  // The module's last error ("" when it has none).
  std::string LastError() const {
    return module_->last_error ? module_->last_error() : std::string();
  }

 private:
  Loaded() = default;
  void* handle_ = nullptr;
  const ct_module* module_ = nullptr;
  const ct_runtime** runtime_slot_ = nullptr;
};

}  // namespace crosstune::model::testing
