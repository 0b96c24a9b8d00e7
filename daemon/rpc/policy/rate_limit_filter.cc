#include "rpc/policy/rate_limit_filter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "config/json_message.h"
#include "config/rpc_policy.pb.h"

namespace conduit::rpc {
namespace {

// The longest a call may be held for a token: an hour (max_wait_ms 1e300 overflowed the
// conversion to nanoseconds, undefined behaviour found by fuzzing).
constexpr double kMaxWaitMs = 3600.0 * 1000;

}  // namespace

Status RateLimitFilter::Create(const std::string& name, const Json& spec, std::shared_ptr<Filter>* out) {
  config::v1::RateLimitPolicy doc;
  CONDUIT_RETURN_IF_ERROR(config::MessageFromJson(spec, "rate limit", &doc));
  auto f = std::make_shared<RateLimitFilter>();
  f->name_ = name;
  CONDUIT_RETURN_IF_ERROR(Scope::Make(doc.service(), doc.method(), doc.side(), &f->scope_));
  const google::protobuf::Value& rate = doc.rate();
  if (config::IsString(rate) && (rate.string_value() == "inf" || rate.string_value() == "infinity")) {
    f->rate_ = std::numeric_limits<double>::infinity();
  } else if (rate.kind_case() == google::protobuf::Value::kNumberValue && rate.number_value() > 0) {
    f->rate_ = rate.number_value();
  } else {
    return InvalidArgument("a rate limit needs \"rate\": calls per second (> 0) or \"inf\"");
  }
  const double burst = doc.has_burst() ? doc.burst() : std::isinf(f->rate_) ? 1 : std::max(1.0, f->rate_ / 10);
  const double max_wait_ms = doc.has_max_wait_ms() ? doc.max_wait_ms() : 1000;
  if (!(burst >= 1)) return InvalidArgument("\"burst\" must be at least 1");
  if (!(max_wait_ms >= 0 && max_wait_ms <= kMaxWaitMs)) return InvalidArgument("\"max_wait_ms\" must be 0..3600000");
  f->burst_ = burst;
  f->tokens_ = burst;
  f->max_wait_ = std::chrono::nanoseconds(static_cast<int64_t>(max_wait_ms * 1e6));
  if (!doc.on_limit().empty()) {
    if (doc.on_limit() != "wait" && doc.on_limit() != "reject") {
      return InvalidArgument("\"on_limit\" must be \"wait\" or \"reject\"");
    }
    f->wait_ = doc.on_limit() == "wait";
  }
  *out = std::move(f);
  return Status::Ok();
}

void RateLimitFilter::TakeStateFrom(Filter& previous) {
  auto* old = dynamic_cast<RateLimitFilter*>(&previous);
  if (old == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  std::scoped_lock lock(old->mu_, mu_);
  const double carried = old->TokensAt(now);
  tokens_ = std::min(burst_, carried);
  last_ = now;
}

double RateLimitFilter::TokensAt(std::chrono::steady_clock::time_point now) const {
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  return std::min(burst_, tokens_ + elapsed * rate_);
}

Json RateLimitFilter::SavedState() const {
  if (std::isinf(rate_)) return Json();  // unlimited: a bucket that is always full
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  Json state = Json::Object();
  state["tokens"] = std::max(0.0, TokensAt(now));
  state["monotonic_ns"] = static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  return state;
}

Status RateLimitFilter::RestoreState(const Json& state) {
  const Json* tokens = state.is_object() ? state.find("tokens") : nullptr;
  const Json* at = state.is_object() ? state.find("monotonic_ns") : nullptr;
  if (tokens == nullptr || !tokens->is_number() || !std::isfinite(tokens->as_number()) || at == nullptr ||
      !at->is_int()) {
    return InvalidArgument("rate limit '%s': the saved state is not {\"tokens\": number, \"monotonic_ns\": integer}",
                           name_.c_str());
  }
  if (std::isinf(rate_)) return Status::Ok();
  const auto now = std::chrono::steady_clock::now();
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  // A time ahead of this clock (not one boot's) counts as no time at all.
  const double elapsed = at->as_int() < now_ns ? static_cast<double>(now_ns - at->as_int()) / 1e9 : 0.0;
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::min(burst_, std::max(0.0, tokens->as_number()) + elapsed * rate_);
  last_ = now;
  return Status::Ok();
}

Verdict RateLimitFilter::OnAdmit(const RpcInfo&) {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = TokensAt(now);
  last_ = now;
  if (tokens_ >= 1) {
    tokens_ -= 1;
    return Verdict::Continue();
  }
  // Not enough: the call would leave when its token has accrued. Compared in floating point
  // first: at a tiny rate the wait is beyond any integer.
  const double wait_ns = (1 - tokens_) / rate_ * 1e9;
  if (!wait_ || !(wait_ns <= static_cast<double>(max_wait_.count()))) {
    char rate[32];
    snprintf(rate, sizeof(rate), "%g", rate_);
    return Verdict::Deny(GrpcStatusOf(StatusCode::kResourceExhausted),
                         "conduit: rate limit '" + name_ + "' (" + rate + " calls/s) exceeded");
  }
  tokens_ -= 1;
  return Verdict::Delay(std::chrono::nanoseconds(static_cast<int64_t>(wait_ns)));
}

}  // namespace conduit::rpc
