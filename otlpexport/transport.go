package otlpexport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
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
	return tc, nil
}

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
