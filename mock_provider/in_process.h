// The mock provider without a socket: an HttpTransport that hands each
// request straight to a MockEngine. Delays and hangs wait on the injected
// Clock (so a FakeClock makes them instant and exact), drops and garbage
// come back as the real transport would report them, and the provider
// adapters and retry policy above it run unchanged. This is what a
// pipeline's `mock:` block runs on under `steps test` and `--mock`.
#ifndef STEPS_MOCK_PROVIDER_IN_PROCESS_H_
#define STEPS_MOCK_PROVIDER_IN_PROCESS_H_

#include <memory>

#include "core/clock.h"
#include "mock_provider/engine.h"
#include "providers/http.h"
#include "providers/registry.h"

namespace steps {

class InProcessMockTransport : public HttpTransport {
 public:
  // `clock` is not owned and must outlive the transport.
  InProcessMockTransport(std::shared_ptr<MockEngine> engine, Clock& clock);

  // Thread-safe. The URL's path picks the wire format; its host is
  // ignored. TransferOptions::time_limit and idle_limit are read on the
  // injected clock.
  TransportResult Post(const HttpRequest& request,
                       const TransferOptions& options) override;

  MockEngine& engine() { return *engine_; }

 private:
  std::shared_ptr<MockEngine> engine_;
  Clock& clock_;
};

// Registers the `mock` provider: `mock/ANY` is an OpenAI-compatible source
// served by `transport` (not owned; must outlive the registry's providers).
// Also makes every provider in `registry` mockable: an adapter whose wire
// format the mock speaks (AdapterInfo::mock_wire) keeps its factory, so
// its own requests and parsing run against the script on the wire; every
// other adapter is re-registered to be answered at the Provider interface:
// its sources become AdapterProviders that reach the script through the
// mock's own dialect, so answers are typed and statuses, Retry-After,
// hangs, drops and delays still pass through the engine's transport
// limits, retries and deadlines (the adapter's request building and
// parsing do not run; the conformance kit covers those).
void RegisterMockProvider(ProviderRegistry& registry,
                          InProcessMockTransport& transport);

// An environment that routes every source, whatever its provider, to
// `transport`, with a placeholder for every key: nothing leaves the
// process and no real key is read.
ProviderEnvironment MockProviderEnvironment(InProcessMockTransport& transport);

}  // namespace steps

#endif  // STEPS_MOCK_PROVIDER_IN_PROCESS_H_
