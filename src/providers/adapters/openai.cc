// The OpenAI-compatible providers: `openai/`, `openrouter/` (which also
// reports cost) and `ollama/` (a local server, no key needed). One dialect,
// three defaults; see providers/openai.h.
#include "providers/openai.h"

#include <memory>
#include <string>
#include <vector>

#include "providers/registry.h"

namespace steps {
namespace {

// Chat completions has every model parameter.
const std::vector<std::string> kOpenAiParameters = ModelParameters::AllKeys();

}  // namespace

void RegisterAdapter_openai(ProviderRegistry& registry) {
  registry.RegisterAdapter(std::make_shared<OpenAiAdapter>(
      AdapterInfo{.name = "openai",
                  .default_base_url = "https://api.openai.com/v1",
                  .key_env = "OPENAI_API_KEY",
                  .key_required = true,
                  .can_stream = true,
                  .mock_wire = MockWireFormat::kOpenAiChat,
                  .parameters = kOpenAiParameters},
      /*request_cost=*/false));
  registry.RegisterAdapter(std::make_shared<OpenAiAdapter>(
      AdapterInfo{.name = "openrouter",
                  .default_base_url = "https://openrouter.ai/api/v1",
                  .key_env = "OPENROUTER_API_KEY",
                  .key_required = true,
                  .can_stream = true,
                  .mock_wire = MockWireFormat::kOpenAiChat,
                  .parameters = kOpenAiParameters},
      /*request_cost=*/true));
  registry.RegisterAdapter(std::make_shared<OpenAiAdapter>(
      AdapterInfo{.name = "ollama",
                  .default_base_url = "http://127.0.0.1:11434/v1",
                  .key_env = "OLLAMA_API_KEY",
                  .key_required = false,
                  .can_stream = true,
                  .mock_wire = MockWireFormat::kOpenAiChat,
                  .parameters = kOpenAiParameters},
      /*request_cost=*/false));
}

}  // namespace steps
