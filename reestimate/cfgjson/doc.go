// Package cfgjson reads the JSON interchange format of docs/reestimate-json.md: functions
// given as x86-64 machine code with per-instruction samples, or as explicit CFGs with
// per-block samples.
//
//	funcs, err := cfgjson.Read(r)
//	if err != nil { ... } // an *InputError naming the byte offset, wrapping ErrBadInput
//	for _, fn := range funcs {
//		var r *reestimate.Repaired
//		if fn.Given != nil {
//			r, err = reestimate.RepairSamples(fn.Given.CFG, fn.Given.Attribution(), opt)
//		} else {
//			r, err = reestimate.RepairCode(fn.Code, fn.Addr, fn.Samples, opt)
//		}
//		...
//	}
//
// Read is hostile-input code: every allocation whose size comes from the input is capped (the
// Max constants). It is safe for concurrent use.
package cfgjson
