package otlpexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Exporter sends profiles to one OTLP endpoint from a goroutine of its own. Export, Stats
// and Close are safe to call concurrently.
type Exporter struct {
	cfg    Config
	log    *slog.Logger
	sender sender
	where  string // the endpoint, for messages

	wake     chan struct{} // a request was queued, or Close began
	draining chan struct{} // closed by Close: send what is queued, then stop
	stop     context.CancelFunc
	ctx      context.Context // ends when Close gives up
	done     chan struct{}   // closed when the sending goroutine returns
	once     sync.Once

	mu          sync.Mutex
	queue       []request // oldest first
	queuedBytes int
	closed      bool
	inFlight    *request
	// cut says Close's deadline ended the request in flight during an attempt: the
	// endpoint may have taken it.
	cut bool
	// downAtClose says the attempt Close made at once failed too: Close gave up before its
	// deadline.
	downAtClose bool
	stats       Stats
	dropping    bool // a drop episode: warned, not yet ended by a send
}

// request is one ExportProfilesServiceRequest waiting to be sent, encoded: the queue's bound
// is the memory it holds.
type request struct {
	body   []byte
	bytes  int       // len(body), kept when body is let go
	end    time.Time // the profile's Profile.End, on its last request only
	origin *origin   // the profile's, when it has a Source
}

// origin is what the requests of one profile with a Source share, under the exporter's
// mutex: whether none of them was sent, and whether Config.Dropped was told so.
type origin struct {
	source  string
	parts   int  // its requests
	dropped int  // of them, dropped by the queue's bound
	sent    int  // of them, sent (or being sent when Close gave up)
	settled int  // of them, sent, refused or dropped: none left to try
	told    bool // Config.Dropped was called with source
}

// settle counts one of o's requests settled and, when that was the last, appends o's
// source to settled, for Config.Settled to be told of it.
func (o *origin) settle(settled []string) []string {
	if o == nil {
		return settled
	}
	if o.settled++; o.settled == o.parts {
		settled = append(settled, o.source)
	}
	return settled
}

// tell calls Config.Dropped with each of lost, then Config.Settled with each of settled.
// Called without the exporter's mutex.
func (e *Exporter) tell(lost, settled []string) {
	if e.cfg.Dropped != nil {
		for _, source := range lost {
			e.cfg.Dropped(source)
		}
	}
	if e.cfg.Settled != nil {
		for _, source := range settled {
			e.cfg.Settled(source)
		}
	}
}

// unsent reports, once, whether none of o's requests was sent: Config.Dropped is then to
// be told of it.
func (o *origin) unsent() bool {
	if o == nil || o.told || o.sent > 0 {
		return false
	}
	o.told = true
	return true
}

// Stats is a snapshot of an Exporter's counters. A "profile" here is one request: an Export
// call makes one, or several when it is split for size.
type Stats struct {
	QueuedRequests, QueuedBytes int    // QueuedBytes: encoded, as Config.QueueBytes bounds them
	InFlight                    bool   // a request is being sent or waits for its retry
	SentRequests, SentBytes     uint64 // bytes encoded, before compression
	Retries                     uint64 // attempts that failed and were tried again
	DroppedRequests             uint64 // dropped for the queue bound, or after Close
	DroppedSamples              uint64 // single samples larger than Config.MaxRequestBytes
	FailedRequests              uint64 // given up on: a permanent error, or Close's deadline
	LastError                   string
	LastErrorTime               time.Time
	// ExportLatency is the sum of successful attempts' round trips, ExportCount their number.
	ExportLatency time.Duration
	ExportCount   uint64
}

// New starts an exporter for cfg; a nil logger discards. It does not connect: the first
// request does.
func New(cfg Config, logger *slog.Logger) (*Exporter, error) {
	cfg = cfg.withDefaults()
	t, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	var s sender
	if cfg.Protocol == ProtocolHTTP {
		s, err = newHTTPSender(cfg, t)
	} else {
		s, err = newGRPCSender(cfg, t)
	}
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	where := t.hostPort
	if cfg.Protocol == ProtocolHTTP {
		where = t.url
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Exporter{
		cfg:      cfg,
		log:      logger.With("otlp_endpoint", where),
		sender:   s,
		where:    where,
		wake:     make(chan struct{}, 1),
		draining: make(chan struct{}),
		stop:     cancel,
		ctx:      ctx,
		done:     make(chan struct{}),
	}
	go e.run()
	return e, nil
}

// Export converts p and queues it; it never waits for the network. Past the queue's bound
// the oldest queued requests are dropped and counted. A profile larger than the request
// bound is split across requests by its samples. After Close it drops p.
func (e *Exporter) Export(p Profile) {
	if p.Pprof == nil {
		return
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		e.drop(1, "the exporter is closed")
		if p.Source != "" {
			e.tell([]string{p.Source}, []string{p.Source})
		}
		return
	}
	reqs, oversize := e.requests(&p, p.Pprof.Sample)
	if oversize > 0 {
		e.mu.Lock()
		e.stats.DroppedSamples += uint64(oversize)
		e.mu.Unlock()
		e.log.Warn("otlpexport: dropping samples each larger than a request may be; Stats().DroppedSamples counts them",
			"samples", oversize, "max_request_bytes", e.cfg.MaxRequestBytes)
	}
	if len(reqs) > 0 {
		reqs[len(reqs)-1].end = p.End
	} else if p.Source != "" {
		e.tell(nil, []string{p.Source}) // nothing to send
	}
	if p.Source != "" && (e.cfg.Dropped != nil || e.cfg.Settled != nil) {
		o := &origin{source: p.Source, parts: len(reqs)}
		for i := range reqs {
			reqs[i].origin = o
		}
	}
	for _, r := range reqs {
		e.enqueue(r)
	}
}

// requests converts samples into requests of at most MaxRequestBytes each, splitting the
// samples until they fit; it counts single samples that do not fit on their own.
func (e *Exporter) requests(p *Profile, samples []*profile.Sample) ([]request, int) {
	if len(samples) == 0 {
		return nil, 0
	}
	pd := convert(p, samples)
	var m pprofile.ProtoMarshaler
	size := m.ProfilesSize(pd)
	if size <= e.cfg.MaxRequestBytes {
		body, err := m.MarshalProfiles(pd)
		if err != nil { // pdata fails only on values it cannot encode, which convert makes none of
			e.log.Error("otlpexport: encoding a profile", "error", err)
			return nil, len(samples)
		}
		return []request{{body: body, bytes: len(body)}}, 0
	}
	if len(samples) == 1 {
		return nil, 1
	}
	// Each part repeats part of the dictionary: aim under the bound by a quarter.
	parts := min(len(samples), 1+size*5/4/e.cfg.MaxRequestBytes)
	var reqs []request
	var oversize int
	for i := range parts {
		part := samples[i*len(samples)/parts : (i+1)*len(samples)/parts]
		r, n := e.requests(p, part)
		reqs = append(reqs, r...)
		oversize += n
	}
	return reqs, oversize
}

func (e *Exporter) enqueue(r request) {
	e.mu.Lock()
	if e.closed || r.bytes > e.cfg.QueueBytes {
		why := "the exporter is closed" // Close has counted what it could not send: this one is dropped
		if !e.closed {
			why = fmt.Sprintf("a request of %d bytes is larger than the queue (%d bytes)", r.bytes, e.cfg.QueueBytes)
		}
		settled := r.origin.settle(nil)
		e.mu.Unlock()
		e.drop(1, why)
		e.tell(nil, settled)
		return
	}
	var dropped int
	var lost, settled []string // sources whose every request was dropped; settled
	for len(e.queue) > 0 && e.queuedBytes+r.bytes > e.cfg.QueueBytes {
		if o := e.queue[0].origin; o != nil {
			if o.dropped++; o.dropped == o.parts && o.unsent() {
				lost = append(lost, o.source)
			}
			settled = o.settle(settled)
		}
		e.queuedBytes -= e.queue[0].bytes
		e.queue[0] = request{}
		e.queue = e.queue[1:]
		dropped++
	}
	e.queue = append(e.queue, r)
	e.queuedBytes += r.bytes
	e.mu.Unlock()
	if dropped > 0 {
		e.drop(dropped, fmt.Sprintf("the queue is full (%d bytes): dropping the oldest", e.cfg.QueueBytes))
	}
	e.tell(lost, settled)
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// drop counts n dropped requests and warns at the first drop of an episode; a send that
// empties the queue ends the episode.
func (e *Exporter) drop(n int, why string) {
	e.mu.Lock()
	e.stats.DroppedRequests += uint64(n)
	warn := !e.dropping
	e.dropping = true
	total := e.stats.DroppedRequests
	e.mu.Unlock()
	if warn {
		e.log.Warn("otlpexport: dropping profiles until the queue drains; Stats().DroppedRequests counts them",
			"reason", why, "dropped_total", total)
	}
}

// Stats returns a snapshot of the counters.
func (e *Exporter) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.QueuedRequests = len(e.queue)
	s.QueuedBytes = e.queuedBytes
	s.InFlight = e.inFlight != nil
	return s
}

// Close sends what is queued until ctx ends, then stops and releases the connection; a
// request waiting out the exporter's backoff is tried at once, on a new connection (a
// server's retry delay is still waited), and when that attempt fails too Close gives up
// without waiting for ctx, the endpoint being down. Config.Dropped is told of each profile
// none of whose requests was sent (but not of one an attempt was under way for when ctx
// ended: the endpoint may have taken it). It returns an error naming how many requests were
// not sent, nil when all were. Only the first call does anything.
func (e *Exporter) Close(ctx context.Context) error {
	err := errors.New("otlpexport: already closed")
	e.once.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		if ctx.Err() != nil {
			e.stop() // no attempt begins: none is cut short either
		}
		close(e.draining)
		select {
		case <-e.done:
		case <-ctx.Done():
			e.stop()
			<-e.done
		}
		e.stop()
		e.mu.Lock()
		unsent := len(e.queue)
		left := e.queue
		if e.inFlight != nil {
			unsent++
			if e.cut && e.inFlight.origin != nil {
				e.inFlight.origin.sent++ // perhaps
			}
			left = append([]request{*e.inFlight}, left...)
			e.inFlight = nil
		}
		e.queue, e.queuedBytes = nil, 0
		var lost, settled []string
		for _, r := range left {
			if r.origin.unsent() {
				lost = append(lost, r.origin.source)
			}
			settled = r.origin.settle(settled)
		}
		e.stats.FailedRequests += uint64(unsent)
		when := "before the close deadline"
		if e.downAtClose {
			when = "at the close: it failed again when tried at once"
		}
		why := "last error: " + e.stats.LastError
		if e.stats.LastError == "" { // the first attempt was still waiting for its answer
			why = "the endpoint had not answered"
		}
		e.mu.Unlock()
		err = nil
		if unsent > 0 {
			err = fmt.Errorf("otlpexport: %d profile requests not sent to %s %s (%s)", unsent, e.where, when, why)
		}
		if cerr := e.sender.close(); cerr != nil && err == nil {
			err = fmt.Errorf("otlpexport: close: %w", cerr)
		}
		e.tell(lost, settled)
	})
	return err
}

// next takes the oldest queued request, waiting for one; false when the exporter stops.
func (e *Exporter) next() (request, bool) {
	for {
		e.mu.Lock()
		if len(e.queue) > 0 {
			r := e.queue[0]
			e.queue[0] = request{}
			e.queue = e.queue[1:]
			e.queuedBytes -= r.bytes
			e.inFlight = &r
			e.mu.Unlock()
			return r, true
		}
		e.mu.Unlock()
		select {
		case <-e.wake:
		case <-e.draining:
			e.mu.Lock()
			empty := len(e.queue) == 0
			e.mu.Unlock()
			if empty {
				return request{}, false
			}
		case <-e.ctx.Done():
			return request{}, false
		}
	}
}

const initialBackoff = 250 * time.Millisecond

// run is the sending goroutine: one request at a time, oldest first.
func (e *Exporter) run() {
	defer close(e.done)
	var (
		failing     bool      // a failure episode: warned, not yet ended by a send
		failedSince time.Time // its first failure
		failedTries int
		backoff     = initialBackoff
		// closing cuts one backoff of the exporter's own short once Close begins: the
		// endpoint may be back, and Close's deadline may come before the backoff ends.
		closing = e.draining
	)
	for {
		r, ok := e.next()
		if !ok {
			return
		}
		for {
			if e.ctx.Err() != nil {
				return // Close gave up before this attempt; it counts the request in flight
			}
			ctx, cancel := context.WithTimeout(e.ctx, e.cfg.Timeout)
			start := time.Now()
			err := e.sender.send(ctx, r.body)
			cancel()
			if err == nil {
				elapsed := time.Since(start)
				e.mu.Lock()
				e.inFlight = nil
				if r.origin != nil {
					r.origin.sent++
				}
				settled := r.origin.settle(nil)
				e.stats.SentRequests++
				e.stats.SentBytes += uint64(r.bytes)
				e.stats.ExportLatency += elapsed
				e.stats.ExportCount++
				dropped := e.stats.DroppedRequests
				drained := e.dropping && len(e.queue) == 0
				if drained {
					e.dropping = false
				}
				e.mu.Unlock()
				if e.cfg.Delivered != nil && !r.end.IsZero() {
					e.cfg.Delivered(r.end)
				}
				e.tell(nil, settled)
				if failing {
					e.log.Info("otlpexport: sending again", "failed_attempts", failedTries,
						"gap", time.Since(failedSince).Round(time.Millisecond))
				}
				if drained {
					e.log.Info("otlpexport: queue drained; dropping ended", "dropped_total", dropped)
				}
				failing, failedTries, backoff = false, 0, initialBackoff
				break
			}
			if e.ctx.Err() != nil {
				// Close gave up during the attempt; it counts the request in flight.
				e.mu.Lock()
				e.cut = true
				e.mu.Unlock()
				return
			}
			var se *sendError
			if !errors.As(err, &se) {
				se = &sendError{err: err, retryable: true}
			}
			e.mu.Lock()
			e.stats.LastError = se.Error()
			e.stats.LastErrorTime = time.Now()
			var settled []string
			if !se.retryable {
				e.stats.FailedRequests++
				e.inFlight = nil
				settled = r.origin.settle(nil)
			} else {
				e.stats.Retries++
			}
			e.mu.Unlock()
			e.tell(nil, settled)
			failedTries++
			if !failing {
				failing, failedSince = true, time.Now()
				msg := "otlpexport: sending profiles fails; retrying until it works, dropping past the queue's bound"
				if !se.retryable {
					msg = "otlpexport: the endpoint refuses profiles; dropping each refused request"
				}
				e.log.Warn(msg, "error", se.Error())
			}
			if !se.retryable {
				break
			}
			if closing == nil && se.retryAfter == 0 {
				// Close tried it at once, on a new connection, and it failed again: the
				// endpoint is down, and waiting out Close's deadline would hold the stop
				// for nothing. Close counts and names what is left.
				e.mu.Lock()
				e.downAtClose = true
				e.mu.Unlock()
				return
			}
			wait := jitter(backoff)
			backoff = min(backoff*2, e.cfg.MaxBackoff)
			cut := closing
			if ra := min(se.retryAfter, maxServerWait); ra > wait { // the server's delay is waited, at the close too
				wait, cut = ra, nil
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-cut:
				t.Stop()
				closing = nil
				if rd, ok := e.sender.(redialer); ok {
					if err := rd.redial(); err != nil {
						e.log.Debug("otlpexport: a new connection for the close", "error", err)
					}
				}
			case <-e.ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// maxServerWait bounds the delay a server asks for before a retry (HTTP's Retry-After,
// gRPC's RetryInfo): a server that asks for days, or for more than a time.Duration holds,
// does not stop the export for longer.
const maxServerWait = time.Hour

// jitter is d scaled by a random factor in [0.5, 1.5).
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}
