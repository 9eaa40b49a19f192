package main

import (
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=VERSION" (`make build`: git
// describe --always --dirty); without it --version gives the module's version.
var version string

// versionLine is what --version prints: the version set at build time, else the module's
// (a tag for `go install ...@vX.Y.Z`, a pseudo-version for a build in a checkout), then the
// commit, whether the tree had changes ("modified") and the commit's time, where the build
// recorded them (a build in a git checkout does, unless -buildvcs=false).
func versionLine(set string, bi *debug.BuildInfo) string {
	v := set
	if v == "" && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var details []string
	if bi != nil {
		var revision, at string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if revision != "" {
			details = append(details, "commit "+revision[:min(len(revision), 7)])
			if modified {
				details = append(details, "modified")
			}
		}
		if at != "" {
			details = append(details, at)
		}
	}
	switch {
	case v == "" && len(details) == 0:
		return "profd, version unknown: built without version or VCS information (make build, or go build -buildvcs=true in a git checkout, records them)"
	case v == "":
		v = "(devel)"
	}
	if len(details) == 0 {
		return "profd " + v
	}
	return "profd " + v + " (" + strings.Join(details, ", ") + ")"
}

// buildVersionLine is versionLine for this binary.
func buildVersionLine() string {
	bi, _ := debug.ReadBuildInfo()
	return versionLine(version, bi)
}
