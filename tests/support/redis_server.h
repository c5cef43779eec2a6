// A real redis-server for tests: a private directory, a port of its own, no persistence;
// stopped and cleaned up when destroyed.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/process.h"

namespace gluon::test {

class redis_server {
public:
    /// Starts redis-server with `extra` arguments ("--requirepass", "pw", ...). With tls set
    /// (cert, key and CA files), it listens with TLS only. nullptr with `why` set if it is not
    /// installed or did not start.
    struct tls_files {
        std::string cert, key, ca;
    };
    static std::unique_ptr<redis_server> start(std::string& why, const std::vector<std::string>& extra = {},
                                               const tls_files* tls = nullptr) {
        std::string bin = find_program("redis-server");
        if (bin.empty()) {
            why = "redis-server not installed";
            return nullptr;
        }
        std::string tmpl = std::filesystem::temp_directory_path() / "gluon-redis-XXXXXX";
        if (!::mkdtemp(tmpl.data())) {
            why = "mkdtemp failed";
            return nullptr;
        }
        std::unique_ptr<redis_server> r(new redis_server);
        r->dir_ = tmpl;
        for (int attempt = 0; attempt < 3; ++attempt)
            if (r->launch(bin, extra, tls)) return r;
        why = "redis-server did not start; see " + r->dir_ + "/redis.log";
        r->keep_dir_ = true;
        return nullptr;
    }
    ~redis_server() {
        proc_.reset();
        std::error_code ec;
        if (!keep_dir_) std::filesystem::remove_all(dir_, ec);
    }
    uint16_t port() const { return port_; }
    /// Kills the server (SIGKILL), for tests of a server that goes away.
    void kill() { proc_.reset(); }

private:
    redis_server() = default;

    bool launch(const std::string& bin, const std::vector<std::string>& extra, const tls_files* tls) {
        port_ = free_port();
        std::vector<std::string> args = {bin, "--bind", "127.0.0.1", "--dir", dir_, "--save", "", "--appendonly", "no",
                                         "--logfile", dir_ + "/redis.log", "--daemonize", "no"};
        if (tls) {
            args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_), "--tls-cert-file", tls->cert,
                                     "--tls-key-file", tls->key, "--tls-ca-cert-file", tls->ca, "--tls-auth-clients", "no"});
        } else {
            args.insert(args.end(), {"--port", std::to_string(port_)});
        }
        args.insert(args.end(), extra.begin(), extra.end());
        proc_ = std::make_unique<child>(args);
        // Ready once it accepts connections; if it exits instead, the port was taken.
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < give_up && proc_->running()) {
            if (can_connect(port_)) return true;
            ::usleep(1000);
        }
        proc_.reset();
        return false;
    }

    std::string dir_;
    uint16_t port_ = 0;
    std::unique_ptr<child> proc_;
    bool keep_dir_ = false;
};

}  // namespace gluon::test
