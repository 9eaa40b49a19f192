package daemon

import (
	"context"
	"time"

	"github.com/profd/profd/profileio"
)

// Interval is one interval of one output: the samples its processes drew between Start and
// End, and nothing else. Every sample of a run belongs to exactly one interval of its
// output.
type Interval struct {
	Base       string // the output's base name: <image>-<pid>, <image>, <image>-uid<UID>
	Start, End time.Time
	// Capture holds the interval's samples only. It shares code and line tables with the
	// daemon's state: read it, never change it.
	Capture *profileio.Capture
	Final   bool // the output's last interval (its process exited, or profd stops)
	// CaptureFile is the interval's capture in the interval directory, where an exporter
	// may read it again (--keep deletes it in time), and CaptureBytes its size as written;
	// "" and 0 when none was written.
	CaptureFile  string
	CaptureBytes int64
}

// Exporter ships intervals off the host (cmd/profd's OTLP exporter is one).
type Exporter interface {
	// Start hands over the interval directory, once the run holds --out's lock and before
	// the first interval: an exporter may keep there, and read back from there, what it
	// must remember from one run to the next. The daemon calls it once, with
	// --flush-interval only.
	Start(intervalDir string)
	// Export hands over one interval. It must not block a flush: an exporter queues what
	// it takes, within its own bounds, and counts what it drops.
	Export(Interval)
	// Close sends what is queued until ctx ends, then lets go of it. The daemon calls it
	// once, after the final flush, with what is left of the stop timeout.
	Close(ctx context.Context) error
}

// ExportStats is what an exporter counts of itself, for profd's self-metrics: cmd/profd
// hands its exporter's to the metrics server.
type ExportStats struct {
	QueuedIntervals uint64 // now: intervals waiting to be sent
	QueuedBytes     uint64 // now: their encoded size
	Sent            uint64 // intervals delivered
	Dropped         uint64 // intervals let go unsent: past the queue's bounds, or at the stop
	Resent          uint64 // of those, intervals queued again from their files
	ToResend        uint64 // now: intervals dropped unsent waiting to be queued again
	Failed          uint64 // intervals given up on after errors
	// Latency is how long delivered intervals took from their end to their delivery.
	Latency Histogram
}
