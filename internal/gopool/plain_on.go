//go:build egressd_plaingo

package gopool

// plainGo: built with the tag egressd_plaingo, every Go is a plain
// `go f()` (bench/peer/gopool-ab.sh).
const plainGo = true
