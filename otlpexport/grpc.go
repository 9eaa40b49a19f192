package otlpexport

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// grpcSender sends over OTLP/gRPC through pprofileotlp's client, on one connection.
type grpcSender struct {
	conn    *grpc.ClientConn
	client  pprofileotlp.GRPCClient
	md      metadata.MD
	options []grpc.CallOption
	asked   *certAsked // nil with a client certificate, or without TLS
	dial    func() (*grpc.ClientConn, error)
}

func newGRPCSender(c Config, t target) (*grpcSender, error) {
	creds := insecure.NewCredentials()
	var asked *certAsked
	if t.tls {
		tc, a, err := tlsConfig(c, t.hostPort)
		if err != nil {
			return nil, err
		}
		creds, asked = credentials.NewTLS(tc), a
	}
	dial := func() (*grpc.ClientConn, error) {
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
		return conn, nil
	}
	conn, err := dial()
	if err != nil {
		return nil, err
	}
	s := &grpcSender{conn: conn, client: pprofileotlp.NewGRPCClient(conn), md: metadata.New(c.Headers), asked: asked, dial: dial}
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
	return s.asked.hint(grpcError(err))
}

func (s *grpcSender) close() error { return s.conn.Close() }

// redial replaces the connection with a new one. A connection that failed waits out its
// own backoff before it connects again, and a call made meanwhile fails at once; a new one
// connects at the next call, which fails only when that connection does.
func (s *grpcSender) redial() error {
	conn, err := s.dial()
	if err != nil {
		return err
	}
	s.conn.Close()
	s.conn, s.client = conn, pprofileotlp.NewGRPCClient(conn)
	return nil
}

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
		se.retryable = !isCertificateError(err) && !clientCertRefused(err)
	case codes.ResourceExhausted:
		se.retryable = retryInfo != nil
	}
	if st.Code() == codes.Unavailable && strings.Contains(st.Message(), "server preface") {
		se.err = fmt.Errorf("otlpexport: grpc: the endpoint accepted the connection but does not speak gRPC, or not in time: %s", st.Message())
	}
	switch {
	case !se.retryable && st.Code() == codes.Unavailable && clientCertRefused(err):
		se.err = fmt.Errorf("otlpexport: grpc: %s: %s", clientCertHelp, st.Message())
	case !se.retryable && st.Code() == codes.Unavailable:
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
