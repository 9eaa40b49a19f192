package otlpexport

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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

type grpcSender struct {
	conn    *grpc.ClientConn
	client  pprofileotlp.GRPCClient
	md      metadata.MD
	options []grpc.CallOption
}

func newGRPCSender(c Config, t target) (*grpcSender, error) {
	creds := insecure.NewCredentials()
	if t.tls {
		tc, err := tlsConfig(c)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(t.hostPort,
		grpc.WithTransportCredentials(creds),
		// Reconnect no slower than requests are retried.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: initialBackoff, Multiplier: 1.6, Jitter: 0.2, MaxDelay: c.MaxBackoff},
			MinConnectTimeout: c.Timeout,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<20)))
	if err != nil {
		return nil, fmt.Errorf("otlpexport: grpc endpoint %s: %w", t.hostPort, err)
	}
	s := &grpcSender{conn: conn, client: pprofileotlp.NewGRPCClient(conn), md: metadata.New(c.Headers)}
	if c.Compression == CompressionGzip {
		s.options = append(s.options, grpc.UseCompressor(grpcgzip.Name))
	}
	return s, nil
}

func (s *grpcSender) send(ctx context.Context, body []byte) error {
	req := pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		return &sendError{err: fmt.Errorf("otlpexport: decode the queued request: %w", err)}
	}
	if len(s.md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, s.md)
	}
	resp, err := s.client.Export(ctx, req, s.options...)
	if err == nil {
		return partialSuccess(resp)
	}
	return grpcError(err)
}

func (s *grpcSender) close() error { return s.conn.Close() }

// grpcError classifies a failed call as the OTLP specification does: ResourceExhausted is
// retried only when the server sends RetryInfo.
func grpcError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return &sendError{err: fmt.Errorf("otlpexport: grpc: %w", err), retryable: true}
	}
	var retryInfo *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retryInfo = ri
		}
	}
	se := &sendError{err: fmt.Errorf("otlpexport: grpc: %s: %s", st.Code(), st.Message())}
	if retryInfo != nil && retryInfo.RetryDelay != nil {
		se.retryAfter = retryInfo.RetryDelay.AsDuration()
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable, codes.DataLoss:
		se.retryable = !isCertificateError(err)
	case codes.ResourceExhausted:
		se.retryable = retryInfo != nil
	}
	if st.Code() == codes.Unavailable && strings.Contains(st.Message(), "server preface") {
		se.err = fmt.Errorf("otlpexport: grpc: the endpoint accepted the connection but does not speak gRPC, or not in time: %s", st.Message())
	}
	if !se.retryable && st.Code() == codes.Unavailable {
		se.err = fmt.Errorf("otlpexport: grpc: the server's certificate does not verify (set a CA file, or the endpoint's host name): %s", st.Message())
	}
	return se
}

func partialSuccess(resp pprofileotlp.ExportResponse) error {
	ps := resp.PartialSuccess()
	if ps.RejectedProfiles() == 0 {
		return nil
	}
	return &sendError{err: fmt.Errorf("otlpexport: the server rejected %d profiles: %s", ps.RejectedProfiles(), ps.ErrorMessage())}
}

type httpSender struct {
	client  *http.Client
	url     string
	headers map[string]string
	gzip    bool
}

// maxAnswerBytes bounds how much of an HTTP answer is read.
const maxAnswerBytes = 1 << 20

func newHTTPSender(c Config, t target) (*httpSender, error) {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: c.Timeout}).DialContext,
		TLSHandshakeTimeout:   c.Timeout,
		ResponseHeaderTimeout: c.Timeout,
		MaxIdleConns:          2,
		IdleConnTimeout:       90 * time.Second,
	}
	if t.tls {
		tc, err := tlsConfig(c)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	return &httpSender{client: &http.Client{Transport: tr}, url: t.url, headers: c.Headers, gzip: c.Compression == CompressionGzip}, nil
}

func (s *httpSender) send(ctx context.Context, body []byte) error {
	if s.gzip {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return &sendError{err: fmt.Errorf("otlpexport: http: %w", err)}
	}
	for k, v := range s.headers {
		hr.Header.Set(k, v)
	}
	hr.Header.Set("Content-Type", "application/x-protobuf")
	if s.gzip {
		hr.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := s.client.Do(hr)
	if err != nil {
		if isCertificateError(err) {
			return &sendError{err: fmt.Errorf("otlpexport: http: the server's certificate does not verify (set a CA file, or the endpoint's host name): %w", err)}
		}
		return &sendError{err: fmt.Errorf("otlpexport: http: %w", err), retryable: true}
	}
	defer resp.Body.Close()
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	ctype := resp.Header.Get("Content-Type")
	isProto := strings.HasPrefix(ctype, "application/x-protobuf")
	if resp.StatusCode == http.StatusOK {
		if readErr != nil {
			return &sendError{err: fmt.Errorf("otlpexport: http: reading the answer: %w", readErr), retryable: true}
		}
		if !isProto && len(answer) > 0 {
			return &sendError{err: fmt.Errorf("otlpexport: http %s: answered 200 with %q: %w (check the endpoint's port and path)", s.url, ctype, ErrNotOTLP)}
		}
		out := pprofileotlp.NewExportResponse()
		if err := out.UnmarshalProto(answer); err != nil {
			return &sendError{err: fmt.Errorf("otlpexport: http %s: answer: %w: %w", s.url, ErrNotOTLP, err)}
		}
		return partialSuccess(out)
	}
	se := &sendError{err: fmt.Errorf("otlpexport: http %s: %s: %s", s.url, resp.Status, answerText(answer, isProto))}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		se.retryable = true
		se.retryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return se
}

func (s *httpSender) close() error {
	s.client.CloseIdleConnections()
	return nil
}

// answerText is what an error answer says: the message of a google.rpc.Status, else its
// first printable bytes.
func answerText(b []byte, isProto bool) string {
	if isProto {
		var st spb.Status
		if proto.Unmarshal(b, &st) == nil {
			return st.GetMessage()
		}
	}
	const maxText = 200
	s := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, string(b[:min(len(b), maxText)]))
	s = strings.Join(strings.Fields(s), " ")
	if len(b) > maxText {
		s += "…"
	}
	return s
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
