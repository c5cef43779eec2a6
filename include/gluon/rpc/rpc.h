// gluon's native RPC: methods by id over any gluon byte stream, plain-struct messages sent and
// received in place (gluon/rpc/native/message.h), deadlines, cancellation, a connection pool.
// gRPC, for interoperating with other stacks, is gluon/rpc/grpc.h.
#pragma once

#include "gluon/rpc/native/client.h"
#include "gluon/rpc/native/error.h"
#include "gluon/rpc/native/message.h"
#include "gluon/rpc/native/method.h"
#include "gluon/rpc/native/server.h"
