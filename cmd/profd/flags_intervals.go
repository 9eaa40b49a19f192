package main

import (
	"flag"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/profd/profd/daemon"
	"github.com/profd/profd/profileio"
)

// keepForms is what --keep accepts, for its help and its errors.
const keepForms = "a count of intervals per output (48), an age (24h, 90m, 7d), a total size of all interval files (512MB, 2GiB)"

// registerIntervalFlags adds the flags of interval outputs to fs, filling cfg.
func registerIntervalFlags(fs *flag.FlagSet, cfg *daemon.Config) {
	fs.Func("keep", fmt.Sprintf("with --flush-interval, which interval files to keep in --out/%s (`LIST`, comma-separated limits, each one of: %s); past any limit the oldest intervals are deleted after each flush that ends one, those of earlier runs included, and with an output's last interval its cumulative files, unless a process of the run still writes them. Default %s; a LIST replaces the default whole",
		daemon.IntervalDir, keepForms, describeKeep(daemon.DefaultKeep)), func(s string) error {
		r, err := parseKeep(s)
		if err != nil {
			return err
		}
		cfg.Keep = r
		return nil
	})
	fs.Func("keep-ended", "with --flush-interval, how long (`D`, e.g. 10m or 1d, or all) the cumulative outputs keep a JIT function after its last code ended (while a copy of it or other code of its name that drew samples is live, it stays); then it is in the interval files only (by name, with its code), and the cumulative outputs count its samples as "+
		`"`+profileio.EndedMapping+`"`+"; a call chain not sampled as long keeps its leaf there, its callers "+`"`+profileio.CallersInIntervalsMapping+`"`+". So a JIT that keeps running new code and unloading it costs profd memory and flush time for what it ran lately, not for all it ever ran; a --group-by group whose processes have all been gone as long is let go of (its files stay; a later process of it starts them anew). Default 10 intervals, at least 1m; all keeps every function for the whole run (the default without pprof or capture in --format, whose interval files hold what is let go of)", func(s string) error {
		if s == "all" {
			cfg.KeepEnded = daemon.KeepAllEnded
			return nil
		}
		d, ok := parseAge(s)
		if !ok || d <= 0 {
			return fmt.Errorf("want a duration such as 10m or 1d, or all")
		}
		cfg.KeepEnded = d
		return nil
	})
}

// sizeLimit is a total size: a number and its unit, decimal (MB) or binary (MiB).
var sizeLimit = regexp.MustCompile(`^([0-9]+)([KMGT]i?B|B)$`)

var sizeUnits = map[string]int64{"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

// parseKeep parses --keep's list; each limit is told by its form, and each kind may come
// once.
func parseKeep(list string) (daemon.Retention, error) {
	var r daemon.Retention
	bad := func(why string) (daemon.Retention, error) {
		return daemon.Retention{}, fmt.Errorf("--keep %q: %s; want comma-separated limits, each %s", list, why, keepForms)
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		var kind string
		if n, err := strconv.ParseInt(f, 10, 32); err == nil {
			if n <= 0 {
				return bad(fmt.Sprintf("%s: a count of intervals must be at least 1", f))
			}
			kind, r.Count = "count", int(n)
		} else if m := sizeLimit.FindStringSubmatch(f); m != nil {
			n, err := strconv.ParseInt(m[1], 10, 64)
			unit := sizeUnits[m[2]]
			if err != nil || n <= 0 || n > math.MaxInt64/unit {
				return bad(fmt.Sprintf("%s: a size must be more than 0 and less than 8 EiB", f))
			}
			kind, r.Bytes = "size", n*unit
		} else if age, ok := parseAge(f); ok {
			if age <= 0 {
				return bad(fmt.Sprintf("%s: an age must be more than 0", f))
			}
			kind, r.Age = "age", age
		} else {
			return bad(fmt.Sprintf("%q is none of these", f))
		}
		if seen[kind] {
			return bad("more than one " + kind)
		}
		seen[kind] = true
	}
	return r, nil
}

// parseAge parses a Go duration, or a whole number of days ("7d").
func parseAge(s string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		return time.Duration(n) * 24 * time.Hour, err == nil
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// describeKeep says r in --keep's forms.
func describeKeep(r daemon.Retention) string {
	var parts []string
	if r.Count > 0 {
		parts = append(parts, strconv.Itoa(r.Count))
	}
	if r.Age > 0 {
		parts = append(parts, strings.TrimSuffix(strings.TrimSuffix(r.Age.String(), "0s"), "0m"))
	}
	switch {
	case r.Bytes > 0 && r.Bytes%(1<<30) == 0:
		parts = append(parts, strconv.FormatInt(r.Bytes>>30, 10)+"GiB")
	case r.Bytes > 0 && r.Bytes%(1<<20) == 0:
		parts = append(parts, strconv.FormatInt(r.Bytes>>20, 10)+"MiB")
	case r.Bytes > 0:
		parts = append(parts, strconv.FormatInt(r.Bytes, 10)+"B")
	}
	return strings.Join(parts, ",")
}
