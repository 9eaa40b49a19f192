package otlpexport

import (
	"context"
	"encoding/pem"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/profd/profd/internal/testenv"
)

// hits records when a fake server was asked.
type hits struct {
	mu    sync.Mutex
	times []time.Time
}

func (h *hits) add() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.times = append(h.times, time.Now())
	return len(h.times)
}

func (h *hits) get() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.times...)
}

func okAnswer(w http.ResponseWriter) {
	b, _ := pprofileotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// TestHTMLServer: an HTTP server that is not a receiver fails each request once, with one
// warning that names the problem.
func TestHTMLServer(t *testing.T) {
	var h hits
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.add()
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>It works!</body></html>"))
	}))
	defer srv.Close()
	log, logBuf := logs()
	e, err := New(Config{Endpoint: srv.URL, Protocol: ProtocolHTTP}, log)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.Export(testProfile(10))
	}
	st := waitStats(t, e, "three failures", func(s Stats) bool { return s.FailedRequests == 3 })
	if err := closeWithin(t, e, 10*time.Second); err != nil {
		t.Errorf("Close: %v, want nil: nothing was left to send", err)
	}
	if n := len(h.get()); n != 3 {
		t.Errorf("%d requests reached the server, want 3: a non-OTLP answer is not retried", n)
	}
	if !strings.Contains(st.LastError, "not an OTLP") || !strings.Contains(st.LastError, "text/html") {
		t.Errorf("last error %q does not say the endpoint is not OTLP", st.LastError)
	}
	if n := strings.Count(logBuf.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logBuf.String())
	}

	// gRPC to the same server: retried, as a proxy in front of a receiver may answer so
	// while it restarts, and bounded by Close.
	e, err = New(Config{Endpoint: srv.Listener.Addr().String(), Insecure: true, MaxBackoff: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Export(testProfile(10))
	st = waitStats(t, e, "a retry", func(s Stats) bool { return s.Retries >= 1 })
	if !strings.Contains(st.LastError, "does not speak gRPC") {
		t.Errorf("last error %q does not say the endpoint does not speak gRPC", st.LastError)
	}
	if err := closeWithin(t, e, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "1 profile requests not sent") {
		t.Errorf("Close: %v, want 1 request not sent", err)
	}
}

// TestRetryAfterHTTP: a 503 with Retry-After is retried no sooner than it asks.
func TestRetryAfterHTTP(t *testing.T) {
	var h hits
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.add() == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		okAnswer(w)
	}))
	defer srv.Close()
	e, err := New(Config{Endpoint: srv.URL, Protocol: ProtocolHTTP}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Export(testProfile(10))
	if err := closeWithin(t, e, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	times := h.get()
	if len(times) != 2 {
		t.Fatalf("%d requests, want 2", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < time.Second {
		t.Errorf("retried after %v, before the server's Retry-After of 1s", gap)
	}
	if st := e.Stats(); st.SentRequests != 1 || st.Retries != 1 || !strings.Contains(st.LastError, "503") {
		t.Errorf("stats %+v", st)
	}
}

// TestAlways503: a server that never recovers gets bounded retries, and Close returns
// within its context, counting what was not sent.
func TestAlways503(t *testing.T) {
	var h hits
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.add()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	e, err := New(Config{Endpoint: srv.URL, Protocol: ProtocolHTTP}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Export(testProfile(10))
	e.Export(testProfile(10))
	waitStats(t, e, "a retry", func(s Stats) bool { return s.Retries >= 1 })
	err = closeWithin(t, e, 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "2 profile requests not sent") {
		t.Errorf("Close: %v, want 2 requests not sent", err)
	}
	// Retry-After 1s bounds the attempts in the ~1.5s of Close to a handful.
	if n := len(h.get()); n > 4 {
		t.Errorf("%d attempts, want at most 4 with Retry-After: 1", n)
	}
}

// TestSilentServer: a port that accepts and says nothing costs at most Timeout per attempt.
func TestSilentServer(t *testing.T) {
	for _, proto := range []string{ProtocolGRPC, ProtocolHTTP} {
		t.Run(proto, func(t *testing.T) {
			addr := testenv.SilentListener(t)
			log, logBuf := logs()
			e, err := New(Config{Endpoint: addr, Protocol: proto, Insecure: true, Timeout: 300 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}, log)
			if err != nil {
				t.Fatal(err)
			}
			e.Export(testProfile(10))
			st := waitStats(t, e, "attempts to time out", func(s Stats) bool { return s.Retries >= 2 })
			if !strings.Contains(st.LastError, "deadline") && !strings.Contains(st.LastError, "timeout") && !strings.Contains(st.LastError, "does not speak") {
				t.Errorf("last error %q does not say the attempt timed out", st.LastError)
			}
			err = closeWithin(t, e, 500*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), "1 profile requests not sent") {
				t.Errorf("Close: %v, want 1 request not sent", err)
			}
			if n := strings.Count(logBuf.String(), "level=WARN"); n != 1 {
				t.Errorf("%d warnings, want 1:\n%s", n, logBuf.String())
			}
		})
	}
}

// TestCloseBeforeAnswer: Close ending while the first attempt still waits for a silent
// server's answer says so, rather than naming an empty last error.
func TestCloseBeforeAnswer(t *testing.T) {
	e, err := New(Config{Endpoint: testenv.SilentListener(t), Insecure: true}, nil) // the default Timeout: no attempt ends first
	if err != nil {
		t.Fatal(err)
	}
	e.Export(testProfile(10))
	waitStats(t, e, "the attempt", func(s Stats) bool { return s.InFlight })
	err = closeWithin(t, e, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "1 profile requests not sent") || !strings.Contains(err.Error(), "the endpoint had not answered") {
		t.Errorf("Close: %v, want 1 request not sent, the endpoint not having answered", err)
	}
}

// TestUnknownCA: a certificate that does not verify fails the request at once, saying so;
// with the CA file the same server is reached.
func TestUnknownCA(t *testing.T) {
	var h hits
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.add()
		okAnswer(w)
	}))
	srv.EnableHTTP2 = true // so that gRPC's handshake gets as far as the certificate
	srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for _, tc := range []struct{ endpoint, proto string }{
		{srv.URL, ProtocolHTTP},
		{addr, ProtocolGRPC},
	} {
		e, err := New(Config{Endpoint: tc.endpoint, Protocol: tc.proto}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.Export(testProfile(10))
		st := waitStats(t, e, "the failure", func(s Stats) bool { return s.FailedRequests == 1 })
		if !strings.Contains(st.LastError, "certificate") || st.Retries != 0 {
			t.Errorf("%s: stats %+v: want one failure naming the certificate, no retry", tc.proto, st)
		}
		closeWithin(t, e, 5*time.Second)
	}
	if n := len(h.get()); n != 0 {
		t.Errorf("%d requests reached the server past a certificate that does not verify", n)
	}

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Endpoint: srv.URL, Protocol: ProtocolHTTP, CAFile: caFile, Headers: map[string]string{"authorization": "Bearer x"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Export(testProfile(10))
	if err := closeWithin(t, e, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(h.get()); n != 1 {
		t.Errorf("%d requests reached the server with its CA file, want 1", n)
	}
}

// fakeReceiver is a gRPC profiles service answering what answer says.
type fakeReceiver struct {
	pprofileotlp.UnimplementedGRPCServer
	hits   hits
	answer func(n int) error
}

func (f *fakeReceiver) Export(ctx context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	return pprofileotlp.NewExportResponse(), f.answer(f.hits.add())
}

func startFakeReceiver(t *testing.T, answer func(n int) error) (*fakeReceiver, string) {
	return startFakeReceiverAt(t, "127.0.0.1:0", answer)
}

func startFakeReceiverAt(t *testing.T, addr string, answer func(n int) error) (*fakeReceiver, string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeReceiver{answer: answer}
	s := grpc.NewServer()
	pprofileotlp.RegisterGRPCServer(s, f)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return f, l.Addr().String()
}

// TestGRPCErrors: permanent codes fail each request once with one warning; ResourceExhausted
// without RetryInfo (a message over the server's limit) is permanent; a RetryInfo delay is
// waited.
func TestGRPCErrors(t *testing.T) {
	for _, code := range []codes.Code{codes.InvalidArgument, codes.Unauthenticated, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			f, addr := startFakeReceiver(t, func(int) error { return status.Error(code, "no") })
			log, logBuf := logs()
			e, err := New(Config{Endpoint: addr, Insecure: true}, log)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				e.Export(testProfile(10))
			}
			st := waitStats(t, e, "three failures", func(s Stats) bool { return s.FailedRequests == 3 })
			closeWithin(t, e, 5*time.Second)
			if n := len(f.hits.get()); n != 3 || st.Retries != 0 {
				t.Errorf("%d attempts, %d retries: want 3 attempts, none retried", n, st.Retries)
			}
			if !strings.Contains(st.LastError, code.String()) {
				t.Errorf("last error %q does not name %s", st.LastError, code)
			}
			if n := strings.Count(logBuf.String(), "level=WARN"); n != 1 {
				t.Errorf("%d warnings, want 1:\n%s", n, logBuf.String())
			}
		})
	}
	t.Run("RetryInfo", func(t *testing.T) {
		f, addr := startFakeReceiver(t, func(n int) error {
			if n > 1 {
				return nil
			}
			st, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
			return st.Err()
		})
		e, err := New(Config{Endpoint: addr, Insecure: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.Export(testProfile(10))
		if err := closeWithin(t, e, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		times := f.hits.get()
		if len(times) != 2 {
			t.Fatalf("%d attempts, want 2", len(times))
		}
		if gap := times[1].Sub(times[0]); gap < time.Second {
			t.Errorf("retried after %v, before RetryInfo's 1s", gap)
		}
	})
}

// TestCloseCutsBackoff: Close beginning while a request waits out its backoff tries it at
// once, so an endpoint that is back gets it before a deadline shorter than the backoff.
func TestCloseCutsBackoff(t *testing.T) {
	f, addr := startFakeReceiver(t, func(n int) error {
		if n <= 4 {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	})
	e, err := New(Config{Endpoint: addr, Insecure: true, MaxBackoff: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Export(testProfile(10))
	// After the fourth failure the backoff is 2 s jittered: at least 1 s.
	waitStats(t, e, "four failures", func(s Stats) bool { return s.Retries == 4 })
	if err := closeWithin(t, e, 900*time.Millisecond); err != nil {
		t.Errorf("Close: %v, want the request sent at once", err)
	}
	if n := len(f.hits.get()); n != 5 {
		t.Errorf("%d attempts, want 5", n)
	}
}

// TestCloseGivesUpWhenDown: Close tries the request waiting out its backoff once more,
// and when the endpoint fails it again gives up without waiting for its deadline, counting
// what was not sent.
func TestCloseGivesUpWhenDown(t *testing.T) {
	f, addr := startFakeReceiver(t, func(int) error { return status.Error(codes.Unavailable, "down") })
	for name, addr := range map[string]string{"failing": addr, "nothing listening": deadAddr(t)} {
		t.Run(name, func(t *testing.T) {
			e, err := New(Config{Endpoint: addr, Insecure: true, MaxBackoff: time.Minute}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				e.Export(testProfile(10))
			}
			waitStats(t, e, "two failures", func(s Stats) bool { return s.Retries == 2 })
			before := len(f.hits.get())
			start := time.Now()
			err = closeWithin(t, e, time.Minute)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "3 profile requests not sent") || !strings.Contains(err.Error(), "failed again") {
				t.Errorf("Close: %v, want 3 requests not sent, the endpoint failing again", err)
			}
			if took > 30*time.Second {
				t.Errorf("Close returned after %v, want it to give up long before its minute", took)
			}
			if n := len(f.hits.get()) - before; name == "failing" && n != 1 {
				t.Errorf("Close made %d attempts, want 1", n)
			}
		})
	}
}

// TestCloseFindsEndpointBack: an endpoint back up while the exporter waits out its backoff,
// and its connection its own, is sent everything at the close, on a new connection: the
// attempt on the old one would fail at once, the endpoint looking down still.
func TestCloseFindsEndpointBack(t *testing.T) {
	addr := deadAddr(t)
	e, err := New(Config{Endpoint: addr, Insecure: true, MaxBackoff: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.Export(testProfile(10))
	}
	waitStats(t, e, "four failures", func(s Stats) bool { return s.Retries == 4 })
	f, _ := startFakeReceiverAt(t, addr, func(int) error { return nil })
	if err := closeWithin(t, e, 30*time.Second); err != nil {
		t.Errorf("Close: %v, want every request sent", err)
	}
	if n := len(f.hits.get()); n != 3 {
		t.Errorf("the endpoint took %d requests, want 3", n)
	}
}

// TestNoCollector: with nothing listening the queue holds its bound, drops the oldest and
// counts them, warns once, and Close says how many were not sent.
func TestNoCollector(t *testing.T) {
	addr := deadAddr(t)

	p := testProfile(50)
	var m pprofile.ProtoMarshaler
	size := m.ProfilesSize(convert(&p, p.Pprof.Sample))
	bound := size*7/2 + 1
	log, logBuf := logs()
	e, err := New(Config{Endpoint: addr, Insecure: true, QueueBytes: bound}, log)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for range n {
		e.Export(testProfile(50))
	}
	st := e.Stats()
	inFlight := 0
	if st.InFlight {
		inFlight = 1
	}
	if st.QueuedBytes > bound {
		t.Errorf("%d bytes queued, over the bound of %d", st.QueuedBytes, bound)
	}
	if got := int(st.DroppedRequests) + st.QueuedRequests + inFlight; got != n {
		t.Errorf("dropped %d + queued %d + in flight %d = %d, want %d", st.DroppedRequests, st.QueuedRequests, inFlight, got, n)
	}
	if st.DroppedRequests < n-4 {
		t.Errorf("%d dropped, want at least %d", st.DroppedRequests, n-4)
	}
	err = closeWithin(t, e, time.Second)
	if err == nil || !strings.Contains(err.Error(), "not sent") {
		t.Errorf("Close: %v, want requests not sent", err)
	}
	before := e.Stats().DroppedRequests
	e.Export(testProfile(5))
	if got := e.Stats().DroppedRequests; got != before+1 {
		t.Errorf("an Export after Close: %d dropped, want %d", got, before+1)
	}
	out := logBuf.String()
	if c := strings.Count(out, "dropping profiles"); c != 1 {
		t.Errorf("%d drop warnings, want 1:\n%s", c, out)
	}
	if c := strings.Count(out, "level=WARN"); c > 2 {
		t.Errorf("%d warnings, want at most 2 (drops, failure):\n%s", c, out)
	}
}

// TestRequestLargerThanQueue: a request the queue cannot hold is dropped alone, not with
// everything queued before it.
func TestRequestLargerThanQueue(t *testing.T) {
	addr := deadAddr(t)
	small := testProfile(10)
	var m pprofile.ProtoMarshaler
	size := m.ProfilesSize(convert(&small, small.Pprof.Sample))
	e, err := New(Config{Endpoint: addr, Insecure: true, QueueBytes: 3 * size}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(t, e, time.Second)
	e.Export(testProfile(10))
	e.Export(testProfile(10))
	e.Export(benchProfile(2000))
	st := e.Stats()
	inFlight := 0
	if st.InFlight {
		inFlight = 1
	}
	if st.DroppedRequests != 1 || st.QueuedRequests+inFlight != 2 {
		t.Errorf("stats %+v: want the large request dropped and the two small ones kept", st)
	}
}
