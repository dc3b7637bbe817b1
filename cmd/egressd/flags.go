package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// stringList is a repeatable flag; from the environment it takes a
// comma-separated list.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// envName is the environment variable of a flag: --proxy-addr reads
// EGRESSD_PROXY_ADDR.
func envName(flagName string) string {
	return "EGRESSD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args, then fills every flag not given on the command
// line from its EGRESSD_<NAME> variable. The command line wins.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		values := []string{v}
		if _, list := f.Value.(*stringList); list {
			values = strings.Split(v, ",")
		}
		for _, one := range values {
			if one = strings.TrimSpace(one); one == "" {
				continue
			}
			if e := f.Value.Set(one); e != nil {
				err = fmt.Errorf("%s=%q: %s", envName(f.Name), one, accepted(f, e))
				return
			}
		}
	})
	return err
}

// accepted says what a flag accepts when a value was refused: the flag
// package's own words for a bool or a number are "parse error".
func accepted(f *flag.Flag, err error) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "want true or false (also 1, 0, t, f)"
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		return "want a whole number"
	case float64:
		return "want a number"
	case time.Duration:
		return "want a duration such as 30s, 5m or 1h"
	}
	return err.Error()
}
