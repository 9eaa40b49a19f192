package otlpexport

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		explicit Config
		want     Config
		wantErr  string
	}{
		{
			name: "defaults",
			want: Config{Protocol: ProtocolGRPC, Compression: CompressionGzip},
		},
		{
			name: "general",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20x, tenant = a",
				"OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
				"OTEL_EXPORTER_OTLP_COMPRESSION": "none",
			},
			want: Config{Endpoint: "collector:4317", Protocol: ProtocolHTTP, Insecure: true, CAFile: "/ca.pem",
				Headers: map[string]string{"authorization": "Bearer x", "tenant": "a"}, Timeout: 2500 * time.Millisecond, Compression: CompressionNone},
		},
		{
			name: "profiles-specific wins",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "a:1", "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT": "https://b:2",
				"OTEL_EXPORTER_OTLP_HEADERS": "k=general", "OTEL_EXPORTER_OTLP_PROFILES_HEADERS": "k=profiles",
				"OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_EXPORTER_OTLP_PROFILES_INSECURE": "false",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL": "grpc",
			},
			want: Config{Endpoint: "https://b:2", Protocol: ProtocolGRPC, Headers: map[string]string{"k": "profiles"}, Compression: CompressionGzip},
		},
		{
			name:     "explicit wins",
			env:      map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "a:1", "OTEL_EXPORTER_OTLP_HEADERS": "k=env,j=env", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			explicit: Config{Endpoint: "c:3", Protocol: ProtocolHTTP, Headers: map[string]string{"k": "explicit"}, Timeout: time.Second},
			want:     Config{Endpoint: "c:3", Protocol: ProtocolHTTP, Headers: map[string]string{"k": "explicit", "j": "env"}, Timeout: time.Second, Compression: CompressionGzip},
		},
		{
			name: "general base URL",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://gw/otlp/", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			want: Config{Endpoint: "https://gw/otlp/v1development/profiles", Protocol: ProtocolHTTP, Compression: CompressionGzip},
		},
		{
			name: "profiles URL as it is",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT": "https://gw/custom", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			want: Config{Endpoint: "https://gw/custom", Protocol: ProtocolHTTP, Compression: CompressionGzip},
		},
		{name: "bad protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "bad insecure", env: map[string]string{"OTEL_EXPORTER_OTLP_PROFILES_INSECURE": "yes please"}, wantErr: "OTEL_EXPORTER_OTLP_PROFILES_INSECURE"},
		{name: "bad headers", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, wantErr: "OTEL_EXPORTER_OTLP_HEADERS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFromEnv(tc.explicit, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.Headers, tc.want.Headers) {
				t.Errorf("headers %v, want %v", got.Headers, tc.want.Headers)
			}
			got.Headers, tc.want.Headers = nil, nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		cfg                Config
		hostPort, url, err string
		tls                bool
	}{
		{cfg: Config{Endpoint: "h:1"}, hostPort: "h:1", url: "https://h:1/v1development/profiles", tls: true},
		{cfg: Config{Endpoint: "h:1", Insecure: true}, hostPort: "h:1", url: "http://h:1/v1development/profiles"},
		{cfg: Config{Endpoint: "http://h:1"}, hostPort: "h:1", url: "http://h:1/v1development/profiles"},
		{cfg: Config{Endpoint: "https://h:1", Insecure: true}, hostPort: "h:1", url: "https://h:1/v1development/profiles", tls: true},
		{cfg: Config{Endpoint: "http://h:1/custom/path"}, hostPort: "h:1", url: "http://h:1/custom/path"},
		{cfg: Config{Endpoint: "h"}, hostPort: "h:4317", url: "https://h:4317/v1development/profiles", tls: true},
		{cfg: Config{Endpoint: "http://h", Protocol: ProtocolHTTP}, hostPort: "h:4318", url: "http://h:4318/v1development/profiles"},
		{cfg: Config{Endpoint: "[::1]:5"}, hostPort: "[::1]:5", url: "https://[::1]:5/v1development/profiles", tls: true},
		{cfg: Config{}, err: "no endpoint"},
		{cfg: Config{Endpoint: "ftp://h:1"}, err: "scheme"},
		{cfg: Config{Endpoint: "h:1", Protocol: "http/json"}, err: "protocol"},
	} {
		got, err := tc.cfg.resolve()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: error %v, want one saying %q", tc.cfg, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", tc.cfg, err)
			continue
		}
		if got != (target{hostPort: tc.hostPort, url: tc.url, tls: tc.tls}) {
			t.Errorf("%+v: got %+v, want %s %s tls=%v", tc.cfg, got, tc.hostPort, tc.url, tc.tls)
		}
	}
}

func TestParseHeaders(t *testing.T) {
	got, err := ParseHeaders(" a=1 ,b = two%20words,, c=x=y,d=%3D")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1", "b": "two words", "c": "x=y", "d": "="}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"a", "=v", "a=%zz", "a%0Ab=c", "a=b%0Ac", "a%3Ab=c"} {
		if _, err := ParseHeaders(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzParseHeaders checks that any input either fails or gives headers an HTTP request and
// gRPC metadata can carry, and that what it gives reads back the same once re-encoded.
func FuzzParseHeaders(f *testing.F) {
	for _, s := range []string{"", "a=1", "authorization=Bearer%20x,k=v", " a = b , c=d=e,,", "%zz=1", "a=%0D%0A", "=", ",,,", "k=%E2%82%AC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHeaders(s)
		if err != nil {
			return
		}
		var parts []string
		for k, v := range h {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
				t.Fatalf("%q: header %q=%q cannot be sent", s, k, v)
			}
			parts = append(parts, escapeHeader(k)+"="+escapeHeader(v))
		}
		back, err := ParseHeaders(strings.Join(parts, ","))
		if err != nil {
			t.Fatalf("%q: re-encoded %q: %v", s, parts, err)
		}
		if !maps.Equal(h, back) {
			t.Fatalf("%q: %v read back as %v", s, h, back)
		}
	})
}

func escapeHeader(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c == ',' || c == '=' || c <= ' ' || c >= 0x7f {
			b.WriteString("%")
			b.WriteString(strings.ToUpper(string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15])))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// FuzzRetryAfter checks that a server's Retry-After never makes a negative wait, nor one
// past maxServerWait.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "1", "120", "-5", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 01 Jan 2100 00:00:00 GMT", "soon", "99999999999999999999", "9227000000"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if d := retryAfter(s, now); d < 0 || d > maxServerWait {
			t.Fatalf("%q: wait %v", s, d)
		}
	})
}

// FuzzAnswerText checks that any error answer becomes short printable text.
func FuzzAnswerText(f *testing.F) {
	f.Add([]byte("<html>x</html>"), false)
	f.Add([]byte{0x12, 0x02, 'h', 'i'}, true)
	f.Add([]byte{0xff, 0x00, '\n'}, false)
	f.Fuzz(func(t *testing.T, b []byte, isProto bool) {
		s := answerText(b, isProto)
		if !isProto && len(s) > 4*200+len("…") {
			t.Fatalf("%d bytes of text from %d bytes", len(s), len(b))
		}
		if !isProto && strings.ContainsAny(s, "\r\n") {
			t.Fatalf("%q holds a line break", s)
		}
	})
}
