#include "server/http/http_server.h"

#include "server/http/access_log.h"

#include <fcntl.h>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <cctype>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/last_resort.h"
#include "core/log.h"
#include "core/thread_priority.h"
#include "server/http/http_limits.h"
#include "server/http/route_table.h"

namespace autoglm {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(60);

// Asio opens sockets without O_CLOEXEC; a tool started later must not inherit them.
void set_close_on_exec(int fd) {
  const int flags = fcntl(fd, F_GETFD);
  if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// The reply to a request that could not be read, or none when the connection just ends.
std::optional<Reply> read_error_reply(beast::error_code ec, int64_t max_body_bytes) {
  if (ec == http::error::body_limit)
    return error_reply(413, "the request body is larger than " + std::to_string(max_body_bytes) + " bytes");
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return error_reply(431, "the request's header fields, chunk extensions or trailer exceed " +
                                std::to_string(ec == http::error::header_limit ? kMaxHeaderBytes : kMaxUnparsedBytes) +
                                " bytes");
  if (ec.category() == http::make_error_code(http::error::bad_target).category())
    return error_reply(400, "malformed HTTP request: " + ec.message());
  return std::nullopt;
}

bool is_probe(const HttpRequest& r) {
  const RouteLookup found = find_route(r.method, path_of(r.target));
  return found.route && found.route->access == Access::kProbe;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpService& api, net::thread_pool& workers, std::atomic<int64_t>& open,
          BodyBudget& bodies, std::atomic<int64_t>& preparing, AccessLog& access_log)
      : stream_(std::move(socket)),
        api_(api),
        workers_(workers),
        open_(open),
        bodies_(bodies),
        preparing_(preparing),
        access_log_(access_log) {
    ++open_;
  }
  ~Session() { --open_; }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

 private:
  // The headers first: a request the service refuses (no route, wrong key, over its rate, the
  // server draining) is answered before its body is read, and a body is read only while the
  // bytes of bodies in flight stay under max_body_bytes_in_flight, in all and per client.
  void read_request() {
    access_ = AccessEntry{};
    access_.started = std::chrono::steady_clock::now();
    origin_.clear();
    head_only_ = false;
    parser_.emplace();
    body_limit_ = api_.config().max_body_bytes;
    apply_request_limits(*parser_, body_limit_);
    request_deadline_ = std::chrono::steady_clock::now() + kIdleTimeout;  // headers and body together
    stream_.expires_at(request_deadline_);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  bool read_failed(beast::error_code ec) {
    if (!ec) return false;
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted) {
      close();
    } else if (auto reply = read_error_reply(ec, body_limit_)) {
      send(std::move(*reply), false);
    } else {
      close();
    }
    return true;
  }

  void on_header(beast::error_code ec) {
    if (read_failed(ec)) return;
    auto& req = parser_->get();
    head_ = HttpRequest{};
    head_.method = std::string(req.method_string());
    head_.target = std::string(req.target());
    head_.authorization = std::string(req[http::field::authorization]);
    head_.origin = origin_ = std::string(req[http::field::origin]);
    head_.cache_control = std::string(req[http::field::cache_control]);
    head_.headers.clear();
    for (const auto& field : req) {
      std::string name(field.name_string());
      for (char& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      head_.headers.emplace_back(std::move(name), std::string(field.value()));
    }
    head_only_ = req.method() == http::verb::head;
    beast::error_code ec_peer;
    const auto peer = stream_.socket().remote_endpoint(ec_peer);
    if (!ec_peer) head_.client_address = peer.address().to_string();
    access_.started = std::chrono::steady_clock::now();  // from the headers, not the idle wait
    access_.method = head_.method;
    access_.path = path_of(head_.target);
    access_.key_id = api_key_id(api_key_of(head_));
    access_.client = head_.client_address;
    if (auto refused = api_.admit(head_)) return send(std::move(*refused), false);  // the body is never read
    body_limit_ = api_.body_limit(head_);                                           // larger for uploads
    parser_->body_limit(uint64_t(body_limit_));
    // The budget counts bytes as they arrive; a body announced larger than what is left of it
    // now is refused before it is read.
    body_budget_ = bodies_.open(budget_client());
    const auto announced = parser_->content_length();
    if (announced && !body_budget_->fits(int64_t(*announced), budget_caps())) return send(too_much_in_flight(), false);
    // A client that asked to be told before it sends the body (curl does past 1 MiB) is told.
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_.socket(), net::buffer(kContinue),
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                if (ec) return self->close();
                                self->read_body();
                              });
    }
    read_body();
  }

  // A piece at a time, each counted against the budget: a client that stops sending (or
  // never starts) is closed after body_timeout_s, holding only what it sent.
  void read_body() {
    if (parser_->is_done()) return on_request();
    const auto wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(api_.config().body_timeout_s));
    stream_.expires_at(std::min(request_deadline_, std::chrono::steady_clock::now() + wait));
    http::async_read_some(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body_bytes(ec); });
  }

  void on_body_bytes(beast::error_code ec) {
    if (read_failed(ec)) return;
    if (!body_budget_->grow_to(int64_t(parser_->get().body().size()), budget_caps()))
      return send(too_much_in_flight(), false);
    read_body();
  }

  // Whose share of the budget a body takes: its API key when it is one of the server's (routes
  // that need no key read bodies too: made-up keys must not each get a share), else its address.
  std::string budget_client() const {
    if (api_.accepts_key(api_key_of(head_))) return "key " + access_.key_id;
    return "address " + head_.client_address;
  }

  // A request's own body always fits its client's share (a single upload may be larger).
  BodyBudget::Caps budget_caps() const {
    const ServerConfig& c = api_.config();
    return {c.max_body_bytes_in_flight, std::max(body_budget_share(c), body_limit_)};
  }

  static Reply too_much_in_flight() {
    Reply busy = error_reply(503, "too much request data in flight; try again shortly", "", "service_unavailable");
    busy.headers.emplace_back("Retry-After", "1");
    return busy;
  }

  void on_request() {
    auto& req = parser_->get();
    HttpRequest r = std::move(head_);
    r.body = std::move(req.body());
    keep_alive_ = req.keep_alive();
    // A liveness or readiness probe reads a few flags: answered here at once, never queued
    // behind slow preparations.
    if (is_probe(r)) {
      body_budget_.reset();
      return send(api_.handle_admitted(r), keep_alive_);
    }
    // Preparing a request (parsing, grammars, the chat template, tokenizing) runs on a worker,
    // so a slow one never holds an I/O thread that other clients' bytes need. The body's
    // budget is held until the preparation is done with it, and takes its parsed form too.
    r.hold_memory = [budget = body_budget_, caps = budget_caps(), body = int64_t(r.body.size())](int64_t bytes) {
      return budget->grow_to(body + bytes, caps);
    };
    ++preparing_;
    net::post(workers_, [self = shared_from_this(), r = std::move(r), budget = std::move(body_budget_)] {
      use_background_priority();  // the engine's forward passes come first
      auto reply = std::make_shared<Reply>(self->api_.handle_admitted(r));
      --self->preparing_;
      net::dispatch(self->stream_.get_executor(), [self, reply] {
        if (!reply->stream) return self->send(std::move(*reply), self->keep_alive_);
        self->start_generation(std::move(*reply));
      });
    });
  }

  void send(Reply reply, bool keep_alive) {
    api_.metrics().count_status(reply.status);
    auto res = std::make_shared<http::response<http::string_body>>(http::status(reply.status), 11);
    res->set(http::field::server, "open-autoglm");
    res->set(http::field::content_type, reply.content_type);
    for (const auto& [k, v] : reply.headers) res->set(k, v);
    for (const auto& [k, v] : api_.cors_headers(origin_)) res->set(k, v);
    res->keep_alive(keep_alive);
    access_.status = reply.status;
    note_answering_model(reply.answered_by);
    access_.prompt_tokens = reply.prompt_tokens;
    access_.completion_tokens = reply.completion_tokens;
    access_log_.write(access_);  // now: once the client has the reply, the server may be stopping
    res->body() = std::move(reply.body);
    res->prepare_payload();
    stream_.expires_after(kIdleTimeout);
    auto done = [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->after_reply(keep_alive);
    };
    if (!head_only_) return http::async_write(stream_, *res, std::move(done));
    // HEAD: the headers GET would send (Content-Length included), no body.
    auto serializer = std::make_shared<http::response_serializer<http::string_body>>(*res);
    http::async_write_header(stream_, *serializer,
                             [serializer, done = std::move(done)](beast::error_code ec, size_t n) { done(ec, n); });
  }

  // Generation: events arrive on the engine thread and are handled on this strand.
  void start_generation(Reply reply) {
    handle_ = reply.stream;
    consume_ = std::move(reply.consume);
    generation_headers_ = std::move(reply.headers);
    answered_by_ = std::move(reply.answered_by);
    decided_ = std::move(reply.decided);
    streaming_ = reply.streaming;
    input_end_cancels_ = reply.input_end_cancels;
    stream_.expires_never();
    head_sent_ = false;
    if (streaming_) {
      api_.metrics().count_status(200);
      access_.status = 200;
      if (!decided_) write_stream_head();  // else with the first event
    }
    watch_for_disconnect();
    std::weak_ptr<Session> weak = shared_from_this();
    auto executor = stream_.get_executor();
    handle_->set_notify([weak, executor] {
      net::post(executor, [weak] {
        if (auto self = weak.lock()) self->drain();
      });
    });
    drain();  // events that came before the notifier was set
  }

  // The head of an SSE reply: chunked, so that the connection outlives the stream
  // (keep-alive, as clients expect).
  void write_stream_head() {
    head_sent_ = true;
    pending_ +=
        "HTTP/1.1 200 OK\r\nServer: open-autoglm\r\nContent-Type: text/event-stream\r\n"
        "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
    if (!keep_alive_) pending_ += "Connection: close\r\n";
    if (decided_) take_decided(generation_headers_, answered_by_);
    for (const auto& [k, v] : generation_headers_) pending_ += k + ": " + v + "\r\n";
    for (const auto& [k, v] : api_.cors_headers(origin_)) pending_ += k + ": " + v + "\r\n";
    pending_ += "\r\n";
    note_answering_model(answered_by_);
    flush();
  }

  // What the first event decided: its headers after the reply's own, and who answered.
  void take_decided(std::vector<std::pair<std::string, std::string>>& headers, AnsweredBy& answered) {
    Reply::Decided d = decided_();
    if (d.answered_by) {
      answered = *d.answered_by;
      for (auto& h : answered_by_headers(answered)) headers.push_back(std::move(h));
    }
    for (auto& h : d.headers) headers.push_back(std::move(h));
  }

  // The access log names the model that answered a generation and its route.
  void note_answering_model(const AnsweredBy& answered) {
    access_.model = answered.model;
    access_.route = answered.route;
  }

  // A client that goes away cancels its request: the read ends with an error. A half-close
  // (end of file: the client has sent all it will, and still reads) is not one; nor are bytes
  // sent while it waits (a pipelined next request), which are kept, up to a bound, for when
  // the reply is out.
  void watch_for_disconnect() {
    probing_ = true;
    stream_.socket().async_read_some(net::buffer(probe_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->probing_ = false;
      const bool overflow = self->buffer_.size() + n > self->buffer_.max_size();
      if (n > 0 && !overflow)
        self->buffer_.commit(net::buffer_copy(self->buffer_.prepare(n), net::buffer(self->probe_.data(), n)));
      if (self->resume_after_probe_) {  // the reply is out and the connection stays: next request
        self->resume_after_probe_ = false;
        return overflow ? self->close() : self->read_request();
      }
      if (!self->handle_ || self->complete_) return;
      if (ec == net::error::eof) {  // half-closed, or gone: a stream finds out with its next write
        if (self->input_end_cancels_) self->handle_->cancel();  // a task's tools must not outlive it
        self->keep_alive_ = false;
        if (self->streaming_ && self->head_sent_) {
          self->append_chunk(": \n\n");  // an SSE comment: a closed peer answers it with a reset
          self->flush();
        }
        // Pending operations are what keep a session alive: this wait holds it until the
        // reply is out (close() cancels it) or the server stops.
        self->hold_.expires_at(std::chrono::steady_clock::time_point::max());
        self->hold_.async_wait([self](beast::error_code) {});
        return;  // a plain reply is still written when it is ready
      }
      if (ec || overflow) return self->handle_->cancel();
      self->watch_for_disconnect();
    });
  }

  void drain() {
    if (!handle_ || complete_) return;
    StreamEvent ev;
    size_t choice = 0;
    while (!complete_ && handle_->try_next(ev, choice)) {
      ReplyChunk chunk = consume_(ev, choice);
      complete_ = chunk.complete;
      access_.prompt_tokens = chunk.prompt_tokens;
      access_.completion_tokens = chunk.completion_tokens;
      if (streaming_) {
        if (!head_sent_) write_stream_head();
        append_chunk(chunk.bytes);
        if (complete_) {
          pending_ += "0\r\n\r\n";  // the last chunk
          access_log_.write(access_);
        }
      } else if (chunk.complete) {
        Reply r;
        r.status = chunk.status;
        r.body = std::move(chunk.bytes);
        r.headers = std::move(generation_headers_);
        r.answered_by = answered_by_;
        if (decided_) take_decided(r.headers, r.answered_by);
        r.prompt_tokens = chunk.prompt_tokens;
        r.completion_tokens = chunk.completion_tokens;
        handle_->set_notify(nullptr);
        return send(std::move(r), keep_alive_);
      }
    }
    if (streaming_) flush();
  }

  void flush() {
    if (writing_ || pending_.empty()) {
      if (!writing_ && complete_ && streaming_) finish_stream();
      return;
    }
    writing_ = true;
    auto data = std::make_shared<std::string>(std::move(pending_));
    pending_.clear();
    start_write_deadline();
    net::async_write(stream_.socket(), net::buffer(*data),
                     [self = shared_from_this(), data](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       self->write_deadline_.cancel();
                       if (ec) {
                         if (self->handle_) self->handle_->cancel();
                         return self->close();
                       }
                       self->flush();
                     });
  }

  // A client that stops reading leaves a stream's write pending: past stream_write_timeout_s its
  // request is cancelled (the sequence and its KV go) and the connection closed.
  void start_write_deadline() {
    write_deadline_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(api_.config().stream_write_timeout_s)));
    write_deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      // The write finished in time (a tick queued as it finished finds a later write's expiry).
      if (ec || !self->writing_ || self->write_deadline_.expiry() > std::chrono::steady_clock::now()) return;
      if (self->handle_) self->handle_->cancel();
      self->close();
    });
  }

  // One chunk of the chunked stream.
  void append_chunk(const std::string& bytes) {
    if (bytes.empty()) return;
    char size[24];
    std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
    pending_ += size;
    pending_ += bytes;
    pending_ += "\r\n";
  }

  void finish_stream() {
    if (handle_) handle_->set_notify(nullptr);
    after_reply(keep_alive_);
  }

  // The reply is out: the next request, or the end of the connection. A disconnect probe
  // still reading is stopped first; what it read belongs to the next request.
  void after_reply(bool keep_alive) {
    if (!keep_alive) return close();
    if (handle_) handle_->set_notify(nullptr);
    handle_.reset();
    consume_ = nullptr;
    decided_ = nullptr;
    streaming_ = complete_ = false;
    if (!probing_) return read_request();
    resume_after_probe_ = true;
    beast::error_code ec;
    stream_.socket().cancel(ec);
  }

  void close() {
    hold_.cancel();
    write_deadline_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  HttpService& api_;
  net::thread_pool& workers_;
  std::atomic<int64_t>& open_;       // the server's count of open connections
  BodyBudget& bodies_;               // the server's bytes of request bodies held
  std::atomic<int64_t>& preparing_;  // the server's requests handed to workers, not yet prepared
  AccessLog& access_log_;
  AccessEntry access_;                                                   // of the request being answered
  HttpRequest head_;                                                     // the request being read, until its body is in
  std::string origin_;                                                   // of the request being answered (CORS headers)
  std::vector<std::pair<std::string, std::string>> generation_headers_;  // the generation reply's own
  bool head_only_ = false;                                               // a HEAD request: the reply's headers only
  std::shared_ptr<BodyBudget::Reservation> body_budget_;                 // of the request being read, until prepared
  int64_t body_limit_ = 0;                                               // of the request being read
  std::chrono::steady_clock::time_point request_deadline_;               // its headers and body must be in by then
  beast::flat_buffer buffer_{kMaxUnparsedBytes};
  std::optional<http::request_parser<ArrivingStringBody>> parser_;
  bool keep_alive_ = true;
  std::shared_ptr<ChoiceStreams> handle_;
  std::function<ReplyChunk(const StreamEvent&, size_t)> consume_;
  AnsweredBy answered_by_;                   // the generation's, once known
  std::function<Reply::Decided()> decided_;  // known with the first event (a cascade's model)
  bool head_sent_ = false;  // a stream's head (it waits for the first event when headers are decided then)
  bool streaming_ = false;
  bool input_end_cancels_ = false;  // Reply::input_end_cancels of the request being answered
  bool complete_ = false;
  bool writing_ = false;
  std::string pending_;
  std::array<char, 512> probe_{};
  bool probing_ = false;                                      // a disconnect probe's read is pending
  bool resume_after_probe_ = false;                           // the probe, once stopped, starts the next request
  net::steady_timer hold_{stream_.get_executor()};            // keeps a half-closed session until its reply
  net::steady_timer write_deadline_{stream_.get_executor()};  // of a stream's pending write
};

}  // namespace

struct HttpServer::Impl {
  std::atomic<int64_t> open_connections{0};  // first: sessions destroyed with ioc count down
  BodyBudget bodies;                         // before the sessions, whose reservations go back to it
  std::atomic<int64_t> preparing{0};
  std::unique_ptr<AccessLog> access_log;  // before the sessions, which write to it
  net::io_context ioc;
  net::thread_pool workers{4};  // request preparation (see Session::on_request)
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  std::unique_ptr<net::executor_work_guard<net::io_context::executor_type>> work;
  net::steady_timer retry{ioc};

  // An exception out of a handler unwinds only that handler (its connection closes as the
  // session is released); the thread logs it and goes on serving.
  void run() {
    use_background_priority();  // a flood of request bytes must not starve the forward passes
    bool stopped = false;
    while (!stopped)
      stopped = run_guarded(
          "http", [this] { ioc.run(); }, [](const std::string&) {});
  }

  void accept(HttpService& api) {
    acceptor.async_accept(net::make_strand(ioc), [this, &api](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;
      if (ec) {  // e.g. out of file descriptors: try again shortly
        log_line(LogLevel::kWarning, "accept: " + ec.message());
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this, &api](beast::error_code) { accept(api); });
        return;
      }
      set_close_on_exec(socket.native_handle());
      if (open_connections.load() >= api.config().max_connections) {  // over the limit: closed at once
        beast::error_code ignored;
        socket.close(ignored);
      } else {
        std::make_shared<Session>(std::move(socket), api, workers, open_connections, bodies, preparing, *access_log)
            ->start();
      }
      accept(api);
    });
  }
};

HttpServer::HttpServer(HttpService& api, int io_threads)
    : impl_(std::make_unique<Impl>()), api_(api), io_threads_(io_threads) {}

HttpServer::~HttpServer() {
  close_connections();
}

int64_t HttpServer::requests_preparing() const {
  return impl_->preparing.load();
}

int64_t HttpServer::body_bytes_in_flight() const {
  return impl_->bodies.in_flight();
}

Status HttpServer::start(const std::string& host, int port) {
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return invalid_argument("host: '" + host + "' is not an IP address");
  tcp::endpoint endpoint(address, uint16_t(port));
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) set_close_on_exec(impl_->acceptor.native_handle());
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return io_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  AUTOGLM_ASSIGN_OR_RETURN(impl_->access_log, AccessLog::open(api_.config().access_log));
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->work = std::make_unique<net::executor_work_guard<net::io_context::executor_type>>(impl_->ioc.get_executor());
  impl_->accept(api_);
  for (int i = 0; i < std::max(1, io_threads_); ++i) impl_->threads.emplace_back([this] { impl_->run(); });
  return Status::ok();
}

void HttpServer::drain_and_stop(double grace_seconds) {
  using Clock = std::chrono::steady_clock;
  api_.begin_drain();
  auto wait_idle = [&](double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (api_.in_flight() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return api_.in_flight() == 0;
  };
  if (!wait_idle(grace_seconds)) {
    log_line(LogLevel::kWarning, "drain: " + std::to_string(api_.in_flight()) +
                                     " request(s) still running after the grace period: cancelling them");
    api_.cancel_in_flight();
    wait_idle(2.0);
  }
  stop();
}

void HttpServer::stop() {
  if (impl_->threads.empty()) return;
  api_.begin_stop();
  net::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->workers.join();  // preparations still running finish; their replies have nowhere to go
}

void HttpServer::close_connections() {
  stop();
  api_.shutdown();
  // Destroying the context destroys the sessions its pending handlers hold: every connection
  // still open is closed, so no client waits on a stopped server.
  impl_ = std::make_unique<Impl>();
}

}  // namespace autoglm
