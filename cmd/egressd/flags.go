package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
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
// line from its EGRESSD_<NAME> variable. The command line wins. A flag set
// without its own Usage gets flag's, with the flags spelt as printDefaults
// spells them.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if fs.Usage == nil {
		fs.Usage = func() {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
			printDefaults(fs)
		}
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
				err = fmt.Errorf("%s: %w", envName(f.Name), e)
				return
			}
		}
	})
	return err
}

// printDefaults is flag's PrintDefaults with each flag spelt as the docs
// and the usage lines write it: --name, and -x for a one-letter name (Go's
// flag package reads both spellings).
func printDefaults(fs *flag.FlagSet) {
	var b strings.Builder
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprint(out, longFlag.ReplaceAllString(b.String(), "$1--$2"))
}

// longFlag is the head of one of PrintDefaults' lines for a flag whose
// name is longer than one letter.
var longFlag = regexp.MustCompile(`(?m)^(  )-([A-Za-z0-9][-A-Za-z0-9_.]+)`)
