package otlpexport

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Protocols an exporter speaks.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// profilesPath is where an OTLP/HTTP receiver takes profiles.
const profilesPath = "/v1development/profiles"

// Defaults of a Config's zero fields.
const (
	DefaultQueueBytes      = 64 << 20
	DefaultTimeout         = 10 * time.Second
	DefaultMaxBackoff      = 30 * time.Second
	DefaultMaxRequestBytes = 4<<20 - 64<<10 // under the 4 MiB a gRPC server takes by default
)

// Config says where and how profiles are sent. Zero fields take the defaults above.
type Config struct {
	// Endpoint is host:port, http://host:port (plaintext) or https://host:port (TLS). Over
	// HTTP a path other than "/" replaces /v1development/profiles (ConfigFromEnv puts that
	// under the path of OTEL_EXPORTER_OTLP_ENDPOINT, as the specification says).
	Endpoint string
	Protocol string // ProtocolGRPC (default) or ProtocolHTTP
	// Insecure sends in plaintext. A scheme in Endpoint decides instead.
	Insecure bool
	// CAFile holds the PEM certificates to verify the server with, read again when it
	// changes; "" takes the system's.
	CAFile string
	// ClientCertFile and ClientKeyFile are the PEM certificate and key profd presents to a
	// server that asks for one (mutual TLS), both or neither. They are read again when
	// either file changes, at the next connection: a certificate rotated on disk is taken
	// without a restart.
	ClientCertFile, ClientKeyFile string
	// Headers are sent with every request (gRPC metadata, HTTP headers).
	Headers map[string]string
	// QueueBytes bounds the encoded bytes waiting to be sent; past it the oldest wait is dropped.
	QueueBytes int
	// Timeout bounds one attempt: connecting, sending and the answer.
	Timeout time.Duration
	// MaxRequestBytes bounds one request before compression: a larger profile is split
	// across requests by its samples.
	MaxRequestBytes int
	// Compression is CompressionGzip (default) or CompressionNone.
	Compression string
	// MaxBackoff bounds the wait between attempts at one request (default 30s); the server's
	// retry delay, when it names one, is waited instead when longer.
	MaxBackoff time.Duration
	// Delivered, when set, is called on the sending goroutine with a Profile's End once its
	// last request is sent (for a latency measure): it must return quickly.
	Delivered func(end time.Time)
	// Dropped, when set, is called once with a Profile's Source when none of its requests
	// will be sent: the queue's bound dropped every one, Close left them unsent, or it was
	// exported after Close. Its owner may read it again from there and Export it once the
	// endpoint keeps up (or keep it for a later run). It is called on the goroutine that
	// exported the request that pushed them out, or in Close, and must return quickly.
	Dropped func(source string)
	// Settled, when set, is called once with a Profile's Source when none of its requests
	// is left to send or to try again: each was sent, refused by the endpoint, or dropped
	// (after Dropped, when that is called for it). Until then the profile may still be
	// sent, or be in the endpoint's hands unanswered. It is called on the goroutine that
	// settled its last request and must return quickly.
	Settled func(source string)
}

// Compressions of a request's body.
const (
	CompressionGzip = "gzip"
	CompressionNone = "none"
)

// Environment variables ConfigFromEnv reads, the profiles-specific ones first.
const (
	envEndpoint           = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envProfilesEndpoint   = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"
	envHeaders            = "OTEL_EXPORTER_OTLP_HEADERS"
	envProfilesHeaders    = "OTEL_EXPORTER_OTLP_PROFILES_HEADERS"
	envInsecure           = "OTEL_EXPORTER_OTLP_INSECURE"
	envProfilesInsecure   = "OTEL_EXPORTER_OTLP_PROFILES_INSECURE"
	envCertificate        = "OTEL_EXPORTER_OTLP_CERTIFICATE"
	envProfilesCert       = "OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE"
	envClientCert         = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
	envProfilesClientCert = "OTEL_EXPORTER_OTLP_PROFILES_CLIENT_CERTIFICATE"
	envClientKey          = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
	envProfilesClientKey  = "OTEL_EXPORTER_OTLP_PROFILES_CLIENT_KEY"
	envProtocol           = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envProfilesProtocol   = "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL"
	envCompression        = "OTEL_EXPORTER_OTLP_COMPRESSION"
	envProfilesCompress   = "OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION"
	envTimeout            = "OTEL_EXPORTER_OTLP_TIMEOUT"
	envProfilesTimeout    = "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT"
)

// ConfigFromEnv returns explicit, its empty fields filled from the standard OTLP exporter
// environment variables (getenv is os.Getenv when nil). A profiles-specific variable wins
// over the general one; a field set in explicit wins over both. Headers merge, explicit
// ones replacing those of the same name.
func ConfigFromEnv(explicit Config, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	env := func(specific, general string) (string, string) {
		if v := strings.TrimSpace(getenv(specific)); v != "" {
			return v, specific
		}
		return strings.TrimSpace(getenv(general)), general
	}
	c := explicit
	endpointFrom := ""
	if c.Endpoint == "" {
		c.Endpoint, endpointFrom = env(envProfilesEndpoint, envEndpoint)
	}
	if c.Protocol == "" {
		p, name := env(envProfilesProtocol, envProtocol)
		switch p {
		case "", "grpc":
			c.Protocol = ProtocolGRPC
		case "http/protobuf":
			c.Protocol = ProtocolHTTP
		default:
			return Config{}, fmt.Errorf("otlpexport: %s=%q: want grpc or http/protobuf", name, p)
		}
	}
	// The general endpoint is a base URL: over HTTP the signal's path goes under its path.
	if endpointFrom == envEndpoint && c.Protocol == ProtocolHTTP && strings.Contains(c.Endpoint, "://") {
		if u, err := url.Parse(c.Endpoint); err == nil && strings.Trim(u.Path, "/") != "" {
			u.Path = strings.TrimSuffix(u.Path, "/") + profilesPath
			c.Endpoint = u.String()
		}
	}
	if !c.Insecure {
		if v, name := env(envProfilesInsecure, envInsecure); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, fmt.Errorf("otlpexport: %s=%q: want true or false", name, v)
			}
			c.Insecure = b
		}
	}
	if c.CAFile == "" {
		c.CAFile, _ = env(envProfilesCert, envCertificate)
	}
	if c.ClientCertFile == "" && c.ClientKeyFile == "" {
		c.ClientCertFile, _ = env(envProfilesClientCert, envClientCert)
		c.ClientKeyFile, _ = env(envProfilesClientKey, envClientKey)
	}
	if c.Compression == "" {
		v, name := env(envProfilesCompress, envCompression)
		switch v {
		case "", "gzip":
			c.Compression = CompressionGzip
		case "none":
			c.Compression = CompressionNone
		default:
			return Config{}, fmt.Errorf("otlpexport: %s=%q: want gzip or none", name, v)
		}
	}
	if c.Timeout == 0 {
		if v, name := env(envProfilesTimeout, envTimeout); v != "" {
			ms, err := strconv.ParseUint(v, 10, 31)
			if err != nil {
				return Config{}, fmt.Errorf("otlpexport: %s=%q: want milliseconds", name, v)
			}
			c.Timeout = time.Duration(ms) * time.Millisecond
		}
	}
	if v, name := env(envProfilesHeaders, envHeaders); v != "" {
		h, err := ParseHeaders(v)
		if err != nil {
			return Config{}, fmt.Errorf("otlpexport: %s: %w", name, err)
		}
		for k, v := range explicit.Headers {
			h[k] = v
		}
		c.Headers = h
	}
	return c, nil
}

// ParseHeaders reads the OTLP headers format: comma-separated key=value pairs, keys and
// values percent-decoded and trimmed of spaces. An empty member is skipped; a member
// without "=" or with an empty key is an error.
func ParseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for member := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(member) == "" {
			continue
		}
		k, v, ok := strings.Cut(member, "=")
		if !ok {
			return nil, fmt.Errorf("header %q: want key=value", member)
		}
		key, err := url.PathUnescape(strings.TrimSpace(k))
		if err != nil {
			return nil, fmt.Errorf("header %q: key: %w", member, err)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("header %q: value: %w", member, err)
		}
		key = strings.TrimSpace(key)
		if key == "" {
			return nil, fmt.Errorf("header %q: empty key", member)
		}
		if strings.ContainsAny(key, " \t\r\n:") || strings.ContainsAny(val, "\r\n") {
			return nil, fmt.Errorf("header %q: key or value holds a character a header cannot", member)
		}
		h[key] = strings.TrimSpace(val)
	}
	return h, nil
}

// target is a Config resolved for dialing.
type target struct {
	hostPort string // gRPC
	url      string // HTTP
	tls      bool
}

// resolve checks c and works out where to connect.
func (c Config) resolve() (target, error) {
	if c.Endpoint == "" {
		return target{}, errors.New("otlpexport: no endpoint: set one, or OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		return target{}, fmt.Errorf("otlpexport: a client certificate needs its key, and a key its certificate (certificate %q, key %q)",
			c.ClientCertFile, c.ClientKeyFile)
	}
	t := target{tls: !c.Insecure}
	path := ""
	if strings.Contains(c.Endpoint, "://") {
		u, err := url.Parse(c.Endpoint)
		if err != nil {
			return target{}, fmt.Errorf("otlpexport: endpoint %q: %w", c.Endpoint, err)
		}
		switch u.Scheme {
		case "http":
			t.tls = false
		case "https":
			t.tls = true
		default:
			return target{}, fmt.Errorf("otlpexport: endpoint %q: scheme %q: want http or https", c.Endpoint, u.Scheme)
		}
		if u.Host == "" {
			return target{}, fmt.Errorf("otlpexport: endpoint %q: no host", c.Endpoint)
		}
		t.hostPort = u.Host
		path = u.Path
	} else {
		t.hostPort = c.Endpoint
	}
	if _, port, err := net.SplitHostPort(t.hostPort); err != nil || port == "" {
		defPort := "4317"
		if c.Protocol == ProtocolHTTP {
			defPort = "4318"
		}
		if err == nil || strings.Contains(err.Error(), "missing port") {
			t.hostPort = net.JoinHostPort(strings.Trim(t.hostPort, "[]"), defPort)
		} else {
			return target{}, fmt.Errorf("otlpexport: endpoint %q: %w", c.Endpoint, err)
		}
	}
	scheme := "http"
	if t.tls {
		scheme = "https"
	}
	if path == "" || path == "/" {
		path = profilesPath
	}
	t.url = scheme + "://" + t.hostPort + path
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		return target{}, fmt.Errorf("otlpexport: protocol %q: want %q or %q", c.Protocol, ProtocolGRPC, ProtocolHTTP)
	}
	switch c.Compression {
	case "", CompressionGzip, CompressionNone:
	default:
		return target{}, fmt.Errorf("otlpexport: compression %q: want %q or %q", c.Compression, CompressionGzip, CompressionNone)
	}
	return t, nil
}

func (c Config) withDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = ProtocolGRPC
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Compression == "" {
		c.Compression = CompressionGzip
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	return c
}
