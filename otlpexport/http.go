package otlpexport

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// httpSender posts to an OTLP/HTTP receiver.
type httpSender struct {
	client  *http.Client
	url     string
	headers map[string]string
	gzip    bool
	asked   *certAsked // nil with a client certificate, or without TLS
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
	var asked *certAsked
	if t.tls {
		tc, a, err := tlsConfig(c, t.hostPort)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig, asked = tc, a
	}
	return &httpSender{client: &http.Client{Transport: tr}, url: t.url, headers: c.Headers, gzip: c.Compression == CompressionGzip,
		asked: asked}, nil
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
		if clientCertRefused(err) {
			return &sendError{err: fmt.Errorf("otlpexport: http: %s: %w", clientCertHelp, err)}
		}
		return s.asked.hint(&sendError{err: fmt.Errorf("otlpexport: http: %w", err), retryable: true})
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

// retryAfter reads a Retry-After header: seconds, or an HTTP date; at most maxServerWait.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs > 0 {
		return time.Duration(min(secs, int64(maxServerWait/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxServerWait)
	}
	return 0
}
