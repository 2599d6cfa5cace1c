// Secret values masked as "***" in everything steps shows or keeps: the
// terminal, log lines, the run store (and so `steps show` and the web UI)
// and JUnit XML. One Redactor per process, grown as pipelines declare their
// secrets; see docs/secrets.md for what is masked where.
#ifndef STEPS_CORE_REDACT_H_
#define STEPS_CORE_REDACT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace steps {

// An immutable set of secret values and the function that masks them.
// Thread-safe (nothing changes after construction).
class Redactor {
 public:
  // What a secret is replaced with.
  static constexpr std::string_view kMask = "***";
  // Values shorter than this are not masked: masking "1" or "on" would mask
  // half of every output and protect nothing.
  static constexpr size_t kMinSecretBytes = 4;

  Redactor() = default;
  // `values`: the secrets. Empty and short ones are dropped; a value of
  // several lines is also masked line by line (output is shown and stored a
  // line at a time), each line long enough on its own.
  explicit Redactor(const std::vector<std::string>& values);

  // `text` with every occurrence of every secret replaced by kMask.
  // Overlapping occurrences (one secret inside another) become one mask.
  std::string Redact(std::string_view text) const;
  // True when `text` holds a secret.
  bool Contains(std::string_view text) const;
  bool empty() const { return values_.empty(); }
  // The secrets (deduplicated, longest first).
  const std::vector<std::string>& values() const { return values_; }

 private:
  std::vector<std::string> values_;
};

// The process-wide redactor: empty until secrets are added. Cheap to call
// (a shared pointer copy); never null.
std::shared_ptr<const Redactor> ProcessRedactor();

// Replaces the process-wide redactor with one that also masks `values`.
// Secrets are only ever added, never removed. Thread-safe.
void AddProcessSecrets(const std::vector<std::string>& values);

// Adds the values of the environment variables `names` (those set and long
// enough) to the process-wide redactor.
void AddProcessSecretsFromEnvironment(const std::vector<std::string>& names);

// ProcessRedactor()->Redact(text).
std::string RedactSecrets(std::string_view text);

}  // namespace steps

#endif  // STEPS_CORE_REDACT_H_
