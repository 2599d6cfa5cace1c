#include "agent/agent.h"

#include <sstream>

namespace steps::agent {
namespace {

bool TokenCap(const BudgetLimit& limit) {
  return limit.tokens && *limit.tokens > 0;
}
bool UsdCap(const BudgetLimit& limit) { return limit.usd && *limit.usd > 0; }

}  // namespace

bool BudgetMeter::Add(int64_t tokens, double usd) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ += tokens;
  usd_ += usd;
  return !((TokenCap(limit_) && tokens_ > *limit_.tokens) ||
           (UsdCap(limit_) && usd_ > *limit_.usd));
}

bool BudgetMeter::Exceeded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (TokenCap(limit_) && tokens_ > *limit_.tokens) ||
         (UsdCap(limit_) && usd_ > *limit_.usd);
}

bool BudgetMeter::OwnSpent() const {
  return (TokenCap(limit_) && tokens_ >= *limit_.tokens) ||
         (UsdCap(limit_) && usd_ >= *limit_.usd);
}

bool BudgetMeter::Spent() const {
  std::function<std::optional<std::string>()> check;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (OwnSpent() || !spent_elsewhere_.empty()) return true;
    check = elsewhere_;
  }
  if (!check) return false;
  std::optional<std::string> why = check();
  if (!why) return false;
  std::lock_guard<std::mutex> lock(mu_);
  spent_elsewhere_ = why->empty() ? "spent elsewhere" : *why;
  return true;
}

void BudgetMeter::SetSpentElsewhere(
    std::function<std::optional<std::string>()> check) {
  std::lock_guard<std::mutex> lock(mu_);
  elsewhere_ = std::move(check);
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
  if (TokenCap(limit_) && tokens_ > *limit_.tokens) {
    out << "token budget of " << *limit_.tokens << " exceeded (" << tokens_
        << " used)";
  } else if (UsdCap(limit_) && usd_ > *limit_.usd) {
    out << "USD budget of $" << *limit_.usd << " exceeded ($" << usd_
        << " spent)";
  }
  return out.str();
}

std::string BudgetMeter::DescribeSpent() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  if (TokenCap(limit_) && tokens_ >= *limit_.tokens) {
    out << "token budget of " << *limit_.tokens << " spent (" << tokens_
        << " used)";
  } else if (UsdCap(limit_) && usd_ >= *limit_.usd) {
    out << "USD budget of $" << *limit_.usd << " spent ($" << usd_ << " spent)";
  } else {
    return spent_elsewhere_;
  }
  return out.str();
}

}  // namespace steps::agent
