#include "tools/mcp_stdio_session.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <utility>

#include "core/log.h"
#include "process/live_process.h"
#include "process/output_capture.h"
#include "process/process.h"
#include "process/unique_fd.h"
#include "tools/json_rpc.h"
#include "tools/text.h"

namespace steps {
namespace {

// Without a pidfd, how often the server's state is checked.
constexpr Millis kExitCheckInterval{20};
// The longest single wait in poll: the loop looks at the clock again after
// it (a fake clock, a deadline moved by nobody).
constexpr Millis kMaxPollWait{200};
// Bytes read from one pipe before the others get a turn.
constexpr size_t kReadBurst = 1024 * 1024;
// How long a notifications/cancelled may take to be written.
constexpr Millis kCancelNoticeWait{200};
// Non-JSON lines from stdout logged (the rest only counted).
constexpr int kGarbageLogged = 5;

// An eventfd a cancel callback writes to; shared with the callback, which
// may run after the wait is over.
struct Wakeup {
  UniqueFd fd{eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  void Signal() const {
    uint64_t one = 1;
    ssize_t n = write(fd.get(), &one, sizeof one);
    (void)n;
  }
  void Drain() const {
    uint64_t value;
    ssize_t n = read(fd.get(), &value, sizeof value);
    (void)n;
  }
};

// The running server and the exchange with it.
class StdioSession : public McpSession {
 public:
  StdioSession(std::string server, std::unique_ptr<LiveProcess> process,
               const McpClientOptions& options, Clock& clock)
      : server_(std::move(server)),
        process_(std::move(process)),
        options_(options),
        clock_(clock),
        reader_(options.max_line_bytes),
        stderr_lines_(4096, [this](std::string_view line) { OnStderr(line); }) {
  }

  ~StdioSession() override { process_->Stop(options_.kill_grace); }

  // Sends a request and waits for its answer: the result, or why there is
  // none. A deadline or cancellation also sends notifications/cancelled.
  Result<nlohmann::json> Request(const std::string& method,
                                 const nlohmann::json& params,
                                 Deadline deadline,
                                 const CancelToken& cancel) override {
    const int64_t id = next_id_++;
    waiting_id_ = id;
    response_.reset();
    Queue(JsonRpcRequest(id, method, params));
    Status s = Pump(deadline, cancel, [this] { return response_.has_value(); });
    waiting_id_.reset();
    if (!s.ok()) {
      if (s.code() == StatusCode::kDeadlineExceeded ||
          s.code() == StatusCode::kCancelled) {
        SendCancelled(id, s.code() == StatusCode::kCancelled
                              ? "cancelled by the client"
                              : "the client's time limit was reached");
      }
      return s;
    }
    nlohmann::json response = std::move(*response_);
    response_.reset();
    return McpResponseResult(method, std::move(response));
  }

  // Queues a notification; it goes out with the next exchange.
  void Notify(const std::string& method,
              const nlohmann::json& params) override {
    Queue(JsonRpcNotification(method, params));
  }

  // Why the server can take no more requests; "" while it can.
  const std::string& gone() const override { return gone_; }

  // A note for an error message: lines that were not JSON-RPC, the last of
  // stderr. "" when there is nothing to add.
  std::string Evidence() const override {
    std::string note;
    if (garbage_lines_ > 0) {
      note += "; it wrote " + std::to_string(garbage_lines_) +
              (garbage_lines_ == 1 ? " line" : " lines") + " to stdout that " +
              (garbage_lines_ == 1 ? "is" : "are") +
              " not JSON-RPC (the first: '" + first_garbage_ + "')";
    }
    std::string tail = StderrTail();
    if (!tail.empty()) note += "; the end of its stderr: " + tail;
    return note;
  }

 private:
  void Queue(const std::string& line) {
    pending_ += line;
    pending_ += '\n';
  }

  void SendCancelled(int64_t id, const std::string& reason) {
    if (!gone_.empty()) return;
    Notify("notifications/cancelled", {{"requestId", id}, {"reason", reason}});
    Pump(Deadline::After(clock_, kCancelNoticeWait), CancelToken(),
         [this] { return pending_.empty(); });
  }

  // Exchanges messages until done() holds. Errors: kDeadlineExceeded,
  // kCancelled, kUnavailable (the server is gone; gone() says why).
  Status Pump(Deadline deadline, const CancelToken& cancel,
              const std::function<bool()>& done) {
    auto wake = std::make_shared<Wakeup>();
    CancelCallback on_cancel(cancel, [wake] { wake->Signal(); });
    while (true) {
      if (done()) return Status::Ok();
      if (!gone_.empty()) {
        return Status(StatusCode::kUnavailable, "the server is gone: " + gone_);
      }
      if (cancel.cancelled())
        return Status(StatusCode::kCancelled, "cancelled");
      SteadyTime now = clock_.Now();
      if (deadline.is_set() && now >= deadline.at()) {
        return Status(StatusCode::kDeadlineExceeded, "time ran out");
      }
      Millis wait = kMaxPollWait;
      if (deadline.is_set()) {
        wait = std::min(wait, std::chrono::ceil<Millis>(deadline.at() - now));
      }
      if (process_->exit_fd() < 0) wait = std::min(wait, kExitCheckInterval);
      PollOnce(wait, *wake);
    }
  }

  void PollOnce(Millis wait, const Wakeup& wake) {
    struct pollfd fds[5];
    nfds_t n = 0;
    int out_i = -1, err_i = -1, in_i = -1, exit_i = -1;
    if (!out_eof_) {
      out_i = static_cast<int>(n);
      fds[n++] = {process_->stdout_fd(), POLLIN, 0};
    }
    if (!err_eof_ && process_->stderr_fd() >= 0) {
      err_i = static_cast<int>(n);
      fds[n++] = {process_->stderr_fd(), POLLIN, 0};
    }
    if (!pending_.empty() && process_->stdin_fd() >= 0) {
      in_i = static_cast<int>(n);
      fds[n++] = {process_->stdin_fd(), POLLOUT, 0};
    }
    if (process_->exit_fd() >= 0) {
      exit_i = static_cast<int>(n);
      fds[n++] = {process_->exit_fd(), POLLIN, 0};
    }
    fds[n++] = {wake.fd.get(), POLLIN, 0};
    int rc = poll(fds, n, static_cast<int>(std::max<int64_t>(0, wait.count())));
    if (rc < 0) return;  // EINTR: the loop looks again.
    if (err_i >= 0 && fds[err_i].revents) ReadStderr();
    if (out_i >= 0 && fds[out_i].revents) ReadStdout();
    if (in_i >= 0 && fds[in_i].revents) WritePending();
    if (fds[n - 1].revents) wake.Drain();
    bool exited = exit_i >= 0 ? fds[exit_i].revents != 0 : process_->Exited();
    if (exited && process_->Exited()) OnExit();
  }

  void ReadStdout() {
    char buf[64 * 1024];
    size_t total = 0;
    while (!out_eof_ && gone_.empty() && total < kReadBurst) {
      ssize_t got = read(process_->stdout_fd(), buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EAGAIN) return;
      if (got <= 0) {
        out_eof_ = true;
        // A server that closes stdout is usually on its way out: a moment
        // lets the message say how it ended.
        if (process_->exit_fd() >= 0 && !process_->Exited()) {
          struct pollfd p = {process_->exit_fd(), POLLIN, 0};
          poll(&p, 1, 100);
        }
        SetGone(process_->Exited() ? "it exited" : "it closed its stdout");
        return;
      }
      total += static_cast<size_t>(got);
      Status s = reader_.Feed(std::string_view(buf, static_cast<size_t>(got)));
      while (std::optional<std::string> line = reader_.Next()) {
        HandleLine(*line);
      }
      if (!s.ok()) {
        SetGone("it sent " + s.message() + " on stdout (the limit is " +
                std::to_string(options_.max_line_bytes) + " bytes a message)");
        process_->Stop(Millis(0));
      }
    }
  }

  void ReadStderr() {
    char buf[16 * 1024];
    size_t total = 0;
    while (!err_eof_ && total < kReadBurst) {
      ssize_t got = read(process_->stderr_fd(), buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EAGAIN) return;
      if (got <= 0) {
        err_eof_ = true;
        stderr_lines_.Flush();
        return;
      }
      total += static_cast<size_t>(got);
      std::string_view data(buf, static_cast<size_t>(got));
      stderr_tail_.append(data);
      if (stderr_tail_.size() > 2 * options_.stderr_tail_bytes) {
        stderr_tail_.erase(0, stderr_tail_.size() - options_.stderr_tail_bytes);
      }
      stderr_lines_.Feed(data);
    }
  }

  void OnStderr(std::string_view line) {
    if (stderr_logged_ >= options_.max_stderr_log_bytes) return;
    stderr_logged_ += line.size() + 1;
    LogEvent(LogLevel::kDebug, "mcp.stderr",
             {{"server", server_}, {"line", SanitizeUtf8(std::string(line))}});
    if (stderr_logged_ >= options_.max_stderr_log_bytes) {
      LogEvent(LogLevel::kDebug, "mcp.stderr_cut",
               {{"server", server_},
                {"note", "further stderr is read but not logged"}});
    }
  }

  std::string StderrTail() const {
    std::string_view tail(stderr_tail_);
    if (tail.size() > options_.stderr_tail_bytes) {
      tail.remove_prefix(tail.size() - options_.stderr_tail_bytes);
    }
    while (!tail.empty() &&
           (tail.back() == '\n' || tail.back() == '\r' || tail.back() == ' ')) {
      tail.remove_suffix(1);
    }
    return SanitizeUtf8(std::string(tail));
  }

  void WritePending() {
    while (!pending_.empty()) {
      ssize_t put = WriteWithoutSigpipe(process_->stdin_fd(), pending_.data(),
                                        pending_.size());
      if (put < 0 && errno == EINTR) continue;
      if (put < 0 && errno == EAGAIN) return;
      if (put < 0) {
        pending_.clear();
        SetGone(ExitsSoon() ? "it exited" : "it stopped reading its stdin");
        return;
      }
      pending_.erase(0, static_cast<size_t>(put));
    }
  }

  // Whether the server has exited, or does within kExitGrace: a server
  // that crashed at start closes its stdin by exiting, and the write that
  // finds it closed may come before the exit is seen. That it exited (and
  // how) is the news, not that it stopped reading.
  bool ExitsSoon() {
    constexpr int kExitGraceMs = 200;
    if (process_->Exited()) return true;
    const int fd = process_->exit_fd();
    if (fd < 0) return false;
    struct pollfd p = {fd, POLLIN, 0};
    while (poll(&p, 1, kExitGraceMs) < 0 && errno == EINTR) {
    }
    return process_->Exited();
  }

  // The server exited: what it wrote before is still read, then it is gone.
  void OnExit() {
    ReadStdout();
    ReadStderr();
    SetGone("it exited");
  }

  void SetGone(const std::string& why) {
    if (!gone_.empty()) return;
    gone_ = why;
    if (std::optional<std::string> end = process_->DescribeExit()) {
      if (why == "it exited") {
        gone_ = "it " + *end;
      } else {
        gone_ += " (it " + *end + ")";
      }
    }
    LogEvent(LogLevel::kDebug, "mcp.server_gone",
             {{"server", server_}, {"why", gone_}});
  }

  void HandleLine(const std::string& line) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) return;
    std::optional<nlohmann::json> message = ParseJsonRpcLine(line);
    if (!message) return Garbage(line);
    if (message->is_array()) {
      for (const nlohmann::json& m : *message) HandleMessage(m, line);
      return;
    }
    HandleMessage(*message, line);
  }

  void Garbage(const std::string& line) {
    if (garbage_lines_++ == 0) first_garbage_ = QuoteMcpText(line);
    if (garbage_lines_ <= kGarbageLogged) {
      LogEvent(LogLevel::kWarn, "mcp.not_json_rpc",
               {{"server", server_}, {"line", QuoteMcpText(line)}});
    }
  }

  void HandleMessage(const nlohmann::json& m, const std::string& line) {
    switch (ClassifyJsonRpc(m)) {
      case JsonRpcKind::kResponse:
        if (waiting_id_ && JsonRpcIntId(m) == waiting_id_) {
          response_ = m;
        } else {
          LogEvent(LogLevel::kDebug, "mcp.stray_response",
                   {{"server", server_}, {"line", QuoteMcpText(line)}});
        }
        return;
      case JsonRpcKind::kRequest:
        return Answer(m);
      case JsonRpcKind::kNotification:
        return Notice(m);
      case JsonRpcKind::kInvalid:
        return Garbage(line);
    }
  }

  void Answer(const nlohmann::json& request) {
    Queue(AnswerMcpRequest(server_, request));
  }

  void Notice(const nlohmann::json& n) { LogMcpNotification(server_, n); }

  std::string server_;
  std::unique_ptr<LiveProcess> process_;
  McpClientOptions options_;
  Clock& clock_;
  JsonLineReader reader_;
  LineSplitter stderr_lines_;
  std::string stderr_tail_;
  size_t stderr_logged_ = 0;
  std::string pending_;  // Bytes queued for the server's stdin.
  int64_t next_id_ = 1;
  std::optional<int64_t> waiting_id_;
  std::optional<nlohmann::json> response_;
  bool out_eof_ = false;
  bool err_eof_ = false;
  std::string gone_;
  int garbage_lines_ = 0;
  std::string first_garbage_;
};

}  // namespace

Result<std::unique_ptr<McpSession>> StartMcpStdioSession(
    const McpServerSpec& spec, ProcessLauncher& launcher,
    const std::string& working_dir, Clock& clock,
    const McpClientOptions& options) {
  ProcessRequest request = spec.argv.empty()
                               ? ProcessRequest::Shell(spec.command)
                               : ProcessRequest::Exec(spec.argv);
  request.working_dir = working_dir;
  request.env = spec.env;
  Result<std::unique_ptr<LiveProcess>> process = launcher.Start(request);
  if (!process.ok()) {
    return Status(StatusCode::kUnavailable,
                  "cannot start " +
                      (spec.argv.empty() ? "`" + spec.command + "`"
                                         : "'" + spec.argv[0] + "'") +
                      ": " + process.status().message());
  }
  return std::unique_ptr<McpSession>(std::make_unique<StdioSession>(
      spec.name, std::move(*process), options, clock));
}

}  // namespace steps
