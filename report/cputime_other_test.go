//go:build !unix

package report

import "time"

// cpuTime is not measured here; BenchmarkReport leaves out its CPU metric.
func cpuTime() time.Duration { return 0 }
