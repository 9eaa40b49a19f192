package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/daemon"
	"github.com/profd/profd/otlpexport"
	"github.com/profd/profd/profileio"
)

// otlpOptions are the flags of the OTLP export.
type otlpOptions struct {
	cfg         otlpexport.Config // what the flags set; the OTEL_EXPORTER_OTLP_* variables fill the rest
	commandLine bool              // --otlp-command-line
}

// defaultOTLPQueueMB is --otlp-queue-mb's default.
const defaultOTLPQueueMB = otlpexport.DefaultQueueBytes >> 20

// addOTLPFlags registers the --otlp-* flags into o.
func addOTLPFlags(fs *flag.FlagSet, o *otlpOptions) {
	fs.StringVar(&o.cfg.Endpoint, "otlp-endpoint", "", "send every interval of every output (see --flush-interval) as an OTLP profile to the OpenTelemetry Collector, or any OTLP profiles receiver, at `ENDPOINT`: HOST:PORT (TLS, unless --otlp-insecure), http://HOST:PORT (plaintext) or https://HOST:PORT; default $OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT (the other OTEL_EXPORTER_OTLP_* variables are read too: _HEADERS, _INSECURE, _CERTIFICATE, _CLIENT_CERTIFICATE, _CLIENT_KEY, _PROTOCOL, _COMPRESSION, _TIMEOUT); none: no export")
	fs.Func("otlp-protocol", "`PROTOCOL` of the export: grpc (default) or http/protobuf (POST to /v1development/profiles)", func(s string) error {
		switch s {
		case "grpc":
			o.cfg.Protocol = otlpexport.ProtocolGRPC
		case "http/protobuf", "http":
			o.cfg.Protocol = otlpexport.ProtocolHTTP
		default:
			return fmt.Errorf("want grpc or http/protobuf")
		}
		return nil
	})
	fs.BoolVar(&o.cfg.Insecure, "otlp-insecure", false, "send to a HOST:PORT --otlp-endpoint in plaintext (a local Collector), not over TLS")
	fs.StringVar(&o.cfg.CAFile, "otlp-ca-file", "", "verify the endpoint's TLS certificate with the PEM certificates in `FILE` instead of the system's; read again when it changes, so a rotated CA is taken without a restart")
	fs.StringVar(&o.cfg.ClientCertFile, "otlp-cert-file", "", "with --otlp-key-file, present the PEM certificate in `FILE` to an endpoint that asks for one (mutual TLS); both files are read again when they change, so a rotated certificate is taken without a restart; default $OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
	fs.StringVar(&o.cfg.ClientKeyFile, "otlp-key-file", "", "the PEM private key (`FILE`) of --otlp-cert-file; default $OTEL_EXPORTER_OTLP_CLIENT_KEY")
	fs.Func("otlp-header", "send `KEY=VALUE` with every export request (gRPC metadata, HTTP header), e.g. 'authorization=Bearer TOKEN'; repeat it for more", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, such as 'authorization=Bearer TOKEN'")
		}
		if o.cfg.Headers == nil {
			o.cfg.Headers = map[string]string{}
		}
		o.cfg.Headers[k] = strings.TrimSpace(v)
		return nil
	})
	fs.Func("otlp-queue-mb", fmt.Sprintf("the export requests waiting to be sent may hold `MB` (default %d): past it, while the endpoint is down or slow, the oldest are dropped and counted, with one warning; each is sent again from its interval file once the endpoint keeps up (unless --keep deleted it), by the next profd with this --out if this one stops first", defaultOTLPQueueMB), func(s string) error {
		mb, err := strconv.ParseInt(s, 10, 64)
		if err != nil || mb <= 0 || mb > 1<<20 {
			return fmt.Errorf("want a number of megabytes, such as 64")
		}
		o.cfg.QueueBytes = int(mb << 20)
		return nil
	})
	fs.BoolVar(&o.commandLine, "otlp-command-line", false, "export each process's command line (process.command_line), which may hold secrets; by default it is left out")
}

// startExport makes the exporter the flags and the environment ask for and hands it to cfg;
// nil when no endpoint is configured.
func startExport(o otlpOptions, cfg *daemon.Config, logger *slog.Logger) (*intervalExporter, error) {
	oc, err := otlpexport.ConfigFromEnv(o.cfg, nil)
	if err != nil {
		return nil, err
	}
	if oc.Endpoint == "" {
		return nil, nil
	}
	x := &intervalExporter{commandLine: o.commandLine, log: logger, work: make(chan daemon.Interval, intervalQueue),
		done: make(chan struct{}), latency: daemon.NewDurationHistogram(daemon.FlushBuckets),
		queueBytes: oc.QueueBytes, stop: make(chan struct{}), resent: make(chan struct{})}
	if x.queueBytes == 0 {
		x.queueBytes = otlpexport.DefaultQueueBytes
	}
	oc.Delivered = func(end time.Time) { x.latency.Observe(time.Since(end)) }
	oc.Dropped = x.keepForLater
	oc.Settled = x.settled
	x.exp, err = otlpexport.New(oc, logger)
	if err != nil {
		return nil, err
	}
	go x.run()
	go x.resend()
	cfg.Exporter = x
	return x, nil
}

// intervalQueue bounds the intervals waiting for their conversion to OTLP: each holds its
// capture, which shares code with the daemon's state.
const intervalQueue = 16

// intervalExporter is the daemon's Exporter: it converts each interval's capture to an OTLP
// profile on a goroutine of its own (a flush never waits for it) and queues it for sending.
type intervalExporter struct {
	exp         *otlpexport.Exporter
	commandLine bool
	log         *slog.Logger
	latency     *daemon.DurationHistogram // interval end to delivery

	mu     sync.Mutex // guards closed and sends on work
	closed bool
	work   chan daemon.Interval
	done   chan struct{} // closed when run returns

	dropped  atomic.Uint64 // intervals not converted: the conversion fell behind, or failed
	dropping atomic.Bool   // a drop episode, warned once
	abandon  atomic.Bool   // the stop's deadline passed: run sets aside what is left, unconverted
	// abandoned are the laterSources of the intervals run set aside, oldest first: kept
	// for later after those the exporter leaves, which are older.
	abandoned []string

	// later holds the intervals dropped unsent (the queue's bound, the conversion behind,
	// or the stop), oldest first, by laterSource, to be sent again from their files once the
	// endpoint keeps up (resend); past maxLater the oldest are let go. The interval
	// directory's unsent list (unsentName) keeps them from one run to the next.
	laterMu sync.Mutex
	later   []string
	// pending are the intervals handed to the export and not settled yet (sent, refused or
	// dropped), by laterSource, each with the order it came in: the list written while
	// profd runs holds them too, so that a profd killed (SIGKILL, the OOM killer, a crash)
	// leaves them for the next run. (One the endpoint took in the list's last second is
	// then sent twice; the stop's list leaves them out, as it does the one whose attempt
	// was under way.) They are as many as the export's queue and conversion hold.
	pending      map[string]uint64
	pendingSeq   uint64
	dir          string    // the interval directory (Start), where the unsent list is
	laterChanged bool      // later or pending, since the list was last written
	listsPending bool      // the list written holds pending intervals
	savedAt      time.Time // when it was
	saveOnce     sync.Once // the stop's

	queueBytes int           // the exporter's queue bound
	stop       chan struct{} // closed by Close: resend returns
	resent     chan struct{} // closed when resend returns
	resentN    atomic.Uint64 // intervals sent again from their files
}

// maxLater bounds the intervals kept to be sent again: some 250 bytes each.
const maxLater = 1 << 16

// resendEvery is how often resend looks whether the endpoint keeps up.
const resendEvery = time.Second

// laterSource is what keepForLater is given of iv, to send it again: its capture file, the
// file's size as written and the digest of what tells where it was taken (capturedWhere),
// NUL between; "" when no capture was written.
func laterSource(iv daemon.Interval) string {
	if iv.CaptureFile == "" {
		return ""
	}
	return joinSource(iv.CaptureFile, iv.CaptureBytes, capturedWhere(iv.Capture))
}

// capturedWhere digests what a capture says of where it was taken: its host, its time and
// its processes (pid, executable, cgroup, container, service). An interval file is its
// target's user's to read, and so to change: one sent again must still say the same, so
// that no user can have profd send a profile of theirs as another process's or
// container's.
func capturedWhere(c *profileio.Capture) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %d\n", c.Meta.Host, c.Meta.StartTime.UnixNano())
	if c.End != nil {
		fmt.Fprintf(h, "%d\n", c.End.EndTime.UnixNano())
	}
	for _, p := range c.Processes {
		fmt.Fprintf(h, "%d %q %q %q %q\n", p.Pid, p.Executable, p.CgroupPath, p.ContainerID, p.ServiceName)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// handed records an interval (its laterSource) handed to the export, pending until it is
// settled.
func (x *intervalExporter) handed(source string) {
	if source == "" {
		return
	}
	x.laterMu.Lock()
	defer x.laterMu.Unlock()
	x.handedLocked(source)
}

func (x *intervalExporter) handedLocked(source string) {
	if x.pending == nil {
		x.pending = map[string]uint64{}
	}
	x.pendingSeq++
	x.pending[source] = x.pendingSeq
	x.laterChanged = true
}

// settledLocked forgets a pending interval: sent, refused, dropped or not to be sent.
func (x *intervalExporter) settledLocked(source string) {
	if _, ok := x.pending[source]; ok {
		delete(x.pending, source)
		x.laterChanged = true
	}
}

// settled is the exporter's Settled: none of the interval's requests is left to send (sent,
// refused, or dropped and kept for later).
func (x *intervalExporter) settled(source string) {
	x.laterMu.Lock()
	defer x.laterMu.Unlock()
	x.settledLocked(source)
}

// keepForLater keeps an interval dropped unsent (its laterSource), to be sent again.
func (x *intervalExporter) keepForLater(source string) {
	if source == "" {
		return
	}
	x.laterMu.Lock()
	defer x.laterMu.Unlock()
	x.settledLocked(source)
	if len(x.later) >= maxLater {
		x.later[0] = ""
		x.later = x.later[1:]
	}
	x.later = append(x.later, source)
	x.laterChanged = true
}

// Start implements daemon.Exporter: it takes the intervals the last run with this --out
// left unsent, from the interval directory's list, to send them again first.
func (x *intervalExporter) Start(dir string) {
	sources, err := readUnsent(dir)
	if err != nil {
		x.log.Warn("profd: export: the list of intervals the last run left unsent cannot be read; they are not sent", "err", err)
	}
	x.laterMu.Lock()
	defer x.laterMu.Unlock()
	x.dir = dir
	x.laterChanged = true // the list as read is written again, or removed, at the next save
	if len(sources) > 0 {
		first, _, _ := splitSource(sources[0])
		x.log.Info("profd: export: the last run left intervals unsent; they are sent from their files once the endpoint keeps up",
			"intervals", len(sources), "first", first)
		x.later = append(sources, x.later...)
		x.later = x.later[max(0, len(x.later)-maxLater):]
	}
}

// unsentEvery is how often, at most, the unsent list is written while profd runs.
const unsentEvery = time.Second

// saveUnsent writes the unsent list when later or pending changed since it was last
// written, at most each unsentEvery unless final (the stop's, which also says what it
// leaves, and leaves out what is pending: the endpoint may have taken it).
func (x *intervalExporter) saveUnsent(final bool) {
	x.laterMu.Lock()
	defer x.laterMu.Unlock()
	changed := x.laterChanged || final && x.listsPending
	if x.dir == "" || !changed || !final && time.Since(x.savedAt) < unsentEvery {
		return
	}
	list := x.later
	withPending := !final && len(x.pending) > 0
	if withPending {
		list = append(slices.Clone(x.later), slices.SortedFunc(maps.Keys(x.pending), func(a, b string) int {
			return cmp.Compare(x.pending[a], x.pending[b])
		})...)
	}
	if err := writeUnsent(x.dir, list); err != nil {
		x.log.Warn("profd: export: the list of intervals left unsent cannot be written", "err", err)
		return
	}
	x.laterChanged, x.listsPending, x.savedAt = false, withPending, time.Now()
}

// resend sends the intervals dropped unsent again, from their capture files, while the
// exporter's queue is empty and nothing is in flight (the endpoint keeps up), each second
// until a quarter of the queue's bound is filled; an interval whose file --keep deleted
// meanwhile is skipped. It returns at Close.
func (x *intervalExporter) resend() {
	defer close(x.resent)
	t := time.NewTicker(resendEvery)
	defer t.Stop()
	var sent, skipped int // this episode's
	for {
		select {
		case <-x.stop:
			return
		case <-t.C:
		}
		x.saveUnsent(false)
		if st := x.exp.Stats(); st.QueuedRequests > 0 || st.InFlight {
			continue
		}
		for x.exp.Stats().QueuedBytes < x.queueBytes/4 {
			select {
			case <-x.stop:
				return
			default:
			}
			x.laterMu.Lock()
			if len(x.later) == 0 {
				x.laterMu.Unlock()
				break
			}
			source := x.later[0]
			x.later[0] = ""
			x.later = x.later[1:]
			x.handedLocked(source)
			left := len(x.later)
			x.laterMu.Unlock()
			if sent == 0 && skipped == 0 {
				x.log.Info("profd: export: sending again, from their files, the intervals dropped unsent", "intervals", left+1)
			}
			path, size, where := splitSource(source)
			c, err := loadCapture(path, size)
			if err == nil && capturedWhere(c) != where {
				err = fmt.Errorf("%w: it names another host, time or process", errChanged)
			}
			var p *profile.Profile
			if errors.Is(err, errChanged) {
				x.log.Warn("profd: export: an interval file changed since profd wrote it: not sent again", "file", path, "err", err)
			} else if err == nil {
				p, err = profileio.Pprof(c)
			}
			if err != nil {
				skipped++
				x.log.Debug("profd: export: an interval dropped unsent is not sent again", "file", path, "err", err)
				x.laterMu.Lock()
				x.settledLocked(source)
				x.laterMu.Unlock()
			} else {
				x.exp.Export(otlpexport.Profile{Pprof: p, HostName: c.Meta.Host, Processes: x.processes(c), Source: source})
				sent++
				x.resentN.Add(1)
			}
			if left == 0 {
				// Skipped: deleted by --keep meanwhile or unreadable (each at debug level), or
				// changed (each warned of).
				x.log.Info("profd: export: the intervals dropped unsent were queued again", "intervals", sent, "skipped", skipped)
				sent, skipped = 0, 0
			}
		}
	}
}

// errChanged: an interval file says other than the interval profd wrote (capturedWhere).
var errChanged = errors.New("the file changed since profd wrote it")

// joinSource is the laterSource of the capture file path, size bytes as written, whose
// capturedWhere digest is where.
func joinSource(path string, size int64, where string) string {
	return fmt.Sprintf("%s\x00%d\x00%s", path, size, where)
}

// splitSource splits a laterSource.
func splitSource(source string) (path string, size int64, where string) {
	path, rest, _ := strings.Cut(source, "\x00")
	n, where, _ := strings.Cut(rest, "\x00")
	size, _ = strconv.ParseInt(n, 10, 64)
	return path, size, where
}

// loadCapture reads the capture in path, errChanged unless it is size bytes (what profd
// wrote): a file its user made larger is not read.
func loadCapture(path string, size int64) (*profileio.Capture, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if st.Size() != size {
		return nil, fmt.Errorf("%w: %d bytes, %d written", errChanged, st.Size(), size)
	}
	return profileio.ReadCapture(io.LimitReader(f, size))
}

// Export implements daemon.Exporter: it queues iv for conversion, or drops and counts it when
// intervalQueue are already waiting.
func (x *intervalExporter) Export(iv daemon.Interval) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		x.drop("the exporter is closed", iv)
		return
	}
	select {
	case x.work <- iv:
		x.handed(laterSource(iv))
	default:
		x.drop("intervals end faster than they are converted", iv)
	}
}

// drop counts an interval that is not exported, warning at the first of an episode, and
// keeps its capture file to be sent again.
func (x *intervalExporter) drop(why string, iv daemon.Interval) {
	x.dropped.Add(1)
	x.keepForLater(laterSource(iv))
	if !x.dropping.Swap(true) {
		x.log.Warn("profd: export: dropping intervals; each is sent again from its interval file once the export keeps up; further drops are counted, not logged, until one is exported",
			"why", why, "output", iv.Base, "interval_end", iv.End)
	}
}

// run converts the queued intervals until Close.
func (x *intervalExporter) run() {
	defer close(x.done)
	for iv := range x.work {
		if x.abandon.Load() {
			x.dropped.Add(1)
			if s := laterSource(iv); s != "" {
				x.abandoned = append(x.abandoned, s)
			}
			continue
		}
		p, err := profileio.Pprof(iv.Capture)
		if err != nil {
			x.drop(err.Error(), iv)
			continue
		}
		x.dropping.Store(false)
		x.exp.Export(otlpexport.Profile{Pprof: p, HostName: iv.Capture.Meta.Host, Processes: x.processes(iv.Capture), End: iv.End,
			Source: laterSource(iv)})
	}
}

// processes are the resource attributes of c's processes.
func (x *intervalExporter) processes(c *profileio.Capture) []otlpexport.Process {
	out := make([]otlpexport.Process, 0, len(c.Processes))
	for _, p := range c.Processes {
		name := p.Command
		if p.Executable != "" {
			name = filepath.Base(p.Executable)
		}
		op := otlpexport.Process{Pid: int(p.Pid), ExecutablePath: p.Executable, ExecutableName: name,
			ContainerID: p.ContainerID, Cgroup: p.CgroupPath, ServiceName: p.ServiceName}
		if x.commandLine {
			op.CommandLine = strings.Join(p.CommandLine, " ")
		}
		out = append(out, op)
	}
	return out
}

// Close implements daemon.Exporter: it converts what is queued and sends what it can until
// ctx ends, then writes the unsent list: the intervals dropped unsent and those the stop
// leaves, for the next run. It may be called more than once.
func (x *intervalExporter) Close(ctx context.Context) error {
	x.mu.Lock()
	if !x.closed {
		x.closed = true
		close(x.work)
		close(x.stop)
	}
	x.mu.Unlock()
	<-x.resent
	converted := true
	select {
	case <-x.done:
	default:
		select {
		case <-x.done:
		case <-ctx.Done():
			converted = false
		}
	}
	var errs []error
	if !converted {
		n := len(x.work)
		x.abandon.Store(true)
		<-x.done // the one being converted, if any, and no more
		errs = append(errs, fmt.Errorf("%d intervals not converted before the stop timeout", n))
	}
	errs = append(errs, x.exp.Close(ctx)) // it names those it leaves unsent: keepForLater
	for _, s := range x.abandoned {
		x.keepForLater(s)
	}
	x.abandoned = nil
	x.saveOnce.Do(func() {
		x.saveUnsent(true)
		x.laterMu.Lock()
		defer x.laterMu.Unlock()
		if n := len(x.later); n > 0 {
			first, _, _ := splitSource(x.later[0])
			where := "their files are in the interval directory"
			if x.dir != "" && !x.laterChanged {
				where = "the next profd with this --out sends them from their files"
			}
			errs = append(errs, fmt.Errorf("%d intervals not sent, the first %s: %s", n, first, where))
		}
	})
	return errors.Join(errs...)
}

// stats are the export's counters, for the metrics.
func (x *intervalExporter) stats() daemon.ExportStats {
	st := x.exp.Stats()
	x.laterMu.Lock()
	later := uint64(len(x.later))
	x.laterMu.Unlock()
	queued := uint64(st.QueuedRequests) + uint64(len(x.work))
	if st.InFlight {
		queued++
	}
	return daemon.ExportStats{QueuedIntervals: queued, QueuedBytes: uint64(st.QueuedBytes), Sent: st.SentRequests,
		Dropped: st.DroppedRequests + x.dropped.Load(), Resent: x.resentN.Load(), ToResend: later, Failed: st.FailedRequests,
		Latency: x.latency.Snapshot()}
}
