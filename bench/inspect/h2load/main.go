package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: h2load origin|bench|report [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "origin":
		err = cmdOrigin(os.Args[2:])
	case "bench":
		err = cmdBench(os.Args[2:])
	case "report":
		err = cmdReport(os.Args[2:])
	default:
		err = fmt.Errorf("h2load: unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
