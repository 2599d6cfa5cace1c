#include "agent/agent.h"

#include <sstream>

namespace steps::agent {

bool BudgetMeter::Add(int64_t tokens, double usd) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ += tokens;
  usd_ += usd;
  return !((limit_.tokens && *limit_.tokens > 0 && tokens_ > *limit_.tokens) ||
           (limit_.usd && *limit_.usd > 0 && usd_ > *limit_.usd));
}

bool BudgetMeter::Exceeded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (limit_.tokens && *limit_.tokens > 0 && tokens_ > *limit_.tokens) ||
         (limit_.usd && *limit_.usd > 0 && usd_ > *limit_.usd);
}

int64_t BudgetMeter::tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_;
}

double BudgetMeter::usd() const {
  std::lock_guard<std::mutex> lock(mu_);
  return usd_;
}

std::string BudgetMeter::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  if (limit_.tokens && *limit_.tokens > 0 && tokens_ > *limit_.tokens) {
    out << "token budget of " << *limit_.tokens << " exceeded (" << tokens_
        << " used)";
  } else if (limit_.usd && *limit_.usd > 0 && usd_ > *limit_.usd) {
    out << "USD budget of $" << *limit_.usd << " exceeded ($" << usd_
        << " spent)";
  }
  return out.str();
}

}  // namespace steps::agent
