// A one-connection-at-a-time HTTP/1.1 server on a loopback port for tests: each request goes to
// `handler`, which fills the response. Runs on its own thread until destroyed.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <functional>
#include <thread>

namespace autoglm::test {

class LoopbackHttpServer {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  explicit LoopbackHttpServer(std::function<void(const Request&, Response&)> handler, uint16_t port = 0)
      : handler_(std::move(handler)), acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), port}) {
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackHttpServer() {
    stopping_ = true;
    boost::system::error_code ec;
    boost::asio::io_context wake_ioc;
    boost::asio::ip::tcp::socket wake(wake_ioc);
    wake.connect({boost::asio::ip::make_address("127.0.0.1"), port()}, ec);  // ends the blocking accept
    thread_.join();
    acceptor_.close(ec);
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  void serve() {
    namespace http = boost::beast::http;
    while (!stopping_) {
      boost::system::error_code ec;
      boost::asio::ip::tcp::socket socket(ioc_);
      acceptor_.accept(socket, ec);
      if (ec || stopping_) return;
      boost::beast::flat_buffer buffer;
      Request req;
      http::read(socket, buffer, req, ec);
      if (ec) continue;
      Response res(http::status::ok, 11);
      handler_(req, res);
      res.prepare_payload();
      http::write(socket, res, ec);
    }
  }
  std::function<void(const Request&, Response&)> handler_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
};

}  // namespace autoglm::test
