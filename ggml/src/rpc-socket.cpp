// The RPC server's transport: POSIX TCP sockets, a thread per connection. A frame's payload
// is read in chunks as it arrives, so a size field promising gigabytes allocates only what
// was sent; a peer that stops inside a frame is dropped after a timeout, and a refused
// message closes its connection without touching the listening socket.
#include "rpc-server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kvg::rpc {

namespace {

constexpr int FRAME_TIMEOUT_MS = 30000; // within a frame; between frames a client may idle
constexpr size_t CHUNK = 1 << 20;

// Reads exactly n bytes; timeout_ms < 0 waits forever for the first byte.
bool read_all(int fd, void * dst, size_t n, int timeout_ms) {
    uint8_t * p = (uint8_t *) dst;
    while (n > 0) {
        pollfd pfd{fd, POLLIN, 0};
        const int r = poll(&pfd, 1, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        const ssize_t got = recv(fd, p, n, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        p += got, n -= (size_t) got;
        timeout_ms = FRAME_TIMEOUT_MS;
    }
    return true;
}

bool write_all(int fd, const void * src, size_t n) {
    const uint8_t * p = (const uint8_t *) src;
    while (n > 0) {
        const ssize_t put = send(fd, p, n, MSG_NOSIGNAL);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return false;
        p += put, n -= (size_t) put;
    }
    return true;
}

// Largest payload accepted: a SET_TENSOR of the whole memory limit plus its header, or a
// graph of the largest allowed size.
uint64_t max_payload(const Options & opt) {
    const uint64_t graph = 12 + 8ull * MAX_GRAPH_NODES + (uint64_t) WIRE_TENSOR_SIZE * MAX_GRAPH_TENSORS;
    return std::max<uint64_t>(opt.mem_limit + WIRE_TENSOR_SIZE + 9, graph);
}

int listen_on(const char * host, int port, int * bound) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const std::string p = std::to_string(port);
    if (getaddrinfo(host, p.c_str(), &hints, &res) != 0 || !res) {
        std::fprintf(stderr, "kvg-rpc-server: cannot resolve host '%s'\n", host);
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    const int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 4) != 0) {
        std::fprintf(stderr, "kvg-rpc-server: cannot listen on %s:%d: %s\n", host, port, std::strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    getsockname(fd, (sockaddr *) &addr, &len);
    *bound =
        ntohs(addr.ss_family == AF_INET6 ? ((sockaddr_in6 *) &addr)->sin6_port : ((sockaddr_in *) &addr)->sin_port);
    return fd;
}

// Waits for the first byte of a frame (a client may idle between frames) while *stop allows.
bool wait_for_frame(int fd, const std::atomic<bool> * stop) {
    for (;;) {
        if (stop && stop->load()) return false;
        pollfd pfd{fd, POLLIN, 0};
        const int r = poll(&pfd, 1, 100);
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) return false;
    }
}

} // namespace

std::string serve_connection(int fd, const Options & opt, const std::atomic<bool> * stop) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Session session(opt);
    std::vector<uint8_t> payload, reply;
    std::string why;
    const uint64_t limit = max_payload(opt);
    for (;;) {
        uint8_t head[9];
        if (!wait_for_frame(fd, stop) || !read_all(fd, head, 9, FRAME_TIMEOUT_MS)) break; // closed, stalled or stopped
        uint64_t n;
        std::memcpy(&n, head + 1, 8);
        if (n > limit) {
            why = "frame of " + std::to_string(n) + " bytes is larger than any valid message";
            break;
        }
        payload.clear();
        bool complete = true;
        while (payload.size() < n && complete) { // grows with what arrives
            const size_t off = payload.size(), step = (size_t) std::min<uint64_t>(CHUNK, n - off);
            payload.resize(off + step);
            complete = read_all(fd, payload.data() + off, step, FRAME_TIMEOUT_MS);
        }
        if (!complete) break;
        bool has_reply = false;
        if (!session.dispatch(head[0], payload.data(), payload.size(), &reply, &has_reply)) {
            if (opt.skip_refused_graphs && (head[0] == CMD_GRAPH_COMPUTE || head[0] == CMD_GRAPH_RECOMPUTE)) {
                std::fprintf(stderr, "kvg-rpc-server: graph refused, skipped: %s\n", session.error().c_str());
                session.forget_graph();
                continue; // these commands have no reply
            }
            why = session.error();
            break;
        }
        if (has_reply) {
            const uint64_t rn = reply.size();
            if (!write_all(fd, &rn, 8) || !write_all(fd, reply.data(), reply.size())) break;
        }
    }
    close(fd);
    return why;
}

namespace {

// A connection's thread; done tells serve() it can be joined.
struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
};

void report_end(const std::string & why) {
    if (why.empty()) std::fprintf(stderr, "kvg-rpc-server: client disconnected\n");
    else std::fprintf(stderr, "kvg-rpc-server: connection closed: %s\n", why.c_str());
}

// Joins the connections that have ended.
void reap(std::vector<Connection> & conns) {
    for (size_t i = 0; i < conns.size();) {
        if (!conns[i].done->load()) {
            ++i;
            continue;
        }
        conns[i].thread.join();
        conns[i] = std::move(conns.back());
        conns.pop_back();
    }
}

} // namespace

int serve(const char * host, int port, const Options & options, const std::atomic<bool> * stop,
          const std::function<void(int)> & on_listening) {
    int bound = 0;
    const int lfd = listen_on(host, port, &bound);
    if (lfd < 0) return 1;
    Options opt = options;
    if (!opt.pool) opt.pool = std::make_shared<MemoryPool>(opt.mem_limit);
    if (on_listening) on_listening(bound);
    std::atomic<bool> closing{false}; // tells the connections to end
    std::vector<Connection> conns;
    while (!stop || !stop->load()) {
        reap(conns);
        pollfd pfd{lfd, POLLIN, 0};
        if (poll(&pfd, 1, 100) <= 0) continue;
        const int cfd = accept(lfd, nullptr, nullptr);
        if (cfd < 0) continue;
        if (conns.size() >= (size_t) MAX_CLIENTS) {
            std::fprintf(stderr, "kvg-rpc-server: %d clients already connected; refusing another\n", MAX_CLIENTS);
            close(cfd);
            continue;
        }
        std::fprintf(stderr, "kvg-rpc-server: client connected\n");
        Connection c;
        c.thread = std::thread([cfd, &opt, &closing, done = c.done] {
            report_end(serve_connection(cfd, opt, &closing));
            done->store(true);
        });
        conns.push_back(std::move(c));
    }
    closing = true;
    for (Connection & c : conns) c.thread.join();
    close(lfd);
    return 0;
}

} // namespace kvg::rpc
