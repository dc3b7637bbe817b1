//go:build !egressd_plaingo

package gopool

// plainGo is set by the build tag egressd_plaingo: every Go is then a plain
// `go f()`, nothing parks. It exists for the whole-path A/B of the pool
// against the runtime's own stack sizing (bench/peer/gopool-ab.sh).
const plainGo = false
