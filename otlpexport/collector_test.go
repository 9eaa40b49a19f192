package otlpexport

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/profd/profd/internal/testenv/collector"
)

// TestCollectorRoundTrip sends a profile to a real Collector over each protocol and checks
// that what the Collector received is the profile: its resources, sample totals per leaf
// function, per stack of named frames and per label set, build-ids, sample types, period,
// time and duration.
func TestCollectorRoundTrip(t *testing.T) {
	c := collector.Start(t)
	for _, tc := range []struct {
		name     string
		endpoint string
		protocol string
	}{
		{"grpc", c.GRPCAddr, ProtocolGRPC},
		{"http", "http://" + c.HTTPAddr, ProtocolHTTP},
		{"grpc-uncompressed", "http://" + c.GRPCAddr, ProtocolGRPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(c.Received(t))
			cfg := Config{Endpoint: tc.endpoint, Protocol: tc.protocol, Insecure: true}
			if strings.HasSuffix(tc.name, "uncompressed") {
				cfg.Compression = CompressionNone
			}
			e, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := testProfile(500)
			e.Export(p)
			if err := closeWithin(t, e, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			st := e.Stats()
			if st.SentRequests != 1 || st.DroppedRequests != 0 || st.FailedRequests != 0 || st.ExportCount != 1 {
				t.Errorf("stats %+v, want one request sent", st)
			}
			got := c.Received(t)[before:]
			if len(got) != 1 {
				t.Fatalf("the Collector received %d requests, want 1", len(got))
			}
			compareSummaries(t, otlpSummary(t, got, p.Pprof), pprofSummary(p))
		})
	}
}

// TestCollectorSplitsLargeProfiles checks that a profile over the request bound arrives
// whole, in several requests, and that a sample too large for any request is counted.
func TestCollectorSplitsLargeProfiles(t *testing.T) {
	c := collector.Start(t)
	const bound = 64 << 10
	var delivered []time.Time // Delivered's calls: one, once the last part is sent
	e, err := New(Config{Endpoint: c.GRPCAddr, Insecure: true, MaxRequestBytes: bound,
		Delivered: func(end time.Time) { delivered = append(delivered, end) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := benchProfile(3000)
	p.End = time.Unix(1700000000, 0)
	e.Export(p)
	if err := closeWithin(t, e, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	got := c.Received(t)
	if len(got) < 2 {
		t.Fatalf("%d requests, want the profile split across several", len(got))
	}
	var m pprofile.ProtoMarshaler
	for i, r := range got {
		if n := m.ProfilesSize(r); n > bound {
			t.Errorf("request %d is %d bytes, over the bound", i, n)
		}
	}
	compareSummaries(t, otlpSummary(t, got, p.Pprof), pprofSummary(p))
	if st := e.Stats(); st.SentRequests != uint64(len(got)) || st.DroppedRequests != 0 {
		t.Errorf("stats %+v, want %d sent, none dropped", st, len(got))
	}
	if len(delivered) != 1 || !delivered[0].Equal(p.End) {
		t.Errorf("Delivered called with %v, want once with the profile's end %v", delivered, p.End)
	}

	// A request bound no single sample fits in: every sample is dropped, and counted.
	e, err = New(Config{Endpoint: c.GRPCAddr, Insecure: true, MaxRequestBytes: 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Export(testProfile(5))
	if err := closeWithin(t, e, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.DroppedSamples != 5 || st.SentRequests != 0 {
		t.Errorf("stats %+v, want the 5 samples dropped", st)
	}
}

// TestCollectorRestart stops the Collector while profiles are exported: they wait in the
// queue, arrive once it is back, and the gap is logged once.
func TestCollectorRestart(t *testing.T) {
	for _, proto := range []string{ProtocolGRPC, ProtocolHTTP} {
		t.Run(proto, func(t *testing.T) {
			c := collector.Start(t)
			endpoint := c.GRPCAddr
			if proto == ProtocolHTTP {
				endpoint = c.HTTPAddr
			}
			log, logBuf := logs()
			e, err := New(Config{Endpoint: endpoint, Protocol: proto, Insecure: true, MaxBackoff: 500 * time.Millisecond, Timeout: 5 * time.Second}, log)
			if err != nil {
				t.Fatal(err)
			}
			e.Export(testProfile(50))
			waitStats(t, e, "the first request", func(s Stats) bool { return s.SentRequests == 1 })

			c.Stop()
			for range 3 {
				e.Export(testProfile(50))
			}
			waitStats(t, e, "a failed attempt", func(s Stats) bool { return s.Retries >= 2 })
			c.Restart()
			waitStats(t, e, "the queued requests", func(s Stats) bool { return s.SentRequests == 4 })
			if err := closeWithin(t, e, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := len(c.Received(t)); got != 4 {
				t.Errorf("the Collector received %d requests, want 4", got)
			}
			out := logBuf.String()
			if n := strings.Count(out, "sending profiles fails"); n != 1 {
				t.Errorf("%d warnings of the failure, want 1:\n%s", n, out)
			}
			if !strings.Contains(out, "sending again") || !strings.Contains(out, "gap=") {
				t.Errorf("the gap is not logged:\n%s", out)
			}
			if st := e.Stats(); st.DroppedRequests != 0 || st.FailedRequests != 0 {
				t.Errorf("stats %+v, want nothing lost", st)
			}
		})
	}
}
