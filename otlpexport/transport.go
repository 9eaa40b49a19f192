package otlpexport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sender sends one request; its error is a *sendError.
type sender interface {
	send(ctx context.Context, body []byte) error // body: an encoded ExportProfilesServiceRequest
	close() error
}

// A redialer forgets what its connection learnt of the endpoint's failures, so that its
// next attempt finds the endpoint as it is now, not as it was.
type redialer interface {
	redial() error
}

// sendError is one failed attempt: whether to try the request again, and after how long the
// server asked for.
type sendError struct {
	err        error
	retryable  bool
	retryAfter time.Duration
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// ErrNotOTLP is wrapped by the error of an answer that is not an OTLP export response.
var ErrNotOTLP = errors.New("the endpoint is not an OTLP profiles receiver")

// tlsConfig is the TLS configuration of connections to hostPort, and without a client
// certificate, what tells whether the server asked for one.
func tlsConfig(c Config, hostPort string) (*tls.Config, *certAsked, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		host, _, err := net.SplitHostPort(hostPort)
		if err != nil {
			host = hostPort
		}
		roots := &caFile{host: host, pool: newFromFiles(func() (*x509.CertPool, error) {
			pem, err := os.ReadFile(c.CAFile)
			pool := x509.NewCertPool()
			if err == nil && !pool.AppendCertsFromPEM(pem) {
				err = fmt.Errorf("%s: no PEM certificate in it", c.CAFile)
			}
			if err != nil {
				return nil, fmt.Errorf("otlpexport: CA file: %w", err)
			}
			return pool, nil
		}, c.CAFile)}
		if _, err := roots.pool.get(); err != nil {
			return nil, nil, err
		}
		// crypto/tls verifies against a pool fixed when the connection's configuration is
		// made; the CA file is read again when it changes (a CA rotated on disk), so the
		// server is verified here instead, as crypto/tls would, against the pool as it is.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = roots.verify
	}
	if c.ClientCertFile != "" || c.ClientKeyFile != "" {
		kp := newFromFiles(func() (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
			if err != nil {
				return nil, fmt.Errorf("otlpexport: client certificate: %w", err)
			}
			return &cert, nil
		}, c.ClientCertFile, c.ClientKeyFile)
		if _, err := kp.get(); err != nil {
			return nil, nil, err
		}
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
		return tc, nil, nil
	}
	asked := &certAsked{}
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked.Store(true)
		return &tls.Certificate{}, nil // none: the server decides whether it does without
	}
	return tc, asked, nil
}

// certAsked is set once a server asked profd, which has no client certificate, for one.
type certAsked struct{ atomic.Bool }

// hint adds to err, a retryable failure to send, that the server asked for a client
// certificate profd does not have: a server that requires one may close the connection
// before its refusal is read, and the failure then reads as a broken connection.
func (a *certAsked) hint(err error) error {
	var se *sendError
	if a == nil || !a.Load() || !errors.As(err, &se) || !se.retryable {
		return err
	}
	return &sendError{err: fmt.Errorf("%w (the server asked for a client certificate, and profd has none: --otlp-cert-file and --otlp-key-file)", se.err),
		retryable: true, retryAfter: se.retryAfter}
}

// caFile is the CAs the server's certificate is verified with, read from their file again
// when it changes, at the next handshake.
type caFile struct {
	host string // the endpoint's: the name the server's certificate must hold
	pool *fromFiles[*x509.CertPool]
}

// verify verifies the server's certificate chain and its name, the endpoint's host, as
// crypto/tls does by default, against the CA file's pool as it is now.
func (c *caFile) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("otlpexport: the server sent no certificate")
	}
	if c.host == "" {
		return errors.New("otlpexport: the endpoint names no host to verify the server's certificate with")
	}
	pool, err := c.pool.get()
	if err != nil {
		return err
	}
	opts := x509.VerifyOptions{DNSName: c.host, Roots: pool, Intermediates: x509.NewCertPool()}
	for _, ic := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(ic)
	}
	_, err = cs.PeerCertificates[0].Verify(opts)
	return err
}

// fromFiles is what load makes of files (a CA pool, a key pair), made again at the next
// get after any of them changes (a rotation on disk). A load that fails (a rotation half
// done) keeps the last good value, if any.
type fromFiles[T any] struct {
	files []string
	load  func() (T, error)
	mu    sync.Mutex
	val   T
	made  bool
	stamp []fileStamp // the files' when val was made
}

func newFromFiles[T any](load func() (T, error), files ...string) *fromFiles[T] {
	return &fromFiles[T]{files: files, load: load}
}

// get returns the value, made again if a file changed since it was made.
func (f *fromFiles[T]) get() (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamp := make([]fileStamp, len(f.files))
	same := f.made
	for i, p := range f.files {
		st, err := stampOf(p)
		stamp[i] = st
		same = same && err == nil && st == f.stamp[i]
	}
	if same {
		return f.val, nil
	}
	v, err := f.load()
	if err != nil {
		if f.made {
			return f.val, nil
		}
		return v, err
	}
	f.val, f.made, f.stamp = v, true, stamp
	return v, nil
}

// fileStamp tells one version of a file from another.
type fileStamp struct {
	mtime time.Time
	size  int64
	ino   uint64
}

func stampOf(path string) (fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	s := fileStamp{mtime: st.ModTime(), size: st.Size()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s.ino = sys.Ino
	}
	return s, nil
}

// clientCertAlerts are the TLS alerts a server sends when it refuses the client's
// certificate, or wanted one and was given none.
var clientCertAlerts = []string{"certificate required", "bad certificate", "unknown certificate authority",
	"certificate expired", "certificate revoked", "certificate unknown", "unsupported certificate"}

// clientCertRefused says whether err is the server refusing profd's client certificate, or
// its lack of one, which no retry mends (the next request reads the files again).
func clientCertRefused(err error) bool {
	msg := err.Error()
	for _, a := range clientCertAlerts {
		if strings.Contains(msg, "remote error: tls: "+a) {
			return true
		}
	}
	return false
}

// clientCertHelp ends the message of a request the server refused for its certificate.
const clientCertHelp = "the server refused profd's client certificate, or wanted one (--otlp-cert-file and --otlp-key-file)"

// isCertificateError says whether err is the server's certificate failing to verify, which
// no retry mends.
func isCertificateError(err error) bool {
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var hn x509.HostnameError
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ua) || errors.As(err, &ci) || errors.As(err, &hn) || errors.As(err, &ve) {
		return true
	}
	// gRPC reports handshake failures as text in an Unavailable status.
	msg := err.Error()
	return strings.Contains(msg, "x509: ") || strings.Contains(msg, "tls: failed to verify certificate")
}
