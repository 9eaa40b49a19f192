package daemon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/profd/profd/internal/llvmprof"
	"github.com/profd/profd/profileio"
)

// extension is the file name ending of each output format.
var extension = map[Format]string{
	FormatLLVMText:      ".prof.txt",
	FormatLLVMExtBinary: ".prof.extbinary",
	FormatPprof:         ".pb.gz",
	FormatCapture:       ".profd",
}

// outputBase is "<image>-<pid>" with anything but [A-Za-z0-9._-] in the image name replaced.
func outputBase(image string, pid uint32) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, image)
	return clean + "-" + strconv.FormatUint(uint64(pid), 10)
}

// writeOutputs writes every requested format of c into dir, each atomically, and returns
// the paths written and the LLVM conversion's stats.
func writeOutputs(dir, base string, formats []Format, c *profileio.Capture) ([]string, llvmprof.Stats, error) {
	var paths []string
	var st llvmprof.Stats
	var prof *profileio.Profile
	for _, f := range formats {
		var buf bytes.Buffer
		var err error
		switch f {
		case FormatCapture:
			err = profileio.WriteCapture(&buf, c)
		case FormatPprof:
			err = profileio.WritePprof(&buf, c)
		case FormatLLVMText, FormatLLVMExtBinary:
			if prof == nil {
				prof, st = llvmprof.FromCapture(c, llvmprof.Options{})
			}
			if f == FormatLLVMText {
				err = profileio.WriteText(&buf, prof)
			} else {
				err = profileio.WriteExtBinary(&buf, prof)
			}
		default:
			err = fmt.Errorf("unknown format %q", f)
		}
		if err != nil {
			return paths, st, fmt.Errorf("daemon: %s of %s: %w", f, base, err)
		}
		path := filepath.Join(dir, base+extension[f])
		if err := writeAtomic(path, buf.Bytes()); err != nil {
			return paths, st, err
		}
		paths = append(paths, path)
	}
	return paths, st, nil
}

// writeAtomic writes data to a temporary file beside path and renames it over path, so a
// reader sees the old file or the new one, never a part.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("daemon: output %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("daemon: output %s: %w", path, werr)
	}
	return nil
}

// checkWritable fails early, at start, when dir cannot take output files.
func checkWritable(dir string) error {
	tmp, err := os.CreateTemp(dir, ".profd-write-check-*")
	if err != nil {
		return fmt.Errorf("daemon: %w: --out %s is not writable: %w", ErrConfig, dir, err)
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}
