#include "core/json_text.h"

namespace steps {

std::string DumpJson(const nlohmann::json& value, int indent) {
  // With error_handler replace, dump() substitutes U+FFFD for invalid UTF-8
  // instead of throwing; it has no other failure for a json value.
  return value.dump(indent, ' ', /*ensure_ascii=*/false,
                    nlohmann::json::error_handler_t::replace);
}

}  // namespace steps
