// Package footprint holds the footprint benchmarks of issue 17 (run.sh
// prints them with the command of each): binary and image size,
// start-to-ready with the example policy, idle RSS, and RSS with 10,000
// pods in the informer from a real kube-apiserver. They are benchmarks,
// not timed tests: nothing fails on a figure.
package footprint
