package files

import (
	"bytes"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
)

// tailBytes is how much of a file a reader keeps from just before where it stopped, to see
// whether the file was written anew from its start since (a perf map dumped again).
const tailBytes = 64

// tailedFile is one file being read as it grows.
type tailedFile struct {
	key     string // "host:" or "ns:" and its path
	path    string // for log lines: the path seen from profd
	src     codeobj.Source
	fd      int
	dev     uint64
	ino     uint64
	offset  int64
	tail    []byte // the file's bytes just before offset, up to tailBytes
	stream  *jitmap.Stream
	counted jitmap.StreamCounts // what of stream's counts Stats holds
	wd      int32               // the inotify watch of its writes; -1: none
}

// rewritten reports whether the file no longer holds what was read of it: it is shorter
// than what was read, or the bytes before the read offset changed (a perf map truncated
// and written again, longer than before, shows only that).
func (f *tailedFile) rewritten(size int64, scratch []byte) bool {
	if size < f.offset {
		return true
	}
	if len(f.tail) == 0 {
		return false
	}
	b := scratch[:len(f.tail)]
	n, err := unix.Pread(f.fd, b, f.offset-int64(len(f.tail)))
	return err == nil && (n != len(b) || !bytes.Equal(b, f.tail))
}

// advance records that p was read at the offset.
func (f *tailedFile) advance(p []byte) {
	f.offset += int64(len(p))
	if len(p) >= tailBytes {
		f.tail = append(f.tail[:0], p[len(p)-tailBytes:]...)
		return
	}
	f.tail = append(f.tail, p...)
	if over := len(f.tail) - tailBytes; over > 0 {
		f.tail = append(f.tail[:0], f.tail[over:]...)
	}
}
