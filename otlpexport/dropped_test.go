package otlpexport

import (
	"fmt"
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
