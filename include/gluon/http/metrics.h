// gluon's counters in the Prometheus text exposition format (version 0.0.4): per vCPU, fibers
// (live, created), the run queue's length, busy time, engine operations and their errors, bytes
// received and sent; and the HTTP server's connections (open, total) and responses by status
// class. Reading them takes no lock a vCPU holds: scraping does not slow the servers down.
#pragma once

#include <string>

#include "gluon/http/server.h"

namespace gluon::http {

/// A handler answering GET with the metrics (mount it on a route: routes.get("/metrics",
/// metrics_handler())). Errors: none (an allocation failure throws std::bad_alloc, which the
/// server answers with 500).
handler metrics_handler();

/// The metrics text, for exporters of other shapes. Errors: as metrics_handler.
std::string metrics_text();

}  // namespace gluon::http
