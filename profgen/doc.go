// Package profgen turns captured samples into LLVM sample profiles: for each sampled code
// object it repairs its samples into block counts (reestimate.RepairCode, the one path from
// code and samples to counts that reestimate's other outputs take too) and projects them onto the
// object's source lines (Project). It is where profileio's formats and reestimate's
// algorithm meet, shared by the daemon and cmd/reestimate, so a capture converted offline
// gives the same profile as the daemon's flush.
//
//	c, err := profileio.ReadCapture(f)
//	prof, stats := profgen.FromCapture(c, profgen.Options{})
//	err = profileio.WriteText(out, prof)
//
// FromCapture and Project are safe to call concurrently.
package profgen
