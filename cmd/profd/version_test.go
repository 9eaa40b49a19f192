package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

func TestVersionLine(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "3d617a4f00dcafe1234567890abcdef012345678"},
		{Key: "vcs.time", Value: "2026-11-26T02:20:00Z"}, {Key: "vcs.modified", Value: "false"}}
	dirty := append(vcs[:3:3], debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	for _, c := range []struct {
		set  string
		bi   *debug.BuildInfo
		want string
	}{
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261126022000-3d617a4f00dc"}, Settings: vcs},
			"profd v0.0.0-20261126022000-3d617a4f00dc (commit 3d617a4, 2026-11-26T02:20:00Z)"},
		{"3d617a4-dirty", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: dirty},
			"profd 3d617a4-dirty (commit 3d617a4, modified, 2026-11-26T02:20:00Z)"},
		{"3d617a4", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "profd 3d617a4"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "profd v1.2.3"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: dirty},
			"profd (devel) (commit 3d617a4, modified, 2026-11-26T02:20:00Z)"},
	} {
		if got := versionLine(c.set, c.bi); got != c.want {
			t.Errorf("versionLine(%q, %v) = %q, want %q", c.set, c.bi.Main.Version, got, c.want)
		}
	}
	for _, bi := range []*debug.BuildInfo{nil, {Main: debug.Module{Version: "(devel)"}}} {
		if got := versionLine("", bi); !strings.Contains(got, "version unknown") || strings.Contains(got, "dev\n") {
			t.Errorf("versionLine without information = %q", got)
		}
	}
}

// TestVersionBuilt builds profd from a copy of this checkout as `go build` does and as
// `make build` does (a version set through -ldflags), and checks that --version names the
// checkout's commit, and "modified" when its tree has changes.
func TestVersionBuilt(t *testing.T) {
	testenv.Requires(t, testenv.Tool("go"), testenv.Tool("git"))
	src, head, dirty := checkoutCopy(t)
	commit := "commit " + head[:7]
	bin := filepath.Join(t.TempDir(), "profd")
	version := func(ldflags string) string {
		t.Helper()
		// GOFLAGS may say -buildvcs=false; a flag on the command line wins. -trimpath lets
		// the copy's packages come from the build cache.
		build := exec.Command("go", "build", "-buildvcs=true", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/profd")
		build.Dir = src
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatalf("profd --version: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct{ ldflags, prefix string }{
		{"", "profd v0.0.0-"}, // the module's pseudo-version
		{"-X main.version=v9.9.9-test", "profd v9.9.9-test ("}, // as make build sets it
	} {
		line := version(c.ldflags)
		if !strings.HasPrefix(line, c.prefix) || !strings.Contains(line, commit) || strings.Contains(line, "modified") != dirty {
			t.Errorf("--version (ldflags %q) = %q, want %q..., %s, modified %v", c.ldflags, line, c.prefix, commit, dirty)
		}
	}
	if !dirty {
		if err := os.WriteFile(filepath.Join(src, "untracked.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if line := version(""); !strings.Contains(line, commit+", modified") {
			t.Errorf("--version of a tree with changes = %q, want %s, modified", line, commit)
		}
	}
}

// checkoutCopy clones this checkout at its HEAD into a temporary directory and copies its
// uncommitted changes over: the same tree, in a repository whose .git is a directory (go
// build records no VCS information in a linked worktree, whose .git is a file). It returns
// the copy, HEAD, and whether the checkout has changes.
func checkoutCopy(t *testing.T) (dir, head string, dirty bool) {
	t.Helper()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	root := strings.TrimSpace(string(top))
	head = strings.TrimSpace(git(root, "rev-parse", "HEAD"))
	dir = filepath.Join(t.TempDir(), "profd")
	git(root, "clone", "-q", "--no-checkout", root, dir)
	git(dir, "checkout", "-q", "--detach", head)
	for _, name := range strings.Split(git(root, "ls-files", "-z", "--modified", "--others", "--exclude-standard"), "\x00") {
		if name == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = os.Remove(filepath.Join(dir, name))
		case err == nil:
			if err = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err == nil {
				err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir, head, strings.TrimSpace(git(root, "status", "--porcelain")) != ""
}
