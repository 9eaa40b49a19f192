package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// InUserNamespaceOf starts a process as user uid in a user namespace of its own, maps that
// namespace's root to user root (as profd's namespace sees it), and has the process become
// that root and make another user namespace, in which it runs sleep; it returns the pid
// once sleep runs; the test's cleanup kills it. (unshare(1) execs in between, and a process
// whose user its namespace does not map loses its capabilities at an exec: perl makes the
// system calls itself.)
func InUserNamespaceOf(t testing.TB, uid, root int) int {
	t.Helper()
	Requires(t, Root, Tool("setpriv"), Tool("perl"))
	if runtime.GOARCH != "amd64" {
		t.Skip("the helper calls unshare(2) by its x86-64 number")
	}
	u := strconv.Itoa(uid)
	const newUser = "syscall(272, 0x10000000) == 0 or die \"unshare: $!\""
	cmd := exec.Command("setpriv", "--reuid="+u, "--regid="+u, "--clear-groups", "perl", "-e",
		newUser+`; <STDIN>; $( = 0; $) = "0 0"; ($<, $>) = (0, 0); $< == 0 or die "setuid: $!"; `+newUser+`; exec "sleep", "30"`)
	cmd.Dir = "/"
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	nsPath := fmt.Sprintf("/proc/%d/ns/user", pid)
	own, _ := os.Readlink("/proc/self/ns/user")
	deadline := time.Now().Add(5 * time.Second)
	for link, _ := os.Readlink(nsPath); link == own || link == ""; link, _ = os.Readlink(nsPath) {
		if time.Now().After(deadline) {
			t.Fatalf("perl made no user namespace")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, f := range []string{"uid_map", "gid_map"} {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/%s", pid, f), []byte("0 "+strconv.Itoa(root)+" 1\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	stdin.Write([]byte("go\n"))
	for comm(pid) != "sleep" {
		if time.Now().After(deadline) {
			t.Fatalf("the nested sleep did not start (comm %q)", comm(pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return pid
}

// comm is process pid's name, "" when it is gone.
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
