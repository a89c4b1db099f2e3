// `crosstune inspect`: validates a package with common's checks and shows what it holds; for a
// model package also its graph summary and where every node's kernel config came from. It needs
// no compiler, so it lives in the `crosstune` binary, not in the compiler module.
//
//   crosstune inspect k.ctpkg [--json]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "crosstune/module_table.h"
#include "crosstune/package.h"
#include "model_files.h"

namespace crosstune::cli {
namespace {

using nlohmann::json;

json InspectJson(const pkg::Manifest& m, bool valid, const std::string& error) {
  json j = json::parse(pkg::ManifestToJson(m));
  j["valid"] = valid;
  if (!error.empty()) j["error"] = error;
  return j;
}

// A CPU package's library against its manifest, as the server checks it once it has loaded the
// library, here on the table read from the library's image (nothing of it runs). Ok with a
// `note` when the table cannot be read (a stripped library): the server's check then decides.
Status CheckFunctions(const pkg::Package& p, std::string* note) {
  if (p.manifest.kind != "cpu") return Status::Ok();  // a CUDA module's table is its manifest
  auto member = std::find_if(p.members.begin(), p.members.end(),
                             [&](const pkg::TarMember& t) { return t.path == p.manifest.library; });
  if (member == p.members.end()) return Status::Ok();  // OpenPackage refused such a package
  std::string image(member->size, '\0');
  std::ifstream in(p.path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(member->offset));
  in.read(image.data(), static_cast<std::streamsize>(image.size()));
  if (!in) return Status(ErrorCode::kIoError, p.manifest.library + ": cannot read");
  auto table = ReadModuleTable(image);
  if (!table.ok()) {
    *note = p.manifest.library + ": " + table.status().message() + "; not checked";
    return Status::Ok();
  }
  Status s = pkg::CheckLibraryFunctions(p.manifest, *table);
  return s.ok() ? s : Status(s.code(), p.manifest.library + ": " + s.message());
}

void RunInspect(const std::string& path, bool as_json) {
  auto p = pkg::OpenPackage(path);
  if (!p.ok()) {
    if (as_json) PrintJson(json{{"valid", false}, {"error", p.status().message()}}, 2);
    Fail(path + ": " + p.status().message());
  }
  const pkg::Manifest& m = p->manifest;
  std::string functions_note;
  const Status functions = CheckFunctions(*p, &functions_note);
  // A model package (graph.json): its graph, storage plan, params and functions are checked as
  // the server checks them.
  bool is_model = false;
  for (const auto& member : p->members) is_model |= member.path == pkg::kGraphPath;
  const json model = is_model ? InspectModel(*p) : json();
  const bool model_ok = !is_model || model.value("valid", false);
  const std::string error = !functions.ok() ? functions.message()
                            : model_ok      ? ""
                                            : model.value("error", std::string("invalid model"));
  if (as_json) {
    json j = InspectJson(m, error.empty(), error);
    if (!functions_note.empty()) j["note"] = functions_note;
    if (is_model) j["model"] = model;
    PrintJson(j, 2);
    if (!error.empty()) Fail(path + ": " + error);
    return;
  }
  if (!functions.ok()) Fail(path + ": " + error);
  if (!functions_note.empty()) {
    std::fprintf(stderr, "crosstune: warning: %s: %s\n", path.c_str(), functions_note.c_str());
  }
  std::string features;
  for (const auto& f : m.required_features) features += (features.empty() ? "" : " ") + f;
  std::printf("package   %s (valid: hashes, format v%u, ABI v%u)\n", path.c_str(), m.format_version,
              m.abi_version);
  std::printf("kind      %s\n", m.kind.c_str());
  std::printf("target    %s\n", m.target.c_str());
  std::printf("arch      %s (%s)%s%s\n", m.arch.c_str(), m.triple.c_str(),
              m.cpu.empty() ? "" : ", cpu ", m.cpu.c_str());
  std::printf("features  %s\n", features.empty() ? "(baseline only)" : features.c_str());
  std::printf("built by  crosstune %s, %s %s\n", m.builder_version.c_str(), m.compiler.c_str(),
              m.compiler_version.c_str());
  std::printf("build id  %s\n", m.build_id.c_str());
  std::printf("functions\n");
  for (const auto& f : m.functions) {
    std::string launch;
    if (!f.grid.empty()) {
      auto dims = [](const std::vector<std::string>& d) {
        std::string s;
        for (const auto& x : d) s += (s.empty() ? "" : ",") + x;
        return s;
      };
      launch = "  grid=" + dims(f.grid) + " block=" + dims(f.block);
    }
    std::printf("  %-24s %s%s\n", f.name.c_str(), f.signature.c_str(), launch.c_str());
  }
  std::printf("files\n");
  for (const auto& f : m.files) {
    std::printf("  %-24s %10llu  sha256:%s\n", f.path.c_str(),
                static_cast<unsigned long long>(f.size), f.sha256.c_str());
  }
  if (is_model) {
    PrintModel(model);
    if (!model_ok) Fail(path + ": " + model.value("error", std::string("invalid model")));
  }
}

}  // namespace

void RegisterInspectCommand(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto* inspect = app.add_subcommand(
      "inspect", "Validate a .ctpkg and show its target, functions, files and versions");
  inspect->add_option("package", *path, "the .ctpkg file")->required();
  inspect->add_flag("--json", *as_json, "machine-readable output");
  inspect->callback([path, as_json] { RunInspect(*path, *as_json); });
}

}  // namespace crosstune::cli
