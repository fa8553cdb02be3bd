// Package bench measures wrapup at scale on the local control plane: how
// long it takes from a trigger's status write to the outcome record and to
// the AppWrapper's delete request, side by side with two baselines in the
// same run (kube-controller-manager's TTL-after-finished controller on
// plain Jobs, and the AppWrapper controller's own pod-driven success
// detection), and what it costs: heap per tracked AppWrapper, CPU, informers
// and API requests per completion.
//
// `go test ./test/bench` (part of `make test`) is a smoke run at N=100 that
// checks only that every measurement was taken; `make bench N=1000` is the
// full run, which writes test/bench/results/results-N.md and .csv. Flags
// (after -args): -bench.n (or WRAPUP_BENCH_N), -bench.baseline,
// -bench.waves, -bench.per-namespace, -bench.writers, -bench.idle, -bench.history,
// -bench.out, -bench.cpuprofile, -bench.heapprofile.
package bench
