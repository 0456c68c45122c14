// How much of a request the HTTP server reads before it refuses it: shared by the server's
// sessions and the HTTP fuzz target, so the fuzzer parses exactly as the server does.
#pragma once

#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace autoglm {

// The request line and headers together.
constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
// Bytes read but not yet parsed: a header block, a chunk header with its extensions, or the
// trailer of a chunked body (which Beast does not count against the header limit). Below
// Beast's 64 KiB field size, so no field can make it throw. The read buffer's max size.
constexpr size_t kMaxUnparsedBytes = 32 * 1024;

template <class Parser>
void apply_request_limits(Parser& parser, int64_t max_body_bytes) {
  parser.body_limit(uint64_t(max_body_bytes));
  parser.header_limit(kMaxHeaderBytes);
}

// A string body that grows as its bytes arrive: Beast's own reserves the announced
// Content-Length at once, so a client that announces 8 MiB and sends nothing would hold 8 MiB.
struct ArrivingStringBody : boost::beast::http::string_body {
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<uint64_t>&, boost::system::error_code& ec) { ec = {}; }
    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
      const size_t before = body_.size();
      body_.resize(before + boost::asio::buffer_size(buffers));
      boost::asio::buffer_copy(boost::asio::buffer(body_.data() + before, body_.size() - before), buffers);
      ec = {};
      return body_.size() - before;
    }
    void finish(boost::system::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

// Bytes of request bodies held at once, counted as they arrive (an announced length takes
// nothing) and given back when a request's reservation goes (its body is no longer needed):
// in all, so that 200 clients each sending 8 MB do not add 1.6 GB, and per client (an API
// key, or an address without keys), so that one client cannot take what the others need.
class BodyBudget {
 public:
  struct Caps {
    int64_t total = 0;
    int64_t per_client = 0;
  };

  // What one request's body holds; it grows with the body and gives all back when destroyed.
  class Reservation {
   public:
    Reservation(BodyBudget& budget, std::string client) : budget_(budget), client_(std::move(client)) {}
    ~Reservation() { take(-bytes_); }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;

    // Whether `more` bytes would fit in what is left now: a body announced larger is refused
    // before it is read.
    bool fits(int64_t more, const Caps& caps) const {
      std::lock_guard<std::mutex> lock(budget_.mutex_);
      return budget_.fits_locked(client_, more, caps);
    }
    // Holds `bytes` in all; false (nothing more taken) when that would pass a cap.
    bool grow_to(int64_t bytes, const Caps& caps) {
      if (bytes <= bytes_) return true;
      std::lock_guard<std::mutex> lock(budget_.mutex_);
      if (!budget_.fits_locked(client_, bytes - bytes_, caps)) return false;
      budget_.add_locked(client_, bytes - bytes_);
      bytes_ = bytes;
      return true;
    }

   private:
    void take(int64_t bytes) {
      std::lock_guard<std::mutex> lock(budget_.mutex_);
      budget_.add_locked(client_, bytes);
    }
    BodyBudget& budget_;
    std::string client_;
    int64_t bytes_ = 0;
  };

  std::shared_ptr<Reservation> open(std::string client) {
    return std::make_shared<Reservation>(*this, std::move(client));
  }
  int64_t in_flight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return total_;
  }

 private:
  bool fits_locked(const std::string& client, int64_t more, const Caps& caps) const {
    const auto it = clients_.find(client);
    const int64_t mine = it == clients_.end() ? 0 : it->second;
    return more <= 0 || (total_ + more <= caps.total && mine + more <= caps.per_client);
  }
  void add_locked(const std::string& client, int64_t bytes) {
    if (bytes == 0) return;
    total_ += bytes;
    if ((clients_[client] += bytes) == 0) clients_.erase(client);
  }
  mutable std::mutex mutex_;
  int64_t total_ = 0;
  std::unordered_map<std::string, int64_t> clients_;
};

}  // namespace autoglm
