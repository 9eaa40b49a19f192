package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
)

// extension is the file name ending of each output format.
var extension = map[Format]string{
	FormatLLVMText:      ".prof.txt",
	FormatLLVMExtBinary: ".prof.extbinary",
	FormatPprof:         ".pb.gz",
	FormatCapture:       ".profd",
}

// outputBase is "<image>-<pid>" for the first process of a pid in a run and
// "<image>-<pid>.<n>" for the nth (a pid reused while profd runs), with anything but
// [A-Za-z0-9._-] in the image name replaced.
func outputBase(image string, pid uint32, n int) string {
	base := outfile.SafeName(image, 0) + "-" + strconv.FormatUint(uint64(pid), 10)
	if n > 1 {
		base += "." + strconv.Itoa(n)
	}
	return base
}

// writeOutputs writes every requested format of c into dir, each atomically, and returns
// the paths written, the LLVM conversion's stats, and the errors of the formats that could
// not be written (joined). The formats are written concurrently: the LLVM ones (which share
// one conversion) one after the other on the calling goroutine, each other on a goroutine
// of its own that writeOutputs waits for.
func writeOutputs(dir, base string, formats []Format, c *profileio.Capture) ([]string, profgen.Stats, error) {
	errs := make([]error, len(formats))
	var llvm []int // indices of the LLVM formats
	var wg sync.WaitGroup
	for i, f := range formats {
		if f == FormatLLVMText || f == FormatLLVMExtBinary {
			llvm = append(llvm, i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = writeFormat(dir, base, f, c, nil)
		}()
	}
	var st profgen.Stats
	if len(llvm) > 0 {
		var prof *profileio.Profile
		prof, st = profgen.FromCapture(c, profgen.Options{})
		for _, i := range llvm {
			errs[i] = writeFormat(dir, base, formats[i], c, prof)
		}
	}
	wg.Wait()
	var paths []string
	for i, f := range formats {
		if errs[i] == nil {
			paths = append(paths, filepath.Join(dir, base+extension[f]))
		}
	}
	return paths, st, errors.Join(errs...)
}

// writeFormat writes format f of c (or, for the LLVM formats, of its conversion prof) to
// its file in dir.
func writeFormat(dir, base string, f Format, c *profileio.Capture, prof *profileio.Profile) error {
	var write func(io.Writer) error
	switch f {
	case FormatCapture:
		write = func(w io.Writer) error { return profileio.WriteCapture(w, c) }
	case FormatPprof:
		write = func(w io.Writer) error { return profileio.WritePprof(w, c) }
	case FormatLLVMText:
		write = func(w io.Writer) error { return profileio.WriteText(w, prof) }
	case FormatLLVMExtBinary:
		write = func(w io.Writer) error { return profileio.WriteExtBinary(w, prof) }
	default:
		return fmt.Errorf("daemon: %s of %s: unknown format %q", f, base, f)
	}
	err := outfile.Write(filepath.Join(dir, base+extension[f]), 0o644, write)
	var ee *outfile.EncodeError
	if errors.As(err, &ee) {
		return fmt.Errorf("daemon: %s of %s: %w", f, base, ee.Err)
	}
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
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
