#include "telemetry/otlp_exporter.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/libcurl.h"
#include "core/log.h"
#include "core/redact.h"

namespace steps::telemetry {
namespace {

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = HexValue(s[i + 1]);
      int lo = HexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi << 4 | lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// "k1=v1,k2=v2" (the W3C baggage shape OTEL_*_HEADERS and
// OTEL_RESOURCE_ATTRIBUTES use), values percent-decoded. An entry without
// '=' or with an empty key is named in `bad`.
std::vector<std::pair<std::string, std::string>> KeyValueList(
    std::string_view text, std::vector<std::string>& bad) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? comma : comma - start);
    if (!Trim(item).empty()) {
      size_t eq = item.find('=');
      std::string key =
          eq == std::string_view::npos ? "" : Trim(item.substr(0, eq));
      if (key.empty()) {
        bad.push_back(Trim(item));
      } else {
        out.emplace_back(PercentDecode(key),
                         PercentDecode(Trim(item.substr(eq + 1))));
      }
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// The traces-specific variable, else the general one.
const char* Either(const std::function<const char*(const char*)>& getenv,
                   const char* specific, const char* general,
                   const char** which) {
  const char* v = getenv(specific);
  if (v != nullptr && *v != '\0') {
    *which = specific;
    return v;
  }
  v = getenv(general);
  *which = general;
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::optional<int64_t> Milliseconds(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) return std::nullopt;
  return v;
}

void ReadCount(const std::function<const char*(const char*)>& getenv,
               const char* name, int64_t min, int64_t max, auto set,
               std::vector<std::string>& problems) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return;
  std::optional<int64_t> v = Milliseconds(text);
  if (!v || *v < min || *v > max) {
    problems.push_back(std::string(name) + "=" + text +
                       " is not a whole number from " + std::to_string(min) +
                       " to " + std::to_string(max) + "; the default holds");
    return;
  }
  set(*v);
}

bool IsTrue(const char* text) {
  if (text == nullptr) return false;
  std::string s = Trim(text);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s == "true";
}

size_t KeepBody(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  size_t bytes = size * n;
  if (body->size() < 300) body->append(data, std::min<size_t>(bytes, 300));
  return bytes;
}

}  // namespace

OtlpSetup OtlpConfigFromEnvironment(
    const std::function<const char*(const char*)>& getenv,
    const std::string& version) {
  OtlpSetup setup;
  std::vector<std::string>& problems = setup.problems;
  if (IsTrue(getenv("OTEL_SDK_DISABLED"))) return setup;
  if (const char* e = getenv("OTEL_TRACES_EXPORTER")) {
    std::string names = e;
    if (Trim(names) == "none") return setup;
    if (names.find("otlp") == std::string::npos && !Trim(names).empty()) {
      problems.push_back("OTEL_TRACES_EXPORTER=" + names +
                         ": steps exports traces only over otlp; none are "
                         "exported");
      return setup;
    }
  }
  OtlpConfig c;
  const char* which = nullptr;
  if (const char* url = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
      url != nullptr && *url != '\0') {
    c.endpoint = Trim(url);  // Used as it is.
  } else if (const char* base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
             base != nullptr && *base != '\0') {
    c.endpoint = Trim(base);
    if (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
    c.endpoint += "/v1/traces";
  } else {
    return setup;
  }
  if (c.endpoint.rfind("http://", 0) != 0 &&
      c.endpoint.rfind("https://", 0) != 0) {
    problems.push_back("the OTLP endpoint " + c.endpoint +
                       " is not an http:// or https:// URL; no traces are "
                       "exported");
    return setup;
  }
  if (const char* p = Either(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                             "OTEL_EXPORTER_OTLP_PROTOCOL", &which)) {
    std::string proto = Trim(p);
    if (proto == "http/json") {
      c.json = true;
    } else if (proto != "http/protobuf") {
      problems.push_back(std::string(which) + "=" + proto +
                         ": steps speaks http/protobuf and http/json; no "
                         "traces are exported");
      return setup;
    }
  }
  if (const char* h = Either(getenv, "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                             "OTEL_EXPORTER_OTLP_HEADERS", &which)) {
    std::vector<std::string> bad;
    std::vector<std::string> secrets;
    for (auto& [k, v] : KeyValueList(h, bad)) {
      if (k.find_first_of(":\r\n") != std::string::npos ||
          v.find_first_of("\r\n") != std::string::npos) {
        bad.push_back(k);
        continue;
      }
      c.headers.push_back(k + ": " + v);
      secrets.push_back(v);  // Often an API key: never logged.
    }
    AddProcessSecrets(secrets);
    if (!bad.empty()) {
      problems.push_back(std::string(which) + " has " +
                         std::to_string(bad.size()) +
                         " entry not of the form name=value; it is left out");
    }
  }
  if (const char* t = Either(getenv, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                             "OTEL_EXPORTER_OTLP_TIMEOUT", &which)) {
    std::optional<int64_t> ms = Milliseconds(t);
    if (!ms || *ms == 0 || *ms > 3600000) {
      problems.push_back(std::string(which) + "=" + t +
                         " is not a number of milliseconds from 1 to "
                         "3600000; 10000 holds");
    } else {
      c.timeout = Millis(*ms);
    }
  }
  ReadCount(
      getenv, "OTEL_BSP_SCHEDULE_DELAY", 1, 3600000,
      [&](int64_t v) { c.schedule_delay = Millis(v); }, problems);
  ReadCount(
      getenv, "OTEL_BSP_MAX_QUEUE_SIZE", 1, 1000000,
      [&](int64_t v) { c.max_queue = static_cast<size_t>(v); }, problems);
  ReadCount(
      getenv, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, 1000000,
      [&](int64_t v) { c.max_batch = static_cast<size_t>(v); }, problems);
  c.max_batch = std::min(c.max_batch, c.max_queue);

  std::string service = "steps";
  if (const char* ra = getenv("OTEL_RESOURCE_ATTRIBUTES")) {
    std::vector<std::string> bad;
    for (auto& [k, v] : KeyValueList(ra, bad)) {
      if (k == "service.name")
        service = v;
      else
        c.resource.attributes.push_back({k, v});
    }
    if (!bad.empty()) {
      problems.push_back("OTEL_RESOURCE_ATTRIBUTES has " +
                         std::to_string(bad.size()) +
                         " entry not of the form key=value; it is left out");
    }
  }
  if (const char* s = getenv("OTEL_SERVICE_NAME"); s != nullptr && *s != '\0')
    service = s;
  c.resource.attributes.insert(c.resource.attributes.begin(),
                               {"service.name", service});
  c.resource.attributes.push_back({"telemetry.sdk.name", "steps"});
  c.resource.attributes.push_back({"telemetry.sdk.language", "cpp"});
  c.resource.attributes.push_back({"telemetry.sdk.version", version});
  c.resource.scope_version = version;
  c.capture_content =
      IsTrue(getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"));
  setup.config = std::move(c);
  return setup;
}

PostResult CurlPost(const PostRequest& request, SteadyTime limit,
                    const std::atomic<bool>& abort) {
  PostResult result;
  const SteadyTime now = std::chrono::steady_clock::now();
  if (now >= limit) {
    result.error = "no time was left to send";
    return result;
  }
  CURL* easy = libcurl::easy_init();
  if (easy == nullptr) {
    result.error = "libcurl: " + libcurl::Error();
    return result;
  }
  CURLM* multi = libcurl::multi_init();
  if (multi == nullptr) {
    libcurl::easy_cleanup(easy);
    result.error = "libcurl: " + libcurl::Error();
    return result;
  }
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers)
    headers = libcurl::slist_append(headers, h.c_str());
  headers = libcurl::slist_append(headers, "Expect:");
  std::string body;
  const long limit_ms = static_cast<long>(std::max<int64_t>(
      1, std::chrono::duration_cast<Millis>(limit - now).count()));
  libcurl::easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  libcurl::easy_setopt(easy, CURLOPT_POST, 1L);
  libcurl::easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
  libcurl::easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
  libcurl::easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  libcurl::easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  libcurl::easy_setopt(easy, CURLOPT_TIMEOUT_MS, limit_ms);
  libcurl::easy_setopt(easy, CURLOPT_WRITEFUNCTION, &KeepBody);
  libcurl::easy_setopt(easy, CURLOPT_WRITEDATA, &body);
  libcurl::easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  libcurl::multi_add_handle(multi, easy);
  CURLcode code = CURLE_OK;
  bool finished = false;
  while (!finished) {
    int running = 0;
    libcurl::multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* m = libcurl::multi_info_read(multi, &queued)) {
      if (m->msg == CURLMSG_DONE) {
        code = m->data.result;
        finished = true;
      }
    }
    if (finished) break;
    if (abort.load()) {
      result.error = "abandoned at the end of the run";
      break;
    }
    int ready = 0;
    libcurl::multi_poll(multi, nullptr, 0, 20, &ready);
  }
  if (finished) {
    long status = 0;
    libcurl::easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    result.status = static_cast<int>(status);
    if (code != CURLE_OK) {
      result.error = libcurl::easy_strerror(code);
    } else if (status < 200 || status > 299) {
      result.error = "HTTP " + std::to_string(status);
      if (!body.empty()) result.error += ": " + body.substr(0, 200);
    }
  }
  libcurl::multi_remove_handle(multi, easy);
  libcurl::easy_cleanup(easy);
  libcurl::multi_cleanup(multi);
  libcurl::slist_free_all(headers);
  return result;
}

OtlpExporter::OtlpExporter(OtlpConfig config, PostTransport transport)
    : config_(std::move(config)), transport_(std::move(transport)) {
  worker_ = std::thread([this] { Work(); });
}

OtlpExporter::~OtlpExporter() { Shutdown(Millis(0)); }

void OtlpExporter::Export(trace::SpanData span) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_ || queue_.size() >= config_.max_queue) {
      ++stats_.dropped;
      return;
    }
    queue_.push_back(std::move(span));
    if (queue_.size() < config_.max_batch) return;
  }
  wake_.notify_one();
}

void OtlpExporter::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait_for(lock, config_.schedule_delay, [&] {
      return closing_ || queue_.size() >= config_.max_batch;
    });
    if (queue_.empty()) {
      if (closing_) break;
      continue;
    }
    if (closing_ &&
        (failing_ || std::chrono::steady_clock::now() >= *close_limit_)) {
      stats_.dropped += static_cast<int64_t>(queue_.size());
      queue_.clear();
      break;
    }
    const size_t n = std::min(queue_.size(), config_.max_batch);
    std::vector<trace::SpanData> batch(
        std::make_move_iterator(queue_.begin()),
        std::make_move_iterator(queue_.begin() + n));
    queue_.erase(queue_.begin(), queue_.begin() + n);
    const SteadyTime limit =
        closing_ ? *close_limit_
                 : std::chrono::steady_clock::now() + config_.timeout;
    lock.unlock();
    Send(std::move(batch), limit);
    lock.lock();
  }
  finished_ = true;
  done_.notify_all();
}

void OtlpExporter::Send(std::vector<trace::SpanData> batch, SteadyTime limit) {
  PostRequest request;
  request.url = config_.endpoint;
  request.headers = config_.headers;
  request.headers.push_back(config_.json
                                ? "Content-Type: application/json"
                                : "Content-Type: application/x-protobuf");
  request.body = config_.json ? EncodeJson(config_.resource, batch)
                              : EncodeProtobuf(config_.resource, batch);
  PostResult r = transport_(request, limit, abort_);
  bool warn = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failing_ = !r.error.empty();
    if (failing_) {
      stats_.dropped += static_cast<int64_t>(batch.size());
      ++stats_.batches_failed;
      warn = !warned_;
      warned_ = true;
    } else {
      stats_.exported += static_cast<int64_t>(batch.size());
    }
  }
  if (warn && abort_.load()) {
    LogEvent(LogLevel::kWarn, "telemetry.export_abandoned",
             {{"endpoint", config_.endpoint},
              {"spans", batch.size()},
              {"why",
               "the collector had not answered when the run's grace for it "
               "ended; its last spans are dropped"}});
  } else if (warn) {
    LogEvent(LogLevel::kWarn, "telemetry.export_failed",
             {{"endpoint", config_.endpoint},
              {"error", r.error},
              {"then",
               "spans are dropped while the collector fails; the run goes "
               "on (said once)"}});
  }
}

void OtlpExporter::Shutdown(Millis grace) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!worker_.joinable()) return;
    if (!closing_) {
      closing_ = true;
      close_limit_ =
          std::chrono::steady_clock::now() + std::min(grace, config_.timeout);
    }
    wake_.notify_all();
    // A collector answering within the grace gets the last spans; one that
    // does not is abandoned (CurlPost returns within 20 ms of abort_).
    done_.wait_until(lock, *close_limit_ + Millis(5),
                     [&] { return finished_; });
  }
  abort_ = true;
  wake_.notify_all();
  worker_.join();
}

OtlpExporter::Stats OtlpExporter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace steps::telemetry
