#include "core/yaml_limits.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace steps {
namespace {

// Thrown by the handler to stop the parser at the first problem: parsing
// the rest of a bomb would only cost time.
struct StopParsing {};

// Counts nodes and nesting as the parser reports them. An anchored node's
// expanded size is known once it closes, so an alias costs that size
// without being walked; an alias naming a node still open is a cycle.
class LimitChecker : public YAML::EventHandler {
 public:
  explicit LimitChecker(const YamlLimits& limits) : limits_(limits) {}

  const std::optional<YamlLimitProblem>& problem() const { return problem_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override {
    pending_name_ = name;
  }
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Leaf(mark, anchor);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&,
                YAML::anchor_t anchor, const std::string&) override {
    Leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override;
  void OnSequenceStart(const YAML::Mark& mark, const std::string&,
                       YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&,
                  YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  // What an anchored node expands to.
  struct Anchored {
    std::string name;
    int line = 0;
    bool complete = false;
    int64_t nodes = 1;
    int levels = 0;  // Lists and mappings nested in it, itself included.
  };
  // A list or mapping not closed yet.
  struct Frame {
    YAML::anchor_t anchor = 0;
    int64_t nodes = 1;
    int child_levels = 0;
  };

  static int LineOf(const YAML::Mark& mark) {
    return mark.line < 0 ? 0 : mark.line + 1;
  }
  [[noreturn]] void Fail(int line, std::string message) {
    problem_ = YamlLimitProblem{line, std::move(message)};
    throw StopParsing{};
  }
  void Count(const YAML::Mark& mark, int64_t nodes, const std::string& alias);
  // Records the node an anchor names; `complete` is false for a list or
  // mapping, until it closes.
  void Remember(const YAML::Mark& mark, YAML::anchor_t anchor, bool complete);
  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor);
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor);
  void Close();
  // Adds a finished child of `nodes` nodes and `levels` levels to the
  // innermost open collection.
  void AddToParent(int64_t nodes, int levels);

  const YamlLimits& limits_;
  std::optional<YamlLimitProblem> problem_;
  std::string pending_name_;
  std::unordered_map<YAML::anchor_t, Anchored> anchors_;
  std::vector<Frame> open_;
  int64_t total_nodes_ = 0;
};

void LimitChecker::Count(const YAML::Mark& mark, int64_t nodes,
                         const std::string& alias) {
  total_nodes_ += nodes;
  if (total_nodes_ <= limits_.max_nodes) return;
  std::string limit = std::to_string(limits_.max_nodes);
  if (alias.empty()) {
    Fail(LineOf(mark), "the document has more than " + limit +
                           " YAML nodes; split it into smaller files");
  }
  Fail(LineOf(mark),
       "alias *" + alias + " takes the document past " + limit +
           " YAML nodes once aliases are expanded (an alias bomb?); an "
           "alias repeats a node, it must not multiply the file — write "
           "the repeated parts out, or use 'across:' for a fan-out");
}

void LimitChecker::Remember(const YAML::Mark& mark, YAML::anchor_t anchor,
                            bool complete) {
  if (anchor == 0) return;
  Anchored& a = anchors_[anchor];
  a = Anchored();
  a.name = std::move(pending_name_);
  a.line = LineOf(mark);
  a.complete = complete;
  pending_name_.clear();
}

void LimitChecker::Leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
  Count(mark, 1, "");
  Remember(mark, anchor, true);
  AddToParent(1, 0);
}

void LimitChecker::OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) {
  auto it = anchors_.find(anchor);
  if (it == anchors_.end()) return;  // The parser refuses unknown anchors.
  const Anchored& a = it->second;
  if (!a.complete) {
    Fail(LineOf(mark),
         "alias *" + a.name + " is inside the node it names (&" + a.name +
             " at line " + std::to_string(a.line) +
             "): a recursive alias describes an endless document and is "
             "refused");
  }
  Count(mark, a.nodes, a.name);
  int depth = static_cast<int>(open_.size()) + a.levels;
  if (depth > limits_.max_depth) {
    Fail(LineOf(mark), "alias *" + a.name + " nests the document " +
                           std::to_string(depth) +
                           " levels deep; the limit "
                           "is " +
                           std::to_string(limits_.max_depth) +
                           " levels of lists and mappings");
  }
  AddToParent(a.nodes, a.levels);
}

void LimitChecker::Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
  Count(mark, 1, "");
  if (static_cast<int>(open_.size()) + 1 > limits_.max_depth) {
    Fail(LineOf(mark), "lists and mappings are nested more than " +
                           std::to_string(limits_.max_depth) +
                           " levels deep here; the limit is " +
                           std::to_string(limits_.max_depth));
  }
  Remember(mark, anchor, false);
  open_.push_back(Frame{anchor});
}

void LimitChecker::Close() {
  if (open_.empty()) return;
  Frame f = open_.back();
  open_.pop_back();
  int levels = f.child_levels + 1;
  if (f.anchor != 0) {
    Anchored& a = anchors_[f.anchor];
    a.complete = true;
    a.nodes = f.nodes;
    a.levels = levels;
  }
  AddToParent(f.nodes, levels);
}

void LimitChecker::AddToParent(int64_t nodes, int levels) {
  if (open_.empty()) return;
  Frame& parent = open_.back();
  parent.nodes += nodes;
  parent.child_levels = std::max(parent.child_levels, levels);
}

}  // namespace

std::optional<YamlLimitProblem> CheckYamlLimits(const std::string& text,
                                                const YamlLimits& limits) {
  std::istringstream in(text);
  LimitChecker checker(limits);
  try {
    YAML::Parser parser(in);
    parser.HandleNextDocument(checker);
  } catch (const StopParsing&) {
    return checker.problem();
  } catch (const YAML::Exception&) {
    // Not valid YAML: the load that follows reports it with its line.
  }
  return std::nullopt;
}

}  // namespace steps
