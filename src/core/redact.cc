#include "core/redact.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

namespace steps {
namespace {

std::mutex g_redactor_mu;
std::shared_ptr<const Redactor>& ProcessRedactorSlot() {
  static auto* slot =
      new std::shared_ptr<const Redactor>(std::make_shared<const Redactor>());
  return *slot;
}

void AddIfLongEnough(std::set<std::string>& into, std::string_view value) {
  if (!value.empty() && value.back() == '\r') value.remove_suffix(1);
  if (value.size() >= Redactor::kMinSecretBytes) into.emplace(value);
}

}  // namespace

Redactor::Redactor(const std::vector<std::string>& values) {
  std::set<std::string> unique;
  for (const std::string& v : values) {
    AddIfLongEnough(unique, v);
    if (v.find('\n') == std::string::npos) continue;
    size_t start = 0;
    while (start <= v.size()) {
      size_t end = v.find('\n', start);
      if (end == std::string::npos) end = v.size();
      AddIfLongEnough(unique, std::string_view(v).substr(start, end - start));
      start = end + 1;
    }
  }
  values_.assign(unique.begin(), unique.end());
  std::stable_sort(values_.begin(), values_.end(),
                   [](const std::string& a, const std::string& b) {
                     return a.size() > b.size();
                   });
}

std::string Redactor::Redact(std::string_view text) const {
  // Every occurrence of every secret as [begin, end), merged where they
  // overlap, so that no part of any secret survives.
  std::vector<std::pair<size_t, size_t>> spans;
  for (const std::string& v : values_) {
    for (size_t pos = text.find(v); pos != std::string_view::npos;
         pos = text.find(v, pos + 1)) {
      spans.emplace_back(pos, pos + v.size());
    }
  }
  if (spans.empty()) return std::string(text);
  std::sort(spans.begin(), spans.end());
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;
  for (size_t i = 0; i < spans.size();) {
    size_t begin = spans[i].first, end = spans[i].second;
    for (++i; i < spans.size() && spans[i].first < end; ++i) {
      end = std::max(end, spans[i].second);
    }
    out.append(text.substr(copied, begin - copied));
    out.append(kMask);
    copied = end;
  }
  out.append(text.substr(copied));
  return out;
}

bool Redactor::Contains(std::string_view text) const {
  for (const std::string& v : values_) {
    if (text.find(v) != std::string_view::npos) return true;
  }
  return false;
}

std::shared_ptr<const Redactor> ProcessRedactor() {
  std::lock_guard<std::mutex> lock(g_redactor_mu);
  return ProcessRedactorSlot();
}

void AddProcessSecrets(const std::vector<std::string>& values) {
  std::lock_guard<std::mutex> lock(g_redactor_mu);
  std::shared_ptr<const Redactor>& slot = ProcessRedactorSlot();
  std::vector<std::string> all = slot->values();
  all.insert(all.end(), values.begin(), values.end());
  slot = std::make_shared<const Redactor>(all);
}

void AddProcessSecretsFromEnvironment(const std::vector<std::string>& names) {
  std::vector<std::string> values;
  for (const std::string& name : names) {
    if (const char* v = std::getenv(name.c_str())) values.emplace_back(v);
  }
  if (!values.empty()) AddProcessSecrets(values);
}

std::string RedactSecrets(std::string_view text) {
  std::shared_ptr<const Redactor> redactor = ProcessRedactor();
  if (redactor->empty()) return std::string(text);
  return redactor->Redact(text);
}

}  // namespace steps
