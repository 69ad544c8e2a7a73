#include "http/http_server.h"

#include "http/http_server_impl.h"

namespace kvs::http {



std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (EqualsIgnoreAsciiCase(k, name)) return v;
  }
  return {};
}

HttpResponse& HttpResponse::SetHeader(std::string name, std::string value) {
  for (auto& [k, v] : headers) {
    if (EqualsIgnoreAsciiCase(k, name)) {
      v = std::move(value);
      return *this;
    }
  }
  headers.emplace_back(std::move(name), std::move(value));
  return *this;
}


// ---------------------------------------------------------------------------
// Exchange

Exchange::Exchange(std::shared_ptr<internal::Connection> conn, HttpRequest req, int transport_error,
                   std::string transport_error_message, uint64_t id, std::string remote)
    : conn_(std::move(conn)),
      req_(std::move(req)),
      transport_error_(transport_error),
      transport_error_message_(std::move(transport_error_message)),
      id_(id),
      remote_(std::move(remote)),
      received_at_(Clock::now()) {}

Exchange::~Exchange() {
  // After Stop the io_context runs no more handlers (and may be tearing down).
  if (ended_ || !conn_ || conn_->server_stopped()) return;
  auto conn = conn_;
  const uint64_t id = id_;
  conn->Post([conn, id] { conn->Abandon(id); });
}

void Exchange::Post(std::function<void()> fn) { conn_->Post(std::move(fn)); }
bool Exchange::OnStrand() const { return conn_->OnStrand(); }

void Exchange::Respond(HttpResponse res) {
  KVS_DCHECK(OnStrand());
  if (ended_ || streaming_) return;
  ended_ = true;
  status_ = res.status;
  on_close_ = nullptr;
  conn_->SendResponse(id_, std::move(res));
}

void Exchange::StartStream(HttpResponse header, std::chrono::milliseconds keep_alive, std::string ping) {
  KVS_DCHECK(OnStrand());
  if (ended_ || streaming_) return;
  streaming_ = true;
  status_ = header.status;
  conn_->StartStream(id_, header, keep_alive, std::move(ping));
}

bool Exchange::Write(std::string data) {
  KVS_DCHECK(OnStrand());
  if (ended_ || !streaming_ || client_closed_) return false;
  return conn_->WriteChunk(id_, std::move(data));
}

void Exchange::EndStream() {
  KVS_DCHECK(OnStrand());
  if (ended_ || !streaming_) return;
  ended_ = true;
  on_close_ = nullptr;
  conn_->EndStream(id_);
}

void Exchange::SetDeadline(Clock::time_point when, std::function<void()> fn) {
  KVS_DCHECK(OnStrand());
  if (ended_) return;
  conn_->SetDeadline(id_, when, std::move(fn));
}

void Exchange::NotifyClientClosed() {
  if (client_closed_) return;
  client_closed_ = true;
  if (on_close_) {
    auto fn = std::move(on_close_);
    on_close_ = nullptr;
    fn();
  }
}

// ---------------------------------------------------------------------------
// HttpServer

void HttpServer::Impl::DoAccept() {
  Strand strand = asio::make_strand(*ioc);
  acceptor->async_accept(strand, [this, strand](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      // Serve it even if the listener closed meanwhile: it was accepted.
      StartConnection(std::move(socket), strand);
      if (acceptor->is_open()) DoAccept();
      return;
    }
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    // EMFILE and friends: keep the listener alive and try again shortly.
    LogAcceptFailure(ec);
    auto t = std::make_shared<asio::steady_timer>(*accept_strand, std::chrono::milliseconds(50));
    t->async_wait([this, t](beast::error_code) {
      if (acceptor->is_open()) DoAccept();
    });
  });
}

void HttpServer::Impl::LogAcceptFailure(const beast::error_code& ec) {
  const auto now = Clock::now();
  if (last_accept_log && now - *last_accept_log < internal::kAcceptLogInterval) {
    ++unlogged_accept_failures;
    return;
  }
  spdlog::warn("http: accept failed: {} ({} more failures since the last report; retrying every 50 ms)", ec.message(),
               unlogged_accept_failures);
  last_accept_log = now;
  unlogged_accept_failures = 0;
}

namespace {

// The canned answer to a connection over a limit.
std::string RefusalResponse(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.SetHeader("Content-Type", "application/json");
  r.SetHeader("Retry-After", "1");
  r.body = fmt::format(R"({{"error":{{"message":"{}","type":"{}","param":null,"code":"too_many_connections"}}}})",
                       message, status == 429 ? "rate_limit_error" : "service_unavailable");
  return internal::SerializeResponse(r.status, 11, r.headers, /*keep_alive=*/false, std::move(r.body), false);
}

}  // namespace

void HttpServer::Impl::StartConnection(tcp::socket socket, Strand strand) {
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  const auto ep = socket.remote_endpoint(ec);
  const std::string address = ec ? std::string() : ep.address().to_string();
  const uint64_t id = ++next_connection_id;
  int refuse = 0;
  const int max_conns = max_connections.load();
  const int max_per_client = max_connections_per_client.load();
  std::shared_ptr<internal::Connection> conn;
  std::shared_ptr<SslContext> ctx;
  {
    std::lock_guard<std::mutex> lock(mu);
    ctx = tls;
    if (max_conns > 0 && static_cast<int64_t>(conns.size()) >= max_conns) {
      refuse = 503;
    } else if (max_per_client > 0 && per_client[address] >= max_per_client) {
      refuse = 429;
    } else {
      if (ctx) {
        conn = std::make_shared<internal::BasicConnection<internal::TlsStream>>(this, std::move(socket),
                                                                                std::move(strand), id, address, ctx);
      } else {
        conn = std::make_shared<internal::BasicConnection<beast::tcp_stream>>(this, std::move(socket),
                                                                              std::move(strand), id, address, nullptr);
      }
      conns[id] = conn;
      ++per_client[address];
    }
  }
  if (refuse != 0) {
    refused.fetch_add(1);
    const std::string message =
        refuse == 503 ? fmt::format("too many connections: the server holds server.max_connections ({}) open; retry "
                                    "shortly",
                                    max_conns)
                      : fmt::format("too many connections from {}: server.max_connections_per_client is {}", address,
                                    max_per_client);
    std::string response = RefusalResponse(refuse, message);
    if (ctx) {
      std::make_shared<internal::BasicRefusal<internal::TlsStream>>(std::move(socket), std::move(response), ctx)->Start();
    } else {
      std::make_shared<internal::BasicRefusal<beast::tcp_stream>>(std::move(socket), std::move(response), nullptr)
          ->Start();
    }
    return;
  }
  if (ctx) {
    static_cast<internal::BasicConnection<internal::TlsStream>*>(conn.get())->Start();
  } else {
    static_cast<internal::BasicConnection<beast::tcp_stream>*>(conn.get())->Start();
  }
}

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start(Handler handler) {
  KVS_CHECK(!impl_);
  std::shared_ptr<SslContext> tls;
  if (options_.tls()) {
    KVS_ASSIGN_OR_RETURN(tls, MakeServerTlsContext(TlsFiles()));
  }
  impl_ = std::make_unique<Impl>(options_);
  Impl& s = *impl_;
  s.handler = std::move(handler);
  s.tls = std::move(tls);
  beast::error_code ec;
  tcp::resolver resolver(*s.ioc);
  auto results = resolver.resolve(options_.host, std::to_string(options_.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return InvalidArgument("cannot resolve server.host \"{}\": {}", options_.host, ec.message());
  }
  tcp::endpoint ep = results.begin()->endpoint();
  s.acceptor->open(ep.protocol(), ec);
  if (!ec) s.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(ep, ec);
  if (!ec) s.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("cannot listen on {}:{}: {}", options_.host, options_.port, ec.message());
  }
  bound_port_ = s.acceptor->local_endpoint().port();
  s.work.emplace(asio::make_work_guard(*s.ioc));
  asio::post(*s.accept_strand, [&s] { s.DoAccept(); });
  // spdlog builds its registry on first use, inside libspdlog (not
  // instrumented): built here, before the io threads exist, their first log
  // lines are ordered after it (TSan saw two io threads race on it).
  (void)spdlog::default_logger_raw();
  const int n = std::max(1, options_.io_threads);
  for (int i = 0; i < n; ++i) {
    s.threads.emplace_back([&s] {
      for (;;) {
        try {
          s.ioc->run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("http: io thread caught: {}", e.what());
        }
      }
    });
  }
  return Status::Ok();
}

TlsServerFiles HttpServer::TlsFiles() const {
  return TlsServerFiles{options_.tls_cert_file, options_.tls_key_file, options_.tls_cert_setting,
                        options_.tls_key_setting};
}

void HttpServer::SetLimits(const ServerLimits& l) {
  KVS_CHECK(impl_);
  impl_->max_body_bytes.store(l.max_body_bytes);
  impl_->max_connections.store(l.max_connections);
  impl_->max_connections_per_client.store(l.max_connections_per_client);
  impl_->keep_alive_ms.store(l.keep_alive_timeout.count());
  impl_->header_ms.store(l.header_timeout.count());
}

ServerLimits HttpServer::limits() const {
  if (!impl_) return ServerLimits::Of(options_);
  return {impl_->max_body_bytes.load(), impl_->max_connections.load(), impl_->max_connections_per_client.load(),
          std::chrono::milliseconds(impl_->keep_alive_ms.load()), std::chrono::milliseconds(impl_->header_ms.load())};
}

Status HttpServer::ReloadTls() {
  if (!options_.tls()) return FailedPrecondition("this server does not serve TLS");
  KVS_CHECK(impl_);
  KVS_ASSIGN_OR_RETURN(std::shared_ptr<SslContext> fresh, MakeServerTlsContext(TlsFiles()));
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->tls = std::move(fresh);
  return Status::Ok();
}

void HttpServer::StopAccepting() {
  if (!impl_) return;
  Impl& s = *impl_;
  asio::post(*s.accept_strand, [&s] {
    if (!s.acceptor->is_open()) return;
    // Take what is already queued in the backlog, so those clients get an
    // answer (the handler refuses them while draining) instead of a reset.
    beast::error_code ec;
    s.acceptor->non_blocking(true, ec);
    for (int i = 0; i < 4096 && !ec; ++i) {
      Strand strand = asio::make_strand(*s.ioc);
      tcp::socket socket(strand);
      s.acceptor->accept(socket, ec);
      if (!ec) s.StartConnection(std::move(socket), strand);
    }
    s.acceptor->close(ec);
  });
}

void HttpServer::SetDraining() {
  if (impl_) impl_->draining = true;
}

bool HttpServer::draining() const { return impl_ && impl_->draining; }

void HttpServer::CloseAll() {
  if (!impl_) return;
  std::vector<std::shared_ptr<internal::Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& [id, w] : impl_->conns) {
      if (auto c = w.lock()) conns.push_back(std::move(c));
    }
  }
  for (auto& c : conns) c->ForceClose();
}

void HttpServer::Stop() {
  if (!impl_ || impl_->stopped) return;
  Impl& s = *impl_;
  StopAccepting();
  CloseAll();
  // Let the closes run (clients see the connection end, not a hang), briefly.
  for (int i = 0; i < 50 && open_connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.stopped = true;
  s.work.reset();
  s.ioc->stop();
  for (auto& t : s.threads) {
    if (t.joinable()) t.join();
  }
  s.threads.clear();
}

int64_t HttpServer::active_exchanges() const { return impl_ ? impl_->active_exchanges.load() : 0; }

int64_t HttpServer::refused_connections() const { return impl_ ? impl_->refused.load() : 0; }

int64_t HttpServer::open_connections() const {
  if (!impl_) return 0;
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int64_t>(impl_->conns.size());
}

void HttpServer::RunAfter(std::chrono::milliseconds delay, std::function<void()> fn) {
  KVS_CHECK(impl_);
  auto t = std::make_shared<asio::steady_timer>(*impl_->ioc, delay);
  t->async_wait([t, fn = std::move(fn)](beast::error_code ec) {
    if (!ec) fn();
  });
}

void HttpServer::OnSignal(std::vector<int> signals, std::function<void(int)> fn) {
  KVS_CHECK(impl_);
  auto w = std::make_unique<Impl::SignalWatcher>(*impl_->ioc, std::move(fn));
  for (int sig : signals) w->set.add(sig);
  w->Arm();
  impl_->signal_watchers.push_back(std::move(w));
}

}  // namespace kvs::http
