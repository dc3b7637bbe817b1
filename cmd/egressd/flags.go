package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
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
// line from its EGRESSD_<NAME> variable. The command line wins. The flag
// set's help (PrintDefaults, also inside a command's own Usage) spells the
// flags as the docs do (flagSpeller).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if _, ok := fs.Output().(flagSpeller); !ok {
		fs.SetOutput(flagSpeller{fs.Output()})
	}
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

// flagSpeller writes what a FlagSet prints with each flag spelt as the
// docs and the usage lines write it: --name, and -x for a one-letter name
// (Go's flag package reads both spellings). PrintDefaults writes each
// flag's lines in one Write.
type flagSpeller struct{ w io.Writer }

func (s flagSpeller) Write(p []byte) (int, error) {
	if _, err := s.w.Write(longFlag.ReplaceAll(p, []byte("$1--$2"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// longFlag is the head of one of PrintDefaults' lines for a flag whose
// name is longer than one letter.
var longFlag = regexp.MustCompile(`(?m)^(  )-([A-Za-z0-9][-A-Za-z0-9_.]+)`)

// failf writes a command's error after "egressd CMD: " once: a sentinel of
// the package of the same name already starts with "CMD: " (report's and
// suggest's invalid options), and the reader learns nothing from the
// prefix twice (docs/architecture.md, "Errors").
func failf(w io.Writer, cmd string, err error) {
	fmt.Fprintf(w, "egressd %s: %s\n", cmd, strings.TrimPrefix(err.Error(), cmd+": "))
}
