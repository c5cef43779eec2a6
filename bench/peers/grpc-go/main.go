// grpc-go's echo server for bench/run rpc: the method /gluon.bench.Bench/Echo takes and returns
// a google.protobuf.BytesValue (the same messages gluon's and gRPC C++'s servers use), served
// with the module's own server and codec. Prints its port first, serves until killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type benchServer interface {
	Echo(context.Context, *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error)
}

type echo struct{}

func (echo) Echo(_ context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	return &wrapperspb.BytesValue{Value: in.Value}, nil
}

func echoHandler(srv interface{}, ctx context.Context, dec func(interface{}) error, _ grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(wrapperspb.BytesValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	return srv.(benchServer).Echo(ctx, in)
}

var desc = grpc.ServiceDesc{
	ServiceName: "gluon.bench.Bench",
	HandlerType: (*benchServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Echo", Handler: echoHandler}},
	Metadata:    "bench/rpc/bench.proto",
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: any)")
	flag.Parse()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	s := grpc.NewServer()
	s.RegisterService(&desc, echo{})
	if err := s.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
