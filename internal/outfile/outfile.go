// Package outfile writes profd's output files: whole or not at all (a temporary file beside
// the target, renamed over it once complete and synced), under names made safe from the
// names of programs and functions they are named after.
//
//	err := outfile.WriteOwned(filepath.Join(dir, outfile.SafeName(image, 0)+".prof.txt"), 0o600,
//		outfile.Owner{UID: uid, GID: gid}, func(w io.Writer) error { return profileio.WriteText(w, prof) })
//
// Its functions are safe for concurrent use on different paths.
package outfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// SafeName keeps the letters, digits, '.', '_' and '-' of name and replaces every other
// character with '_', so the result names a file in a directory and nothing else; max > 0
// cuts it to at most max bytes.
func SafeName(name string, max int) string {
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
	if max > 0 && len(s) > max {
		s = s[:max]
	}
	if s == "." || s == ".." {
		s = strings.Repeat("_", len(s))
	}
	return s
}

// EncodeError is an error of the encoder Write ran, as opposed to one of the file.
type EncodeError struct{ Err error }

func (e *EncodeError) Error() string { return e.Err.Error() }
func (e *EncodeError) Unwrap() error { return e.Err }

// Owner is the user and group a written file belongs to; -1 keeps the writer's.
type Owner struct{ UID, GID int }

// WriterOwns keeps the writer's own user and group.
var WriterOwns = Owner{UID: -1, GID: -1}

// Write streams write's output to a temporary file beside path and renames it over path, with
// mode perm, once it is complete and synced, so a reader sees the old file or the new one,
// never a part. The temporary file is removed on any error. An error of write itself is
// returned as an *EncodeError.
func Write(path string, perm os.FileMode, write func(io.Writer) error) error {
	return WriteOwned(path, perm, WriterOwns, write)
}

// writers are the buffers of the files being written: a daemon writes several files a
// second, and a buffer allocated for each would be a steady stream of garbage.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 256<<10) }}

// WriteOwned is Write for a file owned by owner (changing it needs CAP_CHOWN). The
// temporary file is made mode 0600 and given its owner and mode before a byte is written,
// so no one but the writer and the owner can ever read it.
func WriteOwned(path string, perm os.FileMode, owner Owner, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("outfile: %s: %w", path, err)
	}
	var werr error
	if owner != WriterOwns {
		werr = tmp.Chown(owner.UID, owner.GID)
	}
	if werr == nil {
		werr = tmp.Chmod(perm)
	}
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(tmp)
	defer func() { bw.Reset(nil); writers.Put(bw) }()
	if werr == nil {
		if err := write(bw); err != nil {
			werr = &EncodeError{err}
		}
	}
	if werr == nil {
		werr = bw.Flush()
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		var ee *EncodeError
		if errors.As(werr, &ee) {
			return ee
		}
		return fmt.Errorf("outfile: %s: %w", path, werr)
	}
	return nil
}
