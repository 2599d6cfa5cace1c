#include "providers/curl_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/fiber.h"
#include "core/libcurl.h"
#include "providers/plain_http.h"

namespace steps {
namespace {

// Owns a curl_slist.
class HeaderList {
 public:
  HeaderList() = default;
  ~HeaderList() { libcurl::slist_free_all(list_); }
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  void Add(const std::string& line) {
    list_ = libcurl::slist_append(list_, line.c_str());
  }
  curl_slist* get() const { return list_; }

 private:
  curl_slist* list_ = nullptr;
};

struct Transfer;
// Plain transfers' limits by when they pass: the time limit, and until the
// connection is made, the limit on connecting (`connect`).
struct PlainLimit {
  Transfer* transfer;
  bool connect;
};
using PlainLimits =
    std::multimap<std::chrono::steady_clock::time_point, PlainLimit>;

// One transfer, shared by the Post that waits for it, the leader that
// runs it, and its cancel callback (which may run on any thread, even just
// after the transfer ended).
struct Transfer {
  // The libcurl handle, or for a plain request (plain_http.h) its
  // exchange; one of the two.
  CURL* easy = nullptr;
  std::unique_ptr<PlainExchange> plain;
  // A plain request's time limit or connection limit passed.
  bool plain_timed_out = false;
  bool plain_connect_timed_out = false;
  // Its entries in the loop's PlainLimits (end() when none), taken out
  // when it ends.
  std::optional<PlainLimits::iterator> time_limit_entry;
  std::optional<PlainLimits::iterator> connect_limit_entry;
  // Why it ended before it could start (no multi handle), if it did.
  std::optional<TransportError> early_error;
  const TransferOptions* options = nullptr;
  HttpResponse response;
  // The request body and how much of it libcurl has read.
  std::string_view body;
  size_t body_sent = 0;
  // libcurl wanted to re-send the request on a fresh connection after a
  // reused one died; refused (see OnSeek).
  bool resend_refused = false;
  // errno of a socket() that failed (EMFILE, ...); 0 when none did.
  int socket_errno = 0;
  bool too_large = false;
  bool headers_done = false;
  std::chrono::steady_clock::time_point last_data;
  // When Post handed it over; its time limit counts from here.
  std::chrono::steady_clock::time_point submitted;

  // Set by the loop's leader when it is done with the transfer (under
  // CurlTransport::Loop's lock); the fields below are then final.
  bool done = false;
  // Its Post, waiting while another leads the loop (`following`, under the
  // loop's lock), waits on it: given once done is set.
  Waiter done_wake;
  bool following = false;
  // Its Post runs on a fiber, which never leads: the loop's wait in epoll
  // would hold the fiber's carrier (under the loop's lock).
  bool on_fiber = false;
  bool finished = false;  // libcurl reported an end (`code` holds it).
  bool idle_cut = false;
  bool timed_out_waiting = false;  // Its limit passed before admission.
  CURLcode code = CURLE_OK;
  long new_connections = 0;
  long os_errno = 0;
  std::atomic<bool> cancelled{false};
  uint32_t shard = 0;  // Which multi handle runs it (the leader's).
};

// Its key among the running transfers.
void* KeyOf(const Transfer& t) {
  return t.easy != nullptr ? t.easy : const_cast<Transfer*>(&t);
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  std::string_view line(data, n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
    line.remove_suffix(1);
  }
  t->last_data = std::chrono::steady_clock::now();
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after 100 Continue, say): start over.
    t->response.headers.clear();
    t->headers_done = false;
  } else if (line.empty()) {
    t->headers_done = true;
  } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    t->response.headers.emplace_back(std::string(line.substr(0, colon)),
                                     std::string(value));
  }
  return n;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  t->last_data = std::chrono::steady_clock::now();
  if (t->response.body.size() + n > t->options->max_response_bytes) {
    t->too_large = true;
    return 0;  // Aborts the transfer.
  }
  t->response.body.append(data, n);
  if (t->options->reader) {
    long status = 0;
    libcurl::easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300 &&
        !t->options->reader(std::string_view(data, n))) {
      t->response.stopped_by_reader = true;
      return 0;
    }
  }
  return n;
}

size_t OnRead(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = std::min(size * count, t->body.size() - t->body_sent);
  std::memcpy(buffer, t->body.data() + t->body_sent, n);
  t->body_sent += n;
  return n;
}

// libcurl rewinds the body only to send the request again: after a reused
// keep-alive connection died with no answer it silently retries on a new
// one. That second request would escape `attempts` and every log, so it is
// refused here; the transfer fails (kClosed) and the retry policy decides.
int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(user);
  if (offset == 0 && origin == SEEK_SET && t->body_sent == 0) {
    return CURL_SEEKFUNC_OK;  // Nothing was sent: nothing is re-sent.
  }
  t->resend_refused = true;
  return CURL_SEEKFUNC_FAIL;
}

// Opens the transfer's sockets: close-on-exec, so tasks started while a
// request is in flight do not inherit them, and with socket()'s errno kept,
// since libcurl reports a descriptor shortage as "Couldn't connect".
curl_socket_t OnOpenSocket(void* user, curlsocktype, curl_sockaddr* address) {
  auto* t = static_cast<Transfer*>(user);
  curl_socket_t fd = socket(address->family, address->socktype | SOCK_CLOEXEC,
                            address->protocol);
  if (fd == CURL_SOCKET_BAD) t->socket_errno = errno;
  return fd;
}

// The one place a CURLcode becomes an error kind.
TransportErrorKind KindOf(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      return TransportErrorKind::kConnect;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return TransportErrorKind::kClosed;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportErrorKind::kTimedOut;
    default:
      return TransportErrorKind::kOther;
  }
}

}  // namespace

// The multi handles and the epoll loop that drives them. A Post that finds
// nobody leading the loop leads it itself, on its own thread, for as long
// as its transfer is the only one: a lone conversation has no thread
// between it and its socket, and no wake-up to cross per request. Once
// there are others, the loop's own thread leads while any are left, and
// Posts wait on their hand-offs: one thread, and one thread's allocations
// and stack, for a wide fan-out. Posts hand transfers over through
// `incoming_`, cancel callbacks through `cancels_`; both wake a leader
// waiting in epoll through an eventfd. Only the leader touches the multi
// handles and running transfers; one leads at a time (`leading_`, under
// mu_, which orders one leader's work before the next's).
class CurlTransport::Loop {
  struct Shard;

 public:
  explicit Loop(size_t max_in_flight, Millis connect_timeout)
      : epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
        wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        max_in_flight_(max_in_flight),
        connect_timeout_(connect_timeout),
        plain_(epoll_fd_, max_in_flight) {
    // libcurl looks for a connection to reuse among all of its multi
    // handle's connections to the host, so one handle with thousands in
    // flight spends its time searching: the transfers are spread over
    // shards, each a multi handle with its own connections. A shard's
    // handle is made when a transfer first needs it (each holds a pair of
    // descriptors for its own wake-ups): a lone conversation uses one.
    for (size_t i = 0; i < kShards; ++i) {
      shards_[i].index = static_cast<uint32_t>(i);
      shards_[i].loop = this;
    }
    // No shard is started here: a plain request (plain_http.h) needs no
    // libcurl, and a libcurl request starts the shard it goes to.
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
      made_errno_ = errno;
      return;
    }
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = kWakeKey;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &e);
  }
  ~Loop() {
    if (thread_.joinable()) thread_.join();
    for (Shard& shard : shards_) {
      if (shard.multi) libcurl::multi_cleanup(shard.multi);
    }
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  bool ok() const { return epoll_fd_ >= 0 && wake_fd_ >= 0; }
  // When not ok(): the errno of the call that failed.
  int made_errno() const { return made_errno_; }

  // Hands `t` to the loop: a leader admits it in its next round; without
  // one, the Await that follows leads.
  void Submit(const std::shared_ptr<Transfer>& t) {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(t);
    if (!leading_) return;
    // A Post leads for itself alone: with a second transfer the loop goes
    // to its own thread.
    if (!thread_leads_) demote_ = true;
    WakeLocked();
  }

  void Cancel(const std::shared_ptr<Transfer>& t) {
    t->cancelled = true;
    std::lock_guard<std::mutex> lock(mu_);
    if (t->done || stopping_) return;
    cancels_.push_back(t);
    WakeLocked();
  }

  // Returns once the loop is done with `t` (submitted): leads the loop
  // while nobody else does and `t` is alone, or else waits on its hand-off
  // (not under the loop's lock: thousands of Posts woken in a burst do not
  // queue for it again) until its transfer is done.
  void Await(Transfer& t) {
    bool follow;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (t.done) return;
      if (OnFiber()) {
        t.on_fiber = t.following = true;
        if (!leading_) {
          leading_ = true;
          ThreadLeadsLocked();
        } else if (!thread_leads_) {
          demote_ = true;  // A Post leads: the loop goes to its thread.
          WakeLocked();
        }
        follow = true;
      } else {
        follow = leading_;
        t.following = follow;
        leading_ = true;
      }
    }
    while (true) {
      if (follow && t.done_wake.Wait() == kDone) return;
      // Leads: from the start, or handed the loop back by its thread; until
      // its transfer is done or another Post comes.
      follow = false;
      while (!t.done && !follow) {
        RunOnce(&t);
        if (demote_.load(std::memory_order_relaxed)) follow = Demote(t);
      }
      if (!follow) break;
    }
    HandOver();
  }

  // Ends the loop's thread. REQUIRES: no Post in progress.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      thread_wake_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

  int64_t connections_opened() const {
    return connections_opened_.load() + plain_opened_.load();
  }
  size_t max_in_flight_seen() const { return max_seen_.load(); }
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return incoming_.size();
  }

 private:
  // The leader, whose transfer is `own` (none for the loop's thread): one
  // round of the loop, which waits for nothing once `own` is done
  // (cancelled, cut, timed out).
  void RunOnce(const Transfer* own, int max_wait_ms = kMaxWaitMs) {
    TakeWork();
    ReapFinished();
    int wait_ms = std::min(max_wait_ms, CheckLimits());
    if (own != nullptr && own->done) return;
    for (const Shard& shard : shards_) {
      if (shard.timeout_ms >= 0) wait_ms = std::min(wait_ms, shard.timeout_ms);
    }
    int n = epoll_wait(epoll_fd_, events_.data(),
                       static_cast<int>(events_.size()), wait_ms);
    int running = 0;
    for (int i = 0; i < n; ++i) {
      uint64_t key = events_[i].data.u64;
      if (key == kWakeKey) {
        uint64_t count;
        while (read(wake_fd_, &count, sizeof count) > 0) {
        }
        continue;
      }
      uint32_t ev = events_[i].events;
      if (PlainConnections::IsKey(key)) {
        if (PlainExchange* x = plain_.OnEvent(key, ev)) EndOwner(*x);
        continue;
      }
      int mask = 0;
      if (ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) mask |= CURL_CSELECT_IN;
      if (ev & EPOLLOUT) mask |= CURL_CSELECT_OUT;
      if (ev & EPOLLERR) mask |= CURL_CSELECT_ERR;
      libcurl::multi_socket_action(shards_[key >> 32].multi,
                                   static_cast<curl_socket_t>(key & 0xffffffff),
                                   mask, &running);
    }
    // libcurl's own timers (connect and transfer limits, its own
    // bookkeeping) when they are due.
    auto now = std::chrono::steady_clock::now();
    for (Shard& shard : shards_) {
      if (shard.timeout_ms >= 0 && now >= shard.deadline) {
        shard.timeout_ms = -1;
        libcurl::multi_socket_action(shard.multi, CURL_SOCKET_TIMEOUT, 0,
                                     &running);
      }
    }
    ReapFinished();
    plain_.Sweep();
  }

  // The leading Post's transfer is done. Transfers left in the loop (come
  // since its last round) go to the loop's own thread; with none left,
  // the next Post leads.
  void HandOver() {
    std::lock_guard<std::mutex> lock(mu_);
    demote_ = false;
    if (running_.empty() && incoming_.empty()) {
      leading_ = false;
      return;
    }
    ThreadLeadsLocked();
  }

  // A Post leading for its transfer `own`, not done, is told that another
  // came: the loop goes to its own thread and the Post waits as the others
  // do. Returns whether it is to wait (false: `own` is done after all).
  bool Demote(Transfer& own) {
    std::lock_guard<std::mutex> lock(mu_);
    demote_ = false;
    if (own.done) return false;
    own.done_wake.Reset();  // It may have been given kLead before.
    own.following = true;
    ThreadLeadsLocked();
    return true;
  }

  // Under mu_: the loop's thread leads from now on.
  void ThreadLeadsLocked() {
    thread_leads_ = true;
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { ThreadLeads(); });
    } else {
      thread_wake_.notify_one();
    }
  }

  // The loop's own thread: leads when a Post hands the loop over, until at
  // most one transfer was left for kLinger (a fan-out's conversations
  // between two requests do not send the loop back and forth between Posts
  // and the thread at each lull). Then the loop goes back to the Post of
  // the one transfer left, if any, or to the next Post that comes.
  void ThreadLeads() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      thread_wake_.wait(lock, [this] { return thread_leads_ || stopping_; });
      if (stopping_) return;
      auto last_busy = std::chrono::steady_clock::now();
      while (true) {
        const size_t transfers = running_.size() + incoming_.size();
        const auto now = std::chrono::steady_clock::now();
        // A lone transfer a fiber waits for stays with the thread.
        const Transfer* lone = LoneLocked();
        if (transfers > 1 || (lone != nullptr && lone->on_fiber)) {
          last_busy = now;
        }
        const Millis left =
            kLinger - std::chrono::duration_cast<Millis>(now - last_busy);
        if (transfers <= 1 && left.count() <= 0) break;
        lock.unlock();
        RunOnce(nullptr, transfers <= 1 && left < Millis(kMaxWaitMs)
                             ? static_cast<int>(left.count())
                             : kMaxWaitMs);
        lock.lock();
      }
      thread_leads_ = false;
      leading_ = false;
      Transfer* lone = LoneLocked();
      // A Post not yet waiting finds leading_ false and leads; one waiting
      // is told to.
      if (lone != nullptr && lone->following && !lone->done) {
        lone->following = false;
        leading_ = true;
        lone->done_wake.Give(kLead);
      }
    }
  }

  // Under mu_: a transfer running or waiting to be admitted, if any (the
  // only one when at most one is left).
  Transfer* LoneLocked() const {
    if (!running_.empty()) return running_.begin()->second.get();
    return incoming_.empty() ? nullptr : incoming_.front().get();
  }

  // Under mu_.
  void WakeLocked() {
    uint64_t one = 1;
    ssize_t w = write(wake_fd_, &one, sizeof one);
    (void)w;
  }

  // libcurl's word on what to watch a socket for. A socket it has not
  // told of before (or since it said REMOVE, which also forgets what
  // curl_multi_assign gave it) comes with `watched` null: it is added
  // (one system call); one watched already is modified.
  static int OnSocket(CURL*, curl_socket_t s, int what, void* user,
                      void* watched) {
    auto* shard = static_cast<Shard*>(user);
    Loop* loop = shard->loop;
    if (what == CURL_POLL_REMOVE) {
      epoll_ctl(loop->epoll_fd_, EPOLL_CTL_DEL, s, nullptr);
      return 0;
    }
    epoll_event e{};
    e.data.u64 =
        (static_cast<uint64_t>(shard->index) << 32) | static_cast<uint32_t>(s);
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) e.events |= EPOLLIN;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) e.events |= EPOLLOUT;
    const int first = watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(loop->epoll_fd_, first, s, &e) != 0) {
      // Not as libcurl's word implied (a socket added under another
      // shard's word, say): the other operation.
      if (errno != ENOENT && errno != EEXIST) return 0;
      if (epoll_ctl(loop->epoll_fd_,
                    first == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s,
                    &e) != 0)
        return 0;
    }
    if (!watched) libcurl::multi_assign(shard->multi, s, shard);
    return 0;
  }

  static int OnTimer(CURLM*, long timeout_ms, void* user) {
    auto* shard = static_cast<Shard*>(user);
    shard->timeout_ms =
        timeout_ms < 0 ? -1
                       : static_cast<int>(std::min<long>(timeout_ms, 1000));
    shard->deadline = std::chrono::steady_clock::now() +
                      Millis(std::max<long>(0, timeout_ms));
    return 0;
  }

  // What is left at `now` of the transfer's time limit, counted from when
  // Post handed it over; nullopt when it has none.
  static std::optional<Millis> TimeLeft(
      const Transfer& t, std::chrono::steady_clock::time_point now) {
    if (!t.options->time_limit) return std::nullopt;
    return *t.options->time_limit -
           std::chrono::duration_cast<Millis>(now - t.submitted);
  }

  // The shard with the fewest transfers, the first among equals: a lone
  // conversation keeps to shard 0 and its one connection.
  // A shard not started yet counts as idle, and is started when chosen;
  // when it cannot be (libcurl out of memory: short of descriptors it
  // still makes one, without its wake-up pair), the least busy started
  // one is.
  Shard& LeastBusy() {
    Shard* best = &shards_[0];
    for (Shard& shard : shards_) {
      if (shard.running < best->running) best = &shard;
    }
    if (best->multi != nullptr || Start(*best)) return *best;
    best = &shards_[0];
    for (Shard& shard : shards_) {
      if (shard.multi != nullptr && shard.running < best->running) {
        best = &shard;
      }
    }
    return *best;
  }

  // Makes the shard's multi handle; false when libcurl could not.
  bool Start(Shard& shard) {
    CURLM* multi = libcurl::multi_init();
    if (multi == nullptr) return false;
    // Idle connections kept for reuse: as many as may be in flight.
    libcurl::multi_setopt(multi, CURLMOPT_MAXCONNECTS,
                          static_cast<long>(max_in_flight_));
    // libcurl says which sockets to watch and when to call it back; the
    // loop waits on them with epoll, so a wakeup costs the sockets that
    // are ready, not every socket in flight.
    libcurl::multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, OnSocket);
    libcurl::multi_setopt(multi, CURLMOPT_SOCKETDATA, &shard);
    libcurl::multi_setopt(multi, CURLMOPT_TIMERFUNCTION, OnTimer);
    libcurl::multi_setopt(multi, CURLMOPT_TIMERDATA, &shard);
    shard.multi = multi;
    return true;
  }

  // Admits incoming transfers while there is room and applies
  // cancellations.
  void TakeWork() {
    std::vector<std::shared_ptr<Transfer>> cancels;
    std::vector<std::shared_ptr<Transfer>> plain;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancels.swap(cancels_);
      while (!incoming_.empty() && running_.size() < max_in_flight_) {
        std::shared_ptr<Transfer> t = std::move(incoming_.front());
        incoming_.pop_front();
        if (!Admit(t)) continue;
        running_.emplace(KeyOf(*t), t);
        if (t->options->idle_limit.count() > 0) watched_.push_back(t);
        // Its connection is made outside the lock, which Posts take to
        // hand transfers over.
        if (t->plain) plain.push_back(t);
      }
      size_t seen = max_seen_.load();
      if (running_.size() > seen) max_seen_ = running_.size();
      // Cancelled, or out of time, before admission: never started.
      auto now = std::chrono::steady_clock::now();
      queue_wait_ms_ = 1000;
      for (auto it = incoming_.begin(); it != incoming_.end();) {
        Transfer& t = **it;
        std::optional<Millis> left = TimeLeft(t, now);
        if (t.cancelled || (left && left->count() <= 0)) {
          t.timed_out_waiting = !t.cancelled;
          MarkDoneLocked(t);
          it = incoming_.erase(it);
          continue;
        }
        if (left) {
          queue_wait_ms_ =
              std::min<int>(queue_wait_ms_, static_cast<int>(left->count()));
        }
        ++it;
      }
    }
    for (const auto& t : plain) StartPlain(t);
    for (const auto& t : cancels) {
      auto it = running_.find(KeyOf(*t));
      if (it != running_.end() && it->second == t) End(t);
    }
  }

  // Sends an admitted plain transfer, with its limits: the time limit
  // left and, until connected, the limit on connecting.
  void StartPlain(const std::shared_ptr<Transfer>& t) {
    const auto now = std::chrono::steady_clock::now();
    if (std::optional<Millis> left = TimeLeft(*t, now)) {
      t->time_limit_entry = limits_.emplace(now + std::max(Millis(1), *left),
                                            PlainLimit{t.get(), false});
    }
    t->connect_limit_entry =
        limits_.emplace(now + connect_timeout_, PlainLimit{t.get(), true});
    if (!plain_.Start(*t->plain)) End(t);
  }

  // Ends plain transfers whose limit passed; returns how long the next
  // poll may wait for the nearest one.
  int CheckPlainLimits(int wait_ms) {
    const auto now = std::chrono::steady_clock::now();
    while (!limits_.empty()) {
      const auto first = limits_.begin();
      Transfer& t = *first->second.transfer;
      if (first->second.connect && t.plain->connected) {
        t.connect_limit_entry.reset();
        limits_.erase(first);
        continue;
      }
      if (first->first > now) {
        auto left = std::chrono::ceil<Millis>(first->first - now);
        return std::min<int>(wait_ms, static_cast<int>(left.count()));
      }
      if (first->second.connect) {
        t.plain_connect_timed_out = true;
      } else {
        t.plain_timed_out = true;
      }
      // Running while it has entries: End takes them out with it.
      std::shared_ptr<Transfer> owner = running_.find(&t)->second;
      End(owner);
    }
    return wait_ms;
  }

  void EndOwner(PlainExchange& x) {
    auto it = running_.find(x.owner);
    if (it == running_.end()) return;
    std::shared_ptr<Transfer> t = it->second;
    End(t);
  }

  // Under mu_. Sets the limit left of the transfer's own and adds it;
  // false when the limit already passed or it was cancelled.
  bool Admit(const std::shared_ptr<Transfer>& t) {
    if (t->plain) return AdmitPlain(t);
    if (t->cancelled) {
      MarkDoneLocked(*t);
      return false;
    }
    if (std::optional<Millis> time_left =
            TimeLeft(*t, std::chrono::steady_clock::now())) {
      Millis left = *time_left;
      if (left.count() <= 0 && t->options->time_limit->count() > 0) {
        t->timed_out_waiting = true;
        MarkDoneLocked(*t);
        return false;
      }
      // libcurl reads 0 as "no limit"; a spent limit must still fail.
      libcurl::easy_setopt(
          t->easy, CURLOPT_TIMEOUT_MS,
          static_cast<long>(std::max<int64_t>(1, left.count())));
    }
    t->last_data = std::chrono::steady_clock::now();
    Shard& shard = LeastBusy();
    if (shard.multi == nullptr) {
      const int err = errno;
      t->early_error =
          IsDescriptorShortage(err)
              ? DescriptorShortage(err)
              : TransportError{TransportErrorKind::kOther,
                               "could not create a curl multi handle"};
      MarkDoneLocked(*t);
      return false;
    }
    t->shard = shard.index;
    ++shard.running;
    libcurl::multi_add_handle(shard.multi, t->easy);
    return true;
  }

  // Under mu_. As Admit, for a plain transfer, which TakeWork then starts.
  bool AdmitPlain(const std::shared_ptr<Transfer>& t) {
    if (t->cancelled) {
      MarkDoneLocked(*t);
      return false;
    }
    if (std::optional<Millis> left =
            TimeLeft(*t, std::chrono::steady_clock::now());
        left && left->count() <= 0 && t->options->time_limit->count() > 0) {
      t->timed_out_waiting = true;
      MarkDoneLocked(*t);
      return false;
    }
    return true;
  }

  void ReapFinished() {
    for (Shard& shard : shards_) {
      if (shard.multi == nullptr) continue;
      int left_in_queue = 0;
      while (CURLMsg* msg =
                 libcurl::multi_info_read(shard.multi, &left_in_queue)) {
        if (msg->msg != CURLMSG_DONE) continue;
        auto it = running_.find(msg->easy_handle);
        if (it == running_.end()) continue;
        std::shared_ptr<Transfer> t = it->second;
        t->finished = true;
        t->code = msg->data.result;
        End(t);
      }
    }
  }

  // Cuts streams that went silent; returns how long the next poll may
  // wait (at most 1 s).
  int CheckLimits() {
    int wait_ms = queue_wait_ms_;
    auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<Transfer>> idle;
    // Only transfers with an idle limit are looked at; ended ones leave.
    watched_.erase(std::remove_if(watched_.begin(), watched_.end(),
                                  [](const auto& t) { return t->done; }),
                   watched_.end());
    for (const auto& t : watched_) {
      Millis limit = t->options->idle_limit;
      if (!(t->plain ? t->plain->head_done : t->headers_done)) continue;
      auto silent = now - (t->plain ? t->plain->last_data : t->last_data);
      if (silent >= limit) {
        idle.push_back(t);
        continue;
      }
      auto left = std::chrono::ceil<Millis>(limit - silent);
      wait_ms = std::min<int>(wait_ms, static_cast<int>(left.count()));
    }
    for (const auto& t : idle) {
      t->idle_cut = true;
      End(t);
    }
    if (!idle.empty()) return 0;
    return std::max(1, CheckPlainLimits(wait_ms));
  }

  // Takes `t` out of the multi handle (which aborts it when unfinished and
  // closes its connection) and hands it back to its Post.
  void End(const std::shared_ptr<Transfer>& t) {
    if (t->plain) {
      if (t->time_limit_entry) limits_.erase(*t->time_limit_entry);
      if (t->connect_limit_entry) limits_.erase(*t->connect_limit_entry);
      t->time_limit_entry.reset();
      t->connect_limit_entry.reset();
      plain_.Abort(*t->plain);  // Nothing when it ended on its own.
      plain_opened_ = plain_.opened();
      running_.erase(KeyOf(*t));
      std::lock_guard<std::mutex> lock(mu_);
      MarkDoneLocked(*t);
      return;
    }
    libcurl::easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status_scratch_);
    t->response.status = static_cast<int>(status_scratch_);
    libcurl::easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &t->new_connections);
    libcurl::easy_getinfo(t->easy, CURLINFO_OS_ERRNO, &t->os_errno);
    Shard& shard = shards_[t->shard];
    libcurl::multi_remove_handle(shard.multi, t->easy);
    --shard.running;
    connections_opened_ += t->new_connections;
    running_.erase(t->easy);
    std::lock_guard<std::mutex> lock(mu_);
    MarkDoneLocked(*t);
  }

  void MarkDoneLocked(Transfer& t) {
    t.done = true;
    // The leader's own sees `done`; one not yet awaited sees it in Await.
    if (t.following) t.done_wake.Give(kDone);
  }

  // One multi handle and its connections.
  struct Shard {
    CURLM* multi = nullptr;
    uint32_t index = 0;
    Loop* loop = nullptr;
    size_t running = 0;
    // libcurl's timer (-1: none) and when it is due.
    int timeout_ms = -1;
    std::chrono::steady_clock::time_point deadline;
  };
  static constexpr size_t kShards = 32;
  static constexpr int kMaxWaitMs = 1000;  // What one round waits at most.
  static constexpr Millis kLinger{100};
  // What a waiting Post's hand-off is given.
  static constexpr int kDone = 1;
  static constexpr int kLead = 2;
  // epoll key of the wakeup eventfd; a socket's is (shard << 32) | fd.
  static constexpr uint64_t kWakeKey = ~uint64_t{0};

  Shard shards_[kShards];
  const int epoll_fd_;
  const int wake_fd_;
  const size_t max_in_flight_;
  const Millis connect_timeout_;
  // The leader only.
  PlainConnections plain_;
  // Of the running plain transfers; each is in it until it ends.
  PlainLimits limits_;

  mutable std::mutex mu_;
  bool leading_ = false;       // A Post or the loop's thread leads.
  bool thread_leads_ = false;  // The loop's thread does.
  // A Post leads and another Post came: the leader hands the loop to the
  // loop's thread (set under mu_; read by the leader after each round).
  std::atomic<bool> demote_{false};
  std::thread thread_;  // Started by the first hand-over.
  std::condition_variable thread_wake_;
  // The leader: how soon the first waiting transfer runs out of time.
  int queue_wait_ms_ = 1000;
  bool stopping_ = false;
  std::deque<std::shared_ptr<Transfer>> incoming_;
  std::vector<std::shared_ptr<Transfer>> cancels_;
  // The leader only.
  std::vector<epoll_event> events_ = std::vector<epoll_event>(256);
  std::unordered_map<CURL*, std::shared_ptr<Transfer>> running_;
  int made_errno_ = 0;
  std::vector<std::shared_ptr<Transfer>> watched_;  // With an idle limit.
  long status_scratch_ = 0;
  std::atomic<int64_t> connections_opened_{0};
  std::atomic<int64_t> plain_opened_{0};
  std::atomic<size_t> max_seen_{0};
};

namespace {

size_t DefaultMaxInFlight() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 ||
      limit.rlim_cur == RLIM_INFINITY) {
    return 4096;
  }
  uint64_t soft = limit.rlim_cur;
  return static_cast<size_t>(
      std::max<uint64_t>(16, soft > 256 ? soft - 256 : 0));
}

// Sets up `easy` for `request`; the transfer's state is `t`.
void Configure(CURL* easy, const HttpRequest& request, Transfer& t,
               curl_slist* headers, char* error_buffer,
               Millis connect_timeout) {
  libcurl::easy_setopt(easy, CURLOPT_PRIVATE, &t);
  libcurl::easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  libcurl::easy_setopt(easy, CURLOPT_POST, 1L);
  // The body comes through a read callback, not CURLOPT_POSTFIELDS, so
  // that a re-send needs a rewind, which OnSeek refuses.
  t.body = request.body;
  libcurl::easy_setopt(easy, CURLOPT_READFUNCTION, OnRead);
  libcurl::easy_setopt(easy, CURLOPT_READDATA, &t);
  libcurl::easy_setopt(easy, CURLOPT_SEEKFUNCTION, OnSeek);
  libcurl::easy_setopt(easy, CURLOPT_SEEKDATA, &t);
  libcurl::easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
  libcurl::easy_setopt(easy, CURLOPT_OPENSOCKETDATA, &t);
  libcurl::easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
  // libcurl's upload buffer is 64 KiB unless told; a small body gets the
  // smallest (16 KiB), so that many requests in flight hold less memory.
  libcurl::easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE,
                       static_cast<long>(std::clamp<size_t>(
                           request.body.size(), 16 * 1024, 64 * 1024)));
  libcurl::easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  libcurl::easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
  libcurl::easy_setopt(easy, CURLOPT_HEADERDATA, &t);
  libcurl::easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  libcurl::easy_setopt(easy, CURLOPT_WRITEDATA, &t);
  libcurl::easy_setopt(easy, CURLOPT_ERRORBUFFER, error_buffer);
  libcurl::easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  libcurl::easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
  libcurl::easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  libcurl::easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                       static_cast<long>(connect_timeout.count()));
}

// What an ended transfer amounts to.
// What a transfer the loop ended on its own account amounts to (either
// client's: `response` and `too_large` are the client's): cancelled, not
// started, never admitted in time, cut at the size bound, stopped by its
// reader, or silent too long. Nullopt when it was none of these.
std::optional<TransportResult> EndedByTheLoop(Transfer& t,
                                              HttpResponse& response,
                                              bool too_large,
                                              const TransferOptions& options) {
  if (t.cancelled) {
    return TransportError{TransportErrorKind::kCancelled, "request cancelled"};
  }
  if (t.early_error) return *t.early_error;
  if (t.timed_out_waiting) {
    return TransportError{TransportErrorKind::kTimedOut,
                          "no complete answer within " +
                              FormatDuration(*options.time_limit) +
                              " (the request waited for a free slot)"};
  }
  if (too_large) {
    return TransportError{TransportErrorKind::kTooLarge,
                          "response larger than " +
                              std::to_string(options.max_response_bytes) +
                              " bytes"};
  }
  if (response.stopped_by_reader) return std::move(response);
  if (t.idle_cut) {
    return TransportError{
        TransportErrorKind::kIdle,
        "stream silent for " + FormatDuration(options.idle_limit)};
  }
  return std::nullopt;
}

TransportResult ResultOf(Transfer& t, const TransferOptions& options,
                         const char* error_buffer) {
  t.response.reused_connection = t.new_connections == 0;
  if (std::optional<TransportResult> ended =
          EndedByTheLoop(t, t.response, t.too_large, options))
    return std::move(*ended);
  if (!t.finished) {
    return TransportError{TransportErrorKind::kOther,
                          "transfer loop ended unexpectedly"};
  }
  if (t.resend_refused) {
    return TransportError{TransportErrorKind::kClosed,
                          "the server closed a reused connection without "
                          "answering (the request is not re-sent)"};
  }
  CURLcode code = t.code;
  if (code != CURLE_OK && IsDescriptorShortage(t.socket_errno)) {
    return DescriptorShortage(t.socket_errno);
  }
  if (code != CURLE_OK && IsDescriptorShortage(t.os_errno)) {
    return DescriptorShortage(t.os_errno);
  }
  if (code != CURLE_OK) {
    std::string detail =
        error_buffer[0] ? error_buffer : libcurl::easy_strerror(code);
    if (code == CURLE_OPERATION_TIMEDOUT && options.time_limit) {
      detail =
          "no complete answer within " + FormatDuration(*options.time_limit);
    }
    return TransportError{KindOf(code), detail};
  }
  return std::move(t.response);
}

// What an ended plain transfer amounts to.
TransportResult PlainResultOf(Transfer& t, const TransferOptions& options) {
  PlainExchange& x = *t.plain;
  x.response.reused_connection = !x.new_connection;
  if (std::optional<TransportResult> ended =
          EndedByTheLoop(t, x.response, x.too_large, options))
    return std::move(*ended);
  if (t.plain_timed_out) {
    return TransportError{TransportErrorKind::kTimedOut,
                          "no complete answer within " +
                              FormatDuration(*options.time_limit)};
  }
  if (t.plain_connect_timed_out) {
    return TransportError{TransportErrorKind::kTimedOut,
                          "could not connect to " + x.target.url.host +
                              " port " + std::to_string(x.target.url.port) +
                              " within the connection limit"};
  }
  if (x.error) return *x.error;
  if (!x.complete) {
    return TransportError{TransportErrorKind::kOther,
                          "transfer loop ended unexpectedly"};
  }
  return std::move(x.response);
}

// Why libcurl could not make a handle: not loaded (for want of
// descriptors, or at all), or out of memory.
TransportError NoCurlHandle() {
  if (!libcurl::Loaded()) {
    const int shortage = libcurl::DescriptorShortage();
    return shortage != 0 ? DescriptorShortage(shortage)
                         : TransportError{TransportErrorKind::kUnavailable,
                                          libcurl::Error()};
  }
  return TransportError{TransportErrorKind::kOther,
                        "could not create a curl handle"};
}

}  // namespace

CurlTransport::CurlTransport() : CurlTransport(Options()) {}
CurlTransport::CurlTransport(Options options) : options_(options) {}
CurlTransport::~CurlTransport() {
  if (std::shared_ptr<Loop> loop = CurrentLoop()) loop->Stop();
}

// The loop, and with it libcurl, comes with the first transfer. A loop
// that could not be made (no descriptor for its epoll or wake-ups, libcurl
// not loaded) is not kept: the next transfer tries again.
std::shared_ptr<CurlTransport::Loop> CurlTransport::LoopOrError(
    TransportError& error) {
  std::lock_guard<std::mutex> lock(loop_mu_);
  if (loop_) return loop_;
  auto loop = std::make_shared<Loop>(
      options_.max_in_flight > 0 ? options_.max_in_flight
                                 : DefaultMaxInFlight(),
      options_.connect_timeout);
  const int made_errno = loop->made_errno();
  if (loop->ok()) {
    loop_ = loop;
    return loop_;
  }
  error = IsDescriptorShortage(made_errno)
              ? DescriptorShortage(made_errno)
              : TransportError{TransportErrorKind::kOther,
                               std::string("could not make the transfer "
                                           "loop's epoll or eventfd: ") +
                                   std::strerror(made_errno)};
  return nullptr;
}

std::shared_ptr<CurlTransport::Loop> CurlTransport::CurrentLoop() const {
  std::lock_guard<std::mutex> lock(loop_mu_);
  return loop_;
}

int64_t CurlTransport::connections_opened() const {
  std::shared_ptr<Loop> loop = CurrentLoop();
  return loop ? loop->connections_opened() : 0;
}
size_t CurlTransport::max_in_flight_seen() const {
  std::shared_ptr<Loop> loop = CurrentLoop();
  return loop ? loop->max_in_flight_seen() : 0;
}
size_t CurlTransport::waiting() const {
  std::shared_ptr<Loop> loop = CurrentLoop();
  return loop ? loop->waiting() : 0;
}

TransportResult CurlTransport::Post(const HttpRequest& request,
                                    const TransferOptions& options) {
  if (options.cancel.cancelled()) {
    return TransportError{TransportErrorKind::kCancelled, "cancelled"};
  }
  TransportError no_loop;
  std::shared_ptr<Loop> loop = LoopOrError(no_loop);
  if (!loop) return no_loop;
  if (std::optional<PlainTarget> target = PlainTargetOf(request.url))
    return PostPlain(loop, std::move(*target), request, options);
  CURL* easy = libcurl::easy_init();
  if (easy == nullptr) return NoCurlHandle();
  auto t = std::make_shared<Transfer>();
  t->easy = easy;
  t->options = &options;
  t->submitted = std::chrono::steady_clock::now();

  HeaderList headers;
  for (const auto& [name, value] : request.headers) {
    headers.Add(name + ": " + value);
  }
  headers.Add("Expect:");  // No 100-continue round trip for large bodies.
  char error_buffer[CURL_ERROR_SIZE] = {0};
  Configure(easy, request, *t, headers.get(), error_buffer,
            options_.connect_timeout);

  std::weak_ptr<Transfer> weak = t;
  CancelCallback on_cancel(options.cancel, [loop, weak] {
    if (std::shared_ptr<Transfer> live = weak.lock()) loop->Cancel(live);
  });
  loop->Submit(t);
  loop->Await(*t);
  TransportResult result = ResultOf(*t, options, error_buffer);
  libcurl::easy_cleanup(easy);
  return result;
}

TransportResult CurlTransport::PostPlain(const std::shared_ptr<Loop>& loop,
                                         PlainTarget target,
                                         const HttpRequest& request,
                                         const TransferOptions& options) {
  HttpHeaders headers = request.headers;
  // libcurl sends these unless told otherwise; a server may look for them.
  if (!FindHeader(headers, "Accept")) headers.emplace_back("Accept", "*/*");
  Result<std::string> head = http1::PostHead(target.url, headers,
                                             request.body.size());
  if (!head.ok()) {
    return TransportError{TransportErrorKind::kOther, head.status().message()};
  }
  auto t = std::make_shared<Transfer>();
  t->options = &options;
  t->submitted = std::chrono::steady_clock::now();
  t->plain = std::make_unique<PlainExchange>();
  PlainExchange& x = *t->plain;
  x.target = std::move(target);
  x.head = std::move(*head);
  x.body = request.body;
  x.options = &options;
  x.owner = t.get();

  std::weak_ptr<Transfer> weak = t;
  CancelCallback on_cancel(options.cancel, [loop, weak] {
    if (std::shared_ptr<Transfer> live = weak.lock()) loop->Cancel(live);
  });
  loop->Submit(t);
  loop->Await(*t);
  return PlainResultOf(*t, options);
}

CurlTransport& SharedCurlTransport() {
  static CurlTransport* transport = new CurlTransport();
  return *transport;
}

}  // namespace steps
