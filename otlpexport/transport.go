package otlpexport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
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

func tlsConfig(c Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("otlpexport: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("otlpexport: CA file %s: no PEM certificate in it", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.ClientCertFile != "" || c.ClientKeyFile != "" {
		kp := &keyPair{certFile: c.ClientCertFile, keyFile: c.ClientKeyFile}
		if _, err := kp.get(); err != nil {
			return nil, err
		}
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
	}
	return tc, nil
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
