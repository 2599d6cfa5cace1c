// The `anthropic/` provider: the Messages API; see providers/anthropic.h.
#include "providers/anthropic.h"

#include <memory>

#include "providers/registry.h"

namespace steps {

void RegisterAdapter_anthropic(ProviderRegistry& registry) {
  registry.RegisterAdapter(std::make_shared<AnthropicAdapter>(
      AdapterInfo{.name = "anthropic",
                  .default_base_url = "https://api.anthropic.com/v1",
                  .key_env = "ANTHROPIC_API_KEY",
                  .key_required = true,
                  .can_stream = true,
                  .mock_wire = MockWireFormat::kAnthropic,
                  .parameters = AnthropicParameters()},
      /*version=*/"2023-06-01", /*default_max_tokens=*/4096));
}

}  // namespace steps
