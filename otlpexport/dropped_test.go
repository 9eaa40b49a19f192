package otlpexport

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/profd/profd/internal/testenv"
)

// TestDroppedSources: with nothing listening, Config.Dropped is told the Source of each
// profile whose every request the queue's bound dropped, oldest first, once; never that of
// a profile a request of which was taken for sending (in flight, or sent), nor of one
// without a Source. Close tells it of those it leaves unsent, the one in flight included
// unless an attempt at it was under way, and so does an Export after Close.
func TestDroppedSources(t *testing.T) {
	p := testProfile(50)
	var m pprofile.ProtoMarshaler
	size := m.ProfilesSize(convert(&p, p.Pprof.Sample))

	startAt := func(t *testing.T, addr string, maxRequest int) (*Exporter, func() []string) {
		var mu sync.Mutex
		var got []string
		e, err := New(Config{Endpoint: addr, Insecure: true, QueueBytes: size*7/2 + 1, MaxRequestBytes: maxRequest,
			MaxBackoff: time.Hour, Dropped: func(s string) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, s)
			}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeWithin(t, e, 100*time.Millisecond) })
		return e, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		}
	}
	addr := deadAddr(t)
	start := func(t *testing.T, maxRequest int) (*Exporter, func() []string) { return startAt(t, addr, maxRequest) }
	withSource := func(n int, source string) Profile {
		p := testProfile(n)
		p.Source = source
		return p
	}

	t.Run("whole", func(t *testing.T) {
		e, got := start(t, 0)
		e.Export(withSource(50, "first"))
		waitStats(t, e, "the first request in flight", func(s Stats) bool { return s.InFlight })
		var want []string
		for i := range 10 {
			e.Export(withSource(50, fmt.Sprint(i)))
		}
		e.Export(testProfile(50)) // no source
		st := e.Stats()
		for i := range int(st.DroppedRequests) {
			want = append(want, fmt.Sprint(i))
		}
		if len(want) < 5 || !slices.Equal(got(), want) {
			t.Errorf("Dropped told %q; %d requests dropped, want %q", got(), st.DroppedRequests, want)
		}
	})
	t.Run("split", func(t *testing.T) {
		e, got := start(t, size/2)
		e.Export(withSource(50, "taken"))
		st := waitStats(t, e, "a request in flight", func(s Stats) bool { return s.InFlight })
		if st.QueuedRequests == 0 {
			t.Fatalf("stats %+v: the profile was not split", st)
		}
		for range 10 {
			e.Export(testProfile(5))
		}
		e.Export(withSource(50, "queued"))
		for range 10 {
			e.Export(testProfile(5))
		}
		if st := e.Stats(); !slices.Equal(got(), []string{"queued"}) {
			t.Errorf("Dropped told %q (stats %+v); want the profile none of whose requests was taken, once", got(), st)
		}
	})
	t.Run("close", func(t *testing.T) {
		e, got := start(t, 0)
		e.Export(withSource(50, "in flight"))
		waitStats(t, e, "the first attempt to fail", func(s Stats) bool { return s.Retries > 0 })
		e.Export(withSource(50, "queued"))
		e.Export(testProfile(50))
		if err := closeWithin(t, e, 300*time.Millisecond); err == nil {
			t.Error("Close: nil error, want 3 requests not sent")
		}
		e.Export(withSource(50, "after"))
		if want := []string{"in flight", "queued", "after"}; !slices.Equal(got(), want) {
			t.Errorf("Dropped told %q, want %q", got(), want)
		}
	})
	t.Run("close during an attempt", func(t *testing.T) {
		e, got := startAt(t, testenv.SilentListener(t), 0)
		e.Export(withSource(50, "in flight"))
		waitStats(t, e, "the first attempt", func(s Stats) bool { return s.InFlight })
		e.Export(withSource(50, "queued"))
		closeWithin(t, e, 300*time.Millisecond)
		if want := []string{"queued"}; !slices.Equal(got(), want) {
			t.Errorf("Dropped told %q, want %q: the silent endpoint may have taken the one in flight", got(), want)
		}
	})
}

// TestSettledSources: Config.Settled is told each Source once, when none of its profile's
// requests is left to send: sent (a split profile once all its parts are), refused by the
// endpoint, dropped by the queue's bound (after Dropped), left by Close or exported after
// it; never that of a profile still queued or in flight.
func TestSettledSources(t *testing.T) {
	p := testProfile(50)
	var m pprofile.ProtoMarshaler
	size := m.ProfilesSize(convert(&p, p.Pprof.Sample))
	var mu sync.Mutex
	var settled, dropped []string
	cfg := func(endpoint string) Config {
		return Config{Endpoint: endpoint, Insecure: true, QueueBytes: size*7/2 + 1, MaxBackoff: time.Hour,
			Dropped: func(s string) {
				mu.Lock()
				defer mu.Unlock()
				if slices.Contains(settled, s) {
					t.Errorf("Dropped told %q after Settled", s)
				}
				dropped = append(dropped, s)
			},
			Settled: func(s string) {
				mu.Lock()
				defer mu.Unlock()
				if slices.Contains(settled, s) {
					t.Errorf("Settled told %q twice", s)
				}
				settled = append(settled, s)
			}}
	}
	told := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(settled)
	}
	withSource := func(n int, source string) Profile {
		p := testProfile(n)
		p.Source = source
		return p
	}

	// Sent, refused, and split in two or more, its first part sent and the second refused.
	var requests int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		if n == 2 || n == 4 {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	c := cfg(srv.URL)
	c.Protocol = ProtocolHTTP
	e, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Export(withSource(50, "sent"))
	e.Export(withSource(50, "refused"))
	waitStats(t, e, "two requests settled", func(s Stats) bool { return s.SentRequests+s.FailedRequests == 2 })
	closeWithin(t, e, time.Second)
	c.MaxRequestBytes = size / 2
	if e, err = New(c, nil); err != nil {
		t.Fatal(err)
	}
	e.Export(withSource(50, "split"))
	waitStats(t, e, "every part settled", func(s Stats) bool {
		return s.SentRequests+s.FailedRequests >= 4 && s.QueuedRequests == 0 && !s.InFlight
	})
	if told := told(); len(told) != 3 {
		t.Errorf("Settled told %q once every part of the split profile was sent or refused", told)
	}
	closeWithin(t, e, time.Second)
	if want := []string{"sent", "refused", "split"}; !slices.Equal(told(), want) {
		t.Errorf("Settled told %q, want %q", told(), want)
	}

	// Dropped by the bound, left by Close, exported after it.
	mu.Lock()
	settled = nil
	mu.Unlock()
	e, err = New(cfg(deadAddr(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Export(withSource(50, "in flight"))
	waitStats(t, e, "the first attempt to fail", func(s Stats) bool { return s.Retries > 0 })
	for i := range 6 {
		e.Export(withSource(50, fmt.Sprint("dropped ", i)))
	}
	st := e.Stats()
	before := told()
	if int(st.DroppedRequests) != len(before) || slices.Contains(before, "in flight") {
		t.Errorf("before Close, Settled told %q with %d requests dropped", before, st.DroppedRequests)
	}
	closeWithin(t, e, 300*time.Millisecond)
	e.Export(withSource(50, "dropped after"))
	if got := told(); len(got) != 8 || !slices.Contains(got, "in flight") || got[len(got)-1] != "dropped after" {
		t.Errorf("Settled told %q, want all 8 once, the one after Close last", got)
	}
}
