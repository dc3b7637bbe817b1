//go:build race

package proxy

// raceEnabled: the race detector allows at most 8128 live goroutines, and
// every open tunnel has two.
const raceEnabled = true
