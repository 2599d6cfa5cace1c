#include "mock_provider/in_process.h"

#include "providers/openai.h"

namespace steps {
namespace {

std::string PathOf(const std::string& url) {
  size_t scheme = url.find("://");
  size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  size_t slash = url.find('/', start);
  return slash == std::string::npos ? "/" : url.substr(slash);
}

}  // namespace

InProcessMockTransport::InProcessMockTransport(
    std::shared_ptr<MockEngine> engine, Clock& clock)
    : engine_(std::move(engine)), clock_(clock) {}

TransportResult InProcessMockTransport::Post(const HttpRequest& request,
                                             const TransferOptions& options) {
  const SteadyTime start = clock_.Now();
  const bool limited = options.time_limit.has_value();
  const SteadyTime limit_at = limited ? start + *options.time_limit : start;
  // Waits until `until`, the time limit or cancellation, whichever is
  // first; returns the error that ended the wait early, if any.
  auto wait =
      [&](std::optional<SteadyTime> until) -> std::optional<TransportError> {
    SteadyTime target;
    bool to_limit = false;
    if (until && (!limited || *until < limit_at)) {
      target = *until;
    } else if (limited) {
      target = limit_at;
      to_limit = true;
    } else {
      // Neither: in effect, wait for cancellation only.
      target = clock_.Now() + std::chrono::hours(24 * 365);
    }
    if (!clock_.SleepUntil(target, options.cancel)) {
      return TransportError{TransportErrorKind::kCancelled,
                            "request cancelled"};
    }
    if (to_limit) {
      return TransportError{
          TransportErrorKind::kTimedOut,
          "no complete answer within " + FormatDuration(*options.time_limit)};
    }
    return std::nullopt;
  };

  if (options.cancel.cancelled()) {
    return TransportError{TransportErrorKind::kCancelled, "request cancelled"};
  }
  MockReply reply =
      engine_->Handle(PathOf(request.url), request.headers, request.body);
  if (reply.delay.count() > 0) {
    if (auto e = wait(clock_.Now() + reply.delay)) return *e;
  }
  if (reply.kind == MockReply::Kind::kHang) {
    return *wait(std::nullopt);
  }
  if (reply.kind == MockReply::Kind::kDrop) {
    return TransportError{TransportErrorKind::kClosed,
                          "Empty reply from server"};
  }
  HttpResponse response;
  response.status = reply.status;
  response.headers = reply.headers;
  response.reused_connection = true;
  const bool ok_status = reply.status >= 200 && reply.status < 300;
  auto append = [&](const std::string& piece) {
    if (response.body.size() + piece.size() > options.max_response_bytes) {
      return false;
    }
    response.body += piece;
    return true;
  };
  if (!reply.stream) {
    if (!append(reply.body)) {
      return TransportError{TransportErrorKind::kTooLarge,
                            "response larger than " +
                                std::to_string(options.max_response_bytes) +
                                " bytes"};
    }
    if (ok_status && options.reader && !options.reader(response.body)) {
      response.stopped_by_reader = true;
    }
    return response;
  }
  for (const std::string& event : reply.events) {
    if (!append(event)) {
      return TransportError{TransportErrorKind::kTooLarge,
                            "response larger than " +
                                std::to_string(options.max_response_bytes) +
                                " bytes"};
    }
    if (ok_status && options.reader && !options.reader(event)) {
      response.stopped_by_reader = true;
      return response;
    }
  }
  if (reply.hang_after_events) {
    if (options.idle_limit.count() > 0) {
      if (auto e = wait(clock_.Now() + options.idle_limit)) return *e;
      return TransportError{
          TransportErrorKind::kIdle,
          "stream silent for " + FormatDuration(options.idle_limit)};
    }
    return *wait(std::nullopt);
  }
  return response;
}

namespace {

// A factory whose sources reach `transport` in the chat-completions
// dialect, named `name` (the provider they stand in for).
ProviderFactory MockDialectFactory(const std::string& name, bool can_stream,
                                   InProcessMockTransport& transport) {
  auto adapter = std::make_shared<OpenAiAdapter>(
      AdapterInfo{.name = name,
                  .default_base_url = "mock://in-process/v1",
                  .key_env = "",
                  .key_required = false,
                  .can_stream = true,
                  .mock_wire = MockWireFormat::kOpenAiChat,
                  // The mock takes every parameter (and can check each
                  // one with `expect: {body: ...}`).
                  .parameters = ModelParameters::AllKeys()},
      /*request_cost=*/false);
  return [adapter, can_stream, &transport](
             const SourceSpec& spec, const std::string&,
             const ProviderEnvironment&) -> Result<std::unique_ptr<Provider>> {
    AdapterConfig config;
    config.base_url = adapter->info().default_base_url;
    config.headers = spec.headers;
    config.stream = spec.stream && can_stream;
    AdapterLimits limits;
    limits.stream_idle_limit = spec.stream_idle_limit;
    return std::unique_ptr<Provider>(std::make_unique<AdapterProvider>(
        adapter, std::move(config), transport, limits));
  };
}

}  // namespace

void RegisterMockProvider(ProviderRegistry& registry,
                          InProcessMockTransport& transport) {
  for (const std::string& name : registry.Names()) {
    std::shared_ptr<const Adapter> adapter = registry.FindAdapter(name);
    if (!adapter || adapter->info().mock_wire != MockWireFormat::kNone) {
      continue;
    }
    registry.Register(
        name, MockDialectFactory(name, adapter->info().can_stream, transport));
  }
  registry.Register("mock", MockDialectFactory("mock", true, transport));
}

ProviderEnvironment MockProviderEnvironment(InProcessMockTransport& transport) {
  ProviderEnvironment env;
  env.transport = &transport;
  env.getenv = [](const std::string&) -> std::optional<std::string> {
    return std::string("mock-key");
  };
  return env;
}

}  // namespace steps
