#include "store/plan_outline.h"

#include <algorithm>

namespace steps::store {

namespace {

using pipeline::HookKind;
using pipeline::Step;
using pipeline::StepKind;
using pipeline::StepPtr;

// Walks a job's steps as JobRunner names them (executor.cc: RunSequence,
// RunStep, RunParallel, RunAcross, RunHooks).
class Outliner {
 public:
  Outliner(const pipeline::ResolvedPlan& plan, PlannedJob& job)
      : plan_(plan), job_(job) {}

  void Sequence(const std::vector<StepPtr>& steps, const std::string& prefix) {
    for (size_t i = 0; i < steps.size(); ++i)
      One(*steps[i], prefix + std::to_string(i + 1), std::nullopt);
  }

  void Hooks(const pipeline::Hooks& hooks, const std::string& id) {
    for (HookKind k : pipeline::kAllHooks) {
      if (const StepPtr& h = hooks.Get(k))
        One(*h, id + "/" + pipeline::HookKindName(k), k);
    }
  }

 private:
  void One(const Step& step, const std::string& id,
           std::optional<HookKind> hook) {
    switch (step.kind) {
      case StepKind::kTask:
      case StepKind::kGet:
      case StepKind::kPut:
      case StepKind::kAgent:
      case StepKind::kGate:
        Add(step, id, hook);
        break;
      case StepKind::kDo:
      case StepKind::kTry:
        Sequence(step.steps, id + ".");
        break;
      case StepKind::kInParallel:
        for (size_t i = 0; i < step.steps.size(); ++i)
          One(*step.steps[i], id + "." + std::to_string(i + 1), std::nullopt);
        break;
      case StepKind::kAcross: {
        size_t cells = 1;
        for (const pipeline::AcrossVar& v : step.across)
          cells = std::min(cells * v.values.size(), kMaxPlannedSteps + 1);
        for (size_t c = 0; c < cells && !job_.truncated; ++c)
          Sequence(step.steps, id + ".c" + std::to_string(c + 1) + ".");
        break;
      }
    }
    Hooks(step.hooks, id);
  }

  void Add(const Step& step, const std::string& id,
           std::optional<HookKind> hook) {
    if (job_.steps.size() >= kMaxPlannedSteps) {
      job_.truncated = true;
      return;
    }
    PlannedStep p;
    p.id = job_.name + ":" + id;
    p.name = step.name;
    p.kind = pipeline::StepKindName(step.kind);
    p.hook = hook ? pipeline::HookKindName(*hook) : "";
    p.line = step.line;
    const auto& timeout = plan_.For(step).dials.timeout.value;
    if (timeout) p.timeout_ms = timeout->count();
    job_.steps.push_back(std::move(p));
  }

  const pipeline::ResolvedPlan& plan_;
  PlannedJob& job_;
};

}  // namespace

std::vector<PlannedJob> OutlinePlan(const pipeline::ResolvedPlan& plan,
                                    const std::vector<std::string>& jobs) {
  std::vector<PlannedJob> out;
  for (const pipeline::Job& job : plan.pipeline().jobs) {
    if (!jobs.empty() &&
        std::find(jobs.begin(), jobs.end(), job.name) == jobs.end())
      continue;
    PlannedJob planned;
    planned.name = job.name;
    Outliner walk(plan, planned);
    walk.Sequence(job.plan, "");
    walk.Hooks(job.hooks, "job");
    out.push_back(std::move(planned));
  }
  return out;
}

nlohmann::json OutlineJson(const std::vector<PlannedJob>& outline) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const PlannedJob& job : outline) {
    nlohmann::json steps = nlohmann::json::array();
    for (const PlannedStep& s : job.steps) {
      steps.push_back(
          {{"id", s.id},
           {"name", s.name},
           {"kind", s.kind},
           {"hook", s.hook},
           {"line", s.line},
           {"timeout_ms", s.timeout_ms ? nlohmann::json(*s.timeout_ms)
                                       : nlohmann::json(nullptr)}});
    }
    jobs.push_back(
        {{"name", job.name}, {"truncated", job.truncated}, {"steps", steps}});
  }
  return jobs;
}

std::vector<PlannedJob> OutlineFromJson(const nlohmann::json& j) {
  std::vector<PlannedJob> out;
  if (!j.is_array()) return out;
  auto text = [](const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : "";
  };
  for (const nlohmann::json& jj : j) {
    if (!jj.is_object()) continue;
    PlannedJob job;
    job.name = text(jj, "name");
    auto truncated = jj.find("truncated");
    job.truncated = truncated != jj.end() && truncated->is_boolean() &&
                    truncated->get<bool>();
    auto steps = jj.find("steps");
    if (steps != jj.end() && steps->is_array()) {
      for (const nlohmann::json& sj : *steps) {
        if (!sj.is_object()) continue;
        PlannedStep s;
        s.id = text(sj, "id");
        s.name = text(sj, "name");
        s.kind = text(sj, "kind");
        s.hook = text(sj, "hook");
        auto line = sj.find("line");
        if (line != sj.end() && line->is_number_integer())
          s.line = line->get<int>();
        auto t = sj.find("timeout_ms");
        if (t != sj.end() && t->is_number_integer())
          s.timeout_ms = t->get<int64_t>();
        job.steps.push_back(std::move(s));
      }
    }
    out.push_back(std::move(job));
  }
  return out;
}

}  // namespace steps::store
