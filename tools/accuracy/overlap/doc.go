// Package overlap scores estimated block or edge counts against exact ones: the share of
// the exact distribution an estimate covers (docs/accuracy.md).
//
//	o := overlap.Of(estimatedBlocks, exactBlocks) // 1: proportional, 0: disjoint
//	program := overlap.Weighted([]overlap.Function{{Est: est, Truth: exact}, ...})
//
// Both are pure functions, safe for concurrent use.
package overlap
