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
	// quiet: the line that says it was written is at Debug level (writeAll).
	quiet bool
	// sinceInterval is a group's capture without the processes whose exit an ended
	// interval holds: what its next interval is taken of. Nil: capture.
	sinceInterval *profileio.Capture
}

// ownFinal reports whether w is a process's own final profile (not a group's).
func (w *pending) ownFinal() bool { return w.final && w.pids == nil }

// intervalCapture is what w's interval is taken of.
func (w *pending) intervalCapture() *profileio.Capture {
	if w.sinceInterval != nil {
		return w.sinceInterval
	}
	return w.capture
}

// exitedGroup is what a group (--group-by image or container) keeps of its processes that
// exited, for its cumulative outputs.
type exitedGroup struct {
	// recent are the final captures of those whose samples no ended interval holds yet
	// (their last interval is their group's next): they go to past once one does
	// (foldExited).
	recent []pending
	// past is the others' captures merged into one, some of its processes folded into one
	// past maxExitedApart; nil when none.
	past  *pending
	noted bool // the folding was logged
	// idleSince is when a write of the group last found none of its processes alive (zero
	// while one is): settleGroups lets it go once it has been so for --keep-ended.
	idleSince time.Time
}

// members are the processes w's outputs cover.
func (w *pending) members() []uint32 {
	if w.pids != nil {
		return w.pids
	}
	return []uint32{w.pid}
}

// add keeps w, the final capture of a process of the group that exited.
func (e *exitedGroup) add(w pending) { e.recent = append(e.recent, w) }
