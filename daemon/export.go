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
}

// Exporter ships intervals off the host (cmd/profd's OTLP exporter is one).
type Exporter interface {
	// Export hands over one interval. It must not block a flush: an exporter queues what
	// it takes, within its own bounds, and counts what it drops.
	Export(Interval)
	// Close sends what is queued until ctx ends, then lets go of it. The daemon calls it
	// once, after the final flush, with what is left of the stop timeout.
	Close(ctx context.Context) error
}
