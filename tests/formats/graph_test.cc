#include "crosstune/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "crosstune/messages.h"

namespace crosstune::graph {
namespace {

constexpr DLDataType kF32{kDLFloat, 32, 1};

Node Null(const std::string& name) {
  Node n;
  n.op = std::string(kNullOp);
  n.name = name;
  return n;
}

Node Op(const std::string& name, const std::string& fn, std::vector<EntryRef> inputs) {
  Node n;
  n.op = std::string(kTvmOp);
  n.name = name;
  n.func_name = fn;
  n.inputs = std::move(inputs);
  n.num_inputs = static_cast<uint32_t>(n.inputs.size());
  n.op_type = "elementwise";
  n.flops = 4;
  return n;
}

// x, w -> add -> relu -> neg (the head). Lifetimes: x, w all the time; add [2,3]; relu [3,4];
// neg [4,5]. add and neg may share a buffer; add and relu may not.
Graph SmallGraph() {
  Graph g;
  g.nodes = {Null("x"), Null("w"), Op("add", "ct_add", {{0, 0, 0}, {1, 0, 0}}),
             Op("relu", "ct_relu", {{2, 0, 0}}), Op("neg", "ct_neg", {{3, 0, 0}})};
  g.nodes[2].provenance = Provenance{false, "add 1,4", 7, 1764000000.5};
  g.nodes[3].provenance = Provenance{true, "", -1, 0};
  FillIndex(&g);
  g.heads = {{4, 0, 0}};
  g.storage_id = {0, 1, 2, 3, 2};
  g.shape = {{1, 4}, {4}, {1, 4}, {1, 4}, {1, 4}};
  g.dltype = {kF32, kF32, kF32, kF32, kF32};
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.storage_bytes = {16, 16, 16, 16};
  return g;
}

std::string Message(const Status& s) { return s.ToString(); }

TEST(Graph, SmallGraphIsValid) {
  Graph g = SmallGraph();
  EXPECT_TRUE(ValidateGraph(g).ok()) << Message(ValidateGraph(g));
  EXPECT_EQ(g.node_row_ptr, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(g.arg_nodes, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(ParamNodes(g), (std::vector<uint32_t>{1}));
}

TEST(Graph, RoundTripsThroughJson) {
  Graph g = SmallGraph();
  g.build_id = "abc";
  g.nodes[4].other_attrs["hash"] = "\"1234\"";
  auto back = ParseGraph(GraphToJson(g));
  ASSERT_TRUE(back.ok()) << Message(back.status());
  EXPECT_TRUE(ValidateGraph(*back).ok());
  EXPECT_EQ(GraphToJson(*back), GraphToJson(g));
  EXPECT_EQ(back->nodes[2].func_name, "ct_add");
  EXPECT_EQ(back->nodes[2].num_inputs, 2u);
  ASSERT_TRUE(back->nodes[2].provenance.has_value());
  EXPECT_EQ(back->nodes[2].provenance->config_index, 7);
  EXPECT_EQ(back->nodes[2].provenance->task, "add 1,4");
  EXPECT_DOUBLE_EQ(back->nodes[2].provenance->timestamp, 1764000000.5);
  EXPECT_TRUE(back->nodes[3].provenance->is_default);
  EXPECT_EQ(back->nodes[4].other_attrs.at("hash"), "\"1234\"");
  EXPECT_EQ(back->build_id, "abc");
  EXPECT_EQ(back->inputs, g.inputs);
  EXPECT_EQ(back->outputs, g.outputs);
  EXPECT_EQ(back->storage_bytes, g.storage_bytes);
}

TEST(Graph, WritesTvmSchemaWithStringCounts) {
  auto j = nlohmann::json::parse(GraphToJson(SmallGraph()));
  EXPECT_EQ(j["nodes"][2]["attrs"]["num_inputs"], "2");
  EXPECT_EQ(j["nodes"][2]["attrs"]["num_outputs"], "1");
  EXPECT_EQ(j["attrs"]["dltype"][0], "list_str");
  EXPECT_EQ(j["attrs"]["dltype"][1][0], "float32");
  EXPECT_EQ(j["attrs"]["storage_id"][0], "list_int");
  EXPECT_EQ(j["attrs"]["shape"][0], "list_shape");
  EXPECT_EQ(j["heads"][0], nlohmann::json::array({4, 0, 0}));
}

// TVM's graph executor loader (GraphExecutor::Load) reads only these top-level keys, stopping at
// "metadata"; a node's keys are op, name, inputs, attrs (or attr) and control_deps; an operator's
// attrs are a map of strings that must hold func_name, num_inputs, num_outputs and flatten_data;
// the graph attrs it knows have fixed types, and any other must be a list_int or a size_t to be
// skipped. Each broken rule is one line.
std::vector<std::string> TvmLoaderComplaints(const std::string& text) {
  std::vector<std::string> out;
  auto j = nlohmann::ordered_json::parse(text);
  const std::vector<std::string> top = {"nodes", "arg_nodes", "node_row_ptr", "heads", "attrs"};
  size_t i = 0;
  for (auto it = j.begin(); it != j.end(); ++it, ++i) {
    if (it.key() == "metadata") {
      if (i + 1 != j.size()) out.push_back("metadata is not the last key");
    } else if (std::find(top.begin(), top.end(), it.key()) == top.end()) {
      out.push_back("top-level key " + it.key());
    }
  }
  for (const std::string& k : top) {
    if (!j.contains(k)) out.push_back("no " + k);
  }
  for (const auto& n : j["nodes"]) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string& k = it.key();
      if (k != "op" && k != "name" && k != "inputs" && k != "attrs" && k != "attr" &&
          k != "control_deps") {
        out.push_back("node key " + k);
      }
    }
    if (n["op"] != "tvm_op") continue;
    const auto& a = n["attrs"];
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!it->is_string()) out.push_back("attr " + it.key() + " is not a string");
    }
    for (const char* k : {"func_name", "num_inputs", "num_outputs", "flatten_data"}) {
      if (!a.contains(k)) out.push_back(std::string("no attr ") + k);
    }
  }
  const std::map<std::string, std::string> typed = {{"dltype", "list_str"},
                                                    {"storage_id", "list_int"},
                                                    {"device_index", "list_int"},
                                                    {"shape", "list_shape"}};
  for (auto it = j["attrs"].begin(); it != j["attrs"].end(); ++it) {
    const std::string type = (*it)[0].get<std::string>();
    auto known = typed.find(it.key());
    if (known != typed.end() ? type != known->second : type != "list_int" && type != "size_t") {
      out.push_back("graph attr " + it.key() + " of type " + type);
    }
  }
  return out;
}

TEST(Graph, WritesWhatTvmsLoaderReads) {
  Graph g = SmallGraph();
  g.build_id = "abc";
  g.nodes[2].scratch_bytes = 64;
  EXPECT_EQ(TvmLoaderComplaints(GraphToJson(g)), std::vector<std::string>{});
  // The checker itself: the version 1 layout broke three of its rules.
  auto j = nlohmann::ordered_json::parse(GraphToJson(g));
  j["build_id"] = "abc";
  j["nodes"][2]["attrs"]["flops"] = 4;
  j["nodes"][2]["attrs"].erase("flatten_data");
  EXPECT_EQ(TvmLoaderComplaints(j.dump()),
            (std::vector<std::string>{"metadata is not the last key", "top-level key build_id",
                                      "attr flops is not a string", "no attr flatten_data"}));
}

// A file written before the TVM-strict schema: our keys at the top level, numbers for flops and
// scratch_bytes, provenance as an object.
TEST(Graph, ReadsVersionOneFiles) {
  const std::string v1 = R"({
    "nodes": [{"op": "null", "name": "x", "inputs": []},
              {"op": "tvm_op", "name": "relu", "inputs": [[0, 0, 0]],
               "attrs": {"func_name": "ct_relu", "num_inputs": "1", "num_outputs": "1",
                         "flatten_data": "0", "scratch_bytes": 32, "flops": 4,
                         "provenance": {"task": "relu 1,4", "config_index": 3,
                                        "timestamp": 1764000000.25}}},
              {"op": "tvm_op", "name": "neg", "inputs": [[1, 0, 0]],
               "attrs": {"func_name": "ct_neg", "num_inputs": "1", "num_outputs": "1",
                         "flatten_data": "0", "provenance": {"default": true}}}],
    "arg_nodes": [0], "node_row_ptr": [0, 1, 2, 3], "heads": [[2, 0, 0]],
    "attrs": {"storage_id": ["list_int", [0, 1, 0]],
              "shape": ["list_shape", [[1, 4], [1, 4], [1, 4]]],
              "dltype": ["list_str", ["float32", "float32", "float32"]]},
    "build_id": "old",
    "crosstune": {"version": 1, "inputs": ["x"], "outputs": ["y"], "storage_bytes": [16, 16]}})";
  auto g = ParseGraph(v1);
  ASSERT_TRUE(g.ok()) << Message(g.status());
  EXPECT_EQ(g->build_id, "old");
  EXPECT_EQ(g->version, 1u);
  EXPECT_EQ(g->outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(g->nodes[1].scratch_bytes, 32u);
  ASSERT_TRUE(g->nodes[1].provenance.has_value());
  EXPECT_EQ(g->nodes[1].provenance->config_index, 3);
  EXPECT_DOUBLE_EQ(g->nodes[1].provenance->timestamp, 1764000000.25);
  EXPECT_TRUE(g->nodes[2].provenance->is_default);
  // Written back in the current schema.
  EXPECT_EQ(TvmLoaderComplaints(GraphToJson(*g)), std::vector<std::string>{});
}

TEST(Graph, RefusesAProvenanceThatIsNeitherRecordNorDefault) {
  auto j = nlohmann::json::parse(GraphToJson(SmallGraph()));
  j["nodes"][2]["attrs"]["provenance"] = "guess";
  auto g = ParseGraph(j.dump());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nodes[2].attrs.provenance"), std::string::npos)
      << g.status().message();
  j["nodes"][2]["attrs"]["provenance"] = "record";
  j["nodes"][2]["attrs"]["provenance_config_index"] = "7x";
  g = ParseGraph(j.dump());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("provenance_config_index"), std::string::npos)
      << g.status().message();
}

TEST(Graph, ReadsCountsGivenAsNumbersAndTwoElementEntries) {
  auto j = nlohmann::json::parse(GraphToJson(SmallGraph()));
  j["nodes"][2]["attrs"]["num_inputs"] = 2;
  j["nodes"][2]["attrs"]["num_outputs"] = 1;
  j["nodes"][2]["attrs"]["flops"] = "12";
  j["nodes"][3]["inputs"][0] = nlohmann::json::array({2, 0});
  auto g = ParseGraph(j.dump());
  ASSERT_TRUE(g.ok()) << Message(g.status());
  EXPECT_EQ(g->nodes[2].flops, 12u);
  EXPECT_TRUE(ValidateGraph(*g).ok());
}

TEST(Graph, ParsesTvmGraphWithoutOurKeysAndSaysWhatIsMissing) {
  auto j = nlohmann::json::parse(GraphToJson(SmallGraph()));
  j.erase("metadata");
  auto g = ParseGraph(j.dump());
  ASSERT_TRUE(g.ok()) << Message(g.status());
  Status s = ValidateGraph(*g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("crosstune.outputs"), std::string::npos) << s.message();
}

TEST(Graph, RefusesMalformedFilesNamingTheKey) {
  auto j = nlohmann::json::parse(GraphToJson(SmallGraph()));
  j["nodes"][3]["inputs"][0] = "two";
  auto g = ParseGraph(j.dump());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("nodes[3].inputs[0]"), std::string::npos)
      << g.status().message();
  EXPECT_FALSE(ParseGraph("{\"nodes\": [").ok());
  auto neg = nlohmann::json::parse(GraphToJson(SmallGraph()));
  neg["attrs"]["storage_id"][1][0] = -1;
  EXPECT_FALSE(ParseGraph(neg.dump()).ok());
  auto big = nlohmann::json::parse(GraphToJson(SmallGraph()));
  big["attrs"]["shape"][1][0] = nlohmann::json::array({1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_FALSE(ParseGraph(big.dump()).ok());
}

TEST(Graph, RefusesDeepNestingAtParseTime) {
  std::string deep = "{\"nodes\": " + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  auto g = ParseGraph(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("graph.json: JSON nested deeper than 64 levels"),
            std::string::npos)
      << g.status().message();
}

TEST(Graph, RefusesNewerFormatVersion) {
  auto j = nlohmann::json::parse(GraphToJson(SmallGraph()));
  j["metadata"]["crosstune"]["version"] = kGraphVersion + 1;
  EXPECT_EQ(ParseGraph(j.dump()).status().code(), ErrorCode::kVersionMismatch);
}

TEST(Graph, RefusesOverlappingStorageNamingBothTensors) {
  Graph g = SmallGraph();
  g.storage_id[3] = 2;  // relu would be written into the buffer it reads (add's)
  Status s = ValidateGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("storage 2 holds add and relu at once"), std::string::npos)
      << s.message();
}

TEST(Graph, RefusesHeadSharingAStorageWithALaterTensor) {
  // add becomes an output of the graph too: it must survive the run, so neg may no longer reuse
  // its buffer.
  Graph g = SmallGraph();
  g.heads = {{2, 0, 0}, {4, 0, 0}};
  g.outputs = {"sum", "y"};
  Status s = ValidateGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("storage 2 holds add and neg at once"), std::string::npos)
      << s.message();
}

TEST(Graph, RefusesParamSharingStorage) {
  Graph g = SmallGraph();
  g.storage_id = {0, 1, 1, 3, 2};  // w lives the whole run
  Status s = ValidateGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("storage 1 holds w and add at once"), std::string::npos)
      << s.message();
}

TEST(Graph, RefusesGraphInputSharingStorage) {
  Graph g = SmallGraph();
  g.storage_id[0] = 3;  // x lives all the time; relu is written at node 3
  EXPECT_FALSE(ValidateGraph(g).ok());
}

TEST(Graph, RefusesEntryLargerThanItsStorage) {
  Graph g = SmallGraph();
  g.storage_bytes[2] = 12;
  Status s = ValidateGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("storage 2 is 12 bytes, too small for add (16 bytes)"),
            std::string::npos)
      << s.message();
}

TEST(Graph, RefusesUnusedAndOutOfRangeStorageIds) {
  Graph g = SmallGraph();
  g.storage_bytes.push_back(64);
  EXPECT_NE(ValidateGraph(g).message().find("storage 4 is used by no entry"), std::string::npos);
  g = SmallGraph();
  g.storage_id[4] = 9;
  EXPECT_NE(ValidateGraph(g).message().find("has storage id 9"), std::string::npos);
}

TEST(Graph, RefusesBrokenStructure) {
  Graph g = SmallGraph();
  g.nodes[3].inputs[0] = {4, 0, 0};  // refers forward
  EXPECT_NE(ValidateGraph(g).message().find("does not come before it"), std::string::npos);
  g = SmallGraph();
  g.nodes[3].inputs[0] = {3, 0, 0};  // reads its own output
  EXPECT_NE(ValidateGraph(g).message().find("does not come before it"), std::string::npos);
  g = SmallGraph();
  g.nodes[3].inputs[0] = {2, 1, 0};  // add has one output
  EXPECT_NE(ValidateGraph(g).message().find("which has 1"), std::string::npos);
  g = SmallGraph();
  g.nodes[4].name = "add";
  EXPECT_NE(ValidateGraph(g).message().find("two nodes are named 'add'"), std::string::npos);
  g = SmallGraph();
  g.node_row_ptr[3] = 4;
  EXPECT_NE(ValidateGraph(g).message().find("node_row_ptr[3]"), std::string::npos);
  g = SmallGraph();
  g.arg_nodes = {0};
  EXPECT_NE(ValidateGraph(g).message().find("arg_nodes"), std::string::npos);
  g = SmallGraph();
  g.nodes[2].num_inputs = 3;
  EXPECT_NE(ValidateGraph(g).message().find("num_inputs 3"), std::string::npos);
  g = SmallGraph();
  g.nodes[2].op = "relay_op";
  EXPECT_NE(ValidateGraph(g).message().find("op 'relay_op'"), std::string::npos);
  g = SmallGraph();
  g.shape.pop_back();
  EXPECT_NE(ValidateGraph(g).message().find("one element per entry"), std::string::npos);
  g = SmallGraph();
  g.heads = {{9, 0, 0}};
  EXPECT_NE(ValidateGraph(g).message().find("heads[0]"), std::string::npos);
  g = SmallGraph();
  g.shape[2] = {1, -4};
  EXPECT_NE(ValidateGraph(g).message().find("negative"), std::string::npos);
}

TEST(Graph, RefusesBadInputAndOutputNames) {
  Graph g = SmallGraph();
  g.inputs = {"nope"};
  EXPECT_NE(ValidateGraph(g).message().find("'nope', which is no node"), std::string::npos);
  g.inputs = {"relu"};
  EXPECT_NE(ValidateGraph(g).message().find("which is an operator"), std::string::npos);
  g = SmallGraph();
  g.outputs = {"y", "z"};
  EXPECT_NE(ValidateGraph(g).message().find("2 names for 1 heads"), std::string::npos);
}

TEST(Graph, LifetimesFollowReadersAndHeads) {
  Graph g = SmallGraph();
  auto life = EntryLifetimes(g);
  EXPECT_EQ(life[0].first, 0u);
  EXPECT_EQ(life[0].last, 5u);
  EXPECT_EQ(life[2].first, 2u);
  EXPECT_EQ(life[2].last, 3u);
  EXPECT_EQ(life[4].first, 4u);
  EXPECT_EQ(life[4].last, 5u);
  EXPECT_EQ(EntryName(g, 3), "relu");
}

pkg::ParamTensor Param(const std::string& name, std::vector<int64_t> shape) {
  pkg::ParamTensor p;
  p.name = name;
  p.shape = std::move(shape);
  return p;
}

TEST(Graph, ParamsMatchByNameDtypeAndShape) {
  Graph g = SmallGraph();
  EXPECT_TRUE(CheckParams(g, {Param("w", {4})}).ok());
}

TEST(Graph, ListsEveryMissingAndExtraParamByName) {
  Graph g = SmallGraph();
  g.nodes.insert(g.nodes.begin() + 2, Null("b"));
  // Renumber: the op nodes moved one down.
  g.nodes[3].inputs = {{0, 0, 0}, {1, 0, 0}};
  g.nodes[4].inputs = {{3, 0, 0}};
  g.nodes[5].inputs = {{4, 0, 0}};
  FillIndex(&g);
  g.heads = {{5, 0, 0}};
  g.storage_id = {0, 1, 4, 2, 3, 2};
  g.shape.insert(g.shape.begin() + 2, std::vector<int64_t>{4});
  g.dltype.push_back(kF32);
  g.storage_bytes.push_back(16);
  ASSERT_TRUE(ValidateGraph(g).ok()) << Message(ValidateGraph(g));
  Status s = CheckParams(g, {Param("extra1", {4}), Param("extra2", {2})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("lacks 2 params the graph needs: w, b"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("2 params the graph does not use: extra1, extra2"), std::string::npos)
      << s.message();
}

TEST(Graph, RefusesParamOfAnotherShapeOrDtype) {
  Graph g = SmallGraph();
  Status s = CheckParams(g, {Param("w", {2, 2})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("param 'w' is 2x2xfloat32 in params.bin, the graph wants 4xfloat32"),
            std::string::npos)
      << s.message();
  pkg::ParamTensor p = Param("w", {4});
  p.dtype = DLDataType{kDLInt, 32, 1};
  EXPECT_FALSE(CheckParams(g, {p}).ok());
}

TEST(Graph, ChecksEveryFunctionAndItsArity) {
  Graph g = SmallGraph();
  std::vector<msg::FunctionInfo> fns = {{"ct_add", "ttt"}, {"ct_relu", "tt"}, {"ct_neg", "tt"}};
  EXPECT_TRUE(CheckFunctions(g, fns).ok());
  Status missing = CheckFunctions(g, {{"ct_add", "ttt"}, {"ct_relu", "tt"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("node 4 'neg' calls 'ct_neg', which the library does not have"),
            std::string::npos)
      << missing.message();
  Status arity = CheckFunctions(g, {{"ct_add", "tt"}, {"ct_relu", "tt"}, {"ct_neg", "tt"}});
  ASSERT_FALSE(arity.ok());
  EXPECT_NE(arity.message().find("'add' calls 'ct_add' with 3 tensors"), std::string::npos)
      << arity.message();
  g.nodes[3].scratch_bytes = 256;  // the scratch tensor is one more argument
  EXPECT_FALSE(CheckFunctions(g, fns).ok());
  fns[1].signature = "ttt";
  EXPECT_TRUE(CheckFunctions(g, fns).ok());
  fns[1].signature = "tti";
  EXPECT_FALSE(CheckFunctions(g, fns).ok());
}

TEST(Graph, NamesTvmDtypes) {
  EXPECT_EQ(TvmDTypeName(kF32), "float32");
  EXPECT_EQ(TvmDTypeName(DLDataType{kDLInt, 64, 1}), "int64");
  EXPECT_EQ(TvmDTypeName(DLDataType{kDLUInt, 8, 1}), "uint8");
  EXPECT_EQ(TvmDTypeName(DLDataType{kDLFloat, 32, 4}), "float32x4");
}

}  // namespace
}  // namespace crosstune::graph
