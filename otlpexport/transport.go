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
		roots := &caFile{path: c.CAFile, host: host}
		if _, err := roots.get(); err != nil {
			return nil, nil, err
		}
		// crypto/tls verifies against a pool fixed when the connection's configuration is
		// made; the CA file is read again when it changes (a CA rotated on disk), so the
		// server is verified here instead, as crypto/tls would, against the pool as it is.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = roots.verify
	}
	if c.ClientCertFile != "" || c.ClientKeyFile != "" {
		kp := &keyPair{certFile: c.ClientCertFile, keyFile: c.ClientKeyFile}
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
	path  string
	host  string // the endpoint's: the name the server's certificate must hold
	mu    sync.Mutex
	pool  *x509.CertPool
	stamp fileStamp // the file's when pool was read
}

// get returns the pool, read again if the file changed since it was read. A file that no
// longer reads (a rotation half done) keeps the last good pool, if any.
func (c *caFile) get() (*x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := stampOf(c.path)
	if err == nil && c.pool != nil && st == c.stamp {
		return c.pool, nil
	}
	pem, err := os.ReadFile(c.path)
	pool := x509.NewCertPool()
	if err == nil && !pool.AppendCertsFromPEM(pem) {
		err = fmt.Errorf("%s: no PEM certificate in it", c.path)
	}
	if err != nil {
		if c.pool != nil {
			return c.pool, nil
		}
		return nil, fmt.Errorf("otlpexport: CA file: %w", err)
	}
	c.pool, c.stamp = pool, st
	return pool, nil
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
	pool, err := c.get()
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

// keyPair is a client certificate and its key, read from their files again when either
// changes (a certificate rotated on disk), at the next handshake.
type keyPair struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	stamp             [2]fileStamp // the files' when cert was read
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

// get returns the key pair, read again if either file changed since it was read. A pair
// that no longer reads (a rotation half done) keeps the last good one, if any.
func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cs, cerr := stampOf(k.certFile)
	ks, kerr := stampOf(k.keyFile)
	if cerr == nil && kerr == nil && k.cert != nil && k.stamp == [2]fileStamp{cs, ks} {
		return k.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, fmt.Errorf("otlpexport: client certificate: %w", err)
	}
	k.cert, k.stamp = &cert, [2]fileStamp{cs, ks}
	return k.cert, nil
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
