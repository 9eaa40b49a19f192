// Package collector runs a real OpenTelemetry Collector for tests: tools/testcollector (the
// OTLP receiver over gRPC and HTTP, and an exporter that appends every profiles request to
// a file), built once per test process and cached by its sources' hash.
//
//	c := collector.Start(t)
//	// send to c.GRPCAddr or "http://"+c.HTTPAddr ...
//	got := c.Received(t)
//
// A test using it is skipped only when `go` cannot build the Collector for want of its
// modules (no network and no module cache); any other build failure fails the test.
package collector

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/profd/profd/internal/testenv"
)

// Collector is one running (or stopped) test Collector. Its methods are for the test's
// goroutine.
type Collector struct {
	GRPCAddr, HTTPAddr string // loopback host:port of the OTLP receiver

	t      testing.TB
	bin    string
	dir    string
	config string
	out    string // the file received requests are appended to
	logs   *testenv.SyncBuffer
	cmd    *exec.Cmd
	exited chan struct{}
}

var build struct {
	once sync.Once
	bin  string
	skip string // why tests are skipped, when the modules cannot be had
	err  error
}

// TLS is the files of a Collector whose receivers take TLS: its certificate and key, and
// with ClientCAFile, the CAs whose client certificates it requires (mutual TLS).
type TLS struct {
	CertFile, KeyFile, ClientCAFile string
}

// Start builds the Collector if this test process has not yet, starts it on loopback
// ports, and waits until both receivers accept connections. The test's cleanup stops it.
func Start(t testing.TB) *Collector {
	t.Helper()
	return start(t, nil)
}

// StartTLS is Start with receivers that take TLS only, as tls says.
func StartTLS(t testing.TB, tls TLS) *Collector {
	t.Helper()
	return start(t, &tls)
}

func start(t testing.TB, tls *TLS) *Collector {
	t.Helper()
	build.once.Do(func() { build.bin, build.skip, build.err = buildCollector() })
	if build.skip != "" {
		t.Skipf("requires the test Collector, which go cannot build here: %s", build.skip)
	}
	if build.err != nil {
		t.Fatalf("test Collector: %v", build.err)
	}
	dir := t.TempDir()
	c := &Collector{
		t:      t,
		bin:    build.bin,
		dir:    dir,
		config: filepath.Join(dir, "config.yaml"),
		out:    filepath.Join(dir, "profiles.bin"),
		logs:   &testenv.SyncBuffer{},
	}
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			t.Logf("test Collector output:\n%s", c.logs.String())
		}
	})
	// A port found free may be taken before the Collector binds it: try other ports then.
	for attempt := 1; ; attempt++ {
		c.GRPCAddr, c.HTTPAddr = freeAddrs(t)
		tlsConf := ""
		if tls != nil {
			tlsConf = fmt.Sprintf(tlsTemplate, tls.CertFile, tls.KeyFile)
			if tls.ClientCAFile != "" {
				tlsConf += fmt.Sprintf(clientCATemplate, tls.ClientCAFile)
			}
		}
		conf := fmt.Sprintf(configTemplate, c.GRPCAddr, tlsConf, c.HTTPAddr, tlsConf, c.out)
		if err := os.WriteFile(c.config, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		err := c.start()
		if err == nil {
			return c
		}
		if attempt == 3 || !errors.Is(err, errAddrInUse) {
			t.Fatal(err)
		}
	}
}

const configTemplate = `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %q
%s      http:
        endpoint: %q
%sexporters:
  fileprofiles:
    path: %q
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [fileprofiles]
`

// tlsTemplate and clientCATemplate are a receiver's TLS settings.
const (
	tlsTemplate = `        tls:
          cert_file: %q
          key_file: %q
`
	clientCATemplate = `          client_ca_file: %q
`
)

// Restart starts the Collector again on the same ports after Stop or Kill and waits until
// it accepts connections.
func (c *Collector) Restart() {
	c.t.Helper()
	// Another socket may hold a port for a moment (a connection's local port): try again.
	for attempt := 1; ; attempt++ {
		err := c.start()
		if err == nil {
			return
		}
		if attempt == 5 || !errors.Is(err, errAddrInUse) {
			c.t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var errAddrInUse = errors.New("a port is in use")

func (c *Collector) start() error {
	if c.cmd != nil {
		return errors.New("test Collector: started while it runs")
	}
	cmd := exec.Command(c.bin, "--config", c.config, "--feature-gates=service.profilesSupport")
	run := &testenv.SyncBuffer{} // this run's output, also in c.logs
	cmd.Stdout = io.MultiWriter(c.logs, run)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("test Collector: %w", err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func() {
		cmd.Wait()
		close(c.exited)
	}()
	const readyWithin = 60 * time.Second
	deadline := time.Now().Add(readyWithin)
	for _, addr := range []string{c.GRPCAddr, c.HTTPAddr} {
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-c.exited:
				c.cmd = nil
				err := fmt.Errorf("test Collector exited before it listened on %s:\n%s", addr, run.String())
				if strings.Contains(run.String(), "address already in use") {
					err = fmt.Errorf("%w: %w", errAddrInUse, err)
				}
				return err
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				c.Kill()
				return fmt.Errorf("test Collector did not listen on %s within %v:\n%s", addr, readyWithin, c.logs.String())
			}
		}
	}
	return nil
}

// Stop shuts the Collector down gracefully (SIGTERM) and waits for it.
func (c *Collector) Stop() {
	c.t.Helper()
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.t.Errorf("test Collector did not stop within 30s of SIGTERM; killing it")
		c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
}

// Kill ends the Collector at once (SIGKILL) and waits for it.
func (c *Collector) Kill() {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Kill()
	<-c.exited
	c.cmd = nil
}

// Logs is what the Collector printed so far.
func (c *Collector) Logs() string { return c.logs.String() }

// Received returns every profiles request the Collector has written, oldest first. A
// request the receiver acknowledged is in it.
func (c *Collector) Received(t testing.TB) []pprofile.Profiles {
	t.Helper()
	got, err := ReadRequests(c.out)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// ReadRequests reads the file tools/testcollector's fileprofiles exporter writes: records
// of a 4-byte big-endian length and that many bytes of an OTLP profiles request. A file not
// yet created holds none.
func ReadRequests(path string) ([]pprofile.Profiles, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return DecodeRequests(b)
}

// DecodeRequests decodes the records of ReadRequests' file. A truncated last record (the
// exporter writing it) is left out.
func DecodeRequests(b []byte) ([]pprofile.Profiles, error) {
	var out []pprofile.Profiles
	var u pprofile.ProtoUnmarshaler
	for off := 0; off+4 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[off:]))
		if n > len(b)-off-4 {
			break
		}
		p, err := u.UnmarshalProfiles(b[off+4 : off+4+n])
		if err != nil {
			return out, fmt.Errorf("collector: record at byte %d: %w", off, err)
		}
		out = append(out, p)
		off += 4 + n
	}
	return out, nil
}

// freeAddrs returns two loopback addresses free a moment ago, never the same one.
func freeAddrs(t testing.TB) (string, string) {
	var addrs [2]string
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs[0], addrs[1]
}

// sourceDir is tools/testcollector in the source tree of this file.
func sourceDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "tools", "testcollector")
}

// buildCollector builds tools/testcollector into the user's cache (os.TempDir without one),
// under a name keyed by the hash of its go.mod, go.sum and sources, unless it is there.
func buildCollector() (bin, skip string, err error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", "go is not on PATH", nil
	}
	src := sourceDir()
	key, err := hashSources(src)
	if err != nil {
		return "", "", fmt.Errorf("hashing %s: %w", src, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "profd-testcollector")
	bin = filepath.Join(dir, "testcollector-"+key[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command(goTool, "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		if missingModules(out.String()) {
			return "", firstLine(out.String()), nil
		}
		return "", "", fmt.Errorf("go build in %s: %w\n%s", src, err, out.String())
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", "", err
	}
	return bin, "", nil
}

// missingModules says whether go build failed for want of modules it could not download.
func missingModules(out string) bool {
	for _, s := range []string{"dial tcp", "no such host", "connection refused", "module lookup disabled",
		"cannot find module providing", "missing go.sum entry", "GOPROXY=off", "network is unreachable", "i/o timeout"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// firstLine is the first line of go's output that is not progress.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "go: downloading") {
			return line
		}
	}
	return strings.TrimSpace(s)
}

func hashSources(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		io.WriteString(h, rel+"\x00")
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	io.WriteString(h, runtime.Version())
	return hex.EncodeToString(h.Sum(nil)), nil
}
