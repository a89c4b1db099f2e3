// A fixed piece of work for scripts/test.sh: the time one compile of this file takes tells how
// fast this machine is against the one the phase budgets were measured on. Standard headers
// only, so it needs nothing the build has not installed yet. Change it and the reference time in
// test.sh must be measured again.
#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace {

using Value = std::variant<long, double, std::string>;

std::map<std::string, std::vector<Value>> Parse(const std::string& text) {
  std::map<std::string, std::vector<Value>> out;
  const std::regex line(R"(^(\w+)\s*=\s*(.*)$)");
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    std::istringstream items(m[2].str());
    for (std::string item; items >> item;) {
      if (std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        out[m[1].str()].emplace_back(std::stol(item));
      } else {
        out[m[1].str()].emplace_back(item);
      }
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::unordered_map<std::string, std::function<size_t(const std::string&)>> commands;
  commands["count"] = [](const std::string& s) { return Parse(s).size(); };
  commands["sort"] = [](const std::string& s) {
    std::vector<std::string> words;
    std::istringstream in(s);
    for (std::string w; in >> w;) words.push_back(w);
    std::sort(words.begin(), words.end());
    return words.size();
  };
  size_t total = 0;
  for (int i = 1; i < argc; ++i) total += commands["count"](argv[i]) + commands["sort"](argv[i]);
  return static_cast<int>(total % 7);
}
