// The Adapter seam: what a model provider is to the engine. An adapter is a
// translator, not a transport: it builds the HTTP request for a chat request
// and reads an answer (a whole body, or stream events as they arrive) back
// into a ChatAnswer or a classified ProviderError. AdapterProvider
// (providers/adapter_provider.h) owns everything else, the same for every
// adapter: the transport call, the step's deadline and llm_timeout,
// cancellation, the size bound, HTTP status classification and Retry-After,
// the X-Steps-* headers, key redaction, and a guard that turns an adapter's
// exception into a malformed answer.
//
// Adding a provider is one file under src/providers/adapters/ (see
// docs/providers.md): CMake finds it and calls its RegisterAdapter_FILE.
#ifndef STEPS_PROVIDERS_ADAPTER_H_
#define STEPS_PROVIDERS_ADAPTER_H_

#include <memory>
#include <string>
#include <vector>

#include "core/sse.h"
#include "core/status.h"
#include "providers/chat.h"
#include "providers/encoded_history.h"
#include "providers/http.h"
#include "providers/model_parameters.h"
#include "providers/provider.h"

namespace steps {

// Which wire format the in-process mock (mock_provider/) can speak for an
// adapter's requests. A `mock:` block serves kOpenAiChat and kAnthropic
// adapters on the wire, so the adapter's own request building and parsing
// run; any other adapter is answered at the Provider interface.
enum class MockWireFormat {
  kNone,        // The mock does not speak this adapter's dialect.
  kOpenAiChat,  // POST {base}/chat/completions, OpenAI chat completions.
  kAnthropic,   // POST {base}/messages, Anthropic Messages.
};

// What the engine knows about a provider before any request.
struct AdapterInfo {
  // The prefix sources use: `model: NAME/MODEL`. Lower-case, no '/'.
  std::string name;
  // Used when the source has no base_url. No trailing '/'.
  std::string default_base_url;
  // The environment variable holding the key when the source names none
  // (api_key_env). Empty = the provider takes no key.
  std::string key_env;
  // Whether a missing key refuses the source. A source with a base_url
  // needs a key only when it names api_key_env (a local server usually
  // wants none), whatever this says.
  bool key_required = true;
  // Whether the adapter can ask for streamed answers (NewStreamParser).
  bool can_stream = false;
  MockWireFormat mock_wire = MockWireFormat::kNone;
  // The model parameters the adapter sends in its dialect, as a pipeline
  // writes them (ModelParameters::SetKeys: "temperature", "top_p", "seed",
  // "max_output_tokens", "stop", "response_format"). A source that sets
  // one not listed here is refused at load: none is dropped silently.
  std::vector<std::string> parameters;
};

// The keys of `p` that the adapter described by `info` does not send.
std::vector<std::string> UnhonouredParameters(const AdapterInfo& info,
                                              const ModelParameters& p);

// One source's settings, resolved by the engine from the pipeline's
// source: block and the environment.
struct AdapterConfig {
  // The endpoint root: the source's base_url, else the adapter's default;
  // never ends in '/'.
  std::string base_url;
  // The key read from the environment; empty when none is set and none is
  // required. Adapters put it in a header; the engine redacts it from
  // every error.
  std::string api_key;
  // Headers the source asks for on every request. The engine adds them
  // after the adapter's own (so adapters need not).
  HttpHeaders headers;
  // Whether to ask for a streamed answer. Only true when info().can_stream.
  bool stream = false;
};

// Reads one streamed answer, event by event, as it arrives. Made fresh for
// each request; not thread-safe.
class StreamParser {
 public:
  virtual ~StreamParser() = default;
  // Consumes one server-sent event. Returns false when the stream must stop:
  // its end, an error event or an answer that breaks the rules (Finish then
  // says which).
  virtual bool Add(const SseEvent& event) = 0;
  // After the stream stopped or the body ended: the answer, or the error
  // that ended it (kStreamError for an error event, kMalformed for a stream
  // cut short or not in the format).
  virtual ChatResult Finish() = 0;
};

// One provider's dialect. Implementations are immutable after
// construction: every method is const and may be called concurrently.
// Methods may throw (a third-party adapter reading a field that is not
// there); the engine turns an exception into a kMalformed answer
// (ParseAnswer, streams) or a kConfig error (BuildRequest).
class Adapter {
 public:
  virtual ~Adapter() = default;

  virtual const AdapterInfo& info() const = 0;

  // The request for `request` under `config`: absolute URL, headers (the
  // key's among them) and body. Per-request settings live in ChatRequest,
  // so a new one (temperature, say) is a field there that each adapter
  // writes in its own dialect. An error is a kConfig ProviderError, e.g. a
  // request the provider cannot express.
  virtual Result<HttpRequest> BuildRequest(
      const ChatRequest& request, const AdapterConfig& config) const = 0;

  // The same request, for a provider that keeps the conversation's
  // messages encoded (`history`, one per conversation): an adapter whose
  // requests carry the whole history may reuse the encodings of the
  // messages earlier requests carried, and must send the same bytes as
  // BuildRequest. Default: BuildRequest.
  virtual Result<HttpRequest> BuildRequestReusing(
      const ChatRequest& request, const AdapterConfig& config,
      EncodedHistory& history) const {
    (void)history;
    return BuildRequest(request, config);
  }

  // Reads a 2xx answer's whole body. Also called for a streamed request
  // that the server answered with one JSON body (Content-Type
  // application/json). Non-2xx statuses never reach the adapter.
  virtual ChatResult ParseAnswer(const HttpResponse& response,
                                 const AdapterConfig& config) const = 0;

  // A parser for one streamed answer. Only called when config.stream.
  // Default: none (info().can_stream false).
  virtual std::unique_ptr<StreamParser> NewStreamParser(
      const AdapterConfig& config) const;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_ADAPTER_H_
