package procfs

import (
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

var cgroupCases = []struct{ file, want string }{
	// cgroup v2 only.
	{"0::/system.slice/docker-" + idA + ".scope\n", "/system.slice/docker-" + idA + ".scope"},
	// Hybrid: the unified line names the cgroup.
	{"12:pids:/system.slice/docker-" + idA + ".scope\n1:name=systemd:/system.slice/docker-" + idA + ".scope\n0::/system.slice/docker-" + idA + ".scope\n",
		"/system.slice/docker-" + idA + ".scope"},
	// Hybrid with the unified hierarchy unused (at its root): the first v1 path that is not.
	{"9:name=systemd:/\n4:memory:/kubepods/besteffort/pod" + podUID + "/" + idB + "\n3:cpu:/kubepods/besteffort/pod" + podUID + "/" + idB + "\n0::/\n",
		"/kubepods/besteffort/pod" + podUID + "/" + idB},
	// v1 only.
	{"11:devices:/docker/" + idA + "\n10:cpu,cpuacct:/docker/" + idA + "\n", "/docker/" + idA},
	// A removed cgroup of an exiting process.
	{"0::/system.slice/nginx.service (deleted)\n", "/system.slice/nginx.service"},
	// The root cgroup, and nothing that parses.
	{"0::/\n", "/"},
	{"1:cpu:/\n", "/"},
	{"garbage\n0:x\n", ""},
	{"", ""},
}

func TestParseCgroup(t *testing.T) {
	for _, c := range cgroupCases {
		if got := parseCgroup([]byte(c.file)).Path; got != c.want {
			t.Errorf("parseCgroup(%q) = %q, want %q", c.file, got, c.want)
		}
	}
}

func TestParseCgroupV2(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"12:pids:/user.slice\n0::/system.slice/a.service\n", "/system.slice/a.service"},
		{"0::/gone (deleted)\n", "/gone"},
		{"0::/\n", "/"},
		{"1:name=systemd:/user.slice/x\n", ""}, // v1 only
		{"0::relative\n", ""},
	} {
		if got := parseCgroup([]byte(c.file)).V2; got != c.want {
			t.Errorf("parseCgroup(%q).V2 = %q, want %q", c.file, got, c.want)
		}
	}
}

func TestCgroupPathSelf(t *testing.T) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	cg, err := ReadCgroup(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if got := cg.Path; got == "" || !strings.Contains(string(data), ":"+got+"\n") {
		t.Errorf("ReadCgroup: path %q, not a path of\n%s", got, data)
	}
}

func FuzzParseCgroup(f *testing.F) {
	for _, c := range cgroupCases {
		f.Add([]byte(c.file))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cg := parseCgroup(data)
		for _, path := range []string{cg.Path, cg.V2} {
			if path != "" && (path[0] != '/' || strings.ContainsRune(path, '\n') || !strings.Contains(string(data), path)) {
				t.Fatalf("parseCgroup(%q) = %+v", data, cg)
			}
		}
	})
}

func TestCommandLine(t *testing.T) {
	cmd := exec.Command("sleep", "5", "0")
	cmd.Args[0] = "a sleeper, named with spaces"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Until its exec, the child has the test binary's command line.
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 || got[0] != cmd.Args[0]; time.Sleep(time.Millisecond) {
		var err error
		if got, err = CommandLine(uint32(cmd.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not exec sleep within 10 s: %q", got)
		}
	}
	if want := cmd.Args; !reflect.DeepEqual(got, want) {
		t.Errorf("CommandLine = %q, want %q", got, want)
	}
}

// TestCommandLineBounded: a command line of many arguments or many bytes (the process's to
// choose, megabytes of it) is kept to commandLineArgs arguments and commandLineBytes, with
// an error saying it was cut; so is a service name, dropped past serviceNameBytes.
func TestCommandLineBounded(t *testing.T) {
	// A shell that waits for its sleep keeps whatever arguments it was given (sleep itself
	// exits at once on arguments it cannot read).
	args := []string{"-c", "sleep 60; :", "sh"}
	for range 2000 {
		args = append(args, "x")
	}
	long := strings.Repeat("s", 64<<10)
	cmd := exec.Command("sh", append(args, long)...)
	cmd.Env = append(os.Environ(), "OTEL_SERVICE_NAME="+long)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its sleep goes with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	pid := uint32(cmd.Process.Pid)
	var got []string
	var err error
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 || got[0] != "sh"; time.Sleep(time.Millisecond) {
		if got, err = CommandLine(pid); time.Now().After(deadline) {
			t.Fatalf("the child did not exec sh within 10 s: %q", got)
		}
	}
	if n := len(strings.Join(got, "\x00")); len(got) > commandLineArgs || n > commandLineBytes || !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d arguments, %d bytes (%v); want at most %d and %d, and ErrTooLarge", len(got), n, err, commandLineArgs, commandLineBytes)
	}
	if name, err := ServiceName(pid); name != "" || !errors.Is(err, ErrTooLarge) {
		t.Errorf("a service name of 64 KiB: %d bytes kept (%v), want none and ErrTooLarge", len(name), err)
	}
}

func TestParseCommandLine(t *testing.T) {
	for _, c := range []struct {
		data string
		want []string
	}{
		{"lli-14\x00-jit-kind=mcjit\x00hot.ll\x00", []string{"lli-14", "-jit-kind=mcjit", "hot.ll"}},
		{"postgres: app db 10.0.0.1(5432) idle\x00\x00\x00", []string{"postgres: app db 10.0.0.1(5432) idle"}}, // a rewritten title
		{"a\x00\x00b", []string{"a", "", "b"}},
		{"cut", []string{"cut"}},
		{"", nil},
		{"\x00\x00", nil},
	} {
		if got := parseCommandLine([]byte(c.data)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseCommandLine(%q) = %q, want %q", c.data, got, c.want)
		}
	}
}

func FuzzParseCommandLine(f *testing.F) {
	f.Add([]byte("lli-14\x00-jit-kind=mcjit\x00hot.ll\x00"))
	f.Add([]byte("postgres: app db idle\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		args := parseCommandLine(data)
		if joined := strings.Join(args, "\x00"); !strings.HasPrefix(string(data), joined) || len(args) > 0 && args[len(args)-1] == "" {
			t.Fatalf("parseCommandLine(%q) = %q", data, args)
		}
	})
}

func TestServiceName(t *testing.T) {
	for _, c := range []struct{ name, attrs, want string }{
		{"checkout", "service.name=ignored", "checkout"},
		{"", "deployment.environment=prod, service.name=cart%20api ,service.version=1", "cart api"},
		{"", "service.name=a,service.name=b", "b"},
		{"  ", "service.namespace=x", ""},
		{"", "service.name=%zz", ""},
		{"", "", ""},
	} {
		if got := serviceName(c.name, c.attrs); got != c.want {
			t.Errorf("serviceName(%q, %q) = %q, want %q", c.name, c.attrs, got, c.want)
		}
	}
}

func FuzzServiceName(f *testing.F) {
	f.Add("", "deployment.environment=prod,service.name=cart%20api")
	f.Add("checkout", "")
	f.Fuzz(func(t *testing.T, name, attrs string) {
		got := serviceName(name, attrs)
		if strings.TrimSpace(name) != "" && got != strings.TrimSpace(name) {
			t.Fatalf("serviceName(%q, %q) = %q", name, attrs, got)
		}
		if got == "" && strings.TrimSpace(name) == "" {
			return
		}
		if got == "" {
			t.Fatalf("serviceName(%q, %q) is empty", name, attrs)
		}
	})
}
