module github.com/egressd/egressd/bench/inspect/goproxy

go 1.26

require github.com/elazarl/goproxy v1.9.3

require (
	golang.org/x/net v0.50.0 // indirect
	golang.org/x/text v0.34.0 // indirect
)
