#include "ui/server.h"

#include <httplib.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "store/reader.h"
#include "store/store.h"

namespace steps::ui {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <typename T>
nlohmann::json Opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json AttemptJson(const store::StoredAttempt& a,
                           const std::string& step_identity) {
  return {
      {"number", a.number},
      {"of", a.of},
      {"status", a.status},
      {"started_ms", a.started_ms},
      {"duration_ms", Opt(a.duration_ms)},
      {"deadline_ms", Opt(a.deadline_ms)},
      {"hash", (a.identity.empty() ? step_identity : a.identity).substr(0, 8)},
      {"exit_code", Opt(a.exit_code)},
      {"timed_out", a.timed_out},
      {"clipped_to_ms", Opt(a.clipped_to_ms)},
      {"exhausted_by", a.exhausted_by},
      {"error", a.error},
      {"fixed", a.fixed},
      {"taken_by", a.taken_by}};
}

nlohmann::json StepJson(const store::StoredStep& s) {
  nlohmann::json attempts = nlohmann::json::array();
  for (const auto& a : s.attempts)
    attempts.push_back(AttemptJson(a, s.identity));
  nlohmann::json turns = nlohmann::json::array();
  for (const auto& t : s.turns) {
    turns.push_back({{"turn", t.turn},
                     {"provider_requests", t.provider_requests},
                     {"source", t.source},
                     {"tokens", t.prompt_tokens + t.completion_tokens},
                     {"usd", t.usd},
                     {"tool_calls", t.tool_calls},
                     {"text", t.text}});
  }
  nlohmann::json j = {{"id", s.id},
                      {"name", s.name},
                      {"kind", s.kind},
                      {"hook", s.hook},
                      {"fixer", s.fixer},
                      {"line", s.line},
                      {"status", s.cached ? "cached" : s.status},
                      {"error", s.error},
                      {"output", s.output},
                      {"started_ms", s.started_ms},
                      {"duration_ms", Opt(s.duration_ms)},
                      {"deadline_ms", Opt(s.deadline_ms)},
                      {"hash", s.identity.substr(0, 8)},
                      {"attempts", attempts},
                      {"turns", turns}};
  if (s.agent) {
    j["agent"] = {
        {"turns", s.agent->turns},
        {"provider_requests", s.agent->provider_requests},
        {"tokens", s.agent->prompt_tokens + s.agent->completion_tokens},
        {"usd", s.agent->usd},
        {"nudge_sent", s.agent->nudge_sent},
        {"fallbacks_taken", s.agent->fallbacks_taken}};
  }
  return j;
}

nlohmann::json RunHeaderJson(const store::StoredRun& r) {
  return {{"id", r.id},
          {"file", r.file},
          {"status", r.status},
          {"started_ms", r.started_ms},
          {"duration_ms", Opt(r.duration_ms)},
          {"taken_by", r.taken_by}};
}

}  // namespace

class UiServer::Impl {
 public:
  explicit Impl(std::string state_dir) : state_dir_(std::move(state_dir)) {}

  // The store, opened on first use (a run may create it after the UI
  // started). Null while there is none.
  store::Store* Open() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_) {
      auto s = store::Store::OpenExisting(store::StorePath(state_dir_));
      if (s.ok()) store_ = std::move(*s);
    }
    return store_.get();
  }

  std::string state_dir_;
  std::mutex mu_;
  std::unique_ptr<store::Store> store_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

UiServer::UiServer(std::string state_dir)
    : impl_(std::make_unique<Impl>(std::move(state_dir))) {
  httplib::Server& s = impl_->server_;
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(PageHtml(), "text/html; charset=utf-8");
  });
  s.Get("/api/runs", [this](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(RunsJson().dump(), "application/json");
  });
  s.Get(R"(/api/runs/([A-Za-z0-9_.-]+))", [this](const httplib::Request& req,
                                                 httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    Result<nlohmann::json> j = RunJson(req.matches[1]);
    if (!j.ok()) {
      res.status = j.status().code() == StatusCode::kNotFound ? 404 : 500;
      res.set_content(nlohmann::json{{"error", j.status().message()}}.dump(),
                      "application/json");
      return;
    }
    res.set_content(j->dump(), "application/json");
  });
}

UiServer::~UiServer() { Stop(); }

nlohmann::json UiServer::RunsJson() {
  nlohmann::json runs = nlohmann::json::array();
  if (store::Store* st = impl_->Open()) {
    auto list = store::ListRuns(*st, 100);
    if (list.ok()) {
      for (const auto& r : *list) runs.push_back(RunHeaderJson(r));
    }
  }
  return {{"now_ms", NowMs()}, {"runs", runs}};
}

Result<nlohmann::json> UiServer::RunJson(const std::string& id) {
  store::Store* st = impl_->Open();
  if (!st) return NotFound("no runs recorded yet");
  auto run = store::LoadRun(*st, id == "latest" ? "" : id);
  if (!run.ok()) return run.status();
  nlohmann::json j = RunHeaderJson(*run);
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& job : run->jobs) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : job.steps) steps.push_back(StepJson(s));
    jobs.push_back({{"name", job.name},
                    {"status", job.status},
                    {"error", job.error},
                    {"execution", job.execution},
                    {"started_ms", job.started_ms},
                    {"duration_ms", Opt(job.duration_ms)},
                    {"deadline_ms", Opt(job.deadline_ms)},
                    {"steps", steps}});
  }
  j["jobs"] = jobs;
  return nlohmann::json{{"now_ms", NowMs()}, {"run", j}};
}

Status UiServer::Start(const std::string& host, int port) {
  httplib::Server& s = impl_->server_;
  int bound = port == 0 ? s.bind_to_any_port(host)
                        : (s.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return IoError("cannot listen on " + host + ":" + std::to_string(port) +
                   " (is the port taken?)");
  }
  impl_->port_ = bound;
  impl_->thread_ = std::thread([&s] { s.listen_after_bind(); });
  return Status::Ok();
}

int UiServer::port() const { return impl_->port_; }

void UiServer::Stop() {
  impl_->server_.stop();
  if (impl_->thread_.joinable()) impl_->thread_.join();
}

}  // namespace steps::ui
