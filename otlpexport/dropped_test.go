package otlpexport

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"
)

// TestDroppedSources: with nothing listening, Config.Dropped is told the Source of each
// profile whose every request the queue's bound dropped, oldest first, once; never that of
// a profile a request of which was taken for sending (in flight, or sent), nor of one
// without a Source.
func TestDroppedSources(t *testing.T) {
	addr := deadAddr(t)
	p := testProfile(50)
	var m pprofile.ProtoMarshaler
	size := m.ProfilesSize(convert(&p, p.Pprof.Sample))

	start := func(t *testing.T, maxRequest int) (*Exporter, func() []string) {
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
}
