#include "telemetry/otlp_exporter.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/libcurl.h"
#include "core/log.h"
#include "core/redact.h"
#include "core/trim.h"

namespace steps::telemetry {
namespace {

// Without HTTP's optional whitespace (spaces, tabs) at either end.
std::string Trim(std::string_view s) { return std::string(TrimBlanks(s)); }

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

void MaskValue(const Redactor& r, trace::AttributeValue& v) {
  if (auto* text = std::get_if<std::string>(&v)) {
    *text = r.Redact(*text);
  } else if (auto* list = std::get_if<std::vector<std::string>>(&v)) {
    for (std::string& t : *list) t = r.Redact(t);
  }
}

// Secrets masked as `***` in every text a span carries, as in every other
// output (docs/secrets.md): on the exporter's thread, off the run's path.
void Mask(std::vector<trace::SpanData>& batch) {
  std::shared_ptr<const Redactor> r = ProcessRedactor();
  if (r->empty()) return;
  for (trace::SpanData& s : batch) {
    s.name = r->Redact(s.name);
    s.status_message = r->Redact(s.status_message);
    for (trace::Attribute& a : s.attributes) MaskValue(*r, a.value);
    for (trace::SpanEvent& e : s.events) {
      e.name = r->Redact(e.name);
      for (trace::Attribute& a : e.attributes) MaskValue(*r, a.value);
    }
  }
}

// "" when `url` is an http(s) URL with a host and a port that can be one;
// else what is wrong, after the URL in a sentence. The scheme may be in
// any case (it is written in lower case).
std::string CheckEndpoint(std::string& url) {
  size_t colon = url.find("://");
  if (colon == std::string::npos) return "is not an http:// or https:// URL";
  std::string scheme = url.substr(0, colon);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (scheme != "http" && scheme != "https")
    return "is not an http:// or https:// URL";
  url = scheme + url.substr(colon);
  const size_t from = colon + 3;
  size_t end = url.find_first_of("/?#", from);
  std::string authority =
      url.substr(from, end == std::string::npos ? end : end - from);
  if (size_t at = authority.rfind('@'); at != std::string::npos)
    authority = authority.substr(at + 1);
  std::string port;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string::npos) return "has an IPv6 address without ']'";
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return "has no port after its address";
      port = authority.substr(close + 2);
    }
    authority = authority.substr(0, close + 1);
  } else if (size_t c = authority.rfind(':'); c != std::string::npos) {
    port = authority.substr(c + 1);
    authority = authority.substr(0, c);
  }
  if (authority.empty() || authority == "[]") return "has no host";
  if (!port.empty()) {
    if (port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return "has a port that is not one (1 to 65535)";
  }
  return "";
}

// "" when `name: value` may be sent; else why not. The framing of the
// request is the exporter's own.
std::string CheckHeader(const std::string& name, const std::string& value) {
  static const char* const kOwn[] = {"content-length",
                                     "transfer-encoding",
                                     "host",
                                     "content-type",
                                     "connection",
                                     "expect",
                                     "te",
                                     "upgrade"};
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const char* own : kOwn) {
    if (lower == own) return "the header " + name + " is the exporter's own";
  }
  for (unsigned char c : name) {
    if (c <= 0x20 || c >= 0x7f || std::strchr("\"(),/:;<=>?@[\\]{}", c))
      return "a header name holds a character a header name cannot (" +
             std::to_string(name.size()) + " bytes)";
  }
  for (unsigned char c : value) {
    if ((c < 0x20 && c != '\t') || c == 0x7f)
      return "the value of the header " + name + " holds a control character";
  }
  return "";
}

}  // namespace

std::vector<std::string> OtlpSecretsFromEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  std::vector<std::string> out;
  for (const char* name :
       {"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}) {
    const char* v = getenv(name);
    if (v == nullptr) continue;
    std::string_view text = v;
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      std::string_view item = text.substr(
          start, comma == std::string_view::npos ? comma : comma - start);
      if (size_t eq = item.find('='); eq != std::string_view::npos) {
        std::string raw = Trim(item.substr(eq + 1));
        out.push_back(raw);
        out.push_back(PercentDecode(raw));
      }
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  for (const char* name :
       {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}) {
    const char* v = getenv(name);
    if (v == nullptr) continue;
    std::string_view url = v;
    size_t scheme = url.find("://");
    size_t from = scheme == std::string_view::npos ? 0 : scheme + 3;
    size_t end = url.find_first_of("/?#", from);
    std::string_view authority =
        url.substr(from, end == std::string_view::npos ? end : end - from);
    size_t at = authority.rfind('@');
    if (at == std::string_view::npos) continue;
    std::string_view userinfo = authority.substr(0, at);
    size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) continue;
    std::string password(userinfo.substr(colon + 1));
    out.push_back(password);
    out.push_back(PercentDecode(password));
  }
  return out;
}

OtlpSetup OtlpConfigFromEnvironment(
    const std::function<const char*(const char*)>& getenv,
    const std::string& version) {
  OtlpSetup setup;
  std::vector<std::string>& problems = setup.problems;
  if (const char* d = getenv("OTEL_SDK_DISABLED"); d != nullptr && *d) {
    if (IsTrue(d)) return setup;
    std::string v = Trim(d);
    std::transform(v.begin(), v.end(), v.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (v != "false") {
      problems.push_back("OTEL_SDK_DISABLED=" + std::string(d) +
                         " is neither true nor false; traces stay on");
    }
  }
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
  if (std::string why = CheckEndpoint(c.endpoint); !why.empty()) {
    problems.push_back("the OTLP endpoint " + c.endpoint + " " + why +
                       "; no traces are exported");
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
      if (std::string why = CheckHeader(k, v); !why.empty()) {
        problems.push_back(std::string(which) + ": " + why +
                           "; it is left out");
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
    libcurl::multi_poll(multi, nullptr, 0, 5, &ready);
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

// What the exporter and its worker share. The worker holds it too, so an
// exporter that leaves a worker stuck (a name lookup libcurl cannot cut)
// leaves it nothing freed to touch.
struct OtlpExporter::Shared {
  Shared(OtlpConfig c, PostTransport t)
      : config(std::move(c)), transport(std::move(t)) {}
  const OtlpConfig config;
  const PostTransport transport;
  std::mutex mu;
  std::condition_variable wake;
  std::condition_variable done;
  std::deque<trace::SpanData> queue;
  bool closing = false;
  bool finished = false;
  std::optional<SteadyTime> close_limit;
  bool failed = false;  // An export failed: at the end it is not waited for.
  bool warned = false;
  Stats stats;
  std::atomic<bool> abort{false};
};

namespace {

using Shared = OtlpExporter::Shared;

void Warn(Shared& s, const PostResult& r, size_t spans, bool abandoned) {
  if (abandoned) {
    LogEvent(LogLevel::kWarn, "telemetry.export_abandoned",
             {{"endpoint", s.config.endpoint},
              {"spans", spans},
              {"why",
               "the collector had not answered when the run's grace for it "
               "ended; the spans not sent are dropped"}});
  } else {
    LogEvent(LogLevel::kWarn, "telemetry.export_failed",
             {{"endpoint", s.config.endpoint},
              {"error", r.error},
              {"then",
               "spans are dropped while the collector fails; the run goes "
               "on (said once)"}});
  }
}

void Send(Shared& s, std::vector<trace::SpanData> batch, SteadyTime limit) {
  Mask(batch);
  PostRequest request;
  request.url = s.config.endpoint;
  request.headers = s.config.headers;
  request.headers.push_back(s.config.json
                                ? "Content-Type: application/json"
                                : "Content-Type: application/x-protobuf");
  request.body = s.config.json ? EncodeJson(s.config.resource, batch)
                               : EncodeProtobuf(s.config.resource, batch);
  PostResult r = s.transport(request, limit, s.abort);
  bool warn = false;
  size_t lost = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!r.error.empty()) {
      s.failed = true;
      s.stats.dropped += static_cast<int64_t>(batch.size());
      ++s.stats.batches_failed;
      warn = !s.warned;
      s.warned = true;
      lost = batch.size() + s.queue.size();
    } else {
      s.stats.exported += static_cast<int64_t>(batch.size());
    }
  }
  if (warn && s.config.say_failures) Warn(s, r, lost, s.abort.load());
}

void Work(const std::shared_ptr<Shared>& shared) {
  Shared& s = *shared;
  std::unique_lock<std::mutex> lock(s.mu);
  while (true) {
    s.wake.wait_for(lock, s.config.schedule_delay, [&] {
      return s.closing || s.queue.size() >= s.config.max_batch;
    });
    if (s.queue.empty()) {
      if (s.closing) break;
      continue;
    }
    if (s.closing && (s.failed || s.abort.load() ||
                      std::chrono::steady_clock::now() >= *s.close_limit)) {
      s.stats.dropped += static_cast<int64_t>(s.queue.size());
      s.queue.clear();
      break;
    }
    const size_t n = std::min(s.queue.size(), s.config.max_batch);
    std::vector<trace::SpanData> batch(
        std::make_move_iterator(s.queue.begin()),
        std::make_move_iterator(s.queue.begin() + n));
    s.queue.erase(s.queue.begin(), s.queue.begin() + n);
    const SteadyTime limit =
        s.closing ? *s.close_limit
                  : std::chrono::steady_clock::now() + s.config.timeout;
    lock.unlock();
    Send(s, std::move(batch), limit);
    lock.lock();
  }
  s.finished = true;
  s.done.notify_all();
}

}  // namespace

OtlpExporter::OtlpExporter(OtlpConfig config, PostTransport transport)
    : shared_(
          std::make_shared<Shared>(std::move(config), std::move(transport))) {
  // libcurl is loaded by the worker as it starts, beside the run rather
  // than in the grace at its end (loading it took a short run's whole
  // grace), and only for the libcurl transport.
  using Post = decltype(&CurlPost);
  const Post* f = shared_->transport.target<Post>();
  const bool curl = f != nullptr && *f == &CurlPost;
  worker_ = std::thread([shared = shared_, curl] {
    if (curl) (void)libcurl::Loaded();
    Work(shared);
  });
}

OtlpExporter::~OtlpExporter() { Shutdown(Millis(0)); }

const OtlpConfig& OtlpExporter::config() const { return shared_->config; }

void OtlpExporter::Export(trace::SpanData span) {
  Shared& s = *shared_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.closing || s.queue.size() >= s.config.max_queue) {
      ++s.stats.dropped;
      return;
    }
    s.queue.push_back(std::move(span));
    if (s.queue.size() < s.config.max_batch) return;
  }
  s.wake.notify_one();
}

void OtlpExporter::Shutdown(Millis grace, const CancelToken& cancel) {
  if (!worker_.joinable()) return;
  Shared& s = *shared_;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    if (!s.closing) {
      s.closing = true;
      // A collector that failed already is not waited for.
      s.close_limit =
          std::chrono::steady_clock::now() +
          (s.failed ? Millis(0) : std::min(grace, s.config.timeout));
    }
    s.wake.notify_all();
    // A collector answering within the grace gets the last spans; a signal
    // ends the wait at once. Waits in slices to see the signal.
    while (!s.finished && !cancel.cancelled() &&
           std::chrono::steady_clock::now() < *s.close_limit) {
      s.done.wait_until(
          lock, std::min(*s.close_limit,
                         std::chrono::steady_clock::now() + Millis(10)));
    }
  }
  s.abort = true;
  s.wake.notify_all();
  // CurlPost returns within 5 ms of abort; a name lookup may not (libcurl
  // waits for its resolver): a worker still busy after that is left to the
  // process's exit, holding what it shares.
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.done.wait_for(lock, Millis(40), [&] { return s.finished; })) {
    lock.unlock();
    worker_.join();
  } else {
    lock.unlock();
    worker_.detach();
  }
}

OtlpExporter::Stats OtlpExporter::stats() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->stats;
}

}  // namespace steps::telemetry
