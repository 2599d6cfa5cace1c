// The one Provider every adapter runs under: sends the adapter's request
// through the HttpTransport within the call's limits and hands the answer
// back to the adapter to read. What is here holds for every provider, so
// an adapter stays a translator.
#ifndef STEPS_PROVIDERS_ADAPTER_PROVIDER_H_
#define STEPS_PROVIDERS_ADAPTER_PROVIDER_H_

#include <cstddef>
#include <memory>

#include "providers/adapter.h"
#include "providers/http.h"
#include "providers/provider.h"

namespace steps {

struct AdapterLimits {
  // A streamed answer silent this long after its headers is cut
  // (kStreamIdle, retryable). Zero = no idle limit. Default 60 s.
  Millis stream_idle_limit{60000};
  // Answers larger than this are refused (kTooLarge). Default 32 MiB.
  size_t max_response_bytes = 32 * 1024 * 1024;
};

class AdapterProvider : public Provider {
 public:
  // `adapter` is shared (adapters are immutable); `transport` is not owned
  // and must outlive the provider.
  AdapterProvider(std::shared_ptr<const Adapter> adapter, AdapterConfig config,
                  HttpTransport& transport, AdapterLimits limits = {});

  // One request: BuildRequest, then the X-Steps-Agent / X-Steps-Step
  // headers and the source's headers are added; the transfer runs within
  // CallContext::RequestLimit() and the cancel token (PostWithin); a
  // non-2xx status is a kHttpStatus error with Retry-After read; a 2xx
  // body goes to ParseAnswer or, streamed, event by event to a
  // StreamParser. Every answer is checked against the limits of
  // providers/wire_json.h. The key is redacted from the errors made here
  // (transport, status, a refused or throwing adapter).
  ChatResult Send(const ChatRequest& request,
                  const CallContext& context) override;

  const Adapter& adapter() const { return *adapter_; }
  const AdapterConfig& config() const { return config_; }

 private:
  std::shared_ptr<const Adapter> adapter_;
  AdapterConfig config_;
  HttpTransport& transport_;
  AdapterLimits limits_;
  // This provider's conversation's messages, encoded once each (a provider
  // is made per conversation; shared, it is still correct, only slower).
  EncodedHistory history_;
};

}  // namespace steps

#endif  // STEPS_PROVIDERS_ADAPTER_PROVIDER_H_
