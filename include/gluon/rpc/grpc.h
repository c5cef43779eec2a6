// gRPC over HTTP/2, interoperable with gRPC of any language: the server (grpc/server.h), the
// client (grpc/client.h) and their status (grpc/status.h).
#pragma once

#include "gluon/rpc/grpc/client.h"
#include "gluon/rpc/grpc/server.h"
#include "gluon/rpc/grpc/status.h"
