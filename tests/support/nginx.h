// A real nginx for tests: one worker, a private temporary prefix, a directory to serve, and a
// port of its own; stopped and cleaned up when destroyed.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "support/process.h"

namespace gluon::test {

class nginx {
public:
    /// Starts nginx serving a fresh directory (www()). `extra_server` is added to the server
    /// block (locations, ...). nullptr with `why` set if it is not installed or did not start.
    /// `listen_flags` go on its listen line (" http2": h2c by prior knowledge).
    static std::unique_ptr<nginx> start(std::string& why, const std::string& extra_server = "",
                                        const std::string& listen_flags = "") {
        std::string bin = find_program("nginx");
        if (bin.empty()) {
            why = "nginx not installed";
            return nullptr;
        }
        std::string tmpl = std::filesystem::temp_directory_path() / "gluon-nginx-XXXXXX";
        if (!::mkdtemp(tmpl.data())) {
            why = "mkdtemp failed";
            return nullptr;
        }
        std::unique_ptr<nginx> n(new nginx);
        n->dir_ = tmpl;
        std::filesystem::create_directories(n->www());
        for (int attempt = 0; attempt < 3; ++attempt)
            if (n->launch(bin, extra_server, listen_flags)) return n;
        why = "nginx did not start; see " + n->dir_ + "/error.log";
        n->keep_dir_ = true;
        return nullptr;
    }
    ~nginx() {
        proc_.reset();
        std::error_code ec;
        if (!keep_dir_) std::filesystem::remove_all(dir_, ec);
    }
    uint16_t port() const { return port_; }
    std::string www() const { return dir_ + "/www"; }
    std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

private:
    nginx() = default;

    bool launch(const std::string& bin, const std::string& extra_server, const std::string& listen_flags) {
        port_ = free_port();
        {
            std::ofstream c(dir_ + "/nginx.conf");
            c << "master_process off;\nworker_processes 1;\n"
              << "pid " << dir_ << "/nginx.pid;\nerror_log " << dir_ << "/error.log warn;\n";
            if (::geteuid() == 0) c << "user root root;\n";  // else it would drop to nobody
            c << "events { worker_connections 1024; }\nhttp {\n"
              << "  access_log " << dir_ << "/access.log;\n";
            for (const char* t : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"})
                c << "  " << t << "_temp_path " << dir_ << "/tmp_" << t << ";\n";
            c << "  types { text/plain txt; text/html html; application/octet-stream bin; }\n"
              << "  default_type application/octet-stream;\n  keepalive_requests 100000;\n"
              << "  server { listen 127.0.0.1:" << port_ << listen_flags << "; root " << www() << ";\n"
              << extra_server << "\n  }\n}\n";
        }
        proc_ = std::make_unique<child>(std::vector<std::string>{bin, "-p", dir_ + "/", "-c", dir_ + "/nginx.conf",
                                                                 "-e", dir_ + "/error.log", "-g", "daemon off;"});
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
