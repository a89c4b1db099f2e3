// Helpers for tests that build real packages and then break them on purpose.
#pragma once

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/package.h"
#include "crosstune/testing/support.h"
#include "test_kernels.h"

namespace crosstune::testing {

inline msg::DeviceInfo X86Device(std::vector<std::string> features = {"sse4.2", "avx", "avx2",
                                                                      "fma"}) {
  msg::DeviceInfo d;
  d.arch = "x86_64";
  d.triple = "x86_64-linux-gnu";
  d.cpu_model = "Test CPU";
  d.cpu_features = std::move(features);
  return d;
}

// Builds kVaddSource for `target` in this process and writes a package.
inline pkg::Manifest BuildPackage(const std::string& target, const std::string& out,
                                  const std::string& graph = "", const std::string& params = "") {
  builder::BuildRequest r;
  r.source = kVaddSource;
  r.target = *builder::ParseTarget(target);
  r.name = "vadd";
  builder::BuildResult res = builder::BuildInProcess(r);
  if (!res.ok()) throw std::runtime_error(res.status.ToString());
  auto m = builder::WriteBuildPackage(r, res, out, graph, params);
  if (!m.ok()) throw std::runtime_error(m.status().ToString());
  return *m;
}

// Reads every member of a package, lets `edit` change them (and the manifest), writes `out`.
inline void RewritePackage(
    const std::string& in, const std::string& out,
    const std::function<void(pkg::Manifest*, std::vector<pkg::PackageInput>*)>& edit) {
  auto members = pkg::ListTar(in);
  std::string bytes = ReadFile(in);
  std::vector<pkg::PackageInput> files;
  pkg::Manifest m;
  for (const auto& mem : *members) {
    std::string data = bytes.substr(mem.offset, mem.size);
    if (mem.path == pkg::kManifestPath) {
      m = *pkg::ManifestFromJson(data);
    } else {
      files.push_back({mem.path, data, ""});
    }
  }
  edit(&m, &files);
  // An edit may supply manifest.json text itself (for fields the struct cannot hold).
  bool has_manifest = false;
  for (const auto& f : files) has_manifest |= f.path == pkg::kManifestPath;
  if (!has_manifest)
    files.insert(files.begin(), {std::string(pkg::kManifestPath), pkg::ManifestToJson(m), ""});
  if (!pkg::WriteTar(out, files).ok()) throw std::runtime_error("WriteTar failed");
}

// The manifest JSON with one field replaced (for versions the C++ struct would normalize).
inline std::string SetManifestField(const pkg::Manifest& m, const std::string& key, int value) {
  std::string json = pkg::ManifestToJson(m);
  std::string needle = "\"" + key + "\": ";
  size_t at = json.find(needle);
  size_t end = json.find_first_of(",\n", at);
  return json.substr(0, at + needle.size()) + std::to_string(value) + json.substr(end);
}

}  // namespace crosstune::testing
