package daemon

import (
	"time"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profileio"
)

// pending is one output's capture, taken under the lock and written outside it: one
// process's, or with --group-by image an image's processes' merged.
type pending struct {
	pid   uint32
	pids  []uint32 // a group's processes (--group-by image); nil for one process
	image string
	base  string
	owner outfile.Owner // who its files belong to
	uid   int           // its process's (or group's) effective user; -1: unknown
	// container is its process's (or group's) container id, "" when none.
	container string
	capture   *profileio.Capture
	// snap is the process's snapshot, whose native and kernel frames name names; nil for a
	// group's merged capture.
	snap   *attribute.Snapshot
	final  bool
	nameBy time.Time // how long naming native samples may wait for their files' symbols
	named  bool      // its native and kernel frames are named
	// firstNs is when its output's first interval starts: when its (first) process was
	// added (CLOCK_MONOTONIC).
	firstNs int64
	// interval: writing it ends an interval of its output (endsInterval).
	interval bool
}

// members are the processes w's outputs cover.
func (w *pending) members() []uint32 {
	if w.pids != nil {
		return w.pids
	}
	return []uint32{w.pid}
}
