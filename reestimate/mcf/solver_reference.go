package mcf

import "fmt"

// cycleCancelling is the reference solver, the method of the paper this package descends
// from: an Edmonds–Karp maximum flow from Source to Sink (shortest augmenting paths by
// breadth-first search), closed into a circulation through the Return arc, then Klein's
// algorithm: while the residual network holds a negative-cost cycle, push as much flow
// around it as its narrowest arc allows.
//
// Negative cycles are found with a queue-based Bellman–Ford from a virtual root joined to
// every node, checking the predecessor graph for a cycle every n relaxations (a cycle there
// always has negative cost). The running time is pseudo-polynomial; use it on small networks.
type cycleCancelling struct{}

func (cycleCancelling) Name() string { return "edmonds-karp+klein" }

func (cycleCancelling) Solve(net *Network) ([]int64, error) {
	if err := net.Validate(); err != nil {
		return nil, err
	}
	r := newResidual(net)
	if net.Return >= 0 {
		ret := r.fwd[net.Return]
		saved := r.slot[ret].rcap
		r.slot[ret].rcap = 0 // the max flow must not run around the return arc
		value := maxFlow(r, int32(net.Source), int32(net.Sink))
		r.slot[ret].rcap = saved
		if value > saved {
			return nil, fmt.Errorf("reestimate: max flow %d exceeds return arc capacity %d: %w", value, saved, ErrBadNetwork)
		}
		r.push(ret, value)
	}
	for {
		cycle := negativeCycle(r)
		if cycle == nil {
			return r.flows(), nil
		}
		delta := r.slot[cycle[0]].rcap
		for _, k := range cycle {
			delta = min(delta, r.slot[k].rcap)
		}
		for _, k := range cycle {
			r.push(k, delta)
		}
	}
}

// maxFlow runs Edmonds–Karp from s to t on r and returns the flow value.
func maxFlow(r *residual, s, t int32) int64 {
	if s == t {
		return 0
	}
	via := make([]int32, r.n)
	queue := make([]int32, 0, r.n)
	var value int64
	for {
		for i := range via {
			via[i] = -1
		}
		queue = append(queue[:0], s)
		reached := false
		for i := 0; i < len(queue) && !reached; i++ {
			u := queue[i]
			for k := r.start[u]; k < r.start[u+1]; k++ {
				v := r.slot[k].head
				if r.slot[k].rcap == 0 || v == s || via[v] >= 0 {
					continue
				}
				via[v] = k
				if v == t {
					reached = true
					break
				}
				queue = append(queue, v)
			}
		}
		if !reached {
			return value
		}
		delta := int64(MaxArcCapacity)
		for v := t; v != s; v = r.tail(via[v]) {
			delta = min(delta, r.slot[via[v]].rcap)
		}
		for v := t; v != s; v = r.tail(via[v]) {
			r.push(via[v], delta)
		}
		value += delta
	}
}

// negativeCycle returns the slots of a negative-cost cycle in r's residual network, or nil.
func negativeCycle(r *residual) []int32 {
	n := r.n
	dist := make([]int64, n) // all 0: a virtual root reaches every node at cost 0
	via := make([]int32, n)
	inQueue := make([]bool, n)
	queue := make([]int32, 0, n)
	for v := range via {
		via[v] = -1
		inQueue[v] = true
		queue = append(queue, int32(v))
	}
	relaxations := 0
	for head := 0; head < len(queue); head++ {
		u := queue[head]
		inQueue[u] = false
		for k := r.start[u]; k < r.start[u+1]; k++ {
			if r.slot[k].rcap == 0 {
				continue
			}
			v := r.slot[k].head
			if nd := dist[u] + int64(r.slot[k].cost); nd < dist[v] {
				dist[v] = nd
				via[v] = k
				if !inQueue[v] {
					inQueue[v] = true
					queue = append(queue, v)
				}
				if relaxations++; relaxations%n == 0 {
					if c := predecessorCycle(r, via); c != nil {
						return c
					}
				}
			}
		}
		if head > 4*n { // compact the queue so it does not grow without bound
			queue = append(queue[:0], queue[head+1:]...)
			head = -1
		}
	}
	return predecessorCycle(r, via)
}

// predecessorCycle finds a cycle in the graph of via (each node's last relaxing slot).
func predecessorCycle(r *residual, via []int32) []int32 {
	mark := make([]int32, len(via)) // 0 unvisited, else the walk that visited it (1-based)
	for s := range via {
		if mark[s] != 0 {
			continue
		}
		walk := int32(s + 1)
		v := int32(s)
		for v >= 0 && mark[v] == 0 {
			mark[v] = walk
			if via[v] < 0 {
				v = -1
				break
			}
			v = r.tail(via[v])
		}
		if v < 0 || mark[v] != walk {
			continue
		}
		// v is on a cycle of this walk: collect its slots.
		var cycle []int32
		for u := v; ; {
			k := via[u]
			cycle = append(cycle, k)
			u = r.tail(k)
			if u == v {
				break
			}
		}
		return cycle
	}
	return nil
}
