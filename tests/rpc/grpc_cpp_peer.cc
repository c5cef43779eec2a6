// gRPC C++ as the peer of gluon's gRPC: `grpc_cpp_peer client HOST:PORT` calls every method of
// the Echo service and checks the answers of gluon's server; `grpc_cpp_peer server FD` serves
// Echo for gluon's client, writing its port to the inherited descriptor FD once it listens. Prints one line per failed check
// and exits 1 if any failed.
#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <thread>

#include "interop.grpc.pb.h"

using gluon::test::Echo;
using gluon::test::Msg;
using grpc::ClientContext;
using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    if (!ok) {
        std::printf("FAIL %s\n", what.c_str());
        ++failures;
    }
}

int run_client(const std::string& target) {
    auto ch = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    auto stub = Echo::NewStub(ch);
    {
        ClientContext c;
        c.AddMetadata("x-in", "meta-value");
        Msg req, resp;
        req.set_text("hello");
        req.set_blob(std::string(100000, 'b'));
        Status s = stub->Unary(&c, req, &resp);
        check(s.ok(), "unary status: " + s.error_message());
        check(resp.text() == "hello" && resp.blob() == req.blob(), "unary body");
        auto tm = c.GetServerTrailingMetadata();
        auto it = tm.find("x-out");
        check(it != tm.end() && std::string(it->second.data(), it->second.size()) == "meta-value", "unary trailing metadata");
    }
    {
        ClientContext c;
        Msg req, m;
        req.set_n(5);
        auto r = stub->ServerStream(&c, req);
        int k = 0;
        while (r->Read(&m)) check(m.n() == k++, "server stream order");
        Status s = r->Finish();
        check(s.ok() && k == 5, "server stream: " + s.error_message() + " count " + std::to_string(k));
    }
    {
        ClientContext c;
        Msg resp;
        auto w = stub->ClientStream(&c, &resp);
        for (const char* t : {"a", "b", "c"}) {
            Msg m;
            m.set_text(t);
            w->Write(m);
        }
        w->WritesDone();
        Status s = w->Finish();
        check(s.ok() && resp.text() == "abc" && resp.n() == 3, "client stream: " + s.error_message() + " " + resp.text());
    }
    {
        // More than the HTTP server's max_body_bytes in one call: each message is limited, not
        // the call's whole request.
        ClientContext c;
        Msg resp;
        auto w = stub->ClientStream(&c, &resp);
        Msg m;
        m.set_text(std::string(1024, 'k'));
        bool written = true;
        for (int i = 0; i < 2000 && written; ++i) written = w->Write(m);
        w->WritesDone();
        Status s = w->Finish();
        check(written && s.ok() && resp.n() == 2000 && resp.text().size() == 2000 * 1024,
              "client stream of 2000 KiB: " + std::to_string(s.error_code()) + " " + s.error_message() + " n " +
                  std::to_string(resp.n()));
    }
    {
        ClientContext c;
        Msg req, resp;
        req.set_blob(std::string(2 << 20, 'm'));
        Status s = stub->Unary(&c, req, &resp);
        check(s.ok() && resp.blob() == req.blob(),
              "unary of 2 MiB: " + std::to_string(s.error_code()) + " " + s.error_message());
    }
    {
        ClientContext c;
        auto rw = stub->Bidi(&c);
        bool ok = true;
        for (int i = 0; i < 10; ++i) {
            Msg m, back;
            m.set_n(i);
            ok = ok && rw->Write(m) && rw->Read(&back) && back.n() == i;
        }
        rw->WritesDone();
        Msg extra;
        check(!rw->Read(&extra), "bidi ends");
        Status s = rw->Finish();
        check(ok && s.ok(), "bidi: " + s.error_message());
    }
    {
        ClientContext c;
        Msg req, resp;
        req.set_n(static_cast<int>(StatusCode::NOT_FOUND));
        req.set_text("no such thing: \xc3\xbc 100%");
        Status s = stub->Fail(&c, req, &resp);
        check(s.error_code() == StatusCode::NOT_FOUND && s.error_message() == req.text(),
              "error status: " + std::to_string(s.error_code()) + " " + s.error_message());
    }
    {
        // The first message says the server has the call; then only the deadline ends it.
        ClientContext c;
        c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));  // room for the first message on a loaded machine
        Msg req, m;
        auto r = stub->Slow(&c, req);
        check(r->Read(&m), "deadline: first message");
        check(!r->Read(&m), "deadline: no second message");
        Status s = r->Finish();
        check(s.error_code() == StatusCode::DEADLINE_EXCEEDED, "deadline: " + std::to_string(s.error_code()));
    }
    {
        ClientContext c;
        Msg req, m;
        auto r = stub->Slow(&c, req);
        check(r->Read(&m), "cancel: first message");
        c.TryCancel();
        Status s = r->Finish();
        check(s.error_code() == StatusCode::CANCELLED, "cancel: " + std::to_string(s.error_code()));
    }
    return failures ? 1 : 0;
}

class echo_service final : public Echo::Service {
    Status Unary(ServerContext* c, const Msg* req, Msg* resp) override {
        *resp = *req;
        auto it = c->client_metadata().find("x-in");
        if (it != c->client_metadata().end()) c->AddTrailingMetadata("x-out", std::string(it->second.data(), it->second.size()));
        return Status::OK;
    }
    Status ServerStream(ServerContext*, const Msg* req, grpc::ServerWriter<Msg>* w) override {
        for (int i = 0; i < req->n(); ++i) {
            Msg m;
            m.set_n(i);
            w->Write(m);
        }
        return Status::OK;
    }
    Status ClientStream(ServerContext*, grpc::ServerReader<Msg>* r, Msg* resp) override {
        Msg m;
        int n = 0;
        std::string t;
        while (r->Read(&m)) t += m.text(), ++n;
        resp->set_text(t);
        resp->set_n(n);
        return Status::OK;
    }
    Status Bidi(ServerContext*, grpc::ServerReaderWriter<Msg, Msg>* rw) override {
        Msg m;
        while (rw->Read(&m)) rw->Write(m);
        return Status::OK;
    }
    Status Fail(ServerContext*, const Msg* req, Msg*) override {
        return Status(static_cast<StatusCode>(req->n()), req->text());
    }
    Status Slow(ServerContext* c, const Msg* req, grpc::ServerWriter<Msg>* w) override {
        w->Write(*req);
        while (!c->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // gRPC's sync API only polls
        return Status::CANCELLED;
    }
};

int run_server(int fd) {
    echo_service svc;
    int port = 0;
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&svc);
    auto srv = b.BuildAndStart();
    if (!srv || port == 0) return 2;
    std::string p = std::to_string(port) + "\n";
    if (::write(fd, p.data(), p.size()) != static_cast<ssize_t>(p.size())) return 2;
    ::close(fd);
    srv->Wait();  // until killed
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "client") return run_client(argv[2]);
    if (argc == 3 && std::string(argv[1]) == "server") return run_server(std::atoi(argv[2]));
    std::fprintf(stderr, "usage: grpc_cpp_peer client HOST:PORT | server FD\n");
    return 2;
}
