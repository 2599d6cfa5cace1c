#include "providers/adapter_provider.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "providers/exchange.h"
#include "providers/wire_json.h"

namespace steps {
namespace {

// The message of whatever an adapter threw.
std::string ThrownText(std::exception_ptr thrown) {
  try {
    std::rethrow_exception(std::move(thrown));
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

ProviderError AdapterThrew(const AdapterInfo& info, std::string_view where,
                           std::exception_ptr thrown, std::string_view secret) {
  ProviderError e = MakeProviderError(
      ProviderErrorKind::kMalformed,
      "malformed answer: the " + info.name + " adapter threw while " +
          std::string(where) + ": " + ThrownText(std::move(thrown)),
      secret);
  return e;
}

// Applies the limits every answer must meet, whichever adapter read it.
// (An error the adapter read from a 2xx body is left as the server wrote
// it; the run's secret masking, docs/secrets.md, covers a key echoed
// there.)
ChatResult Checked(ChatResult result) {
  if (result.ok()) {
    if (auto bad = CheckAnswerLimits(result.answer())) return *bad;
  }
  return result;
}

bool IsJsonBody(const HttpResponse& response) {
  auto type = FindHeader(response.headers, "content-type");
  return type && type->find("application/json") != std::string::npos;
}

// The adapter's request plus the headers every request carries, or the
// final kConfig error (nothing sent) when the adapter could not build it.
std::variant<HttpRequest, ProviderError> BuildHttpRequest(
    const Adapter& adapter, const ChatRequest& request,
    const AdapterConfig& config, const CallContext& context,
    EncodedHistory& history) {
  std::optional<Result<HttpRequest>> built;
  try {
    built.emplace(adapter.BuildRequestReusing(request, config, history));
  } catch (...) {
    ProviderError e = AdapterThrew(adapter.info(), "building the request",
                                   std::current_exception(), config.api_key);
    e.kind = ProviderErrorKind::kConfig;
    e.requests = 0;
    return e;
  }
  if (!built->ok()) {
    ProviderError e = MakeProviderError(
        ProviderErrorKind::kConfig, built->status().message(), config.api_key);
    e.requests = 0;
    return e;
  }
  HttpRequest http = std::move(**built);
  if (!context.agent.empty()) {
    http.headers.emplace_back("X-Steps-Agent", context.agent);
  }
  if (!context.step.empty()) {
    http.headers.emplace_back("X-Steps-Step", context.step);
  }
  for (const auto& h : config.headers) http.headers.push_back(h);
  return http;
}

}  // namespace

std::unique_ptr<StreamParser> Adapter::NewStreamParser(
    const AdapterConfig&) const {
  return nullptr;
}

std::vector<std::string> UnhonouredParameters(const AdapterInfo& info,
                                              const ModelParameters& p) {
  std::vector<std::string> keys;
  for (const std::string& key : p.SetKeys()) {
    if (std::find(info.parameters.begin(), info.parameters.end(), key) ==
        info.parameters.end()) {
      keys.push_back(key);
    }
  }
  return keys;
}

AdapterProvider::AdapterProvider(std::shared_ptr<const Adapter> adapter,
                                 AdapterConfig config, HttpTransport& transport,
                                 AdapterLimits limits)
    : adapter_(std::move(adapter)),
      config_(std::move(config)),
      transport_(transport),
      limits_(limits) {}

ChatResult AdapterProvider::Send(const ChatRequest& request,
                                 const CallContext& context) {
  const AdapterInfo& info = adapter_->info();
  const std::string& secret = config_.api_key;
  std::variant<HttpRequest, ProviderError> built =
      BuildHttpRequest(*adapter_, request, config_, context, history_);
  if (auto* error = std::get_if<ProviderError>(&built)) return *error;
  const HttpRequest& http = std::get<HttpRequest>(built);

  ExchangeOptions options;
  options.secret = secret;
  options.max_response_bytes = limits_.max_response_bytes;
  SseParser sse;
  std::unique_ptr<StreamParser> parser;
  std::optional<ProviderError> stream_threw;
  if (config_.stream) {
    try {
      parser = adapter_->NewStreamParser(config_);
    } catch (...) {
      return AdapterThrew(info, "starting a stream", std::current_exception(),
                          secret);
    }
  }
  if (parser) {
    options.idle_limit = limits_.stream_idle_limit;
    // Runs inside the transport's write callback: nothing may escape it.
    options.reader = [&](std::string_view piece) {
      try {
        for (const SseEvent& e : sse.Feed(piece)) {
          if (!parser->Add(e)) return false;
        }
        return true;
      } catch (...) {
        stream_threw = AdapterThrew(info, "reading a stream event",
                                    std::current_exception(), secret);
        return false;
      }
    };
  }
  ExchangeResult result = PostWithin(transport_, http, context, options);
  // Its room serves the next request's body (sent: nothing reads it now).
  history_.GiveBack(std::move(std::get<HttpRequest>(built).body));
  if (auto* error = std::get_if<ProviderError>(&result)) return *error;
  const HttpResponse& response = std::get<HttpResponse>(result);
  if (stream_threw) return *stream_threw;
  try {
    // A server may ignore a stream request and answer with one JSON body.
    if (!parser || IsJsonBody(response)) {
      return Checked(adapter_->ParseAnswer(response, config_));
    }
    return Checked(parser->Finish());
  } catch (...) {
    return AdapterThrew(info, "reading the answer", std::current_exception(),
                        secret);
  }
}

}  // namespace steps
