#include "crosstune/tuner/replay_task.h"

#include <charconv>
#include <sstream>

namespace crosstune::tuner {

std::string SimMarker(uint64_t index) {
  return std::string(kSimMarkerPrefix) + std::to_string(index) + ";";
}

std::optional<uint64_t> FindSimMarker(std::string_view bytes) {
  for (size_t at = bytes.find(kSimMarkerPrefix); at != std::string_view::npos;
       at = bytes.find(kSimMarkerPrefix, at + 1)) {
    std::string_view rest = bytes.substr(at + kSimMarkerPrefix.size());
    uint64_t index = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
    if (ec == std::errc() && end != rest.data() && end < rest.data() + rest.size() && *end == ';') {
      return index;
    }
  }
  return std::nullopt;
}

namespace {

TaskId ReplayTaskId() {
  TaskId id;
  id.template_name = "replay";
  return id;
}

}  // namespace

ReplayTask::ReplayTask(std::shared_ptr<const ReplayTable> table, builder::Target target)
    : Task(ReplayTaskId(), std::move(target), table->space()), table_(std::move(table)) {
  // A table is never empty (FromPoints refuses one), so some index holds a point.
  const uint64_t size = space().size();
  while (first_index_ + 1 < size && !table_->Find(first_index_)) ++first_index_;
}

std::unique_ptr<ReplayTask> ReplayTask::Make(std::shared_ptr<const ReplayTable> table,
                                             builder::Target target) {
  return std::unique_ptr<ReplayTask>(new ReplayTask(std::move(table), std::move(target)));
}

std::vector<ArgSpec> ReplayTask::args() const {
  return {ArgSpec{.name = "out", .shape = {1}, .output = true}};
}

std::string ReplayTask::Generate(const Config& config) const {
  std::ostringstream o;
  // The marker is the module's last_error text, so it is used and no linker drops it.
  o << "/* crosstune replay " << table_->source() << ": " << config.ToString() << " */\n"
    << "#include \"crosstune/kernel_abi.h\"\n"
    << "static const char kMarker[] = \"" << SimMarker(config.index()) << "\";\n"
    << "static const char* LastError(void) { return kMarker; }\n"
    << "static int32_t Sim(const ct_arg* args, int32_t num_args) {\n"
    << "  if (num_args != 1 || args[0].kind != CT_ARG_TENSOR) return 1;\n"
    << "  DLTensor* t = args[0].value.v_tensor;\n"
    << "  *(float*)((char*)t->data + t->byte_offset) = 0.0f;\n"
    << "  return 0;\n"
    << "}\n"
    << "static const ct_function kFunctions[] = {{\"sim\", Sim, \"t\"}};\n"
    << "CT_DEFINE_MODULE(\"" << target().ToString() << "\", kFunctions, LastError)\n";
  return o.str();
}

void ReplayTask::Reference(HostArgs& args) const {
  for (float& v : args.at(0)) v = 0.0f;
}

std::vector<float> ReplayTask::Features(const Config& config) const {
  if (table_->features()) return table_->features()(config);
  return space().Features(config);
}

}  // namespace crosstune::tuner
