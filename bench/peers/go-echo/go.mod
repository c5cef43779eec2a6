module gluon-bench/go-echo

go 1.26
