package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// ProfileAPIServer starts a CPU profile of the API server cfg points at,
// from delay after ready (polled every 20 ms) first says yes, for the
// given length, written to path, and returns a function that waits for it
// and returns its error. kube-apiserver serves
// /debug/pprof with --profiling, its default (k8s.io/apiserver
// pkg/server/routes, Profiling.Install), to a user allowed the
// non-resource URL, as cfg's administrator is.
func ProfileAPIServer(ctx context.Context, cfg *rest.Config, path string, ready func() bool, delay, length time.Duration) func() error {
	done := make(chan error, 1)
	go func() { done <- profileAPIServer(ctx, cfg, path, ready, delay, length) }()
	return func() error { return <-done }
}

func profileAPIServer(ctx context.Context, cfg *rest.Config, path string, ready func() bool, delay, length time.Duration) error {
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return ready(), nil }); err != nil {
		return err
	}
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	b, err := dc.RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(length/time.Second))).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the API server's profile: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}
