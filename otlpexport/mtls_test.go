package otlpexport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/profd/profd/internal/testenv"
)

// serverTLS is a TLS configuration that requires a client certificate ca signed.
func serverTLS(t *testing.T, ca *testenv.CA) *tls.Config {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, 100, true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		NextProtos: []string{"h2", "http/1.1"}}
}

// serials records the serial of each client certificate a server was shown.
type serials struct {
	mu  sync.Mutex
	got []int64
}

func (s *serials) add(cs *tls.ConnectionState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs != nil && len(cs.PeerCertificates) > 0 {
		s.got = append(s.got, cs.PeerCertificates[0].SerialNumber.Int64())
	}
}

func (s *serials) last() (int64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) == 0 {
		return 0, 0
	}
	return s.got[len(s.got)-1], len(s.got)
}

// mtlsReceiver is a gRPC profiles receiver that records its clients' certificates.
type mtlsReceiver struct {
	pprofileotlp.UnimplementedGRPCServer
	seen *serials
}

func (m *mtlsReceiver) Export(ctx context.Context, _ pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			m.seen.add(&info.State)
		}
	}
	return pprofileotlp.NewExportResponse(), nil
}

// TestClientCertificate: an endpoint that requires a client certificate (mutual TLS)
// refuses an exporter without one, which fails the request saying so; with
// --otlp-cert-file and --otlp-key-file the certificate is shown, and once the files are
// replaced (a rotation) the next connection shows the new one, with no restart. Over HTTP
// and gRPC.
func TestClientCertificate(t *testing.T) {
	ca := testenv.NewCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	writePair := func(serial int64) { ca.IssueFiles(t, dir, "client", serial, false) }

	for _, proto := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(proto, func(t *testing.T) {
			var seen serials
			var endpoint string
			var dropConns func()
			switch proto {
			case ProtocolHTTP:
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					seen.add(r.TLS)
					okAnswer(w)
				}))
				srv.TLS = serverTLS(t, ca)
				srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
				srv.StartTLS()
				t.Cleanup(srv.Close)
				endpoint, dropConns = "https://"+srv.Listener.Addr().String(), srv.CloseClientConnections
			case ProtocolGRPC:
				var stop func()
				serve := func(addr string) string {
					l, err := net.Listen("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					s := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS(t, ca))))
					pprofileotlp.RegisterGRPCServer(s, &mtlsReceiver{seen: &seen})
					go s.Serve(l)
					t.Cleanup(s.Stop)
					stop = s.Stop
					return l.Addr().String()
				}
				endpoint = serve("127.0.0.1:0")
				dropConns = func() {
					stop()
					serve(endpoint) // the client connects anew
				}
			}

			e, err := New(Config{Endpoint: endpoint, Protocol: proto, CAFile: caFile}, nil)
			if err != nil {
				t.Fatal(err)
			}
			e.Export(testProfile(10))
			// The refusal fails the request; under load the client may see the connection
			// closed before it reads the server's alert, and retry, as for any connection
			// lost, saying the server asked for a certificate.
			st := waitStats(t, e, "the refusal", func(s Stats) bool { return strings.Contains(s.LastError, "client certificate") })
			if !strings.Contains(st.LastError, "--otlp-cert-file") {
				t.Errorf("without a client certificate: stats %+v: want the error to name --otlp-cert-file", st)
			}
			closeWithin(t, e, 5*time.Second)
			if _, n := seen.last(); n != 0 {
				t.Fatalf("%d requests reached the server without a client certificate", n)
			}

			writePair(1)
			e, err = New(Config{Endpoint: endpoint, Protocol: proto, CAFile: caFile, ClientCertFile: certFile, ClientKeyFile: keyFile}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer closeWithin(t, e, 5*time.Second)
			e.Export(testProfile(10))
			waitStats(t, e, "the first request", func(s Stats) bool { return s.SentRequests == 1 })
			if serial, n := seen.last(); n != 1 || serial != 1 {
				t.Fatalf("the server saw %d requests, the last with certificate %d: want 1, with 1", n, serial)
			}

			writePair(2)
			dropConns() // the next request connects anew
			e.Export(testProfile(10))
			waitStats(t, e, "the request after the rotation", func(s Stats) bool { return s.SentRequests == 2 })
			if serial, n := seen.last(); n != 2 || serial != 2 {
				t.Errorf("after the rotation the server saw %d requests, the last with certificate %d: want 2, with 2", n, serial)
			}
		})
	}
}

// TestClientCertificateConfig: a certificate without its key, or a key without its
// certificate, is an error; the environment's pair is taken when no flag gives one.
func TestClientCertificateConfig(t *testing.T) {
	if _, err := New(Config{Endpoint: "127.0.0.1:4317", ClientCertFile: "c.pem"}, nil); err == nil || !strings.Contains(err.Error(), "needs its key") {
		t.Errorf("a certificate without its key: %v", err)
	}
	env := map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/etc/c.pem", "OTEL_EXPORTER_OTLP_PROFILES_CLIENT_KEY": "/etc/k.pem"}
	c, err := ConfigFromEnv(Config{}, func(k string) string { return env[k] })
	if err != nil || c.ClientCertFile != "/etc/c.pem" || c.ClientKeyFile != "/etc/k.pem" {
		t.Errorf("from the environment: %+v, %v", c, err)
	}
	c, err = ConfigFromEnv(Config{Endpoint: "127.0.0.1:4317"}, func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_CLIENT_KEY" {
			return "/etc/k.pem"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(c, nil); err == nil || !strings.Contains(err.Error(), "needs its key") {
		t.Errorf("a key without its certificate, from the environment: %v", err)
	}
}

// TestCAFileRotated: the server's certificate is verified against the CA file as it is at
// each connection: once the server's certificate comes from another CA, requests fail as
// the certificate does not verify, and succeed again when the CA file is replaced, with no
// new exporter. A certificate that does not hold the endpoint's host name fails.
func TestCAFileRotated(t *testing.T) {
	oldCA, newCA := testenv.NewCA(t), testenv.NewCA(t)
	serverCert := func(ca *testenv.CA) *tls.Certificate {
		c, k := ca.Issue(t, 10, true)
		cert, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return &cert
	}
	var current atomic.Pointer[tls.Certificate]
	current.Store(serverCert(oldCA))
	var h hits
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.add()
		okAnswer(w)
	}))
	// httptest puts its own certificate in the configuration, which crypto/tls serves before
	// GetCertificate's to a client that sends no name (an address): each handshake gets a
	// configuration of its own instead.
	srv.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{*current.Load()}}, nil
	}}
	srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeCA := func(ca *testenv.CA) {
		t.Helper()
		if err := os.WriteFile(caFile+".new", ca.PEM(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(caFile+".new", caFile); err != nil {
			t.Fatal(err)
		}
	}
	writeCA(oldCA)
	addr := srv.Listener.Addr().String()
	e, err := New(Config{Endpoint: "https://" + addr, Protocol: ProtocolHTTP, CAFile: caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(t, e, 5*time.Second)
	e.Export(testProfile(10))
	waitStats(t, e, "the first request", func(s Stats) bool { return s.SentRequests == 1 })

	current.Store(serverCert(newCA))
	srv.CloseClientConnections()
	e.Export(testProfile(10))
	st := waitStats(t, e, "the request the old CA file fails", func(s Stats) bool { return s.FailedRequests == 1 })
	if !strings.Contains(st.LastError, "certificate") {
		t.Errorf("stats %+v: want a failure naming the certificate", st)
	}
	writeCA(newCA)
	e.Export(testProfile(10))
	waitStats(t, e, "the request after the CA file's rotation", func(s Stats) bool { return s.SentRequests == 2 })
	if n := len(h.get()); n != 2 {
		t.Errorf("%d requests reached the server, want 2", n)
	}

	// The certificate names 127.0.0.1; the endpoint, localhost.
	_, port, _ := net.SplitHostPort(addr)
	other, err := New(Config{Endpoint: "https://localhost:" + port, Protocol: ProtocolHTTP, CAFile: caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(t, other, 5*time.Second)
	other.Export(testProfile(10))
	st = waitStats(t, other, "the request to another name", func(s Stats) bool { return s.FailedRequests == 1 })
	if !strings.Contains(st.LastError, "localhost") || len(h.get()) != 2 {
		t.Errorf("stats %+v, %d requests reached the server: want a failure naming the host, none more", st, len(h.get()))
	}
}

// TestCertAskedHint: a retryable failure after a server asked for a client certificate
// profd has not says so (a refusal read as a broken connection); other failures, and those
// of servers that asked nothing, are left as they are.
func TestCertAskedHint(t *testing.T) {
	broken := &sendError{err: errors.New("write: broken pipe"), retryable: true}
	permanent := &sendError{err: errors.New("bad request")}
	var asked certAsked
	if got := asked.hint(broken); got != error(broken) {
		t.Errorf("nothing asked: %v, want the error as it was", got)
	}
	asked.Store(true)
	if got := asked.hint(broken); !strings.Contains(got.Error(), "--otlp-cert-file") || !errors.As(got, new(*sendError)) || !got.(*sendError).retryable {
		t.Errorf("asked: %v, want the error, still retryable, naming --otlp-cert-file", got)
	}
	if got := asked.hint(permanent); got != error(permanent) {
		t.Errorf("a permanent failure: %v, want it as it was", got)
	}
	if got := (*certAsked)(nil).hint(broken); got != error(broken) {
		t.Errorf("with a certificate (nil): %v, want the error as it was", got)
	}
}
