module github.com/egressd/egressd/bench/inspect/h2load

go 1.26.0

require golang.org/x/net v0.62.0

require golang.org/x/text v0.43.0 // indirect
