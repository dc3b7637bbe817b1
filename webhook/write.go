package webhook

import (
	"fmt"
	"os"
	"path/filepath"
)

// WritePair replaces tls.crt and tls.key in dir, each by a rename so that a
// reader sees an old or a new file, never a part. The two renames are not
// one step: a poll between them sees a mismatched pair, which certDir
// refuses, keeping the last good one until the next poll.
func WritePair(dir string, certPEM, keyPEM []byte) error {
	for _, f := range []struct {
		name string
		data []byte
	}{{KeyFile, keyPEM}, {CertFile, certPEM}} {
		tmp, err := os.CreateTemp(dir, "."+f.name+"-*")
		if err != nil {
			return fmt.Errorf("webhook: write %s: %w", f.name, err)
		}
		_, err = tmp.Write(f.data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, f.name))
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("webhook: write %s: %w", f.name, err)
		}
	}
	return nil
}
