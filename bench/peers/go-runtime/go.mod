module gluon-bench/go-runtime

go 1.26
