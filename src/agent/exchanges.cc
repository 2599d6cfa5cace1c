#include "agent/exchanges.h"

namespace steps::agent {

ObservedProvider::ObservedProvider(Provider& inner, ExchangeObserver& observer,
                                   ProviderExchange about)
    : inner_(inner), observer_(observer), about_(std::move(about)) {}

ChatResult ObservedProvider::Send(const ChatRequest& request,
                                  const CallContext& context) {
  ChatResult result = inner_.Send(request, context);
  ProviderExchange exchange = about_;
  exchange.agent = context.agent;
  exchange.step = context.step;
  exchange.request = &request;
  exchange.result = &result;
  observer_.OnExchange(exchange);
  return result;
}

}  // namespace steps::agent
