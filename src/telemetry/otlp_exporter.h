// Sends ended spans to an OpenTelemetry collector over OTLP/HTTP, batched
// on a thread of its own: Export only queues (bounded: past the queue's
// size a span is dropped), so a slow or dead collector never slows a run.
// A failed export is said once (WRN telemetry.export_failed); its spans are
// dropped. At the end of a run Shutdown gives what is queued a bounded
// grace and then abandons it. docs/observability.md.
#ifndef STEPS_TELEMETRY_OTLP_EXPORTER_H_
#define STEPS_TELEMETRY_OTLP_EXPORTER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"
#include "core/trace.h"
#include "telemetry/otlp_encode.h"

namespace steps::telemetry {

struct OtlpConfig {
  std::string endpoint;              // The URL spans are POSTed to.
  bool json = false;                 // http/json; else http/protobuf.
  std::vector<std::string> headers;  // "Name: value".
  Millis timeout{10000};             // One export's limit.
  Millis schedule_delay{1000};       // How long spans wait to be batched.
  size_t max_queue = 2048;
  size_t max_batch = 512;
  ExportResource resource;
  // gen_ai message contents on spans (masked): off unless asked for.
  bool capture_content = false;
  // Whether the first failed export is said (telemetry.export_failed,
  // export_abandoned). Off for a process's later runs to a collector that
  // failed already (`steps test` of several files says it once).
  bool say_failures = true;
};

// The configuration the OTEL_* variables make (docs/observability.md):
// `config` unset when traces are not to be exported (no endpoint,
// OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none, or a protocol this
// exporter does not speak), `problems` says what was wrong with a variable
// that was set, one sentence each. `getenv` reads a variable (nullptr when
// unset).
struct OtlpSetup {
  std::optional<OtlpConfig> config;
  std::vector<std::string> problems;
};
OtlpSetup OtlpConfigFromEnvironment(
    const std::function<const char*(const char*)>& getenv,
    const std::string& version);

// What the OTEL_* variables hold that is a credential: the header values
// (as written and decoded) and a password in an endpoint's URL. `steps`
// masks them everywhere from its start (docs/secrets.md).
std::vector<std::string> OtlpSecretsFromEnvironment(
    const std::function<const char*(const char*)>& getenv);

// One POST. The transport returns within ~5 ms of `abort` becoming true
// and never after `limit`.
struct PostRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value".
  std::string body;
};
struct PostResult {
  int status = 0;     // HTTP status; 0 when there was no answer.
  std::string error;  // Why it failed; empty on a 2xx.
};
using PostTransport = std::function<PostResult(
    const PostRequest&, SteadyTime limit, const std::atomic<bool>& abort)>;

// libcurl's multi interface, polled every 5 ms for `abort`.
PostResult CurlPost(const PostRequest& request, SteadyTime limit,
                    const std::atomic<bool>& abort);

class OtlpExporter : public trace::SpanExporter {
 public:
  // Its waits are on the steady clock: a fake clock would not make the
  // collector answer sooner.
  explicit OtlpExporter(OtlpConfig config, PostTransport transport = CurlPost);
  ~OtlpExporter() override;
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  void Export(trace::SpanData span) override;

  // Sends what is queued and stops the worker, waiting at most `grace`
  // (not at all once an export has failed, nor once `cancel` is: a signal
  // ends the wait). A worker still stuck 40 ms after that is left behind
  // (detached) rather than waited for. Again is a no-op.
  void Shutdown(Millis grace, const CancelToken& cancel = CancelToken());

  struct Stats {
    int64_t exported = 0;  // Spans a collector took.
    int64_t dropped = 0;   // Spans lost: queue full, failed or abandoned.
    int64_t batches_failed = 0;
  };
  Stats stats() const;
  const OtlpConfig& config() const;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::thread worker_;
};

}  // namespace steps::telemetry

#endif  // STEPS_TELEMETRY_OTLP_EXPORTER_H_
